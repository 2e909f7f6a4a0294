"""A release of private votes outside a ledger (the KD-GAN's sound soft labels) is drawn
once and is a budget of its own on the teachers' private data
(pate_jax.budget.draw_once)."""

from __future__ import annotations

import concurrent.futures
import hashlib
import shutil
import stat
import time

import numpy as np
import pytest

from pate_jax import budget as budget_lib
from pate_jax import io
from pate_jax import rng
from pate_jax import votes as votes_lib

DATA = hashlib.sha256(b"the private rows").hexdigest()
VOTES = "v" * 64
SETTINGS = {"rows": "r", "epsilons": [1.0, 2.0], "noise": "secret"}


class _Draws:
  """A release of fresh random numbers, counting its draws (``pause``: seconds per draw)."""

  def __init__(self, pause=0.0):
    self.count, self.pause = 0, pause

  def __call__(self):
    self.count += 1
    time.sleep(self.pause)
    return {"targets": np.random.default_rng().normal(size=(4, 3)).astype(np.float32)}


def _once(path, draws, registry=None, settings=SETTINGS, secret=True, private_data=DATA,
          **kw):
  """draw_once as a stage calls it: the registry's key resolved first (key_of)."""
  if registry is not None and secret:
    private_data = registry.key_of(VOTES, private_data, path)
  return budget_lib.draw_once(path, draws, votes_digest=VOTES, settings=settings,
                              secret=secret, registry=registry, private_data=private_data,
                              **kw)


def test_a_release_is_drawn_once_and_kept_owner_only(tmp_path):
  draws, path = _Draws(), tmp_path / "w" / "release.npz"
  first = _once(path, draws)
  again = _once(path, draws)
  assert draws.count == 1
  np.testing.assert_array_equal(first["targets"], again["targets"])
  assert set(again) == {"targets"}
  assert stat.S_IMODE(path.stat().st_mode) == 0o600
  assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
  # A secret release is never overwritten: the work directory is its own.
  for kw in ({}, {"another_budget": True}):
    with pytest.raises(budget_lib.BudgetError, match="other settings.*another work directory"):
      _once(path, draws, settings={**SETTINGS, "epsilons": [3.0]}, **kw)
  with pytest.raises(budget_lib.BudgetError, match="another work directory$"):
    _once(path, draws, secret=False, settings={**SETTINGS, "noise": "research:0"})
  assert draws.count == 1
  np.testing.assert_array_equal(_once(path, draws)["targets"], first["targets"])
  # A damaged file is named, not read as no release.
  path.write_bytes(path.read_bytes()[:40])
  with pytest.raises(budget_lib.BudgetError, match="not a readable release"):
    _once(path, draws)


def test_research_noise_is_replaced_freely_and_never_registered(tmp_path):
  reg = budget_lib.BudgetRegistry(tmp_path / "registry")
  draws, path = _Draws(), tmp_path / "release.npz"
  _once(path, draws, reg, secret=False, settings={**SETTINGS, "noise": "research:0"})
  _once(path, draws, reg, secret=False, settings={**SETTINGS, "noise": "research:1"})
  assert draws.count == 2 and reg.budgets(DATA) == []
  _once(path, draws, reg)  # secret noise in its place: nothing spent before it
  assert draws.count == 3 and len(reg.budgets(DATA)) == 1


def _spent_teachers(teachers, registry):
  """Synthetic teachers' votes in ``teachers`` and their ledger, spent on five answers."""
  votes = np.random.default_rng(0).multinomial(50, np.full(10, 0.1), size=20)
  votes_lib.save_votes(teachers / "votes.npz", votes, votes.argmax(1), dataset="synthetic",
                       private_data=DATA)
  ledger = budget_lib.TeachersBudget(
      teachers, votes_lib.load_votes(teachers), rng.noise_key("aggregation"),
      mechanism="gnmax", params={"sigma": 20.0}, epsilon_max=20.0, delta=1e-5,
      chunk_size=16, orders=np.array([2.0, 8.0, 32.0]), registry=registry)
  ledger.answer(np.arange(5))
  return ledger


def test_a_release_is_one_budget_beside_the_teachers_ledger(tmp_path):
  reg = budget_lib.BudgetRegistry(tmp_path / "registry")
  teachers = tmp_path / "teachers"
  ledger = _spent_teachers(teachers, reg)
  draws = _Draws()
  with pytest.raises(budget_lib.BudgetError, match=r"already has a privacy budget: the "
                     r"teachers in .*teachers.*A release of these teachers' votes on the same "
                     r"data opens a second budget.*another_budget=True"):
    _once(tmp_path / "a" / "release.npz", draws, reg)
  assert draws.count == 0 and not (tmp_path / "a" / "release.npz").exists()
  _once(tmp_path / "a" / "release.npz", draws, reg, another_budget=True)
  assert ledger.budgets_on_data() == 2
  assert reg.budgets(DATA)[1]["path"] == str((tmp_path / "a" / "release.npz").resolve())
  ledger.answer(np.arange(5, 10))  # registered first: it goes on


