"""What pate_jax publishes is a valid (ε, δ) release of the teachers' data.

One test per way a release could leak (numbered 1-7 here; the KD-GAN's sound release is
in test_kd_gan.py, the teachers stage's fingerprint in test_stage_fingerprints.py, smaller
fixes in test_small_privacy_fixes.py, test_accounting.py and test_resume_integrity.py),
then two properties over random usage: the ε recomputed from everything released never
exceeds ε_max, and nothing outside a ``private`` part is a function of the private votes
other than the released labels and the released ε.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import shutil
import threading

import jax
import numpy as np
import pytest

from pate_jax import accounting as acc
from pate_jax import budget as budget_lib
from pate_jax import experiment
from pate_jax import labels as labels_lib
from pate_jax import ledger as L
from pate_jax import mechanisms
from pate_jax import reporting
from pate_jax import rng
from pate_jax import votes as votes_lib
from pate_jax.stages import aggregate

REPO = pathlib.Path(__file__).resolve().parent.parent
ORDERS = np.array([1.5, 2.0, 3.0, 5.0, 8.0, 16.0, 32.0, 64.0])
C, T = 10, 250
ANSWERED, NOT_CONFIDENT, REFUSED = (int(L.Status.ANSWERED), int(L.Status.NOT_CONFIDENT),
                                    int(L.Status.REFUSED_BUDGET))


def _votes(seed, q, t=T, c=C, concentration=2.0):
  r = np.random.default_rng(seed)
  p = r.dirichlet(np.full(c, concentration), size=q)
  return np.stack([r.multinomial(t, pi) for pi in p]).astype(np.int32)


def _teachers(path, votes, num_pool=None, labels=None):
  path.mkdir(parents=True, exist_ok=True)
  labels = votes.argmax(1) if labels is None else labels  # The public pool's true labels.
  votes_lib.save_votes(path / "votes.npz", votes, labels.astype(np.int32),
                       num_pool=num_pool or len(votes), dataset="synthetic")
  return path


def _config(votes_dir, **overrides):
  c = experiment.load_script(REPO / "configs" / "aggregate_mnist.py").get_config("cpu")
  c.votes_dir, c.mechanism, c.sigma = str(votes_dir), "gnmax", 40.0
  c.num_queries, c.chunk_size, c.orders = 20, 16, tuple(ORDERS)
  c.epsilon_max, c.privacy_plot = 20.0, False
  for k, v in overrides.items():
    c[k] = v
  return c


# --- 1. The noise is secret ---------------------------------------------------------------


@pytest.mark.slow
def test_1_labels_cannot_be_recomputed_from_what_a_run_wrote(tmp_path):
  """An attacker holding results.json (its seed) and the votes recomputes the noise of a
  seeded stream; with secret noise the released labels are not those."""
  votes = _votes(1, 40, concentration=50.0)        # Small gaps: the noise decides labels.
  teachers = _teachers(tmp_path / "t", votes)
  r = aggregate.run(_config(teachers, num_queries=40), tmp_path / "w")
  record = json.loads((tmp_path / "w" / "results.json").read_text())
  assert record["results"]["noise_source"] == {
      "source": "secret (os.urandom, never written)", "public": False}
  released = labels_lib.load_labels(tmp_path / "w")["labels"]
  seed = record["seed"]
  with jax.enable_x64(True):  # the answers' float64 noise
    guess = mechanisms.GNMAX.answer(rng.stream(rng.root_key(seed), "aggregation"), votes,
                                    np.arange(40, dtype=np.uint32), {"sigma": 40.0})[0]
  assert np.mean(np.asarray(guess) == released) < 0.9, r["label_accuracy_overall"]
  # Nothing any file of the run holds is a key: the noise is in no file.
  assert "key" not in json.dumps(record).lower().replace("kept_in", "")


def _disclosure(workdir: pathlib.Path) -> str:
  return json.loads((workdir / "results.json").read_text())["disclosure"]


@pytest.mark.slow
def test_1_a_research_seed_reproduces_and_says_so(tmp_path):
  teachers = _teachers(tmp_path / "t", _votes(1, 40, concentration=50.0))
  a = aggregate.run(_config(teachers, noise_seed=7), tmp_path / "a")
  b = aggregate.run(_config(teachers, noise_seed=7), tmp_path / "b")
  np.testing.assert_array_equal(labels_lib.load_labels(tmp_path / "a")["labels"],
                                labels_lib.load_labels(tmp_path / "b")["labels"])
  assert a["noise_source"]["public"] and a["epsilon_release"] == b["epsilon_release"]
  assert "measurement, not a release" in a["noise_source"]["note"]
  assert "NOTE: " + rng.PUBLIC_NOISE_NOTE in reporting.aggregate_headline(a)
  assert (tmp_path / "a" / budget_lib.RESEARCH_LEDGER_FILE).exists()
  assert not (teachers / budget_lib.LEDGER_FILE).exists()  # The teachers' budget untouched.
  # With the recorded seed anyone recomputes the noise, and the labels then bound the
  # votes beyond any ε: the run's files are private as a whole, and so is what it prints.
  assert _disclosure(tmp_path / "a") == experiment.MEASUREMENT
  assert experiment.private_as_a_whole(tmp_path / "a")
  assert experiment.noise_disclosure(rng.noise_record(7)) == experiment.MEASUREMENT
  assert experiment.noise_disclosure(rng.noise_record(None)) == experiment.PUBLISHABLE
  secret = aggregate.run(_config(teachers), tmp_path / "s")
  assert not secret["noise_source"]["public"]
  assert _disclosure(tmp_path / "s") == experiment.PUBLISHABLE


@pytest.mark.slow
def test_1_b_the_accounting_runs_on_the_configured_device(tmp_path):
  """The host by default; JAX's default device on request, with the same labels for a
  research seed; an unknown device is refused by name."""
  teachers = _teachers(tmp_path / "t", _votes(1, 40, concentration=50.0))
  host = aggregate.run(_config(teachers, noise_seed=3), tmp_path / "h")
  assert host["accounting_platform"] == "cpu"
  default = aggregate.run(_config(teachers, noise_seed=3, accounting_device="default"),
                          tmp_path / "d")
  assert default["accounting_platform"] == jax.devices()[0].platform
  np.testing.assert_array_equal(labels_lib.load_labels(tmp_path / "h")["labels"],
                                labels_lib.load_labels(tmp_path / "d")["labels"])
  with pytest.raises(ValueError, match="config.accounting_device"):
    aggregate.run(_config(teachers, accounting_device="gpu"), tmp_path / "x")


# --- 2. The release's parameters do not come from the votes -------------------------------


@pytest.mark.slow
def test_2_the_release_parameters_are_the_same_for_any_votes(tmp_path):
  specs = []
  for seed in (1, 2, 3):
    votes = _votes(seed, 20, concentration=0.3 * seed)
    teachers = _teachers(tmp_path / f"t{seed}", votes)
    r = aggregate.run(_config(teachers), tmp_path / f"w{seed}")
    spec = {k: r["epsilon_release"][k] for k in ("order", "beta", "sigma_ss")}
    specs.append(spec)
    for k in ("smooth_sensitivity", "noise_std", "epsilon_data_dependent"):
      assert k not in r["epsilon_release"] and k in r["private"]["epsilon_release"]
    # The release was drawn at those parameters, not at ones chosen on the votes.
    status = labels_lib.load_labels(tmp_path / f"w{seed}")["status"]
    want = acc.smooth_sensitivity_release(
        votes, sigma=40.0, order=spec["order"], betas=np.array([spec["beta"]]),
        sigma_ss=spec["sigma_ss"], delta=1e-5, answered=status == ANSWERED,
        conversion="improved")
    assert r["private"]["epsilon_release"]["epsilon_expected_release"] == pytest.approx(
        float(want.epsilon), rel=1e-9)
  assert specs[0] == specs[1] == specs[2]
  want = budget_lib.default_release_order(mechanisms.GNMAX, {"sigma": 40.0}, 20, 1e-5,
                                          ORDERS, num_classes=C)
  assert specs[0] == {"order": want, "beta": 0.4 / want, "sigma_ss": 10.0}


# --- 3. One release per ledger ------------------------------------------------------------


@pytest.mark.slow
def test_3_reruns_re_report_the_release_and_new_answers_pay_for_a_new_one(tmp_path):
  teachers = _teachers(tmp_path / "t", _votes(4, 40))
  first = aggregate.run(_config(teachers, seed=0), tmp_path / "w")
  for seed in (1, 2):  # Other seeds, other workdirs: the same release, nothing charged.
    again = aggregate.run(_config(teachers, seed=seed), tmp_path / f"w{seed}")
    assert again["epsilon_release"] == first["epsilon_release"]
    assert again["ledger"] == first["ledger"]
  more = aggregate.run(_config(teachers, num_queries=30), tmp_path / "w")
  assert more["epsilon_release"]["release"] == 2 and more["ledger"]["releases"] == 2
  assert more["epsilon_release"]["epsilon_released"] != first["epsilon_release"][
      "epsilon_released"]
  # Its cost was charged: the bound is the labels' plus two releases.
  spec = budget_lib.ReleaseSpec(**{k: more["epsilon_release"][k]
                                   for k in ("order", "beta", "sigma_ss")})
  cost = 30 * ORDERS / 40.0**2 + 2 * spec.rdp_curve(ORDERS)
  eps = acc.rdp_accountant(ORDERS).compose(cost).epsilon(1e-5)[0]
  assert more["ledger"]["epsilon"] == pytest.approx(float(eps), rel=1e-9)


def test_3_a_release_is_drawn_only_where_it_was_paid_for(tmp_path, monkeypatch):
  """Each release is charged when the first rows it covers are answered, so release()
  only draws; a ledger whose charged rows outrun the releases paid for is refused and
  nothing is drawn."""
  teachers = _teachers(tmp_path / "t", _votes(7, 40, concentration=50.0))
  spec = budget_lib.ReleaseSpec(order=8.0, beta=0.02, sigma_ss=10.0)
  drawn = []  # the secret keys made: 128 bits each (rng.SECRET_IMPL)
  secret_key = rng.secret_key
  monkeypatch.setattr(rng, "secret_key", lambda: drawn.append(secret_key()) or drawn[-1])
  make = lambda: budget_lib.TeachersBudget(  # noqa: E731
      teachers, votes_lib.load_votes(teachers), rng.noise_key("aggregation"),
      mechanism="gnmax", params={"sigma": 40.0}, epsilon_max=50.0, delta=1e-5,
      orders=ORDERS, chunk_size=16, release=spec,
      release_key=rng.noise_key("epsilon_release"))
  budget = make()
  assert len(drawn) == 2 and budget.key is drawn[0] and budget.release_key is drawn[1]
  assert all(k.dtype == rng.SECRET_KEY_DTYPE and jax.random.key_data(k).shape == (4,)
             for k in drawn)
  # 20 rows, then 22: the release's program is padded to 32 rows for both, as for the
  # aggregate runs of _config below (20 queries), so one compilation serves them all.
  budget.answer(np.arange(20))
  paid = budget.epsilon
  cost = 20 * ORDERS / 40.0**2 + spec.rdp_curve(ORDERS)  # GNMax: λ/σ² per answer
  assert paid == pytest.approx(float(acc.rdp_accountant(ORDERS).compose(cost).epsilon(
      1e-5)[0]), rel=1e-9)
  first = budget.release()
  assert first["public"]["release"] == 1 and budget.epsilon == paid
  # The k-th release's expected ε is the data-dependent ε plus k releases' RDP (one order).
  _assert_expected_release_epsilon(first, 1)
  budget.answer(np.arange(20, 22))  # the second release is paid with these rows
  read = budget._read  # pylint: disable=protected-access

  def unpaid():
    loaded = read()
    loaded.releases_paid = loaded.release_count
    return loaded

  monkeypatch.setattr(budget, "_read", unpaid)
  ledger = teachers / budget_lib.LEDGER_FILE
  before = ledger.read_bytes()
  with pytest.raises(budget_lib.BudgetError, match="release 2 of 22 charged rows, 1 paid"):
    budget.release()
  monkeypatch.undo()
  assert ledger.read_bytes() == before  # nothing drawn, nothing written
  second = make().release()
  assert second["public"]["release"] == 2
  _assert_expected_release_epsilon(second, 2)


def _assert_expected_release_epsilon(release, k):
  private = release["private"]
  assert private["rdp_release"] > 0
  assert private["epsilon_expected_release"] == pytest.approx(
      private["epsilon_data_dependent"] + k * private["rdp_release"], rel=1e-12)


# --- 4. The budget belongs to the teachers ------------------------------------------------


def test_4_two_aggregators_from_one_record_cannot_both_spend():
  votes = _votes(5, 8)
  a = L.PrivateAggregator(jax.random.key(0), "gnmax", sigma=40.0, epsilon_max=2.0,
                          delta=1e-5, orders=ORDERS, chunk_size=16)
  a.answer(votes[:2])
  record = a.ledger_record()
  b = L.PrivateAggregator(jax.random.key(1), "gnmax", sigma=40.0, epsilon_max=2.0,
                          delta=1e-5, orders=ORDERS, chunk_size=16, ledger=record)
  b.answer(votes[2:4])
  with pytest.raises(L.StaleLedgerError, match="stale"):  # a's copy is now behind.
    a.answer(votes[4:])
  with pytest.raises(L.StaleLedgerError, match="generation"):  # So is the record.
    L.PrivateAggregator(jax.random.key(2), "gnmax", sigma=40.0, epsilon_max=2.0, delta=1e-5,
                        orders=ORDERS, chunk_size=16, ledger=record)


def test_4_discarded_spends_free_their_record_only_where_no_one_spent_since():
  votes = _votes(5, 8)
  kw = dict(sigma=40.0, epsilon_max=2.0, delta=1e-5, orders=ORDERS, chunk_size=16)
  a = L.PrivateAggregator(jax.random.key(0), "gnmax", **kw)
  a.answer(votes[:2])
  record = a.ledger_record()
  a.answer(votes[2:4])  # spent in memory, its record never written
  with pytest.raises(ValueError, match="generation must be in"):
    a.discard_since(3)
  a.discard_since(1)
  b = L.PrivateAggregator(jax.random.key(1), "gnmax", ledger=record, **kw)  # resumes
  with pytest.raises(L.StaleLedgerError, match="stale"):  # the discarded copy cannot spend
    a.answer(votes[4:])
  b.answer(votes[4:6])
  with pytest.raises(L.StaleLedgerError, match="gave its spends back"):  # not even now that
    a.answer(votes[6:8])  # the lineage's newest generation is its own number again
  a.discard_since(1)  # b spent since: nothing changes
  b.answer(votes[6:8])
  with pytest.raises(L.StaleLedgerError, match="generation"):
    L.PrivateAggregator(jax.random.key(3), "gnmax", ledger=record, **kw)


def test_4_a_spend_whose_ledger_write_failed_resumes_in_the_same_process(tmp_path,
                                                                         monkeypatch):
  """The ledger's write fails (a full disk, an interrupt) after new rows were answered in
  memory: nothing of it was returned, and the file on disk is still the record, so a retry
  in the same process answers from it (as a new process would), not refused as an older
  copy; every row is charged once."""
  from pate_jax import io  # pylint: disable=g-import-not-at-top
  teachers = _teachers(tmp_path / "t", _votes(4, 40))
  budget = aggregate.make_budget(_config(teachers, data_dependent=False),
                                 votes_lib.load_votes(teachers), teachers, tmp_path / "w")
  budget.answer(np.arange(10))
  write = io.write_private

  def disk_full(path, fill):
    if pathlib.Path(path).name == "ledger.npz":
      raise OSError(28, "No space left on device")
    return write(path, fill)

  with monkeypatch.context() as m:
    m.setattr(io, "write_private", disk_full)
    with pytest.raises(OSError, match="No space left"):
      budget.answer(np.arange(20))
  out = budget.answer(np.arange(20))
  state = budget.state()
  assert out.repeated.tolist() == [True] * 10 + [False] * 10
  assert sorted(state["rows"].tolist()) == list(range(20))
  assert int(state["record"]["ledger_num_charged"]) == 20
  cost = 20 * ORDERS / 40.0**2
  eps = acc.rdp_accountant(ORDERS).compose(cost).epsilon(1e-5)[0]
  assert budget.epsilon == pytest.approx(float(eps), rel=1e-9)


def test_4_a_ledger_write_killed_before_its_rename_leaves_no_second_answer(tmp_path,
                                                                           monkeypatch):
  """A write that fails before its rename removes its temporary file, and one killed there
  (nothing runs after a SIGKILL) leaves a file that the next read removes: its answers were
  never recorded, and beside the answers drawn again it would hold a second noisy answer to
  the same rows."""
  from pate_jax import io  # pylint: disable=g-import-not-at-top
  teachers = _teachers(tmp_path / "t", _votes(4, 40))
  budget = aggregate.make_budget(_config(teachers, data_dependent=False),
                                 votes_lib.load_votes(teachers), teachers, tmp_path / "w")
  budget.answer(np.arange(10))
  ledger = teachers / budget_lib.LEDGER_FILE
  tmp = io.temporary(ledger)

  def fails_after_filling(f):
    f.write(b"answers drawn but never recorded")
    raise OSError(28, "No space left on device")

  with pytest.raises(OSError, match="No space left"):
    io.write_private(ledger, fails_after_filling)
  assert not tmp.exists() and ledger.exists()
  tmp.write_bytes(b"left by a write killed before its rename")
  budget.state()  # a read alone (the next write would replace it too)
  assert not tmp.exists()
  out = budget.answer(np.arange(15))
  assert out.repeated.tolist() == [True] * 10 + [False] * 5
  assert int(budget.state()["record"]["ledger_num_charged"]) == 15


@pytest.mark.slow
def test_4_two_workdirs_and_a_restored_labels_file_spend_one_budget(tmp_path):
  teachers = _teachers(tmp_path / "t", _votes(6, 60))
  config = _config(teachers, num_queries=40, epsilon_max=1.0)  # About 14 answers fit.
  a = aggregate.run(config, tmp_path / "a")
  saved = (tmp_path / "a" / "labels.npz").read_bytes()
  b = aggregate.run(config, tmp_path / "b")
  assert a["num_answered"] == b["num_answered"] < 40
  np.testing.assert_array_equal(labels_lib.load_labels(tmp_path / "a")["labels"],
                                labels_lib.load_labels(tmp_path / "b")["labels"])
  (tmp_path / "a" / "labels.npz").write_bytes(saved)  # An older copy put back: answered
  again = aggregate.run(config, tmp_path / "a")       # from the record, nothing new.
  assert again["ledger"] == a["ledger"] == b["ledger"] and again["ledger"]["epsilon"] <= 1.0
  with pytest.raises(ValueError, match="must be finite with secret noise"):
    aggregate.run(_config(teachers, epsilon_max=float("inf")), tmp_path / "c")


# --- 5. Labels and ledgers are checked against the votes ----------------------------------


@pytest.mark.slow  # 4.6-6.6 s on the 2-core CPU.
def test_5_a_spliced_labels_file_and_a_forged_ledger_are_refused(tmp_path):
  teachers = _teachers(tmp_path / "t", _votes(7, 40, concentration=50.0))
  aggregate.run(_config(teachers), tmp_path / "a")
  path = tmp_path / "a" / "labels.npz"
  with np.load(path) as f:
    arrays = dict(f)
  other = (arrays["labels"] + 1) % C
  np.savez(path, **{**arrays, "labels": np.where(arrays["answered"], other, -1)})
  with pytest.raises(ValueError, match="not the teachers' budget's answer"):
    aggregate.run(_config(teachers), tmp_path / "a")
  ledger = teachers / budget_lib.LEDGER_FILE
  with np.load(ledger) as f:
    arrays = dict(f)
  forged = {**arrays, "ledger_cost": np.zeros_like(arrays["ledger_cost"]),
            "ledger_extra_cost": np.zeros_like(arrays["ledger_cost"])}
  forged["ledger_epsilon"] = np.float64(acc.rdp_accountant(ORDERS).epsilon(1e-5)[0])
  np.savez(ledger, **forged)
  with pytest.raises(budget_lib.BudgetError, match="not the newest copy"):  # The journal.
    aggregate.run(_config(teachers), tmp_path / "b")
  journal = ledger.with_name(ledger.name + budget_lib.JOURNAL_SUFFIX)
  import hashlib  # pylint: disable=g-import-not-at-top
  journal.write_text(journal.read_text() + f"{int(forged['generation'])} "
                     f"{hashlib.sha256(ledger.read_bytes()).hexdigest()}\n")
  with pytest.raises(budget_lib.BudgetError, match="ledger_cost is not the cost"):
    aggregate.run(_config(teachers), tmp_path / "b")  # Self-consistent, yet refused.


@pytest.mark.slow  # 11 s on the 2-core CPU
def test_5_a_a_forged_private_cost_is_refused_without_showing_it(tmp_path):
  """The data-dependent cost and ε are private: a refusal names the field, not its values
  (an error message's text reaches the acceptance's error files, and a traceback stderr,
  unmarked)."""
  teachers = _teachers(tmp_path / "t", _votes(7, 40, concentration=50.0))
  aggregate.run(_config(teachers), tmp_path / "a")
  ledger = teachers / budget_lib.LEDGER_FILE
  journal = ledger.with_name(ledger.name + budget_lib.JOURNAL_SUFFIX)
  with np.load(ledger) as f:
    arrays = dict(f)
  shown = [repr(float(x))[:7] for x in (arrays["ledger_private_epsilon"],
                                         *arrays["ledger_private_cost"]) if x > 1e-3]
  zero = np.zeros_like(arrays["ledger_private_cost"])
  for forged, match in (
      ({"ledger_private_cost": zero}, "ledger_private_epsilon is not the ε of its cost"),
      ({"ledger_private_cost": zero,  # its ε consistent: the recomputed cost refuses it
        "ledger_private_epsilon": np.float64(acc.rdp_accountant(ORDERS).epsilon(1e-5)[0])},
       "ledger_private_cost is not the cost of the recorded answers")):
    np.savez(ledger, **{**arrays, **forged})
    journal.write_text(journal.read_text() + f"{int(arrays['generation'])} "
                       f"{hashlib.sha256(ledger.read_bytes()).hexdigest()}\n")
    with pytest.raises(budget_lib.BudgetError, match=match) as e:
      aggregate.run(_config(teachers), tmp_path / "b")
    message = str(e.value).replace(str(tmp_path), "")
    assert "recomputed" not in message and not any(v in message for v in shown), message


def test_5_c_a_ledger_two_generations_ahead_is_refused_before_anything_else(tmp_path):
  """_read's "skips the journal" check: a copy two writes ahead (b: 3 writes of 1 row)
  laid over a (1 write of 30 rows) would forget a's 30 answers."""
  votes = _votes(7, 40, concentration=50.0)
  a = _teachers(tmp_path / "a", votes)
  b = tmp_path / "b"
  shutil.copytree(a, b)
  kw = dict(mechanism="gnmax", params={"sigma": 40.0}, epsilon_max=20.0, delta=1e-5,
            orders=ORDERS, chunk_size=16)
  make = lambda d: budget_lib.TeachersBudget(  # noqa: E731
      d, votes_lib.load_votes(d), rng.noise_key("aggregation"), **kw)
  make(a).answer(np.arange(30))       # a: generation 1
  for i in range(3):                  # b: generation 3
    make(b).answer(np.array([i]))
  shutil.copyfile(b / budget_lib.LEDGER_FILE, a / budget_lib.LEDGER_FILE)
  with pytest.raises(budget_lib.BudgetError, match="skips the journal"):
    make(a).answer(np.arange(40))


