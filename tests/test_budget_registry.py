"""One budget per private dataset: teachers trained again on the same data are refused a
second budget (pate_jax.budget.BudgetRegistry) unless it is asked for."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib

import numpy as np
import pytest

from pate_jax import budget as budget_lib
from pate_jax import experiment
from pate_jax import reporting
from pate_jax import rng
from pate_jax import votes as votes_lib
from pate_jax.stages import aggregate

REPO = pathlib.Path(__file__).resolve().parent.parent
DATA = hashlib.sha256(b"the private rows").hexdigest()
OTHER_DATA = hashlib.sha256(b"other private rows").hexdigest()


def _teachers(path, seed, private_data=DATA, q=40, t=50, c=10):
  """votes.npz of ``t`` simulated teachers (a Dirichlet per query) trained on
  ``private_data``."""
  r = np.random.default_rng(seed)
  votes = np.stack([r.multinomial(t, p) for p in r.dirichlet(np.full(c, 0.5), size=q)])
  votes_lib.save_votes(path / "votes.npz", votes, votes.argmax(1), dataset="synthetic",
                       private_data=private_data)
  return path


def _budget(path, registry, **kw):
  return budget_lib.TeachersBudget(
      path, votes_lib.load_votes(path), rng.noise_key("aggregation"), mechanism="gnmax",
      params={"sigma": 20.0}, epsilon_max=20.0, delta=1e-5, chunk_size=16,
      orders=np.array([2.0, 4.0, 8.0, 16.0, 32.0]), registry=registry, **kw)


def test_registry_claims_once_per_votes_and_refuses_other_teachers_of_the_data(tmp_path):
  reg = budget_lib.BudgetRegistry(tmp_path / "registry")
  spent = dict(generation=1, sha256="a" * 64)  # registered with a ledger already written
  first = reg.claim(DATA, "v1", tmp_path / "a", **spent)
  assert [b["votes"] for b in first] == ["v1"]
  assert first[0]["teachers"] == str((tmp_path / "a").resolve())
  assert reg.claim(DATA, "v1", tmp_path / "a") == first      # the same budget: a no-op
  with pytest.raises(budget_lib.BudgetError, match=r"already has a privacy budget: the "
                     r"teachers in .*a \(registered .*config.another_budget=True") as caught:
    reg.claim(DATA, "v2", tmp_path / "b")
  assert DATA not in str(caught.value)  # the entry's name, the private data's digest
  assert reg.budgets(DATA) == first                          # nothing was registered
  assert [b["votes"] for b in reg.claim(OTHER_DATA, "v2", tmp_path / "b")] == ["v2"]
  both = reg.claim(DATA, "v2", tmp_path / "b", another=True, **spent)
  assert [b["votes"] for b in both] == ["v1", "v2"] and reg.budgets(DATA) == both
  with pytest.raises(budget_lib.BudgetError, match="2 budgets in all"):
    reg.claim(DATA, "v3", tmp_path / "c")


def test_registry_refuses_bad_keys_and_damaged_entries(tmp_path):
  reg = budget_lib.BudgetRegistry(tmp_path)
  for bad in ("", "ABC", DATA.upper(), DATA[:-1], None):
    with pytest.raises(ValueError, match="private_data must be a SHA-256"):
      reg.claim(bad, "v1", tmp_path)
  (tmp_path / f"{DATA}.json").write_text("{not json")
  with pytest.raises(budget_lib.BudgetError, match="entry of this private data .* is not "
                     "readable") as caught:
    reg.claim(DATA, "v1", tmp_path)
  # The entry's name is the private data's digest: messages name the registry, not it.
  assert DATA not in str(caught.value)
  (tmp_path / f"{DATA}.json").write_text(json.dumps({"private_data": OTHER_DATA,
                                                     "budgets": []}))
  with pytest.raises(budget_lib.BudgetError, match="is not one of that data") as caught:
    reg.budgets(DATA)
  assert DATA not in str(caught.value)


def test_registry_directory_argument_then_environment_then_xdg(tmp_path, monkeypatch):
  monkeypatch.setenv(budget_lib.REGISTRY_ENV, str(tmp_path / "env"))
  assert budget_lib.registry_directory(tmp_path / "arg") == tmp_path / "arg"
  assert budget_lib.registry_directory("") == tmp_path / "env"
  monkeypatch.delenv(budget_lib.REGISTRY_ENV)
  monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
  assert budget_lib.registry_directory() == tmp_path / "xdg" / "pate_jax" / "budgets"


def test_votes_npz_keeps_private_data_and_refuses_a_malformed_one(tmp_path):
  _teachers(tmp_path, 0)
  assert votes_lib.load_votes(tmp_path)["private_data"] == DATA
  with pytest.raises(ValueError, match="private_data must be a SHA-256"):
    _teachers(tmp_path / "bad", 0, private_data="1234")
  votes_lib.save_votes(tmp_path / "old" / "votes.npz", np.full((3, 2), 2), [0, 1, 0])
  assert "private_data" not in votes_lib.load_votes(tmp_path / "old")


def test_second_teachers_of_the_same_data_are_refused_before_anything_is_charged(tmp_path):
  reg = budget_lib.BudgetRegistry(tmp_path / "registry")
  a, b = _teachers(tmp_path / "a", 0), _teachers(tmp_path / "b", 1)
  first = _budget(a, reg)
  first.answer(np.arange(10))
  assert first.budgets_on_data() == 1
  with pytest.raises(budget_lib.BudgetError, match=r"already has a privacy budget"):
    _budget(b, reg).answer(np.arange(10))
  assert not (b / budget_lib.LEDGER_FILE).exists()           # nothing spent, nothing kept
  first.answer(np.arange(10, 20))                            # the first budget goes on
  # Teachers of other data, a research budget, votes without a data digest: not refused.
  _budget(_teachers(tmp_path / "c", 2, private_data=OTHER_DATA), reg).answer(np.arange(5))
  research = _budget(b, reg, research_seed=0)
  research.answer(np.arange(5))
  assert research.budgets_on_data() is None
  votes_lib.save_votes(tmp_path / "d" / "votes.npz", np.full((5, 10), 5), np.zeros(5, int))
  assert _budget(tmp_path / "d", reg).answer(np.arange(5)).status.size == 5
  # Asked for: a second budget, which both report.
  second = _budget(b, reg, another_budget=True)
  second.answer(np.arange(10))
  assert second.budgets_on_data() == first.budgets_on_data() == 2
  assert [x["teachers"] for x in reg.budgets(DATA)] == [str(a.resolve()), str(b.resolve())]
  _budget(b, reg).answer(np.arange(10, 12))  # registered: it no longer needs the flag


def _config(votes_dir, registry, **overrides):
  c = experiment.load_script(REPO / "configs" / "aggregate_mnist.py").get_config("cpu")
  c.votes_dir, c.mechanism, c.sigma, c.num_queries = str(votes_dir), "gnmax", 20.0, 20
  c.chunk_size, c.epsilon_max, c.privacy_plot = 16, 20.0, False
  c.budget_registry = str(registry)
  for k, v in overrides.items():
    c[k] = v
  return c


@pytest.mark.slow
def test_aggregate_stage_refuses_a_second_budget_unless_asked_and_reports_it(tmp_path,
                                                                             capsys):
  registry = tmp_path / "registry"
  a, b = _teachers(tmp_path / "a", 0), _teachers(tmp_path / "b", 1)
  res = aggregate.run(_config(a, registry), tmp_path / "labels_a")
  assert res["ledger"]["budgets_on_private_data"] == 1
  with pytest.raises(budget_lib.BudgetError, match=r"teachers in .*/a \(registered"):
    aggregate.run(_config(b, registry), tmp_path / "labels_b")
  assert not (tmp_path / "labels_b" / "results.json").exists()
  capsys.readouterr()
  res = aggregate.run(_config(b, registry, another_budget=True), tmp_path / "labels_b")
  assert res["ledger"]["budgets_on_private_data"] == 2
  lines = reporting.aggregate_headline(res)
  assert any(ln.startswith("  NOTE: 2 budgets are spent on the private data") for ln in lines)
  # The registry named by the environment (the default): the first teachers hold it.
  research = aggregate.run(_config(b, "", noise_seed=3), tmp_path / "research")
  assert research["ledger"]["budgets_on_private_data"] is None
  # (Rows answered before come back free, and register nothing: b's 10 new ones do.)
  aggregate.run(_config(a, ""), tmp_path / "labels_env_a")
  aggregate.run(_config(b, "", num_queries=30), tmp_path / "labels_env")
  with pytest.raises(budget_lib.BudgetError, match="already has a privacy budget"):
    aggregate.run(_config(a, "", num_queries=30), tmp_path / "labels_env_a")


def _new_process(monkeypatch):
  """Forgets this process's ledger lineages (pate_jax.ledger refuses a stale copy within
  a process by itself): what another process, which has only the files, would see."""
  from pate_jax.ledger import _aggregator  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(_aggregator, "_NEWEST", {})


def test_the_registry_follows_the_ledger_copies_behind_it_are_refused(tmp_path, monkeypatch):
  """A copy of the teachers' directory shares their one budget: whichever spends first
  holds it, the other is behind and refused; so are an older copy restored and a ledger
  deleted with its journal (each as a new process would meet them: with the files only)."""
  import shutil  # pylint: disable=g-import-not-at-top
  reg = budget_lib.BudgetRegistry(tmp_path / "registry")
  a = _teachers(tmp_path / "a", 0)
  _budget(a, reg).answer(np.arange(5))
  b = tmp_path / "b"
  shutil.copytree(a, b)                          # the same votes and ledger
  older = tmp_path / "older"
  shutil.copytree(a, older)
  _budget(b, reg).answer(np.arange(5, 10))       # b spends first: b holds the budget
  assert reg.budgets(DATA)[0]["teachers"] == str(b.resolve())
  _new_process(monkeypatch)
  with pytest.raises(budget_lib.BudgetError, match=r"has spent 2 writes .* last in .*b\)"):
    _budget(a, reg).answer(np.arange(10, 12))
  _new_process(monkeypatch)
  with pytest.raises(budget_lib.BudgetError, match="an older or copied ledger"):
    _budget(a, reg).state()                      # nor report from it
  # Deleting the ledger and its journal does not start the budget over.
  for name in (budget_lib.LEDGER_FILE, budget_lib.LEDGER_FILE + budget_lib.JOURNAL_SUFFIX):
    (b / name).unlink()
  with pytest.raises(budget_lib.BudgetError, match=r"holds no ledger \(deleted"):
    _budget(b, reg).answer(np.arange(5))
  # An older copy restored in place of the newest is behind too.
  shutil.rmtree(b)
  shutil.copytree(older, b)
  _new_process(monkeypatch)
  with pytest.raises(budget_lib.BudgetError, match="at generation 1"):
    _budget(b, reg).answer(np.arange(12, 14))


def test_the_registry_follows_a_moved_directory_and_a_crash_before_its_update(tmp_path):
  reg = budget_lib.BudgetRegistry(tmp_path / "registry")
  a = _teachers(tmp_path / "a", 0)
  first = _budget(a, reg)
  first.answer(np.arange(5))
  spent = first.epsilon
  moved = tmp_path / "moved"
  a.rename(moved)
  budget = _budget(moved, reg)
  assert budget.epsilon == spent                  # the same budget, found where it moved
  assert reg.budgets(DATA)[0]["teachers"] == str(moved.resolve())
  # A write whose registry update was lost (killed between the journal and the registry):
  # the next reader finds the ledger one write ahead, continuing the entry, and catches up.
  entry = json.loads((tmp_path / "registry" / f"{DATA}.json").read_text())
  budget.answer(np.arange(5, 8))
  (tmp_path / "registry" / f"{DATA}.json").write_text(json.dumps(entry))
  assert _budget(moved, reg).epsilon > spent
  assert reg.budgets(DATA)[0]["generation"] == 2
  # A ledger that does not continue the entry (another file at the next generation) is not.
  entry["budgets"][0]["sha256"] = "0" * 64
  (tmp_path / "registry" / f"{DATA}.json").write_text(json.dumps(entry))
  with pytest.raises(budget_lib.BudgetError, match="cannot spend or report"):
    _budget(moved, reg).answer(np.arange(8, 10))


def test_the_registry_catches_up_writes_made_under_another_registry(tmp_path, monkeypatch):
  """Writes the registry missed (the same teachers spent under another registry: another
  $PATE_JAX_BUDGET_REGISTRY, or a crash before its update) are in the ledger's journal
  after its entry's line: the entry catches up instead of refusing the newest ledger."""
  one = budget_lib.BudgetRegistry(tmp_path / "one")
  other = budget_lib.BudgetRegistry(tmp_path / "other")
  a = _teachers(tmp_path / "a", 0)
  _budget(a, one).answer(np.arange(3))
  _budget(a, one).answer(np.arange(3, 6))        # one: generation 2
  _budget(a, other).answer(np.arange(6, 9))      # other registers it at 2, follows it to 4
  _budget(a, other).answer(np.arange(9, 12))
  _new_process(monkeypatch)
  budget = _budget(a, one)
  assert budget.state()["generation"] == 4 == one.budgets(DATA)[0]["generation"]
  budget.answer(np.arange(12, 14))
  # An entry written before the registry followed ledgers (no generation) adopts the ledger.
  path = tmp_path / "one" / f"{DATA}.json"
  record = json.loads(path.read_text())
  for key in ("generation", "sha256"):
    del record["budgets"][0][key]
  path.write_text(json.dumps(record))
  assert _budget(a, one).state()["generation"] == 5 == one.budgets(DATA)[0]["generation"]


