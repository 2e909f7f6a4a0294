"""The files of a teachers' budget and the lock that guards them.

Owns the file names (``ledger.npz``, ``research_ledger.npz`` and the journal and lock
beside them), :class:`BudgetError`, :func:`votes_digest` (what a budget is spent on),
a file's SHA-256 (the journal's entries), the ``flock`` plus thread lock held while a
process reads, spends and writes (``_locked``), and ``_Loaded``, a verified ledger file
in memory. Reading, checking and writing them is :class:`pate_jax.budget.TeachersBudget`'s
(:mod:`pate_jax.budget` describes the checks).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import pathlib
import threading
from typing import Any, Iterator

import numpy as np

from pate_jax import io
from pate_jax.checkpoint import ResumeMismatchError


LEDGER_FILE = "ledger.npz"
RESEARCH_LEDGER_FILE = "research_ledger.npz"
JOURNAL_SUFFIX = ".journal"
LOCK_SUFFIX = ".lock"


def written_ledgers(directory: str | os.PathLike, *,
                    names: tuple[str, ...] = (LEDGER_FILE,)) -> list[pathlib.Path]:
  """The files of the ledgers ``names`` (and their journals) that exist in ``directory``:
  a budget there has spent (a run killed between a ledger and its journal line too)."""
  directory = pathlib.Path(directory)
  return [p for name in names for p in (directory / name, directory / (name + JOURNAL_SUFFIX))
          if p.exists()]


def refuse_spent_votes(workdir: str | os.PathLike) -> None:
  """Refuses a run that would write ``votes.npz`` where a privacy ledger has spent on votes.

  An aggregate run on these votes keeps its ledger beside them (``ledger.npz``, or a
  research seed's): its released labels, and their ε, refer to these votes. New teachers
  would overwrite them (and the ledger then refuses the new ones), so a stage that writes
  ``votes.npz`` calls this before anything is fitted. A ledger whose votes.npz was deleted
  or moved away refuses too: its labels refer to those votes, not to new ones.

  Raises:
    ResumeMismatchError: naming the ledger and saying to use another workdir.
  """
  spent = written_ledgers(workdir, names=(LEDGER_FILE, RESEARCH_LEDGER_FILE))
  votes = pathlib.Path(workdir) / "votes.npz"
  if spent:
    what = (f"replace {votes}" if votes.exists() else
            f"write new votes into {pathlib.Path(workdir)} (its votes.npz is gone)")
    raise ResumeMismatchError(
        f"refusing to {what}: the privacy ledger "
        f"{spent[0]} spent on the votes there, and the labels it released refer to them; "
        "use another --workdir for new teachers (of the same data: a second privacy budget, "
        "which the aggregate stage refuses unless config.another_budget is True)")


_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


class BudgetError(ValueError):
  """A teachers' ledger that cannot be trusted or spent under the settings asked for."""


def votes_digest(votes: dict[str, Any]) -> str:
  """SHA-256 of what a budget is spent on: the votes and the dataset rows they are of,
  with ``votes.npz``'s secret random ``salt`` (files written before it: without), so that
  the digest, which ``labels.npz`` carries, cannot be recomputed from guessed votes."""
  salt = [votes["salt"]] if "salt" in votes else []
  return io.data_digest(votes["votes"], votes["index"], *salt)


@contextlib.contextmanager
def _locked(path: pathlib.Path) -> Iterator[None]:
  """Holds ``path`` (an ``flock``, blocking) and a lock of this process's threads."""
  with _THREAD_LOCKS_GUARD:
    thread_lock = _THREAD_LOCKS.setdefault(str(path.resolve()), threading.Lock())
  with thread_lock:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX)
      yield
    finally:
      fcntl.flock(fd, fcntl.LOCK_UN)
      os.close(fd)


def _held(path: pathlib.Path) -> bool:
  """Whether the lock file ``path`` is held (``flock``) through another open of it: a
  process -- or another thread of this one -- inside :func:`_locked` on it. A missing
  file is not held."""
  try:
    fd = os.open(path, os.O_RDONLY)
  except OSError:
    return False
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False
  finally:
    os.close(fd)


@dataclasses.dataclass
class _Loaded:
  """A verified ledger file: the aggregator record and the teachers' bookkeeping."""
  record: dict[str, np.ndarray]
  rows: np.ndarray          # int64 [N] charged rows of votes.npz, in the order charged
  labels: np.ndarray        # int32 [N]
  status: np.ndarray        # int32 [N]
  release_count: int              # releases drawn
  releases_paid: int              # releases charged to the budget (>= release_count)
  release: dict[str, Any] | None   # the newest release (public and private parts)
  generation: int                 # writes of the file (its journal's last line)
  aggregator: Any = None          # the record's PrivateAggregator (None: never spent)

  def public_view(self) -> dict[str, Any]:
    """The fields as a dict, without the aggregator (which cannot be copied)."""
    return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
            if f.name != "aggregator"}