def test_a_registered_release_refuses_other_teachers_and_a_second_draw(tmp_path):
  reg = budget_lib.BudgetRegistry(tmp_path / "registry")
  draws, path = _Draws(), tmp_path / "a" / "release.npz"
  first = _once(path, draws, reg)
  with pytest.raises(budget_lib.BudgetError, match=r"budget: a release of their votes "
                     r"outside a ledger, in .*release.npz.*Use that release"):
    reg.claim(DATA, "other votes", tmp_path / "teachers")
  # Moved to another directory: the same release, not drawn again; its entry follows.
  moved = tmp_path / "b" / "release.npz"
  moved.parent.mkdir()
  shutil.move(path, moved)
  np.testing.assert_array_equal(_once(moved, draws, reg)["targets"], first["targets"])
  assert draws.count == 1 and [b["path"] for b in reg.budgets(DATA)] == [str(moved.resolve())]
  # Its file deleted: drawing again spends again. The same votes without their data's
  # digest (votes.npz's private_data removed) are known by their own digest.
  moved.unlink()
  for key in (DATA, None):
    with pytest.raises(budget_lib.BudgetError, match=r"was drawn before .* Copy that file"):
      _once(tmp_path / "c" / "release.npz", draws, reg, private_data=key)
  with pytest.raises(budget_lib.BudgetError, match="votes.npz was altered"):
    _once(moved, draws, reg, private_data=hashlib.sha256(b"other").hexdigest())
  _once(moved, draws, reg, another_budget=True)
  assert draws.count == 2 and len(reg.budgets(DATA)) == 2


def test_a_release_killed_before_its_entry_is_adopted(tmp_path):
  path = tmp_path / "release.npz"
  draws = _Draws()
  _once(path, draws)  # the file, with no registry to record it (a run killed before)
  reg = budget_lib.BudgetRegistry(tmp_path / "registry")
  _once(path, draws, reg)
  assert draws.count == 1
  (only,) = reg.budgets(DATA)
  assert (only["generation"], only["sha256"], only["of_votes"]) == (1, io.file_digest(path),
                                                                    VOTES)


class _Killed(BaseException):
  """A run killed at a chosen point (nothing of the library catches it)."""


def test_a_release_killed_before_its_entry_is_complete_holds_the_data(tmp_path, monkeypatch):
  """Killed after the release's file and before the registry recorded it: the data is
  already held, so other teachers' ledger is refused (not left to spend as the only
  budget, with the release adopted beside it later), and the file's rerun completes the
  entry without drawing again."""
  reg = budget_lib.BudgetRegistry(tmp_path / "registry")
  write = budget_lib.BudgetRegistry._write

  def killed_at_the_entry_of_a_drawn_release(path, private_data, budgets):
    if any(b.get("release") and b.get("generation") == 1 for b in budgets):
      raise _Killed
    write(path, private_data, budgets)

  draws, path = _Draws(), tmp_path / "a" / "release.npz"
  with monkeypatch.context() as m:
    m.setattr(budget_lib.BudgetRegistry, "_write",
              staticmethod(killed_at_the_entry_of_a_drawn_release))
    with pytest.raises(_Killed):
      _once(path, draws, reg)
  assert path.exists() and draws.count == 1
  with pytest.raises(budget_lib.BudgetError, match=r"a release of their votes outside a "
                     r"ledger, in .*release\.npz"):
    reg.claim(DATA, "other votes", tmp_path / "teachers")
  first = np.load(path)["targets"]
  np.testing.assert_array_equal(_once(path, draws, reg)["targets"], first)
  (only,) = reg.budgets(DATA)
  assert draws.count == 1
  assert (only["generation"], only["sha256"], only["path"]) == (
      1, io.file_digest(path), str(path.resolve()))


def test_a_release_killed_while_drawing_kept_nothing_and_is_drawn_again(tmp_path):
  """Killed inside the draw, before its file: nothing was kept, so its entry neither holds
  the data nor refuses the release's rerun, which draws it (once) and registers it."""
  reg = budget_lib.BudgetRegistry(tmp_path / "registry")

  def killed():
    raise _Killed

  path = tmp_path / "a" / "release.npz"
  with pytest.raises(_Killed):
    _once(path, killed, reg)
  assert not path.exists() and reg.budgets(DATA) == []
  draws = _Draws()
  _once(path, draws, reg)
  _once(path, draws, reg)
  (only,) = reg.budgets(DATA)
  assert draws.count == 1 and (only["generation"], only["sha256"]) == (1,
                                                                       io.file_digest(path))


