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
behind it -- a copy of the teachers' directory that did not spend first, an older archive
restored, a ledger and journal deleted and started over -- is refused; a ledger one write
ahead whose recorded previous generation is the entry's (a crash between the ledger's
journal line and the registry) brings it up to date; the directory a budget moved to
replaces the one recorded.

The registry is private, like the ledgers (it names the teachers' directories and the
data's digest). It guards against an honest mistake, not against its owner: deleting it
forgets the budgets (as deleting a ledger did before it), and teachers on a subset or
superset of the rows are another key.

Its directory: the argument given, else ``$PATE_JAX_BUDGET_REGISTRY``, else
``$XDG_DATA_HOME/pate_jax/budgets`` (``~/.local/share/pate_jax/budgets``).
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
from typing import Any

from pate_jax import io
from pate_jax.budget._files import BudgetError, _locked


REGISTRY_ENV = "PATE_JAX_BUDGET_REGISTRY"
_HEX = frozenset("0123456789abcdef")


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
    if (not isinstance(private_data, str) or len(private_data) != 64
        or not set(private_data) <= _HEX):
      raise ValueError("private_data must be a SHA-256 of the private data (64 lowercase hex "
                       f"digits); got {private_data!r}")
    return (self.directory / f"{private_data}.json", self.directory / f"{private_data}.lock")

  def _load(self, path: pathlib.Path, private_data: str) -> list[dict[str, Any]]:
    if not path.exists():
      return []
    try:
      record = json.loads(path.read_text())
      budgets = record["budgets"]
      ok = (record["private_data"] == private_data and isinstance(budgets, list)
            and all(isinstance(b, dict) and isinstance(b.get("votes"), str) for b in budgets))
    except (OSError, ValueError, KeyError, TypeError) as e:
      raise BudgetError(f"{path}: not a readable budget registry entry ({type(e).__name__}: "
                        f"{e}); it lists the budgets spent on a private dataset: restore it "
                        "rather than delete it") from e
    if not ok:
      raise BudgetError(f"{path}: not a budget registry entry of this private data")
    return budgets

  def budgets(self, private_data: str) -> list[dict[str, Any]]:
    """The budgets registered on ``private_data``, in the order registered (each
    ``{"votes", "teachers", "registered"}``)."""
    path, lock = self._paths(private_data)
    with _locked(lock):
      return self._load(path, private_data)

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
      if budgets and not another:
        first = budgets[0]
        raise BudgetError(
            f"the private data these teachers were trained on already has a privacy budget: "
            f"the teachers in {first.get('teachers')} (registered {first.get('registered')}"
            f"{'' if len(budgets) == 1 else f'; {len(budgets)} budgets in all'}, in {path}). "
            "A second set of teachers on the same data opens a second budget, and the ε of "
            "the two add up. Answer from those teachers (config.votes_dir), or, to spend a "
            "second budget knowingly, set config.another_budget=True: every run on this "
            "data then reports how many budgets it has")
      budgets = budgets + [{
          "votes": votes, "teachers": str(pathlib.Path(teachers).resolve()),
          "registered": datetime.datetime.now(datetime.timezone.utc).isoformat(
              timespec="seconds"),
          "generation": int(generation), "sha256": str(sha256)}]
      self._write(path, private_data, budgets)
      return budgets

  def sync(self, private_data: str, votes: str, teachers: str | os.PathLike,
           generation: int, sha256: str, previous: str) -> None:
    """Checks a ledger of the budget of ``votes`` against its entry, and follows it.

    The ledger in ``teachers`` is at ``generation`` (0: never written), its file's hash
    ``sha256`` and the hash of the generation it follows ``previous``. Where the entry
    records the same generation and hash, or the one this file follows (then the entry
    advances to it), the ledger is this budget's newest and its directory is recorded; a
    budget not registered yet is not checked.

    Raises:
      BudgetError: the ledger is behind the entry, or not its continuation.
    """
    path, lock = self._paths(private_data)
    with _locked(lock):
      budgets = self._load(path, private_data)
      entry = next((b for b in budgets if b["votes"] == votes), None)
      if entry is None:
        return
      known = (int(entry.get("generation", 0)), str(entry.get("sha256", "")))
      here = str(pathlib.Path(teachers).resolve())
      if known == (int(generation), str(sha256)):
        if entry["teachers"] == here:
          return
      elif not (int(generation) == known[0] + 1 and str(previous) == known[1]):
        state = ("no ledger (deleted, or a copy taken before it was spent)" if not generation
                 else f"its ledger at generation {generation}")
        raise BudgetError(
            f"the budget of these teachers has spent {known[0]} writes (budget registry, "
            f"{path}; last in {entry['teachers']}) and {here} holds {state}: an older or "
            "copied ledger, or one deleted and started over, cannot spend or report; use "
            f"the teachers' directory that holds the newest ledger")
      entry.update(generation=int(generation), sha256=str(sha256), teachers=here)
      self._write(path, private_data, budgets)

  @staticmethod
  def _write(path: pathlib.Path, private_data: str, budgets: list[dict[str, Any]]) -> None:
    io.write_text(path, json.dumps({"private_data": private_data, "budgets": budgets},
                                   indent=1) + "\n")
