"""The privacy budget cannot leak.

Each test attacks one way of releasing more than ε_max (threads, copies, reruns of the
aggregate stage, a functional state used with other settings, int32 wrap-around, rows
with unequal totals, booleans given as strings or numbers, id overflow, negative
log-moments, reused noise ids) or one way bad hand-over files slipped through; the
property test at the end recomputes ε from the released answers alone over 1,000 random
sessions.
"""

from __future__ import annotations

import copy
import io
import pathlib
import pickle
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pate_jax import accounting as acc
from pate_jax import aggregation as agg
from pate_jax import experiment
from pate_jax import labels as labels_lib
from pate_jax import ledger as L
from pate_jax import mechanisms
from pate_jax import votes as votes_lib

KEY = jax.random.key(16)
C = 10
CHUNK = 16
CAP = 32
POOL = 64
ORDERS = np.array([1.5, 2.0, 3.0, 5.0, 8.0, 16.0, 32.0, 64.0])
ANSWERED, NOT_CONFIDENT, REFUSED = (int(L.Status.ANSWERED), int(L.Status.NOT_CONFIDENT),
                                    int(L.Status.REFUSED_BUDGET))
REPO = pathlib.Path(__file__).resolve().parent.parent


def _votes(rng, q, t, concentration=1.0):
  p = rng.dirichlet(np.full(C, concentration), size=q)
  return np.stack([rng.multinomial(t, pi) for pi in p]).astype(np.int32)


def _gnmax(**kw):
  kw.setdefault("epsilon_max", 1.0)
  kw.setdefault("data_dependent", False)
  return L.PrivateAggregator(KEY, "gnmax", sigma=40.0, delta=1e-5, orders=ORDERS,
                             chunk_size=CHUNK, capacity=CAP, **kw)


def _gnmax_epsilon(num_answers, sigma=40.0, delta=1e-5):
  """ε of ``num_answers`` data-independent GNMax answers (the recomputation's accountant)."""
  rdp = acc.rdp_accountant(ORDERS)
  return float(rdp.compose(num_answers * ORDERS / sigma**2).epsilon(delta)[0])


# --- 1. Threads ---------------------------------------------------------------------------