def test_a_budget_that_never_wrote_yields_to_other_teachers(tmp_path):
  """A run killed or refused before its budget's first write spent nothing: while its
  directory holds no journal, other teachers of the same data may take the budget."""
  reg = budget_lib.BudgetRegistry(tmp_path / "registry")
  a, b = _teachers(tmp_path / "a", 0), _teachers(tmp_path / "b", 1)
  # a's run registered its budget and was killed before writing its ledger.
  reg.claim(DATA, budget_lib.votes_digest(votes_lib.load_votes(a)), a)
  assert reg.budgets(DATA)[0]["generation"] == 0   # registered, never written
  _budget(b, reg).answer(np.arange(5))             # b takes the data's budget
  assert [x["teachers"] for x in reg.budgets(DATA)] == [str(b.resolve())]
  with pytest.raises(budget_lib.BudgetError, match="already has a privacy budget"):
    _budget(a, reg).answer(np.arange(5))           # and a, now, is the second


def test_a_budget_between_its_registration_and_first_write_is_not_replaced(tmp_path):
  """A run that registered and is still spending (its first compile, before the ledger's
  first write) holds its ledger's lock: other teachers are refused, not registered in its
  place (two budgets spent, one listed)."""
  from pate_jax.budget import _files  # pylint: disable=g-import-not-at-top
  reg = budget_lib.BudgetRegistry(tmp_path / "registry")
  a, b = _teachers(tmp_path / "a", 0), _teachers(tmp_path / "b", 1)
  first = _budget(a, reg)
  with _files._locked(first.lock_path):  # a's answer: registered, not written yet
    first._claim()
    with pytest.raises(budget_lib.BudgetError, match="already has a privacy budget"):
      _budget(b, reg).answer(np.arange(5))
  assert [x["teachers"] for x in reg.budgets(DATA)] == [str(a.resolve())]
  _budget(b, reg).answer(np.arange(5))  # a let go without writing: it spent nothing
  assert [x["teachers"] for x in reg.budgets(DATA)] == [str(b.resolve())]