def test_5_a_record_whose_extra_cost_exceeds_its_cost_is_refused():
  """restore_ledger: the charged releases (extra_cost) are part of ledger_cost."""
  a = L.PrivateAggregator(jax.random.key(0), "gnmax", sigma=40.0, epsilon_max=2.0,
                          delta=1e-5, orders=ORDERS, chunk_size=16)
  a.answer(_votes(5, 4))
  record = dict(a.ledger_record())
  record["ledger_extra_cost"] = record["ledger_cost"] * 2.0
  with pytest.raises(ValueError, match="ledger_extra_cost must be part of ledger_cost"):
    L.restore_ledger(record)


def test_5_c_a_ledger_one_generation_ahead_from_another_directory_is_refused(tmp_path):
  """A crash between writing ledger.npz and its journal line leaves a file one generation
  ahead, which the next reader completes; a file one generation ahead copied from another
  directory (a copy of the same votes.npz, spent on fewer rows in more writes) must not
  pass for it: it names another file as the generation it follows."""
  votes = _votes(7, 40, concentration=50.0)
  a = _teachers(tmp_path / "a", votes)
  b, c = tmp_path / "b", tmp_path / "c"
  shutil.copytree(a, b)  # the same votes.npz (its salt: the same digest), a second ledger
  shutil.copytree(a, c)
  kw = dict(mechanism="gnmax", params={"sigma": 40.0}, epsilon_max=20.0, delta=1e-5,
            orders=ORDERS, chunk_size=16)
  make = lambda d: budget_lib.TeachersBudget(  # noqa: E731
      d, votes_lib.load_votes(d), rng.noise_key("aggregation"), **kw)
  make(a).answer(np.arange(30))
  make(a).answer(np.arange(30, 32))   # a: generation 2, 32 rows charged
  for i in range(3):                  # b: generation 3, 3 rows charged
    make(b).answer(np.array([i]))
  ledger = budget_lib.LEDGER_FILE
  journal = a / (ledger + budget_lib.JOURNAL_SUFFIX)
  genuine, spent = (a / ledger).read_bytes(), make(a).epsilon
  shutil.copyfile(b / ledger, a / ledger)
  with pytest.raises(budget_lib.BudgetError, match="does not extend the journal"):
    make(a).answer(np.arange(40))   # 37 rows would have been answered a second time
  (a / ledger).write_bytes(genuine)
  assert make(a).epsilon == spent
  # The crash it is there for: a's next write, its journal line lost, is completed.
  make(a).answer(np.arange(32, 34))   # generation 3
  lines = journal.read_text().splitlines()
  journal.write_text("\n".join(lines[:-1]) + "\n")
  assert make(a).answer(np.arange(34)).repeated.all()
  assert journal.read_text().splitlines() == lines
  # And the first write's: the journal not yet written.
  make(c).answer(np.arange(5))
  c_journal = c / (ledger + budget_lib.JOURNAL_SUFFIX)
  first = c_journal.read_text()
  c_journal.unlink()
  assert make(c).answer(np.arange(5)).repeated.all() and c_journal.read_text() == first