def test_threads_sharing_one_aggregator_spend_one_budget():
  a = _gnmax()
  votes = _votes(np.random.default_rng(1), 1, 40)
  released = []

  def work():
    for _ in range(120):
      out = a.answer(votes)
      released.append(int((out.status == ANSWERED).sum()))

  threads = [threading.Thread(target=work) for _ in range(2)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert sum(released) == a.num_answered
  assert _gnmax_epsilon(sum(released)) <= 1.0
  assert a.epsilon <= 1.0


# --- 2. Copies ----------------------------------------------------------------------------


def test_an_aggregator_with_a_budget_cannot_be_copied_pickled_or_reset():
  a = _gnmax()
  for duplicate in (copy.copy, copy.deepcopy, pickle.dumps):
    with pytest.raises(TypeError, match="duplicate the privacy budget"):
      duplicate(a)
  with pytest.raises(AttributeError):
    a.state = L.init_ledger(np.zeros(len(ORDERS)), orders=ORDERS, delta=1e-5,
                            mechanism="gnmax", params={"sigma": 40.0}, epsilon_max=1.0)


# --- 3. Reruns of experiments/aggregate.py ------------------------------------------------


def _aggregate_setup(tmp_path, num_rows=40, num_pool=32, **votes_kw):
  rng = np.random.default_rng(3)
  votes = _votes(rng, num_rows, 250, concentration=5.0)  # Small gaps: the noise matters.
  labels = votes.argmax(1)
  votes_lib.save_votes(tmp_path / "votes.npz", votes, labels, num_pool=num_pool,
                       dataset="synthetic", **votes_kw)
  script = experiment.load_script(REPO / "experiments" / "aggregate.py")
  config = experiment.load_script(REPO / "configs" / "aggregate_mnist.py").get_config("cpu")
  config.num_queries, config.chunk_size = 20, CHUNK
  config.orders = tuple(ORDERS)
  config.votes_dir = str(tmp_path)
  config.mechanism, config.sigma = "gnmax", 40.0
  config.epsilon_max, config.data_dependent = 0.5, False  # About 13 of 20 answers.
  return script, config


@pytest.mark.slow
def test_reruns_of_the_aggregate_stage_spend_the_teachers_budget(tmp_path):
  script, config = _aggregate_setup(tmp_path)
  work = tmp_path / "work"
  releases: dict[int, set[int]] = {}
  files, first = [], None
  for seed in (0, 1, 2):  # Other seeds, other workdirs: the same budget, the same answers.
    config.seed = seed
    r = script.run(config, work if seed != 1 else tmp_path / "other")
    # Rows new to the budget: all of the first run's; after it, only those it refused
    # (the budget keeps no record of them), whatever the workdir.
    first = first or r
    assert r["num_asked_now"] == (config.num_queries if seed == 0
                                  else first["num_refused_budget"]), seed
    f = labels_lib.load_labels(work if seed != 1 else tmp_path / "other")
    files.append(f)
    for q, label, answered in zip(f["query_index"], f["labels"], f["answered"]):
      if answered:
        releases.setdefault(int(q), set()).add(int(label))
  # Everything ever published, recomputed from the labels alone, fits the budget.
  num_released = sum(len(s) for s in releases.values())
  assert 0 < num_released < 20  # The budget binds.
  assert _gnmax_epsilon(num_released) <= config.epsilon_max
  np.testing.assert_array_equal(files[0]["labels"], files[2]["labels"])
  np.testing.assert_array_equal(files[0]["labels"], files[1]["labels"])
  # The budget beside the votes caches their answers: the owner's only, as the votes.
  budget_files = [p for p in tmp_path.iterdir() if p.name.startswith("ledger")]
  assert len(budget_files) >= 2 and all(
      p.stat().st_mode & 0o777 == 0o600 for p in budget_files + [tmp_path / "votes.npz"])
  # A rerun that changes the budget's settings is refused, naming them.
  config.epsilon_max = 2.0
  with pytest.raises(ValueError, match="epsilon_max"):
    script.run(config, work)
  config.epsilon_max, config.mechanism = 0.5, "lnmax"
  with pytest.raises(ValueError, match="mechanism"):
    script.run(config, work)
  config.mechanism = "gnmax"
  with experiment.locked_workdir(work):  # Another run is writing this workdir right now.
    with pytest.raises(RuntimeError, match="in use"):
      script.run(config, work)


@pytest.mark.slow
def test_a_rerun_asking_more_queries_extends_the_same_ledger(tmp_path):
  script, config = _aggregate_setup(tmp_path)
  config.epsilon_max = 100.0
  config.num_queries = 8
  first = script.run(config, tmp_path / "w")
  before = labels_lib.load_labels(tmp_path / "w")
  config.num_queries, config.seed = 20, 5
  second = script.run(config, tmp_path / "w")
  after = labels_lib.load_labels(tmp_path / "w")
  np.testing.assert_array_equal(after["labels"][:8], before["labels"])
  assert after["labels"].shape == (20,) and second["num_answered"] == 20
  assert first["ledger"]["num_answered"] == 8 and second["ledger"]["num_answered"] == 20
  assert second["num_asked_now"] == 12


# --- 4. The functional state records δ, ε_max and the mechanism ---------------------------


def _state(**kw):
  kw = {"delta": 1e-5, "epsilon_max": 1.0, "mechanism": "gnmax", "params": {"sigma": 40.0},
        "data_dependent": False, **kw}
  return L.init_ledger(np.zeros(len(ORDERS)), orders=ORDERS, **kw)


def test_functional_state_records_delta_budget_and_mechanism():
  votes = _votes(np.random.default_rng(4), 48, 40)
  state = _state()
  old_style = dict(mechanism="gnmax", params={"sigma": 40.0}, orders=ORDERS, delta=1e-5,
                   epsilon_max=1.0, data_dependent=False)
  state, _ = L.answer_batch(state, KEY, votes, np.arange(48), **old_style)
  eps = float(state.epsilon)
  assert 0.9 < eps <= 1.0
  for name, value in (("delta", 0.5), ("epsilon_max", 10.0), ("mechanism", "confident_gnmax"),
                      ("data_dependent", True), ("params", {"sigma": 400.0})):
    with pytest.raises(ValueError, match=name):
      L.answer_batch(state, KEY, votes, np.arange(48, 96), **{**old_style, name: value,
                     **({"params": {"threshold": 1.0, "sigma_threshold": 1.0, "sigma": 40.0}}
                        if value == "confident_gnmax" else {})})
  # The settings come from the state.
  state2, out = L.answer_batch(state, KEY, votes, np.arange(48, 96))
  assert np.all(out.status == REFUSED) and float(state2.epsilon) == eps
  bad = state._replace(accountant=state.accountant.compose(-10 * np.ones(len(ORDERS))))
  with pytest.raises(ValueError, match="cost"):
    L.answer_batch(bad, KEY, votes, np.arange(48, 96))


def test_a_functional_state_with_a_negative_counter_is_refused():
  """A state whose counter went negative (edited by hand, or wrapped) is refused before
  anything is answered or charged, naming the counter."""
  votes = _votes(np.random.default_rng(4), 4, 40)
  state = _state()
  for name in ("num_charged", "num_answered", "num_teachers"):
    bad = state._replace(**{name: np.int32(-1)})
    with pytest.raises(ValueError, match=f"counters must be non-negative; got .*{name} -1"):
      L.answer_batch(bad, KEY, votes, np.arange(4))
    with pytest.raises(ValueError, match=f"counters must be non-negative; got .*{name} -1"):
      L.charge(bad, np.zeros(len(ORDERS)))


# --- 5. Vote counts that do not fit -------------------------------------------------------


def test_vote_counts_that_do_not_fit_are_refused(tmp_path):
  with pytest.raises(ValueError, match="votes must"):
    agg.plurality(np.array([[2**31, 5]]))
  with pytest.raises(ValueError, match="votes must"):
    acc.gnmax_rdp(np.array([[2**31, 2**31 - 1]]), 40.0, ORDERS)
  big = np.array([[2**24 + 1, 2**24 - 1]])  # Past the limit (float32's exact integers).
  with pytest.raises(ValueError, match="votes must"):
    agg.gnmax(KEY, big, 40.0)
  with pytest.raises(ValueError, match="votes must"):
    _gnmax().answer(big)
  # One teacher past the limit, every count within it: the row's total alone is refused.
  with pytest.raises(ValueError, match="at most 16777216 teachers per row.*row 0 sums to"):
    agg.gnmax(KEY, np.array([[2**23 + 1, 2**23]]), 40.0)
  assert agg.gnmax(KEY, np.array([[2**23, 2**23]]), 40.0).shape == (1,)  # At the limit.
  with pytest.raises(ValueError, match="votes must"):
    L.answer_batch(_state(), KEY, np.array([[2**31, 2**31 - 1]]), np.arange(1))
  with pytest.raises(ValueError, match="votes must"):
    votes_lib.save_votes(tmp_path / "v.npz", np.array([[2**31, 0], [0, 2**31]]), [0, 1])
  np.testing.assert_array_equal(agg.plurality(np.array([[2**31 - 6, 5]], np.int64)), [0])


def test_both_vote_limits_are_checked_by_one_program_per_shape():
  # The limit is traced: a noisy mechanism's votes and another core's share the check.
  from pate_jax import _checks  # pylint: disable=g-import-not-at-top
  from pate_jax._checks import _votes  # pylint: disable=g-import-not-at-top
  votes = np.array([[2**23 + 1, 2**23], [1, 2], [3, 0]], np.int32)
  _checks.votes(votes)  # Within int32's limit.
  size = _votes._votes_flags._cache_size()  # pylint: disable=protected-access
  with pytest.raises(ValueError, match="at most 16777216 teachers per row.*row 0 sums to"):
    _checks.votes(votes, max_total=_checks.MAX_NOISY_TOTAL)
  assert _votes._votes_flags._cache_size() == size  # pylint: disable=protected-access


# --- 6. Rows with unequal totals ----------------------------------------------------------


def test_rows_with_unequal_totals_are_refused_everywhere():
  votes = np.array([[30, 10, 0], [300, 100, 0]])
  for call in (lambda: agg.lnmax(KEY, votes, 0.05), lambda: agg.gnmax(KEY, votes, 40.0),
               lambda: L.PrivateAggregator(KEY, "lnmax", gamma=0.05, epsilon_max=1.0,
                                           delta=1e-5).answer(votes),
               lambda: _gnmax().answer(votes)):
    with pytest.raises(ValueError, match="every row must sum"):
      call()
  a = _gnmax(epsilon_max=np.inf)
  a.answer(votes[:1])
  with pytest.raises(ValueError, match="number of teachers"):
    a.answer(votes[1:])  # Inflated rows in a later call.


# --- 7. Booleans given as strings or numbers, and id overflow -----------------------------


def test_booleans_given_as_strings_or_numbers_are_refused():
  votes = np.array([[30, 10, 0]])
  with pytest.raises(ValueError, match="data_dependent must be a boolean"):
    acc.lnmax_log_moments(votes, 0.05, np.arange(1.0, 9.0), data_dependent="False")
  with pytest.raises(ValueError, match="data_dependent must be a boolean"):
    acc.gnmax_rdp(votes, 40.0, ORDERS, data_dependent="False")
  with pytest.raises(ValueError, match="data_dependent must be a boolean"):
    acc.lnmax_moments_epsilon(votes, 0.05, 1e-5, data_dependent="False")
  for name in ("data_dependent", "consistent"):
    with pytest.raises(ValueError, match=f"{name} must be a boolean"):
      _gnmax(**{name: "False"})
    with pytest.raises(ValueError, match=f"{name} must be a boolean; got 0"):
      _gnmax(**{name: 0})  # A number is not a flag either.
  with pytest.raises(ValueError, match="data_dependent must be a boolean; got 1"):
    acc.gnmax_rdp(votes, 40.0, ORDERS, data_dependent=1)


def test_the_largest_id_is_refused_without_consistent_answers():
  """Without consistent answers the next fresh id is one past the last one answered: after
  the largest two-word id it would wrap to 0, and every id, its noise draw already used,
  would be fresh again. That id is refused; the one below it is answered."""
  votes = _votes(np.random.default_rng(7), 2, 40)
  top = 2**32 - 1
  state = _state(epsilon_max=np.inf)
  with pytest.raises(ValueError, match="query_ids must be fresh"):
    L.answer_batch(state, KEY, votes, np.array([[top, top - 1], [top, top]], np.uint32))
  state, out = L.answer_batch(state, KEY, votes[:1], np.array([[top, top - 1]], np.uint32))
  assert np.all(out.status == ANSWERED) and int(state.num_charged) == 1
  with pytest.raises(ValueError, match="query_ids must be fresh"):
    L.answer_batch(state, KEY, votes[:1], np.array([[0, 0]], np.uint32))


def test_votes_whose_index_is_not_a_dataset_row_are_refused(tmp_path):
  index = np.arange(40)
  index[3] = -1
  with pytest.raises(ValueError, match="index must be"):
    _aggregate_setup(tmp_path, index=index)  # Not a row of a dataset.


# --- 8. Negative log-moments, one shared noise id ------------------------------------------


def test_moments_to_epsilon_refuses_negative_log_moments():
  with pytest.raises(ValueError, match="total_log_moments"):
    acc.moments_to_epsilon(np.array([-1000.0, -1000.0]), np.array([1.0, 2.0]), 1e-5)
  eps, _ = acc.moments_to_epsilon(np.zeros(2), np.array([1.0, 2.0]), 1e-5)
  assert float(eps) == pytest.approx(np.log(1e5) / 2)


def test_non_consistent_mode_refuses_a_reused_noise_id():
  votes = _votes(np.random.default_rng(8), 4, 40)
  state = _state(epsilon_max=np.inf)
  with pytest.raises(ValueError, match="query_ids"):
    L.answer_batch(state, KEY, votes, np.zeros(4, np.uint32))
  state, _ = L.answer_batch(state, KEY, votes, np.arange(4))
  with pytest.raises(ValueError, match="query_ids"):
    L.answer_batch(state, KEY, votes, np.arange(4))  # The same draws again.
  state, out = L.answer_batch(state, KEY, votes, np.arange(4, 8))
  assert np.all(out.status == ANSWERED)


# --- 12. votes.npz and labels.npz contents ------------------------------------------------


def _write_votes(path, **override):
  rng = np.random.default_rng(12)
  votes = _votes(rng, 10, 20)
  arrays = dict(votes=votes, labels=votes.argmax(1).astype(np.int32),
                index=np.arange(10, dtype=np.int64), num_pool=np.int64(8),
                num_teachers=np.int64(20), dataset=np.str_("x"))
  arrays.update(override)
  arrays = {k: v for k, v in arrays.items() if v is not None}
  np.savez(path / "votes.npz", **arrays)
  return path / "votes.npz"


@pytest.mark.parametrize("override, match", [
    (dict(labels=np.full(10, 10, np.int32)), r"labels must lie in \[0, 10\)"),
    (dict(labels=np.zeros(7, np.int32)), r"labels must have shape \[10\]"),
    (dict(num_pool=np.int64(100)), "num_pool must"),
    (dict(num_teachers=np.int64(21)), "num_teachers"),
    (dict(votes=None), r"missing \['votes'\]"),
])
def test_bad_votes_files_name_the_file_and_the_field(tmp_path, override, match):
  path = _write_votes(tmp_path, **override)
  with pytest.raises(ValueError, match=match) as info:
    votes_lib.load_votes(tmp_path)
  assert str(path) in str(info.value)


@pytest.mark.parametrize("name", ["votes.npz", "labels.npz"])
def test_corrupted_files_name_the_file(tmp_path, name):
  path = tmp_path / name
  path.write_bytes(b"PK\x03\x04 not a zip file at all")
  load = votes_lib.load_votes if name == "votes.npz" else labels_lib.load_labels
  with pytest.raises(ValueError, match=f"{path}.*(corrupt|not)"):
    load(tmp_path)


def test_the_aggregate_stage_checks_its_votes_before_writing(tmp_path):
  script, config = _aggregate_setup(tmp_path)
  _write_votes(tmp_path, labels=np.zeros(7, np.int32))
  config.num_queries = 5
  with pytest.raises(ValueError, match="labels must have shape"):
    script.run(config, tmp_path / "w")
  assert not (tmp_path / "w" / "labels.npz").exists()


# --- Acceptance: ε of everything released never exceeds ε_max ------------------------------

NUM_SESSIONS = 1000
DISTINCT = CAP - CHUNK  # Consistent sessions ask these rows: the answer cache never grows.


def _settings(rng, mechanism):
  """Random settings of one session (keyword arguments of PrivateAggregator)."""
  kw = {"delta": float(10.0 ** rng.uniform(-8, -3)), "epsilon_max": float(rng.uniform(0.3, 4.0)),
        "data_dependent": bool(rng.random() < 0.75), "consistent": bool(rng.integers(2))}
  if mechanism == "lnmax":
    return {**kw, "gamma": float(rng.uniform(0.02, 0.2))}
  kw.update(orders=ORDERS, sigma=float(rng.uniform(3.0, 40.0)))  # (Both conversions: test_ledger.)
  if mechanism == "confident_gnmax":
    kw.update(threshold=float(rng.uniform(10, 35)), sigma_threshold=float(rng.uniform(3, 20)))
  return kw


def _recompute(mechanism, data_dependent, conversion, sessions):
  """Cost and ε of the released answers of each session, vectorised over sessions.

  A session's release counts ``n_answered[POOL]``, ``n_not_confident[POOL]`` (how many
  times each pool row was released with that outcome) compose with the registry's
  data-independent cost (the budget's, whatever the session's private accounting) in a
  fresh accountant; nothing of the ledger is used.
  """
  del data_dependent  # The budget is the data-independent bound.
  m = mechanisms.get(mechanism)
  empty = mechanisms.make_accountant(m, None if m.accountant == "moments" else ORDERS,
                                     conversion or "improved")
  names = m.param_names

  def one(pool, params, n_answered, n_not_confident, delta):
    p = dict(zip(names, params))
    yes = jnp.ones(pool.shape[0], bool)
    cost = (n_answered @ m.cost(pool, yes, p, empty.orders, False)
            + n_not_confident @ m.cost(pool, ~yes, p, empty.orders, False))
    return cost, empty.compose(cost).epsilon(delta)[0]

  stack = lambda k: np.stack([s[k] for s in sessions])  # noqa: E731
  with jax.enable_x64(True):
    cost, eps = jax.jit(jax.vmap(one))(
        stack("pool"), stack("params"), stack("n_answered").astype(np.float64),
        stack("n_not_confident").astype(np.float64), stack("delta"))
  return np.asarray(cost), np.asarray(eps)


def _session(rng, key, mechanism, stats):
  """One random session: batches, repeats, threads and reruns on one private pool."""
  kw = _settings(rng, mechanism)
  consistent = kw["consistent"]
  pool = _votes(rng, POOL, 40, concentration=rng.uniform(0.05, 2.0))
  make = lambda k, ledger=None: L.PrivateAggregator(  # noqa: E731
      k, mechanism, chunk_size=CHUNK, capacity=CAP, ledger=ledger, **kw)
  holder = [make(key)]
  released = []  # (row, status, label) of every released answer, from any thread or run.

  def ask(rows):
    a = holder[0]
    out = (a.answer(pool[rows], query_ids=rows.astype(np.uint32)) if consistent
           else a.answer(pool[rows]))
    released.extend((r, st, lab) for r, st, lab in zip(rows, out.status, out.labels)
                    if st in (ANSWERED, NOT_CONFIDENT))
    stats["refused"] += int((out.status == REFUSED).sum())

  def rows():
    b = int(rng.integers(1, 25))
    return rng.integers(0, DISTINCT if consistent else POOL, size=b)

  for _ in range(int(rng.integers(1, 4))):
    op = rng.choice(["batch", "threads", "rerun"], p=[0.45, 0.3, 0.25])
    stats[op] += 1
    if op == "batch":
      ask(rows())
    elif op == "threads":
      work = [[rows() for _ in range(int(rng.integers(1, 3)))] for _ in range(2)]
      threads = [threading.Thread(target=lambda w=w: [ask(r) for r in w]) for w in work]
      for t in threads:
        t.start()
      for t in threads:
        t.join()
    else:  # A new process: the ledger persisted (sometimes through an .npz) and resumed.
      record = holder[0].ledger_record()
      if rng.random() < 0.5:
        buffer = io.BytesIO()
        np.savez(buffer, **record)
        buffer.seek(0)
        with np.load(buffer) as f:
          record = dict(f)
      holder[0] = make(jax.random.fold_in(key, len(released) + 1), ledger=record)
  n_answered, n_not_confident = np.zeros(POOL, int), np.zeros(POOL, int)
  first = {}
  for r, st, lab in released:
    if consistent and r in first:  # A repeat must be the recorded answer (it is free).
      assert first[r] == (st, lab), (mechanism, r, first[r], st, lab)
      stats["repeats"] += 1
      continue
    first[r] = (st, lab)
    (n_answered if st == ANSWERED else n_not_confident)[r] += 1
  m = mechanisms.get(mechanism)
  return {"pool": pool, "params": np.array([kw[k] for k in m.param_names]),
          "delta": kw["delta"], "epsilon_max": kw["epsilon_max"], "n_answered": n_answered,
          "n_not_confident": n_not_confident, "ledger_cost": np.asarray(holder[0].state.cost),
          "group": (mechanism, kw["data_dependent"], kw.get("conversion"))}


@pytest.mark.slow
def test_property_released_epsilon_never_exceeds_the_budget():
  """1,000 random sessions mixing batch sizes, repeats, threads and reruns: the ε of
  everything released, recomputed from the released answers alone, is ≤ ε_max, and it is
  exactly what the ledger recorded."""
  rng = np.random.default_rng(1616)
  keys = jax.random.split(KEY, NUM_SESSIONS)
  names = ("gnmax", "confident_gnmax", "lnmax")
  stats = {k: 0 for k in ("batch", "threads", "rerun", "refused", "repeats")}
  sessions = [_session(rng, keys[s], names[s % 3], stats) for s in range(NUM_SESSIONS)]
  groups: dict[tuple, list[dict]] = {}
  for s in sessions:
    groups.setdefault(s["group"], []).append(s)
  num_released, num_binding = 0, 0
  for group, members in groups.items():
    cost, eps = _recompute(*group, members)
    for s, c, e in zip(members, cost, eps):
      released = s["n_answered"].sum() + s["n_not_confident"].sum()
      num_released += released
      if released:
        assert e <= s["epsilon_max"] * (1 + 1e-9), (group, e, s["epsilon_max"])
        num_binding += e > 0.5 * s["epsilon_max"]
      np.testing.assert_allclose(s["ledger_cost"], c, rtol=1e-9, atol=1e-12)
  # The sessions exercise every path, and the budget binds in many of them.
  assert min(stats.values()) > 200 and num_released > 5000 and num_binding > 200, (
      stats, num_released, num_binding)


@pytest.mark.slow
def test_the_aggregate_stage_reports_a_publishable_epsilon(tmp_path):
  # GNMax: the data-dependent ε is released with smooth sensitivity at parameters fixed in
  # the config; the private part is kept apart. LNMax has none and says so.
  script, config = _aggregate_setup(tmp_path)
  config.epsilon_max, config.data_dependent = 20.0, True
  r = script.run(config, tmp_path / "gnmax")
  rel = r["epsilon_release"]
  assert np.isfinite(rel["epsilon_released"]) and rel["release"] == 1
  assert rel["sigma_ss"] == config.release.sigma_ss and rel["beta"] == 0.4 / rel["order"]
  private = r["private"]["epsilon_release"]
  # Noisy, it lies on the fixed grid: its float64 bits would tell neighbouring votes apart.
  from pate_jax import accounting  # pylint: disable=g-import-not-at-top
  assert private["noise_std"] > 0
  # Clipped to [0, the budget's data-independent ε]: public, so the sampler's δ term for its
  # cell edges is too, and it is charged with the answers'.
  assert rel["clipped_to"] == [0.0, r["ledger"]["epsilon"]]
  assert 0.0 <= rel["epsilon_released"] <= r["ledger"]["epsilon"]
  steps = rel["epsilon_released"] / accounting.RELEASE_GRID
  assert steps == round(steps) or rel["epsilon_released"] == r["ledger"]["epsilon"]
  assert r["ledger"]["sampler_delta_releases"] == mechanisms.release_sampler_delta(
      1, config.epsilon_max, config.epsilon_max) > 0
  assert r["ledger"]["sampler_delta"] > r["ledger"]["sampler_delta_releases"]
  # The release costs something on top of the data-dependent ε it publishes.
  assert private["epsilon_expected_release"] >= private["epsilon_data_dependent"]
  config.mechanism, config.gamma = "lnmax", 0.05
  with pytest.raises(ValueError, match="mechanism"):  # One budget per set of teachers.
    script.run(config, tmp_path / "lnmax")
  config.noise_seed = 0  # A research run measures in its own workdir's ledger.
  r = script.run(config, tmp_path / "lnmax")
  assert "data-independent" in r["epsilon_release"]