@pytest.mark.parametrize("then", ["rerun", "other teachers"])
def test_a_secret_release_killed_over_a_research_file_kept_nothing(tmp_path, then):
  """A secret draw meant to replace a research measurement in the same work directory,
  killed while drawing, kept nothing: the research file still there is not the release, so
  its entry neither refuses the rerun nor holds the data against other teachers."""
  reg = budget_lib.BudgetRegistry(tmp_path / "registry")
  path = tmp_path / "w" / "release.npz"
  _once(path, _Draws(), reg, settings={**SETTINGS, "noise": "research seed"}, secret=False)

  def killed():
    raise _Killed

  with pytest.raises(_Killed):
    _once(path, killed, reg)
  assert path.exists() and reg.budgets(DATA) == []
  if then == "rerun":
    draws = _Draws()
    _once(path, draws, reg)
    _once(path, draws, reg)
    (only,) = reg.budgets(DATA)
    assert draws.count == 1 and only["sha256"] == io.file_digest(path)
  else:
    (only,) = reg.claim(DATA, "o" * 64, tmp_path / "teachers")
    assert only["votes"] == "o" * 64


def test_two_runs_at_once_cannot_both_draw(tmp_path):
  """The checks and the draw hold the registry's lock: the second run sees the first."""
  reg = budget_lib.BudgetRegistry(tmp_path / "registry")
  draws = _Draws(pause=0.5)

  def run(name):
    try:
      _once(tmp_path / name / "release.npz", draws, reg)
      return "drawn"
    except budget_lib.BudgetError:
      return "refused"

  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    outcomes = sorted(pool.map(run, ["a", "b"]))
  assert outcomes == ["drawn", "refused"] and draws.count == 1
  assert len(reg.budgets(DATA)) == 1


def test_a_secret_release_of_votes_naming_no_data_is_refused_unless_another_budget(tmp_path):
  """Votes that name no private data key no budget: nothing would keep a secret release of
  them to one draw, so a new one is refused, also where a research release lies (replaced
  freely otherwise); asked for as another budget it is drawn once and read back."""
  reg, draws = budget_lib.BudgetRegistry(tmp_path / "registry"), _Draws()
  path = tmp_path / "w" / "release.npz"
  _once(path, draws, reg, secret=False, private_data=None,
        settings={**SETTINGS, "noise": "research:0"})
  for where in (path, tmp_path / "v" / "release.npz"):
    with pytest.raises(budget_lib.BudgetError, match="no digest of the teachers' private data"):
      _once(where, draws, reg, private_data=None)
  assert draws.count == 1
  first = _once(path, draws, reg, private_data=None, another_budget=True)
  again = _once(path, draws, reg, private_data=None)  # its own: read back, not refused
  np.testing.assert_array_equal(first["targets"], again["targets"])
  assert draws.count == 2


def test_a_release_beside_a_spent_ledger_is_refused_under_another_registry(tmp_path):
  """The teachers' ledger beside their votes is their budget whichever registry a run
  names: a registry that does not follow it (another one, or one deleted) does not let a
  secret release of the same votes open a second budget unasked. A rerun reads back the
  release it drew; research noise spends nothing."""
  teachers = tmp_path / "teachers"
  ledger = _spent_teachers(teachers, budget_lib.BudgetRegistry(tmp_path / "registry"))
  other = budget_lib.BudgetRegistry(tmp_path / "another_registry")
  draws, path = _Draws(), tmp_path / "a" / "release.npz"
  for registry in (other, None):
    with pytest.raises(budget_lib.BudgetError, match=r"ledger\.npz: the teachers' privacy "
                       r"ledger beside their votes has spent.*another_budget=True"):
      _once(path, draws, registry, teachers=teachers)
  assert draws.count == 0 and not path.exists() and other.budgets(DATA) == []
  _once(tmp_path / "r" / "release.npz", draws, other, teachers=teachers, secret=False,
        settings={**SETTINGS, "noise": "research:0"})
  first = _once(path, draws, other, teachers=teachers, another_budget=True)
  again = _once(path, draws, other, teachers=teachers)  # read back: nothing drawn
  assert draws.count == 2 and len(other.budgets(DATA)) == 1
  np.testing.assert_array_equal(first["targets"], again["targets"])