def test_5_b_the_labels_digest_of_the_votes_is_salted_with_a_secret(tmp_path):
  """labels.npz binds its labels to the votes by their digest; an attacker holding it and
  guessing the votes (all the data but one record, the teachers' seed) must not be able to
  test the guess against it: the digest mixes in votes.npz's random salt."""
  from pate_jax import io  # pylint: disable=g-import-not-at-top
  votes = _votes(7, 40, concentration=50.0)
  a, b = (votes_lib.load_votes(_teachers(tmp_path / name, votes)) for name in ("a", "b"))
  np.testing.assert_array_equal(a["votes"], b["votes"])
  assert a["salt"].shape == (votes_lib.SALT_BYTES,) and not np.array_equal(a["salt"], b["salt"])
  aggregate.run(_config(tmp_path / "a"), tmp_path / "w")
  digest = str(labels_lib.load_labels(tmp_path / "w")["votes_digest"])
  assert digest == budget_lib.votes_digest(a) != budget_lib.votes_digest(b)
  assert digest != io.data_digest(a["votes"], a["index"])  # the guess's digest, unsalted
  unsalted = {k: v for k, v in a.items() if k != "salt"}  # a file written before the salt
  assert budget_lib.votes_digest(unsalted) == io.data_digest(a["votes"], a["index"])
  # The same votes written again keep their salt (the budget and labels keyed by the digest
  # stay valid: a rerun goes on); other votes get a new one.
  again = votes_lib.load_votes(_teachers(tmp_path / "a", votes))
  assert budget_lib.votes_digest(again) == digest
  aggregate.run(_config(tmp_path / "a"), tmp_path / "w")  # the budget resumes
  other = votes.copy()
  other[0, [0, 1]] += [1, -1] if other[0, 1] else [-1, 1]
  changed = votes_lib.load_votes(_teachers(tmp_path / "a", other))
  assert not np.array_equal(changed["salt"], a["salt"])