def test_a_budget_killed_between_its_ledger_and_its_journal_line_stands(tmp_path):
  """ledger.npz replaced, its journal line not yet written: the ledger spent (its next
  read completes the journal), so its entry is not provisional."""
  reg = budget_lib.BudgetRegistry(tmp_path / "registry")
  a, b = _teachers(tmp_path / "a", 0), _teachers(tmp_path / "b", 1)
  reg.claim(DATA, budget_lib.votes_digest(votes_lib.load_votes(a)), a)
  (a / budget_lib.LEDGER_FILE).write_bytes(b"the first write")
  with pytest.raises(budget_lib.BudgetError, match="already has a privacy budget"):
    reg.claim(DATA, "other votes", b)


def test_teachers_trained_again_where_a_budget_never_wrote_take_its_place(tmp_path):
  """A run killed before its first write, then teachers trained again into the same
  directory (other votes): their run holds that directory's ledger lock itself, and the
  old entry, which spent nothing, yields to it."""
  reg = budget_lib.BudgetRegistry(tmp_path / "registry")
  a = _teachers(tmp_path / "a", 0)
  reg.claim(DATA, budget_lib.votes_digest(votes_lib.load_votes(a)), a)  # killed after this
  _teachers(a, 1)                                                         # trained again
  _budget(a, reg).answer(np.arange(5))
  (entry,) = reg.budgets(DATA)
  assert entry["votes"] == budget_lib.votes_digest(votes_lib.load_votes(a))


