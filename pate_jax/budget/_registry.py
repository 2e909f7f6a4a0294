"""Which budgets are spent on each private dataset: :class:`BudgetRegistry`.

A teachers' ledger (:class:`pate_jax.budget.TeachersBudget`) is keyed by their votes, and
lives beside them. Teachers trained again on the same private data -- into another work
directory, with another seed or model -- have other votes, so they would open a second
ledger whose ε adds to the first: the data's privacy loss is the sum of both. The registry
keeps, outside every work directory, one file per private dataset (keyed by the SHA-256
of its rows, ``votes.npz``'s ``private_data``) listing the budgets spent on it::

  <registry>/<private_data>.json   {"private_data": ..., "budgets": [{"votes": <the votes'
                                   salted digest>, "teachers": <their directory>,
                                   "registered": <UTC time>, "generation": <its ledger's
                                   newest>, "sha256": <that file's>}, ...]}
  <registry>/<private_data>.lock   held (``flock``) while a budget is registered

A budget registers before its first charge (:meth:`BudgetRegistry.claim`): the first set of
teachers of a dataset is registered; another set is refused unless the caller says that it
opens another budget on the same data (``another``), which is then listed beside the first
so that every run on the data reports how many budgets add up.

Each entry also follows its ledger (:meth:`BudgetRegistry.sync`): the generation and
SHA-256 of its newest ``ledger.npz``, advanced by every write. A ledger of the same votes
whose journal does not hold that line -- a copy of the teachers' directory that did not
spend first, an older archive restored, a ledger and journal deleted and started over --
is refused; a ledger whose journal holds it further on (writes the registry missed: a
crash between the ledger's journal line and the registry, or writes under another
registry) brings the entry up to date; the directory a budget moved to replaces the one
recorded. A budget registered but never written (a run killed or refused before its first
write) is provisional: while its directory holds no ledger (nor journal) and no run holds
its ledger's lock, other teachers may replace it (a run between its registration and its
first write holds that lock, so that two sets of teachers cannot both pass as the first).

A release drawn once from the teachers' votes outside a ledger (the KD-GAN's sound soft
labels: :func:`pate_jax.budget.draw_once`) is a budget of its own on the data, listed the
same way (``{"votes": <the entry's id>, "release": <digest of what was released from which
votes, with which settings>, "of_votes": <the votes' salted digest>, "path": <its file>,
"registered", "generation": 1, "sha256": <its file's>}``): it is refused where the data has
another budget, unless asked for, and teachers' ledgers are refused where it has one. It is
drawn and registered under the entry's lock (:meth:`BudgetRegistry.spend_release`), its
entry written before the draw (generation 0, no hash) and completed after its file: a run
killed between the file and the entry leaves an entry that holds the data against other
teachers, and that the file's next reader completes (:meth:`record_release`). An entry left
at generation 0 whose path does not hold its release (a run killed while drawing, before
anything was kept: no file, or an older research file it was to replace) is provisional, as
a ledger's.

The registry is private, like the ledgers (it names the teachers' directories and the
data's digest, which its file names are): its directory is made owner-only (0700; a
directory shared with other users is refused), its files 0600, each written
atomically and synced to disk. It guards against an honest mistake, not against its owner:
deleting it forgets the budgets (as deleting a ledger did before it), and it is one
machine's; teachers of the same people in another file or split are another key.

Its directory: the argument given, else ``$PATE_JAX_BUDGET_REGISTRY``, else
``$XDG_DATA_HOME/pate_jax/budgets`` (``~/.local/share/pate_jax/budgets``).
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import secrets
from typing import Any, Callable

import numpy as np

from pate_jax import _checks
from pate_jax import io
from pate_jax.budget._files import (LEDGER_FILE, LOCK_SUFFIX, BudgetError, _held, _locked,
                                     written_ledgers)


REGISTRY_ENV = "PATE_JAX_BUDGET_REGISTRY"


def registry_directory(directory: str | os.PathLike | None = None) -> pathlib.Path:
  """The registry's directory: ``directory`` if given (non-empty), else the environment's
  ``PATE_JAX_BUDGET_REGISTRY``, else ``$XDG_DATA_HOME/pate_jax/budgets`` (by default
  ``~/.local/share/pate_jax/budgets``)."""
  if directory:
    return pathlib.Path(directory).expanduser()
  if os.environ.get(REGISTRY_ENV):
    return pathlib.Path(os.environ[REGISTRY_ENV]).expanduser()
  base = os.environ.get("XDG_DATA_HOME") or pathlib.Path.home() / ".local" / "share"
  return pathlib.Path(base) / "pate_jax" / "budgets"


class BudgetRegistry:
  """The budgets spent on each private dataset, kept in one directory (module docstring).

  Args:
    directory: :func:`registry_directory`'s argument.
  """

  def __init__(self, directory: str | os.PathLike | None = None):
    self.directory = registry_directory(directory)

  def _paths(self, private_data: str) -> tuple[pathlib.Path, pathlib.Path]:
    """The entry and lock files of ``private_data``; the directory is made on first use,
    owner-only (it names the data and the teachers)."""
    if not _checks.is_sha256(private_data):
      raise ValueError("private_data must be a SHA-256 of the private data (64 lowercase hex "
                       f"digits); got {private_data!r}")
    if self.directory.exists() and io.shared_directory(self.directory):
      raise BudgetError(f"budget registry {self.directory}: the directory is shared with "
                        "other users (sticky, or another user's), and the registry's file "
                        "names are digests of private data; give it a directory of its own "
                        "(config.budget_registry, $PATE_JAX_BUDGET_REGISTRY)")
    io.private_directory(self.directory)  # made, or narrowed, owner-only
    return (self.directory / f"{private_data}.json", self.directory / f"{private_data}.lock")

  def _load(self, path: pathlib.Path, private_data: str) -> list[dict[str, Any]]:
    if not path.exists():
      return []
    try:
      record = json.loads(path.read_text())
      budgets = record["budgets"]
      ok = (record["private_data"] == private_data and isinstance(budgets, list)
            and all(_entry_ok(b) for b in budgets))
    except (OSError, ValueError, KeyError, TypeError) as e:
      raise BudgetError(f"budget registry {self.directory}: the entry of this private data "
                        "(named by votes.npz's private_data) is not readable "
                        f"({type(e).__name__}); it lists the budgets spent on that data: "
                        "restore it rather than delete it") from e
    if not ok:
      raise BudgetError(f"budget registry {self.directory}: the entry named by votes.npz's "
                        "private_data is not one of that data, or one of its budgets is not "
                        "an entry as written (a generation that is not an integer >= 0, a hash "
                        "or directory that is not a string)")
    return budgets

  def budgets(self, private_data: str) -> list[dict[str, Any]]:
    """The budgets registered on ``private_data``, in the order registered (each
    ``{"votes", "teachers", "registered", "generation", "sha256"}``, a release's with
    ``"release"``, ``"of_votes"`` and ``"path"`` instead of ``"teachers"``)."""
    path, lock = self._paths(private_data)
    with _locked(lock):
      return self._load(path, private_data)

  def data_of(self, votes: str) -> str | None:
    """The private data under which a budget of the votes digest ``votes`` (a ledger, or a
    release of them) is registered, or None: what ties votes to their data where
    votes.npz's ``private_data`` was removed or replaced in a copy (the votes' salted
    digest does not cover it)."""
    if not self.directory.is_dir():
      return None
    for path in sorted(self.directory.glob("*.json")):
      if not _checks.is_sha256(path.stem):
        continue
      _, lock = self._paths(path.stem)
      with _locked(lock):
        try:
          budgets = self._load(path, path.stem)
        except BudgetError:  # another data's damaged entry: its own budgets refuse it
          continue
      if any(votes in (b["votes"], b.get("of_votes")) for b in budgets):
        return path.stem
    return None

  def key_of(self, votes: str, private_data: str | None, where: Any) -> str | None:
    """The registry's key for a budget of the votes digest ``votes``: ``private_data``
    (votes.npz's, or the digest the teachers' run recorded), else the private data the
    registry holds these votes under (:meth:`data_of`: a copy whose ``private_data`` was
    removed), else None (nothing to key a budget by).

    Raises:
      BudgetError: ``private_data`` is not the data the registry holds these votes under
        (votes.npz was altered); ``where`` names the votes.
    """
    known = self.data_of(votes)
    if known is not None and private_data and private_data != known:
      raise BudgetError(
          f"{where}: votes.npz names other private data than the budget registry "
          f"{self.directory} holds these votes under (their salted digest {votes[:12]}…): "
          "votes.npz was altered; its budget is the registry's entry, spent from the "
          "teachers' own directory")
    return private_data or known

  def claim(self, private_data: str, votes: str, teachers: str | os.PathLike, *,
            another: bool = False, generation: int = 0,
            sha256: str = "") -> list[dict[str, Any]]:
    """Registers the budget of the votes digest ``votes`` (teachers in ``teachers``, its
    ledger at ``generation`` with file hash ``sha256``: 0 and "" before any write) on
    ``private_data``, before it is first charged; a budget already registered is left as
    it is.

    Returns:
      Every budget registered on ``private_data``, this one included.

    Raises:
      BudgetError: another budget is registered on ``private_data`` and ``another`` is
        False (the message names its teachers' directory and the way on).
    """
    path, lock = self._paths(private_data)
    with _locked(lock):
      budgets = self._load(path, private_data)
      if any(b["votes"] == votes for b in budgets):
        return budgets
      # A budget never written whose directory holds no ledger spent nothing: it yields.
      # (The caller holds its own ledger's lock: an entry of its own directory is judged
      # by its files alone.)
      budgets = [b for b in budgets
                 if not _provisional(b, own=str(pathlib.Path(teachers).resolve()))]
      if budgets and not another:
        raise BudgetError(self._refusal(budgets))
      budgets = budgets + [{
          "votes": votes, "teachers": str(pathlib.Path(teachers).resolve()),
          "registered": _now(),
          "generation": int(generation), "sha256": str(sha256)}]
      self._write(path, private_data, budgets)
      return budgets

  def sync(self, private_data: str, votes: str, teachers: str | os.PathLike,
           journal: list[tuple[int, str]]) -> None:
    """Checks a ledger of the budget of ``votes`` against its entry, and follows it.

    ``journal``: the ledger's journal in ``teachers``, ``(generation, SHA-256)`` per write
    in order (empty: never written). Where it holds the entry's generation and hash (the
    start, before any write, for an entry never written), the ledger is this budget's, and
    newest: the entry advances to its last line and records its directory. A budget not
    registered yet is not checked; an entry written before the registry followed ledgers
    adopts the ledger as it is.

    Raises:
      BudgetError: the ledger's journal does not hold the entry's newest write: it is
        behind it (an older copy, a copy that did not spend first, a ledger deleted and
        started over) or not this budget's.
    """
    path, lock = self._paths(private_data)
    with _locked(lock):
      budgets = self._load(path, private_data)
      entry = next((b for b in budgets if b["votes"] == votes), None)
      if entry is None:
        return
      here = str(pathlib.Path(teachers).resolve())
      newest = tuple(journal[-1]) if journal else (0, "")
      if "generation" in entry:
        known = (int(entry["generation"]), str(entry["sha256"]))
        if known != (0, "") and known not in {tuple(line) for line in journal}:
          state = ("no ledger (deleted, or a copy taken before it was spent)" if not journal
                   else f"its ledger at generation {newest[0]}, another line of writes")
          raise BudgetError(
              f"the budget of these teachers has spent {known[0]} writes (budget registry "
              f"{self.directory}; last in {entry['teachers']}) and {here} holds {state}: an "
              "older or copied ledger, or one deleted and started over, cannot spend or "
              "report; use the teachers' directory that holds the newest ledger")
        if (int(newest[0]), str(newest[1])) == known and entry["teachers"] == here:
          return
      entry.update(generation=int(newest[0]), sha256=str(newest[1]), teachers=here)
      self._write(path, private_data, budgets)

  def _refusal(self, budgets: list[dict[str, Any]], new: str = "a second set of teachers"
               ) -> str:
    """Why a new budget (``new``, in words) is refused where ``budgets`` are spent on the
    same data."""
    first = budgets[0]
    if "release" in first:
      what = (f"a release of their votes outside a ledger, in {first.get('path')} (the "
              "KD-GAN's sound soft labels)")
      way = "Use that release (the work directory that holds it)"
    else:
      what = f"the teachers in {first.get('teachers')}"
      way = "Answer from those teachers (config.votes_dir)"
    return (
        f"the private data these teachers were trained on already has a privacy budget: "
        f"{what} (registered {first.get('registered')}"
        f"{'' if len(budgets) == 1 else f'; {len(budgets)} budgets in all'}, in the budget "
        f"registry {self.directory}). "
        f"{new[0].upper() + new[1:]} on the same data opens a second budget, and the ε of "
        f"the two add up. {way}, or, to spend a second budget knowingly, set "
        "config.another_budget=True (--config.aggregate.another_budget=True where the "
        "aggregate stage is nested: the main job, the student script): every run on this "
        "data then reports how many budgets it has")

  def spend_release(self, private_data: str, release: str, votes: str,
                    path: str | os.PathLike, write: Callable[[], str], *,
                    another: bool = False) -> None:
    """Draws and registers a release in one step, under the registry's lock: ``write()``
    draws the release ``release`` (a digest of what is released from which votes, with
    which settings) of the votes digest ``votes`` into ``path`` and returns the file's
    SHA-256. Its entry is written before the draw (generation 0, no hash: it already holds
    the data against other budgets) and completed after the file. Holding the lock
    throughout, two runs cannot both pass the checks before either registers (a release is
    a quick draw); a run killed after the file and before the entry is completed leaves a
    file that :meth:`record_release` adopts into that entry, and one killed before the
    file an entry that is provisional (nothing was kept: the release may be drawn).

    Raises:
      BudgetError, before ``write`` is called: the release was drawn before (its entry
        holds a file's hash) or another budget is registered on ``private_data``, and
        ``another`` is False.
    """
    entry_path, lock = self._paths(private_data)
    with _locked(lock):
      live = [b for b in self._load(entry_path, private_data) if not _provisional(b)]
      drawn = [b for b in live if b.get("release") == release]
      here = str(pathlib.Path(path).resolve())
      if drawn and any(b.get("path") == here for b in drawn) and pathlib.Path(path).exists():
        raise BudgetError(f"another run drew this release into {path} meanwhile; run again "
                          "to read it from there")
      if drawn and not another:
        raise BudgetError(
            f"this release was drawn before (registered {drawn[-1]['registered']} in the "
            f"budget registry {self.directory}, its file {drawn[-1]['path']}) and "
            f"{pathlib.Path(path)} does not hold it: drawing it again spends again. Copy "
            "that file here to use it, or set config.another_budget=True to draw a new one "
            "(the budgets add up)")
      if live and not another:
        raise BudgetError(self._refusal(live, "a release of these teachers' votes"))
      # Registered before the draw: a run killed once its file is written, before the
      # entry is completed, still holds the data against other budgets.
      entry = {"votes": secrets.token_hex(16), "release": release, "of_votes": votes,
               "path": here, "registered": _now(), "generation": 0, "sha256": ""}
      self._write(entry_path, private_data, live + [entry])
      try:
        sha256 = write()
      except BaseException:
        if not _holds(path, release):  # nothing was kept (maybe an older research file)
          self._write(entry_path, private_data, live)
        raise
      entry.update(generation=1, sha256=str(sha256))
      self._write(entry_path, private_data, live + [entry])

  def record_release(self, private_data: str, release: str, votes: str,
                     path: str | os.PathLike, sha256: str) -> None:
    """Records that the release ``release`` of the votes digest ``votes`` is in ``path``
    with file hash ``sha256``: in its entry that holds this file (a moved copy: the path
    follows), or in the entry registered for ``path`` before its draw (a run killed between
    its file and the entry's completion), else in a new entry: a release drawn where this
    registry did not follow it (another registry, one deleted) is spent all the same, and
    is listed beside the others."""
    entry_path, lock = self._paths(private_data)
    here = str(pathlib.Path(path).resolve())
    with _locked(lock):
      budgets = self._load(entry_path, private_data)
      entry = next((b for b in budgets if b.get("release") == release
                    and (b.get("sha256") == sha256
                         or (int(b.get("generation", -1)) == 0 and b.get("path") == here))),
                   None)
      if entry is not None and (entry.get("path"), entry.get("sha256")) == (here, sha256):
        return
      if entry is None:
        entry = {"votes": secrets.token_hex(16), "release": release, "of_votes": votes,
                 "registered": _now()}
        budgets.append(entry)
      entry.update(path=here, generation=1, sha256=str(sha256))
      self._write(entry_path, private_data, budgets)

  @staticmethod
  def _write(path: pathlib.Path, private_data: str, budgets: list[dict[str, Any]]) -> None:
    """The entry, atomically, durably and owner-only (:func:`pate_jax.io.write_text`)."""
    io.write_text(path, json.dumps({"private_data": private_data, "budgets": budgets},
                                   indent=1) + "\n", private=True)


def _entry_ok(b: Any) -> bool:
  """An entry as written: its votes a string, its generation (if any: entries written before
  the registry followed ledgers have none) an int >= 0 (not a bool, a float, a string or
  NaN), its hash a string, a ledger's teachers directory a string."""
  return (isinstance(b, dict) and isinstance(b.get("votes"), str)
          and ("generation" not in b
               or (type(b["generation"]) is int and b["generation"] >= 0))  # noqa: E721
          and isinstance(b.get("sha256", ""), str)
          and ("release" in b or isinstance(b.get("teachers"), str)))


def _now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _holds(path: str | os.PathLike, release: str) -> bool:
  """Whether the file at ``path`` is the release ``release`` (a release file naming it, as
  :func:`pate_jax.budget.draw_once` writes them), or may be: an unreadable file is judged
  to hold it (a damaged release stays spent). A file of another release, such as a
  research-noise measurement a secret draw was to replace, does not."""
  path = pathlib.Path(path)
  if not path.is_file():
    return False
  try:
    with np.load(path, allow_pickle=False) as f:
      return str(f["release"]) == release
  except Exception:  # noqa: BLE001 -- a damaged file, whatever numpy or zipfile raises
    return True


def _provisional(entry: dict[str, Any], own: str | None = None) -> bool:
  """A ledger's entry registered but never written, whose directory holds no ledger (nor
  its journal) and whose ledger lock no one holds: a run killed or refused before its first
  write, which spent nothing. (A run between its registration and its first write holds
  the lock: its entry stands.) Or a release's entry registered before its draw whose path
  does not hold that release (:func:`_holds`): a run killed while drawing, which kept
  nothing (a run still drawing holds the registry's lock, under which this is asked). ``own``: the caller's teachers
  directory, whose lock the caller holds itself; an entry there is judged by its files
  alone."""
  if int(entry.get("generation", -1)) != 0:
    return False
  if "release" in entry:
    return not _holds(str(entry.get("path", "")), entry["release"])
  teachers = pathlib.Path(entry["teachers"])
  return (not written_ledgers(teachers)  # (killed between the ledger and its journal: spent)
          and (entry["teachers"] == own or not _held(teachers / (LEDGER_FILE + LOCK_SUFFIX))))