def test_5_b_labels_of_votes_without_a_salt_are_warned_about(tmp_path, monkeypatch):
  """A votes.npz written before the salt still answers (its budget goes on), but the digest
  its labels.npz carries can be tested against guesses: the stage says so."""
  from pate_jax.stages import teachers as teachers_stage  # pylint: disable=g-import-not-at-top
  warned = []
  monkeypatch.setattr(teachers_stage, "warn_unsalted_votes", warned.append)
  _teachers(tmp_path / "salted", _votes(7, 40, concentration=50.0))
  aggregate.run(_config(tmp_path / "salted"), tmp_path / "w")
  assert not warned
  with np.load(tmp_path / "salted" / "votes.npz") as f:
    arrays = {k: f[k] for k in f.files if k != "salt"}
  (tmp_path / "legacy").mkdir()
  np.savez(tmp_path / "legacy" / "votes.npz", **arrays)
  aggregate.run(_config(tmp_path / "legacy"), tmp_path / "w_legacy")
  assert [pathlib.Path(w).resolve() for w in warned] == [(tmp_path / "legacy").resolve()]


def test_5_d_every_published_delta_carries_the_samplers_term_and_a_large_one_is_warned_about(
    tmp_path, monkeypatch):
  """The float64 samplers' δ term (answers and releases) is printed with every public
  (ε, δ) pair and written in labels.npz; where it passes δ itself (ε_max 20: e^20 ≈ 5e8),
  the stage warns before drawing anything. At ε_max 2 it is 1e-8 of δ's 1e-5: no warning."""
  warned = []
  monkeypatch.setattr(aggregate.logging, "warning",
                      lambda *a: warned.extend([a[0] % a[1:]] if "samplers" in a[0] else []))
  teachers = _teachers(tmp_path / "t", _votes(7, 40, concentration=50.0))
  r = aggregate.run(_config(teachers), tmp_path / "w")
  term = r["ledger"]["sampler_delta"]
  assert term > 1e-5 and len(warned) == 1 and "config.epsilon_max" in warned[0]
  assert labels_lib.load_labels(tmp_path / "w")["sampler_delta"] == term
  public = [line for line in reporting.aggregate_headline(r)
            if line.lstrip().startswith("ε ")]
  assert public and all(f"at δ = 1e-05 + {term:.1e}" in line for line in public), public
  warned.clear()
  other = _teachers(tmp_path / "t2", _votes(8, 40))
  r = aggregate.run(_config(other, epsilon_max=2.0), tmp_path / "w2")
  assert not warned and 0 < r["ledger"]["sampler_delta"] < 1e-7