def test_the_registry_is_owner_only(tmp_path):
  reg = budget_lib.BudgetRegistry(tmp_path / "registry")
  assert not (tmp_path / "registry").exists()  # made on first use, not by a research run
  reg.claim(DATA, "v1", tmp_path)
  assert (tmp_path / "registry").stat().st_mode & 0o777 == 0o700
  assert (tmp_path / "registry" / f"{DATA}.json").stat().st_mode & 0o777 == 0o600
  # One's own directory opened wider is narrowed; a shared one (sticky, as /tmp) is refused:
  # the entries' file names are the private data's digest.
  (tmp_path / "registry").chmod(0o755)
  reg.budgets(DATA)
  assert (tmp_path / "registry").stat().st_mode & 0o777 == 0o700
  (tmp_path / "shared").mkdir(mode=0o777)
  (tmp_path / "shared").chmod(0o1777)
  with pytest.raises(budget_lib.BudgetError, match="shared with other users.*own"):
    budget_lib.BudgetRegistry(tmp_path / "shared").claim(DATA, "v1", tmp_path)
  assert not list((tmp_path / "shared").iterdir())


def test_a_budgets_files_and_locks_are_owner_only(tmp_path):
  """The ledger, its journal and the locks guarding them and the registry's entry are
  0600 whatever the umask: another user who could open a lock could hold it, and stall
  every spend of the budget."""
  old = os.umask(0o022)
  try:
    reg = budget_lib.BudgetRegistry(tmp_path / "registry")
    a = _teachers(tmp_path / "a", 0)
    _budget(a, reg).answer(np.arange(5))
  finally:
    os.umask(old)
  files = [a / "ledger.npz", a / "ledger.npz.journal", a / "ledger.npz.lock",
           tmp_path / "registry" / f"{DATA}.lock"]
  assert {str(p): oct(p.stat().st_mode & 0o777) for p in files} == {
      str(p): "0o600" for p in files}


@pytest.mark.slow
def test_votes_without_private_data_fall_back_to_the_digest_their_run_recorded(tmp_path):
  """votes.npz written before it carried private_data: the key is the training rows'
  digest in the teachers' run record (votes_fingerprint.json)."""
  from pate_jax.stages import teachers as teachers_stage  # pylint: disable=g-import-not-at-top
  registry = tmp_path / "registry"
  a = _teachers(tmp_path / "a", 0)
  b = _teachers(tmp_path / "b", 1, private_data=None)
  teachers_stage.write_votes_record(b, {"data_sha256": DATA}, {})
  assert teachers_stage.recorded_data_digest(b) == DATA
  aggregate.run(_config(a, registry), tmp_path / "labels_a")
  with pytest.raises(budget_lib.BudgetError, match="already has a privacy budget"):
    aggregate.run(_config(b, registry), tmp_path / "labels_b")


def test_votes_whose_private_data_was_removed_or_replaced_meet_their_budget(tmp_path):
  """The votes' salted digest does not cover ``private_data``: a copy of votes.npz without
  it (or with other data's) in a fresh directory had no registry entry to meet and opened
  a second budget from zero. The registry knows the votes, whatever the file says."""
  reg = budget_lib.BudgetRegistry(tmp_path / "registry")
  a = _teachers(tmp_path / "a", 0)
  _budget(a, reg).answer(np.arange(5))
  assert reg.data_of(budget_lib.votes_digest(votes_lib.load_votes(a))) == DATA
  assert reg.data_of("0" * 64) is None
  # Another data's damaged entry stops neither the search nor these teachers' budget.
  (reg.directory / f"{OTHER_DATA[::-1]}.json").write_text("{not json")
  assert reg.data_of(budget_lib.votes_digest(votes_lib.load_votes(a))) == DATA
  v = dict(np.load(a / "votes.npz"))
  for name, private_data in (("removed", None), ("replaced", OTHER_DATA)):
    forged = tmp_path / name
    forged.mkdir()
    np.savez(forged / "votes.npz", **{k: x for k, x in v.items() if k != "private_data"},
             **({} if private_data is None else {"private_data": private_data}))
    with pytest.raises(budget_lib.BudgetError,
                       match="votes.npz was altered" if private_data else "holds no ledger"):
      _budget(forged, reg).answer(np.arange(5, 10))
  assert [b["teachers"] for b in reg.budgets(DATA)] == [str(a.resolve())]
  assert reg.budgets(OTHER_DATA) == []
  _budget(a, reg).answer(np.arange(5, 10))        # the teachers' own directory spends on