def test_5_d_the_samplers_warning_counts_the_releases_the_run_draws(tmp_path, monkeypatch):
  """The warning's δ term is the one results.json then reports: a first run draws one
  release; a rerun that asks nothing new draws none (the release covers every charged row)
  and warned of a second one (0.29 where results.json says 0.15); a rerun that asks new
  rows draws a second."""
  warned = []
  monkeypatch.setattr(aggregate.logging, "warning",
                      lambda *a: warned.extend([a[0] % a[1:]] if "samplers" in a[0] else []))
  teachers = _teachers(tmp_path / "t", _votes(7, 40, concentration=50.0))
  for num_queries, releases in ((20, 1), (20, 1), (22, 2)):
    warned.clear()
    r = aggregate.run(_config(teachers, num_queries=num_queries), tmp_path / "w")
    assert r["ledger"]["releases"] == releases and len(warned) == 1
    assert f" add {r['ledger']['sampler_delta']:.2g} to δ" in warned[0], warned[0]


def test_5_d_releases_after_counts_a_release_due_from_a_run_killed_before_it(tmp_path):
  """The budget's own count: a release is due where new rows are asked or the newest
  release leaves charged rows uncovered (a run killed between its answers and its release);
  after the release, asking the same rows draws none. Where the budget refuses every new
  row the count is an upper bound by one."""
  teachers = _teachers(tmp_path / "t", _votes(7, 60))
  budget = aggregate.make_budget(_config(teachers, epsilon_max=1.0),
                                 votes_lib.load_votes(teachers), teachers, tmp_path / "w")
  rows = np.arange(10)
  assert budget.releases_after(rows) == 1
  budget.answer(rows)  # Killed here: answered, not released.
  assert budget.releases_after(rows) == budget.releases_after(rows[:3]) == 1
  budget.release()
  assert budget.releases_after(rows) == 1 and budget.releases_after(np.arange(12)) == 2
  budget.answer(np.arange(60))  # Spends to the refusal point.
  budget.release()
  drawn = budget.state()["release_count"]
  refused = np.setdiff1d(np.arange(60), budget.state()["rows"])
  assert refused.size and budget.releases_after(refused) == drawn + 1
  budget.answer(refused)
  assert budget.release() is not None and budget.state()["release_count"] == drawn


# --- 6. Refusals do not depend on the votes -----------------------------------------------


def test_6_the_refusal_point_is_the_same_for_any_votes(tmp_path):
  answered = set()
  for seed, concentration in ((8, 0.05), (9, 50.0)):  # Unanimous teachers vs a toss-up.
    teachers = _teachers(tmp_path / f"t{seed}", _votes(seed, 60, concentration=concentration))
    r = aggregate.run(_config(teachers, num_queries=60, epsilon_max=1.0), tmp_path / f"{seed}")
    answered.add(r["num_answered"])
    assert r["num_refused_budget"] > 0
    if concentration < 1:  # The data-dependent ε would have allowed more: not used.
      assert r["private"]["epsilon"]["rdp_data_dependent_improved"]["epsilon"] < 0.75
  assert len(answered) == 1


# --- 7. Reports print private values only in private parts --------------------------------


def _public(results):
  """Everything outside ``private`` parts, the released ε values left out."""
  if isinstance(results, dict):
    return {k: _public(v) for k, v in results.items()
            if k not in ("private", "epsilon_released", "time_s")}
  if isinstance(results, list):
    return [_public(v) for v in results]
  return results


def _perturbed(votes, labels, status, seed):
  """Other private votes that give the same released outcome under the same noise: votes
  move from other classes to each answered row's label (its noisy argmax only gains),
  away from the top of each not-confident row, anywhere on a refused row."""
  r = np.random.default_rng(seed)
  out = votes.copy()
  for i in range(len(votes)):
    if status[i] == ANSWERED:
      others = [j for j in range(votes.shape[1]) if j != labels[i] and out[i, j] > 0]
      for j in r.choice(others, size=min(len(others), 3), replace=False):
        k = r.integers(0, out[i, j] + 1)
        out[i, j] -= k
        out[i, labels[i]] += k
    elif status[i] == REFUSED:
      out[i] = r.multinomial(votes[i].sum(), np.full(votes.shape[1], 1 / votes.shape[1]))
  return out


@pytest.mark.slow
def test_7_publishable_parts_do_not_depend_on_the_votes(tmp_path, capsys):
  """The same released labels from other votes (the same research noise, standing in for
  secret noise that drew the same): every publishable value, line the stage's report prints
  and the publishable half of report.md are the same but for the released ε; the private
  parts differ. (A research-seed run is private as a whole, so run_and_report would mark
  every line it prints: the stage's report is called directly.)"""
  votes = _votes(10, 40, concentration=0.5)  # Gaps wide enough for a data-dependent ε.
  outs = []
  for name, v in (("a", votes), ("b", None)):
    if v is None:
      first = labels_lib.load_labels(tmp_path / "a")
      by_row = np.argsort(first["query_index"])  # Every row was asked, in the stage's order.
      v = _perturbed(votes, first["labels"][by_row], first["status"][by_row], 0)
    teachers = _teachers(tmp_path / f"t{name}", v, labels=votes.argmax(1))
    config = _config(teachers, num_queries=40, epsilon_max=2.0, noise_seed=3)
    capsys.readouterr()
    r = aggregate.run(config, str(tmp_path / name))
    aggregate.report(r)
    printed = capsys.readouterr().out.splitlines()
    summary = {"noise_source": r["noise_source"], "data": {
        "data_source": "x", "fallback_data": False}, "aggregate": r, "student": {
            "student": "s", "eval_accuracy": 0.5, "num_eval": 10, "num_labels": 20,
            "label_accuracy": 0.5, "epochs": 1, "train_seconds": 1},
        "epsilon_release": r["epsilon_release"], "ledger": r["ledger"], "wall_seconds": 1,
        "private": reporting.private_part(
            teachers={"dataset": "x", "num_teachers": T, "examples_per_teacher": 1,
                      "teacher_test_accuracy": {"mean": v.mean(), "min": 0, "max": 1},
                      "plurality_accuracy_test": float(v[0, 0]), "mean_normalized_gap": 0.1},
            epsilon=r["private"]["epsilon"],
            epsilon_release=r["private"]["epsilon_release"], attack={"skipped": "x"})}
    md = reporting.main_job_markdown(summary, {})
    outs.append((r, printed, md))
  (ra, pa, ma), (rb, pb, mb) = outs
  assert ra["num_answered"] > 20 and rb["num_answered"] == ra["num_answered"]
  np.testing.assert_array_equal(labels_lib.load_labels(tmp_path / "a")["labels"],
                                labels_lib.load_labels(tmp_path / "b")["labels"])
  assert _public(ra) == _public(rb)
  assert ra["private"] != rb["private"]
  strip = lambda lines: [ln for ln in lines if "private" not in ln and "released" not in ln
                         and str(tmp_path) not in ln]
  assert strip(pa) == strip(pb) and len(strip(pa)) >= 4
  pub_a, priv_a = ma.split("## Private: for the data owner only")
  pub_b, priv_b = mb.split("## Private: for the data owner only")
  cut = lambda s: "\n".join(ln for ln in s.splitlines() if "released with smooth" not in ln)
  assert cut(pub_a) == cut(pub_b) and priv_a != priv_b
  # The research noise is public: report.md says that nothing in it may be published.
  assert "## Publishable with secret noise" in pub_a and "**Nothing in this report" in pub_a
  secret = {**summary, "noise_source": rng.noise_record(None)}
  assert "Everything in this part may be published" in reporting.main_job_markdown(secret, {})