@pytest.mark.parametrize("field,value", [
    ("generation", float("nan")), ("generation", "x"), ("generation", None),
    ("generation", 0.5), ("generation", False), ("generation", "0"), ("generation", -1),
    ("teachers", 5),
    ("sha256", None)])
def test_registry_entries_with_mistyped_fields_are_refused_as_damaged(tmp_path, field, value):
  """Such an entry raised a bare ValueError/TypeError/KeyError, or (0.5, False, "0") read as
  generation 0: a budget never written, which other teachers may replace."""
  reg = budget_lib.BudgetRegistry(tmp_path / "registry")
  reg.claim(DATA, "v1", tmp_path / "a", generation=3, sha256="b" * 64)
  path = tmp_path / "registry" / f"{DATA}.json"
  record = json.loads(path.read_text())
  record["budgets"][0][field] = value
  path.write_text(json.dumps(record))
  with pytest.raises(budget_lib.BudgetError, match="budget registry .*not an entry as written"):
    reg.claim(DATA, "v2", tmp_path / "b")
  with pytest.raises(budget_lib.BudgetError, match="budget registry .*not an entry as written"):
    reg.sync(DATA, "v1", tmp_path / "a", [(3, "b" * 64)])


@pytest.mark.parametrize("epsilon_max", [float("inf"), float("nan")])
def test_a_budget_of_secret_noise_needs_a_finite_epsilon_max(tmp_path, epsilon_max):
  """The library's own check, not only the aggregate stage's: with secret noise the answers
  are a release, and a release needs a budget; a research seed may run unbounded."""
  _teachers(tmp_path, 0)
  with pytest.raises(ValueError, match="epsilon_max must be finite with secret noise"):
    budget_lib.TeachersBudget(
        tmp_path, votes_lib.load_votes(tmp_path), rng.noise_key("aggregation"),
        mechanism="gnmax", params={"sigma": 20.0}, epsilon_max=epsilon_max, delta=1e-5,
        chunk_size=16)
  assert not (tmp_path / "ledger.npz").exists()
  research = budget_lib.TeachersBudget(
      tmp_path, votes_lib.load_votes(tmp_path), rng.noise_key("aggregation", 0),
      mechanism="gnmax", params={"sigma": 20.0}, epsilon_max=float("inf"), delta=1e-5,
      chunk_size=16, research_seed=0)
  assert research.path.name == "research_ledger.npz"


def test_a_release_drawn_again_into_another_file_is_a_second_entry(tmp_path):
  """record_release: the same release in another file (another hash: drawn again) is
  another spend and gets its own entry; the same file moved only moves its entry."""
  reg = budget_lib.BudgetRegistry(tmp_path / "registry")
  release = hashlib.sha256(b"a release").hexdigest()
  reg.record_release(DATA, release, "v", tmp_path / "a.npz", "a" * 64)
  reg.record_release(DATA, release, "v", tmp_path / "b.npz", "b" * 64)
  reg.record_release(DATA, release, "v", tmp_path / "c.npz", "a" * 64)   # a.npz moved
  entries = reg.budgets(DATA)
  assert [(b["sha256"], pathlib.Path(b["path"]).name) for b in entries] == [
      ("a" * 64, "c.npz"), ("b" * 64, "b.npz")]
  assert all(b["release"] == release and b["of_votes"] == "v" for b in entries)