# --- Property: ε of everything released <= ε_max, over random usage -----------------------


def _random_settings(r):
  mechanism = ("gnmax", "confident_gnmax", "lnmax")[r.integers(3)]
  kw = {"mechanism": mechanism, "delta": 1e-5, "epsilon_max": float(r.uniform(0.8, 4.0)),
        "data_dependent": bool(r.random() < 0.7), "chunk_size": 16}
  if mechanism == "lnmax":
    kw["params"] = {"gamma": float(r.uniform(0.02, 0.15))}
  else:
    kw["orders"] = ORDERS
    # σ a whole number: a release's conditions C5 and C6 are checked once per σ (cached, about
    # 1 s each on the 2-core CPU), so all draws share at most 31 checks.
    kw["params"] = {"sigma": float(np.round(r.uniform(10.0, 40.0)))}
    if mechanism == "confident_gnmax":
      kw["params"].update(threshold=35.0, sigma_threshold=float(r.uniform(5.0, 20.0)))
    if kw["data_dependent"] and r.random() < 0.7:
      kw["release"] = budget_lib.ReleaseSpec.make(float(r.choice([5.0, 8.0])), 10.0)
  return kw


class _Recorder:
  """Every answer and release a session lets out, to recompute ε from them alone."""

  def __init__(self):
    self.fresh = []        # (row, status) of every answer drawn from fresh noise
    self.outcome = {}      # row -> (label, status) as first released
    self.drawn = set()     # rows answered from fresh noise
    self.releases = set()  # numbers of the releases drawn
    self.kinds = {"refused": 0, "not_confident": 0, "repeated": 0, "no_room": 0}
    self.lock = threading.Lock()

  def answers(self, rows, out):
    """Records one call's released answers. A fresh draw (``repeated`` False) happens at
    most once per row, whichever thread's call is recorded first; every release of a row,
    fresh or repeated, is the same outcome."""
    with self.lock:
      for r, lab, st, rep in zip(rows, out.labels, out.status, out.repeated):
        self.kinds["refused"] += int(st == REFUSED)
        self.kinds["not_confident"] += int(st == NOT_CONFIDENT and not rep)
        self.kinds["repeated"] += int(st != REFUSED and bool(rep))
        if st == REFUSED:
          continue
        r = int(r)
        assert self.outcome.setdefault(r, (int(lab), int(st))) == (int(lab), int(st))
        if not rep:
          assert r not in self.drawn, r  # One noise draw per row, ever.
          self.drawn.add(r)
          self.fresh.append((r, int(st)))

  def epsilon(self, kw, votes, spec):
    m = mechanisms.get(kw["mechanism"])
    accountant = mechanisms.make_accountant(m, kw.get("orders"))
    if not self.fresh:
      return 0.0
    rows = np.array([r for r, _ in self.fresh])
    # Every row's cost at once (one array shape, one compile), then the drawn rows': a
    # query's cost depends on its own votes and answer only, and each is drawn once.
    answered = np.zeros(votes.shape[0], bool)
    answered[rows] = [s == ANSWERED for _, s in self.fresh]
    cost = np.asarray(m.cost(votes, answered, kw["params"], accountant.orders, False))[rows]
    total = cost.sum(0) + (len(self.releases) * spec.rdp_curve(accountant.orders)
                           if self.releases else 0.0)
    return float(accountant.compose(total).epsilon(kw["delta"])[0])


def _answer(rec, budget, rows, ledger):
  try:
    rec.answers(rows, budget.answer(rows))
  except budget_lib.BudgetError as e:  # ε_max below one release: nothing is ever spent.
    assert "leaves no room" in str(e) and not ledger.exists(), e
    with rec.lock:
      rec.kinds["no_room"] += 1


def _session(seed, root):
  """One random usage session on one set of teachers (module docstring)."""
  r = np.random.default_rng(seed)
  kw = _random_settings(r)
  votes = _votes(seed, 24, t=50, c=5, concentration=float(r.choice([0.1, 1.0, 10.0])))
  teachers = _teachers(root / f"s{seed}", votes)
  data = votes_lib.load_votes(teachers)
  spec = kw.get("release")
  make = lambda: budget_lib.TeachersBudget(  # noqa: E731  A new process, or aggregator.
      teachers, data, rng.noise_key("aggregation"), release_key=rng.noise_key(
          "epsilon_release"), **kw)
  rec, budgets = _Recorder(), [make()]
  ledger = teachers / budget_lib.LEDGER_FILE
  # What this run of _session exercised beside ``stats``: its settings and the answers' outcomes.
  kinds = {kw["mechanism"]: 1, "data_dependent": int(kw["data_dependent"]),
           "release_spec": int(spec is not None), "restored": 0, "spliced": 0}
  if spec is not None and not budget_lib.ReleaseSpec.rdp_curve(spec, ORDERS).min() < np.inf:
    return {"refused_files": 0, "threads": 0, "releases": 0}, 0, {}
  snapshots, stats = [], {"refused_files": 0, "threads": 0, "releases": 0}
  for _ in range(int(r.integers(3, 9))):
    op = r.choice(["answer", "answer", "new", "threads", "release", "restore", "splice"])
    rows = r.integers(0, 24, size=int(r.integers(1, 8)))
    if ledger.exists():
      snapshots.append(ledger.read_bytes())
    if op == "new":
      budgets.append(make())
    if op in ("answer", "new"):
      b = budgets[r.integers(len(budgets))]
      _answer(rec, b, rows, ledger)
    elif op == "threads":
      stats["threads"] += 1
      work = [(make(), r.integers(0, 24, size=5)) for _ in range(2)]
      threads = [threading.Thread(target=lambda b=b, x=x: _answer(rec, b, x, ledger))
                 for b, x in work]
      for t in threads:
        t.start()
      for t in threads:
        t.join()
    elif op == "release":
      out = budgets[0].release()
      if out is not None:
        rec.releases.add(out["public"]["release"])
        stats["releases"] += 1
    elif op in ("restore", "splice") and len(snapshots) > 1:
      newest = ledger.read_bytes()
      if op == "restore":  # An older copy of the ledger put back.
        ledger.write_bytes(snapshots[r.integers(len(snapshots) - 1)])
      else:                # The newest with another row's outcome spliced in.
        with np.load(ledger) as f:
          arrays = dict(f)
        if arrays["rows"].size < 2:
          continue
        arrays["row_labels"] = np.roll(arrays["row_labels"], 1)
        arrays["row_status"] = np.roll(arrays["row_status"], 1)
        np.savez(ledger, **arrays)
      if ledger.read_bytes() != newest:
        with pytest.raises(budget_lib.BudgetError):
          make().answer(rows)
        stats["refused_files"] += 1
        kinds["restored" if op == "restore" else "spliced"] += 1
      ledger.write_bytes(newest)
  eps = rec.epsilon(kw, votes, spec)
  recorded = budgets[0].epsilon
  assert eps <= kw["epsilon_max"] * (1 + 1e-9), (seed, eps, kw)
  assert eps <= recorded * (1 + 1e-9) + 1e-12
  if ledger.exists():  # Something was spent (an empty ledger's ε is its floor, e.g. LNMax's).
    assert recorded <= kw["epsilon_max"] * (1 + 1e-9)
  return stats, len(rec.fresh), {**kinds, **rec.kinds}


def _sessions(n, root):
  """The totals of ``n`` sessions' ``stats``, fresh answers and what else they exercised:
  each mechanism, data-dependent accounting, a release paid for, ledgers put back
  (``restored``) and spliced each refused, answers refused, not confident and repeated,
  and budgets with no room for one release."""
  totals = dict.fromkeys(("refused_files", "threads", "releases", "answers", "gnmax",
                          "confident_gnmax", "lnmax", "data_dependent", "release_spec",
                          "restored", "spliced", "refused", "not_confident", "repeated",
                          "no_room"), 0)
  for seed in range(n):
    stats, answers, exercised = _session(seed, root)
    for k, x in {**stats, **exercised}.items():
      totals[k] += x
    totals["answers"] += answers
  return totals


@pytest.mark.slow
def test_property_few_sessions(tmp_path):
  totals = _sessions(15, tmp_path)
  assert totals["answers"] > 50


@pytest.mark.slow
def test_property_everything_released_fits_the_budget(tmp_path):
  """500 random sessions on one set of teachers each: budgets re-created (processes),
  threads, releases, older ledger copies put back and spliced ledgers; the ε recomputed
  from every answer and release let out is <= ε_max and <= the ledger's public ε."""
  totals = _sessions(500, tmp_path)
  # Every total, each mechanism and event of _sessions too, is > 30: the rarest are the
  # releases drawn (50), ledgers put back (104) and budgets with no room (225).
  assert min(totals.values()) > 30 and totals["answers"] > 2000, totals


@pytest.mark.parametrize("disclosure, name", [(None, "results.json"),
                                              ("measurement", "results.json"),
                                              ("measurement", "figure2.json")])
def test_a_report_of_a_run_private_as_a_whole_marks_every_line(tmp_path, capsys, disclosure,
                                                               name):
  """A script whose results file is private as a whole (a research measurement; Figure 2's
  is figure2.json) prints no line a reader could take as publishable: the harness marks
  every report line that does not already say "private"; a publishable run's lines are
  printed as they are."""
  def run(config, workdir):
    kwargs = {"disclosure": experiment.MEASUREMENT} if disclosure else {}
    experiment.write_results(workdir, {"accuracy": 0.9}, config={}, seed=0, name=name,
                             **kwargs)
    return {"accuracy": 0.9}

  def report(results):
    print(f"student accuracy {results['accuracy']:.1%}\n\nprivate (data owner only): x\n"
          "non-private forest 0.85, not private: y, PRIVATE figure")

  experiment.run_and_report(run, report, None, str(tmp_path))
  lines = capsys.readouterr().out.splitlines()
  mark = "private (data owner only): " if disclosure else ""
  assert lines[:4] == [mark + "student accuracy 90.0%", "", "private (data owner only): x",
                       mark + "non-private forest 0.85, not private: y, PRIVATE figure"]
  assert experiment.mark_private("non-private forest 0.85").startswith("private (data")
  # A line that says "private" only further on reads as publishable from its start: it is
  # marked too (the KD-GAN's headline quoting "private training records", a tabular line
  # with its values before a mid-line mark).
  for line in ("headline: 14.30% as published; sound ε: none — the private training records",
               "Confident-GNMax: 167/500 answered | private (data owner only): eps 10.6"):
    assert experiment.mark_private(line) == "private (data owner only): " + line
  assert experiment.mark_private("  PRIVATE (data owner only): figure") == (
      "  PRIVATE (data owner only): figure")


@pytest.mark.slow  # 7.6 s on the 2-core CPU: three aggregate runs.
def test_a_budget_keeps_its_release_sigma_and_says_so_when_a_rerun_asks_another(tmp_path):
  """The release's parameters are fixed once per budget: with the order by rule, the
  stored σ_ss is kept, and a rerun asking for another is told so."""
  _teachers(tmp_path / "t", _votes(7, 40, concentration=50.0))
  first = aggregate.run(_config(tmp_path / "t"), tmp_path / "w")
  assert first["epsilon_release"]["sigma_ss"] == 10.0
  again = _config(tmp_path / "t", num_queries=25)
  again.release.sigma_ss = 20.0
  with pytest.warns(UserWarning, match="keeps the σ_ss 10 and β"):
    res = aggregate.run(again, tmp_path / "w")
  assert res["epsilon_release"]["sigma_ss"] == 10.0
  # An explicit β other than the stored one is kept out too, and said.
  beta = again.release.beta = 0.5 * float(res["epsilon_release"]["beta"])
  again.release.sigma_ss = 10.0
  with pytest.warns(UserWarning, match="are not used"):
    res = aggregate.run(again, tmp_path / "w")
  assert res["epsilon_release"]["beta"] != beta
