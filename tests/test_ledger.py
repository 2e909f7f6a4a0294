"""Tests for pate_jax.ledger: budget enforcement, consistent answers, property test."""

from __future__ import annotations

import collections
import dataclasses
import math
import pathlib

import jax
import numpy as np
import pytest
from scipy import special, stats

from pate_jax import accounting as acc
from pate_jax import aggregation as agg
from pate_jax import attacks
from pate_jax import experiment
from pate_jax import ledger as L
from pate_jax import mechanisms

KEY = jax.random.key(3)
C = 10          # Classes in every test (one compilation per mechanism).
CHUNK = 16      # Chunk size of every aggregator in this file.
CAP = 32        # Id-record capacity (a shape too: tests share compiled steps).
POOL = 64       # Rows of every votes array given to the accountants (one compilation).
ORDERS = np.array([1.5, 2.0, 3.0, 5.0, 8.0, 16.0, 32.0, 64.0])
ANSWERED, NOT_CONFIDENT, REFUSED = (int(L.Status.ANSWERED), int(L.Status.NOT_CONFIDENT),
                                    int(L.Status.REFUSED_BUDGET))


def _votes(rng, q, t, concentration=None):
  """Random histograms ``[q, C]`` of ``t`` teachers (Dirichlet-skewed class probabilities)."""
  a = rng.uniform(0.05, 2.0) if concentration is None else concentration
  p = rng.dirichlet(np.full(C, a), size=q)
  return np.stack([rng.multinomial(t, pi) for pi in p]).astype(np.int32)


def _classic_eps(rdp, orders, delta):
  return np.min(rdp + np.log(1 / delta) / (orders - 1))


def _make(mechanism, **kw):
  params = {"lnmax": dict(gamma=0.05), "gnmax": dict(sigma=20.0, orders=ORDERS),
            "confident_gnmax": dict(threshold=30.0, sigma_threshold=10.0, sigma=20.0,
                                    orders=ORDERS)}[mechanism]
  params.update(kw)
  params.setdefault("delta", 1e-5)
  params.setdefault("capacity", CAP)
  return L.PrivateAggregator(KEY, mechanism, chunk_size=CHUNK, **params)


# --- Budget enforcement against closed forms ----------------------------------------------


def test_gnmax_data_independent_answers_exactly_what_fits():
  # k answers cost k λ/σ² (Rényi), classic conversion ε(k) = min_λ kλ/σ² + log(1/δ)/(λ-1).
  sigma, delta = 20.0, 1e-5
  eps_k = np.array([_classic_eps(k * ORDERS / sigma**2, ORDERS, delta) for k in range(60)])
  budget = 0.5 * (eps_k[23] + eps_k[24])  # 23 answers fit, 24 do not.
  rng = np.random.default_rng(0)
  votes = _votes(rng, POOL, 40)
  a = _make("gnmax", epsilon_max=budget, data_dependent=False, conversion="classic")
  out = a.answer(votes)
  np.testing.assert_array_equal(out.status, [ANSWERED] * 23 + [REFUSED] * (POOL - 23))
  assert a.num_answered == 23 and a.num_charged == 23
  np.testing.assert_allclose(a.epsilon, eps_k[23], rtol=1e-12)
  assert a.epsilon <= budget
  # Answered labels are GNMax with noise fold_in(key, sequence number).
  np.testing.assert_array_equal(out.labels[:23], agg.gnmax(KEY, votes, sigma)[:23])
  np.testing.assert_array_equal(out.labels[23:], -1)
  # The ledger is unchanged by refused queries and keeps refusing.
  cost = np.asarray(a.state.cost)
  again = a.answer(votes[:5])
  np.testing.assert_array_equal(again.status, [REFUSED] * 5)
  np.testing.assert_array_equal(np.asarray(a.state.cost), cost)
  assert a.num_answered == 23


def test_answers_do_not_depend_on_batching():
  rng = np.random.default_rng(1)
  votes = _votes(rng, 45, 30)
  a = _make("gnmax", epsilon_max=2.0, data_dependent=False)
  one = a.answer(votes)
  b = _make("gnmax", epsilon_max=2.0, data_dependent=False)
  parts = [b.answer(votes[s]) for s in (slice(0, 7), slice(7, 30), slice(30, 45))]
  np.testing.assert_array_equal(np.concatenate([p.status for p in parts]), one.status)
  np.testing.assert_array_equal(np.concatenate([p.labels for p in parts]), one.labels)
  assert a.epsilon == b.epsilon and a.num_answered == b.num_answered
  assert 0 < a.num_answered < 45  # The budget binds inside the batch.


def test_lnmax_ledger_matches_2017_accountant():
  rng = np.random.default_rng(2)
  votes = _votes(rng, POOL, 250, concentration=0.1)
  delta = 1e-5
  a = _make("lnmax", epsilon_max=float("inf"), delta=delta)
  # No query yet: ε = min_l log(1/δ)/l = log(1/δ)/8.
  np.testing.assert_allclose(a.epsilon, math.log(1 / delta) / 8, rtol=1e-12)
  out = a.answer(votes)
  assert np.all(out.status == ANSWERED)
  eps, moment = acc.lnmax_moments_epsilon(votes, 0.05, delta, data_dependent=True)
  np.testing.assert_allclose(a.private_epsilon, float(eps), rtol=1e-10)
  assert a.private_best_order == float(moment)
  np.testing.assert_array_equal(out.labels, agg.lnmax(KEY, votes, 0.05))
  di = _make("lnmax", epsilon_max=float("inf"), delta=delta, data_dependent=False)
  di.answer(votes)
  bound = float(acc.lnmax_moments_epsilon(votes, 0.05, delta, data_dependent=False)[0])
  np.testing.assert_allclose(di.epsilon, bound, rtol=1e-10)
  # The budget (public ε) is the data-independent bound whatever the private accounting.
  np.testing.assert_allclose(a.epsilon, bound, rtol=1e-10)
  assert di.private_epsilon == di.epsilon > a.private_epsilon


def test_confident_gnmax_charges_threshold_for_all_and_gnmax_for_answered():
  rng = np.random.default_rng(3)
  votes = _votes(rng, POOL, 50)  # Tops spread around the threshold of 30.
  a = _make("confident_gnmax", epsilon_max=float("inf"))
  out = a.answer(votes)
  ans = out.status == ANSWERED
  assert ans.any() and (out.status == NOT_CONFIDENT).any()
  np.testing.assert_array_equal(out.labels[~ans], -1)
  want_labels, want_ans = agg.confident_gnmax(KEY, votes, 30.0, 10.0, 20.0)
  np.testing.assert_array_equal(ans, want_ans)
  np.testing.assert_array_equal(out.labels, want_labels)
  thr = np.asarray(acc.confident_threshold_rdp(votes, 30.0, 10.0, ORDERS))
  gn = np.asarray(acc.gnmax_rdp(votes, 20.0, ORDERS))
  rdp = thr.sum(0) + gn[ans].sum(0)
  np.testing.assert_allclose(np.asarray(a.state.private_accountant.cost), rdp, rtol=1e-10)
  np.testing.assert_allclose(a.private_epsilon,
                             float(acc.rdp_to_epsilon(rdp, ORDERS, 1e-5)[0]), rtol=1e-10)
  # The budget: λ/(2σ_T²) per query checked plus λ/σ² per query answered.
  bound = POOL * ORDERS / (2 * 10.0**2) + ans.sum() * ORDERS / 20.0**2
  np.testing.assert_allclose(np.asarray(a.state.cost), bound, rtol=1e-10)
  np.testing.assert_allclose(a.epsilon, float(acc.rdp_to_epsilon(bound, ORDERS, 1e-5)[0]),
                             rtol=1e-10)
  assert a.num_charged == POOL and a.num_answered == ans.sum()


def test_a_budget_of_exactly_k_answers_answers_k():
  """The check is ε ≤ ε_max: a budget equal to the ε of 23 answers (as a ledger computes
  it) answers 23, and not 22."""
  votes = _votes(np.random.default_rng(0), POOL, 40)
  first = _make("gnmax", epsilon_max=float("inf"), data_dependent=False, conversion="classic")
  first.answer(votes[:23])
  exact = _make("gnmax", epsilon_max=float(first.epsilon), data_dependent=False,
                conversion="classic")
  out = exact.answer(votes)
  np.testing.assert_array_equal(out.status, [ANSWERED] * 23 + [REFUSED] * (POOL - 23))
  assert exact.epsilon == first.epsilon


def test_a_refusal_never_depends_on_whether_the_query_would_be_answered():
  """Confident-GNMax asks the budget for the worst case, the threshold check and the
  answer, before it knows whether the votes pass: a budget between the two is refused
  though no query would have been answered (answering NOT_CONFIDENT instead would say that
  the votes fell below the threshold, at no charge the budget had checked)."""
  delta = 1e-5
  threshold_only = _classic_eps(ORDERS / (2 * 10.0**2), ORDERS, delta)
  with_answer = _classic_eps(ORDERS / (2 * 10.0**2) + ORDERS / 20.0**2, ORDERS, delta)
  votes = np.zeros((4, C), np.int32)
  votes[:, 0] = 40
  a = _make("confident_gnmax", threshold=1e6, epsilon_max=0.5 * (threshold_only + with_answer),
            data_dependent=False, conversion="classic")
  out = a.answer(votes)  # no count reaches 10⁶: none would be answered
  np.testing.assert_array_equal(out.status, [REFUSED] * 4)
  assert a.num_charged == 0


def _prefix_epsilon(mechanism, params, votes, data_dependent, delta=1e-5):
  """ε after each prefix of ``votes`` answered (every query answered), the oracle's way:
  the registered cost composed by hand."""
  m = mechanisms.get(mechanism)
  empty = mechanisms.make_accountant(m, ORDERS)
  cost = np.asarray(m.cost(votes, np.ones(len(votes), bool), params, empty.orders,
                           data_dependent), np.float64)
  return np.asarray(dataclasses.replace(empty, cost=np.cumsum(cost, 0)).epsilon(delta)[0])


def test_a_neighbour_that_moves_the_private_epsilon_is_answered_the_same_rows():
  """One training record replaced moves one teacher's vote on every query: the neighbour's
  data-dependent ε (private) is larger after every prefix, and the budget's refusals must
  not see it. ε_max lies between the two neighbours' data-dependent ε after some prefix,
  where answering until the data-dependent ε passes the budget (the papers' accounting)
  would answer the two a different number of rows, and the number of labels would tell
  which neighbour it was. The refusal reads the data-independent bound: both neighbours get
  the same rows, labels, statuses and published ε; only their private ε differs."""
  gen = np.random.default_rng(0)
  q, agree = 32, 140
  labels = gen.integers(0, C, q)
  x = np.stack([gen.multinomial(250 - agree, np.full(C, 1 / C)) for _ in range(q)])
  x[np.arange(q), labels] += agree
  y = x.copy()  # one teacher moves from the plurality to the runner-up, on every row
  y[np.arange(q), x.argmax(1)] -= 1
  y[np.arange(q), np.argsort(x, 1)[:, -2]] += 1
  x, y = x.astype(np.int32), y.astype(np.int32)
  with jax.enable_x64(True):
    px, py = (_prefix_epsilon("gnmax", {"sigma": 20.0}, v, True) for v in (x, y))
    bound = _prefix_epsilon("gnmax", {"sigma": 20.0}, x, False)
  k = q - 6
  budget = 0.5 * (px[k] + py[k])
  assert px[k] < budget < py[k]  # a data-dependent refusal would answer y fewer rows
  expected = int(np.sum(bound <= budget))
  assert 0 < expected < q  # the data-independent bound refuses some rows, not all
  out = {}
  for name, votes in (("x", x), ("y", y)):
    a = _make("gnmax", epsilon_max=budget, data_dependent=True)
    out[name] = (a.answer(votes), a)
  (rx, ax), (ry, ay) = out["x"], out["y"]
  assert ax.num_answered == ay.num_answered == expected
  np.testing.assert_array_equal(rx.status, ry.status)
  np.testing.assert_array_equal(rx.status, [ANSWERED] * expected + [REFUSED] * (q - expected))
  np.testing.assert_array_equal(rx.labels, ry.labels)
  assert ax.epsilon == ay.epsilon and ax.best_order == ay.best_order
  assert ax.private_epsilon < ay.private_epsilon  # the neighbour is seen where it is private


def test_budget_below_the_empty_ledger_answers_nothing():
  a = _make("lnmax", epsilon_max=0.5)  # ε(no queries) = log(1e5)/8 ≈ 1.44 > 0.5.
  out = a.answer(_votes(np.random.default_rng(4), 5, 20))
  np.testing.assert_array_equal(out.status, [REFUSED] * 5)
  assert a.num_charged == 0


# --- Consistent answers -------------------------------------------------------------------


@pytest.mark.slow
def test_consistent_repeats_are_free_and_identical():
  rng = np.random.default_rng(5)
  inputs = rng.integers(0, 256, size=(12, 3, 3), dtype=np.uint8)
  votes = _votes(rng, 12, 20, concentration=5.0)  # Close votes: answers are noisy.
  # hash_query_ids gives two-word ids; every chunk holds CHUNK rows.
  a = _make("gnmax", epsilon_max=float("inf"), consistent=True, capacity=CAP // 2)
  first = a.answer(votes, inputs=inputs)
  assert np.all(first.status == ANSWERED) and not first.repeated.any()
  eps, cost = a.epsilon, np.asarray(a.state.cost)
  # Ask again, shuffled, with duplicates inside the batch: same answers, no cost.
  order = rng.integers(0, 12, size=30)
  again = a.answer(votes[order], inputs=inputs[order])
  np.testing.assert_array_equal(again.labels, first.labels[order])
  assert again.repeated.all()
  assert a.epsilon == eps and np.array_equal(np.asarray(a.state.cost), cost)
  assert a.num_charged == 12 and a.num_answered == 12
  assert a.state.ids.shape[0] == CAP  # The record doubled to fit a chunk.
  # Same labels as the plain aggregator with the hashed ids.
  np.testing.assert_array_equal(first.labels,
                                agg.gnmax(KEY, votes, 20.0, agg.hash_query_ids(inputs)))


def test_consistent_duplicates_in_one_new_batch_are_charged_once():
  rng = np.random.default_rng(6)
  votes = _votes(rng, 6, 20)
  ids = np.array([7, 9, 7, 7, 11, 9], np.uint32)
  a = _make("confident_gnmax", epsilon_max=float("inf"), consistent=True)
  out = a.answer(votes[[0, 1, 0, 0, 4, 1]], query_ids=ids)
  np.testing.assert_array_equal(out.repeated, [False, False, True, True, False, True])
  np.testing.assert_array_equal(out.status[[2, 3]], out.status[[0, 0]])
  np.testing.assert_array_equal(out.labels[[2, 3, 5]], out.labels[[0, 0, 1]])
  assert a.num_charged == 3
  b = _make("confident_gnmax", epsilon_max=float("inf"), consistent=True)
  b.answer(votes[[0, 1, 4]], query_ids=[7, 9, 11])
  np.testing.assert_allclose(np.asarray(a.state.cost), np.asarray(b.state.cost), rtol=1e-12)


def test_functional_api_refuses_when_the_record_is_full():
  settings = dict(orders=ORDERS, delta=1e-5, mechanism="gnmax", params={"sigma": 20.0},
                  epsilon_max=np.inf)
  state = L.init_ledger(consistent=True, capacity=CAP, **settings)
  votes = _votes(np.random.default_rng(7), CHUNK, 20)
  kw = dict(mechanism="gnmax", params={"sigma": 20.0}, orders=ORDERS, delta=1e-5,
            epsilon_max=np.inf, consistent=True)
  valid = np.arange(CHUNK) < 8
  state, out = L.answer_batch(state, KEY, votes, np.arange(CHUNK) + 100, valid, **kw)
  assert int(state.size) == 8
  state, out = L.answer_batch(state, KEY, votes, np.arange(CHUNK) + 200, **kw)
  state, out = L.answer_batch(state, KEY, votes, np.arange(CHUNK) + 300, **kw)
  want = [ANSWERED] * 8 + [int(L.Status.REFUSED_CAPACITY)] * 8
  np.testing.assert_array_equal(out.status, want)
  assert int(state.size) == CAP and int(state.num_charged) == CAP
  want_ids = np.concatenate([np.arange(8) + 100, np.arange(CHUNK) + 200, np.arange(8) + 300])
  np.testing.assert_array_equal(np.asarray(state.ids), want_ids)
  # A repeat of a recorded id is still answered when the record is full.
  state, out = L.answer_batch(state, KEY, votes, np.full(CHUNK, 205), **kw)
  assert np.all(out.status == ANSWERED) and np.all(out.repeated)
  with pytest.raises(ValueError, match="capacity"):
    L.init_ledger(consistent=True, **settings)
  empty = L.init_ledger(**settings)
  with pytest.raises(ValueError, match="consistent must be the ledger's False"):
    L.answer_batch(empty, KEY, votes, np.arange(CHUNK), **kw)


# --- Bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, match", [
    (dict(mechanism="gnmax"), "sigma is required"),
    (dict(mechanism="gnmax", sigma=1.0, gamma=0.1), "gamma is not a parameter"),
    (dict(mechanism="gnmax", sigma=-1.0), "sigma"),
    (dict(mechanism="lnmax", gamma=0.0), "gamma"),
    (dict(mechanism="confident_gnmax", threshold=5.0, sigma=1.0, sigma_threshold=0.0),
     "sigma_threshold"),
    (dict(mechanism="gnmax", sigma=1.0, epsilon_max=0.0), "epsilon_max"),
    (dict(mechanism="gnmax", sigma=1.0, epsilon_max=float("nan")), "epsilon_max"),
    (dict(mechanism="gnmax", sigma=1.0, delta=1.0), "delta"),
    (dict(mechanism="gnmax", sigma=1.0, delta=0.0), "delta"),
    (dict(mechanism="gnmax", sigma=1.0, orders=[1.0, 2.0]), "orders"),
    (dict(mechanism="lnmax", gamma=0.1, orders=[2.0]), "orders"),
    (dict(mechanism="lnmax", gamma=0.1, max_moment=0), "max_moment"),
    (dict(mechanism="gnmax", sigma=1.0, conversion="tight"), "conversion"),
    (dict(mechanism="gnmax", sigma=1.0, chunk_size=0), "chunk_size"),
    (dict(mechanism="laplace", gamma=0.1), "mechanism"),
])
def test_bad_aggregator_arguments(kwargs, match):
  kwargs.setdefault("epsilon_max", 1.0)
  kwargs.setdefault("delta", 1e-5)
  with pytest.raises(ValueError, match=match):
    L.PrivateAggregator(KEY, **kwargs)


def test_bad_answer_arguments():
  votes = _votes(np.random.default_rng(8), 4, 20)
  a = _make("gnmax", epsilon_max=1.0)
  with pytest.raises(ValueError, match="only used with consistent"):
    a.answer(votes, query_ids=np.arange(4))
  with pytest.raises(ValueError, match="votes must be non-negative"):
    a.answer(-votes)
  c = _make("confident_gnmax", epsilon_max=1.0, consistent=True)
  with pytest.raises(ValueError, match="exactly one of inputs or query_ids"):
    c.answer(votes)
  bad = votes.copy()
  bad[1, 0] += 1
  with pytest.raises(ValueError, match="every row must sum"):
    c.answer(bad, query_ids=np.arange(4))
  c.answer(votes, query_ids=np.arange(4))
  with pytest.raises(ValueError, match="same width"):
    c.answer(votes, query_ids=np.zeros((4, 2), np.uint32))
  with pytest.raises(ValueError, match="valid must be a prefix"):
    L.answer_batch(a.state, KEY, votes, np.arange(4), [True, False, True, False],
                   mechanism="gnmax", params={"sigma": 20.0}, orders=ORDERS, delta=1e-5,
                   epsilon_max=1.0)


# --- Property test ------------------------------------------------------------------------


def _accountant(mechanism, orders, conversion):
  """An empty accountant of the mechanism's kind (RDP orders, or moment orders)."""
  return mechanisms.make_accountant(mechanisms.get(mechanism), orders, conversion)


# 500 of the 1,000 keys below: of each feature they exercise about half as many as all
# 1,000 (floor sessions 45 of 88, refusals checked 246 of 485, the rarest of the 24 settings
# 5 times of 13), well above the thresholds, in half the time.
NUM_LEDGER_SESSIONS = 500


def _random_sessions(num_sessions):
  """The first ``num_sessions`` (<= 1,000) random sessions of the test below, each checked;
  what each exercised."""
  rng = np.random.default_rng(2024)
  pool_size, t = POOL, 40
  distinct = CAP - CHUNK  # Consistent sessions repeat these queries; the record never grows.
  names = ("lnmax", "gnmax", "confident_gnmax")
  moments = np.arange(1.0, 9.0)
  keys = jax.random.split(KEY, 1000)  # Sessions take the first num_sessions of these.
  exercised = []
  for s in range(num_sessions):
    num_refused, num_repeats = 0, 0
    mechanism = names[s % 3]
    consistent = bool(rng.integers(2))
    dd = bool(rng.random() < 0.75)
    conversion = "improved" if rng.random() < 0.5 else "classic"
    delta = float(10.0 ** rng.uniform(-8, -3))
    if mechanism == "lnmax":
      params, orders = {"gamma": float(rng.uniform(0.01, 0.2))}, moments
    elif mechanism == "gnmax":
      params, orders = {"sigma": float(rng.uniform(3.0, 40.0)), "orders": ORDERS}, ORDERS
    else:
      params = {"threshold": float(rng.uniform(10, 35)), "sigma": float(rng.uniform(3, 40)),
                "sigma_threshold": float(rng.uniform(3, 20)), "orders": ORDERS}
      orders = ORDERS
    eps_max = float(rng.uniform(0.3, 6.0))
    a = L.PrivateAggregator(keys[s], mechanism, delta=delta,
                            epsilon_max=eps_max, data_dependent=dd, consistent=consistent,
                            conversion=conversion, chunk_size=CHUNK, capacity=CAP,
                            **params)
    eps_empty = a.epsilon
    pool = _votes(rng, pool_size, t)  # Distinct queries; consistent sessions repeat them.
    seen: dict[int, tuple[int, int]] = {}
    answered = np.zeros(pool_size, bool)
    charged = np.zeros(pool_size, bool)
    first_refused = None  # First query refused while not yet charged.
    asked = 0
    for _ in range(int(rng.integers(1, 5))):
      b = int(rng.integers(1, 25))
      if consistent:
        rows = rng.integers(0, distinct, size=b)
      else:
        rows = np.arange(asked, min(asked + b, pool_size))
        if rows.size == 0:
          break
      asked += rows.size
      out = (a.answer(pool[rows], query_ids=rows.astype(np.uint32)) if consistent
             else a.answer(pool[rows]))
      refused = out.status == REFUSED
      assert not np.any(np.diff(refused.astype(int)) < 0), out.status  # A prefix is answered.
      for r, label, status, rep in zip(rows, out.labels, out.status, out.repeated):
        if status == REFUSED:
          if first_refused is None and r not in seen:
            first_refused = (int(r), charged.copy(), answered.copy())
          continue
        if r in seen:  # A repeat returns the recorded answer, for free.
          assert consistent and rep and seen[r] == (label, status)
          num_repeats += 1
        else:
          assert not rep
          seen[r] = (label, status)
          charged[r], answered[r] = True, status == ANSWERED
      num_refused += int(refused.sum())
    # An overrun: something was charged and ε ended above the budget. (With no
    # query ε is the accountant's floor, e.g. log(1/δ)/8 for LNMax, which may
    # exceed a small ε_max; then nothing may be answered.)
    assert not (charged.any() and a.epsilon > eps_max), (s, a.epsilon, eps_max)
    # Costs only add up: if the empty ledger's ε already exceeds ε_max, nothing may
    # be processed (charged), let alone answered.
    if eps_empty > eps_max:
      assert not charged.any(), (s, eps_empty, eps_max)
    assert a.num_charged == charged.sum() and a.num_answered == answered.sum()
    # Recompute the charge from the registry's per-query costs (whose validity
    # test_costs_bound_the_exact_renyi_divergence checks against the exact divergence),
    # composed by a fresh accountant: the ledger must have charged exactly this.
    m = mechanisms.get(mechanism)
    p = {k: params[k] for k in m.param_names}
    # The budget composes the data-independent bound; the private accountant the
    # session's accounting.
    empty = _accountant(mechanism, orders, conversion)
    total = empty.compose(m.cost(pool, answered, p, orders, False), mask=charged)
    private = empty.compose(m.cost(pool, answered, p, orders, dd), mask=charged)
    if charged.any():
      np.testing.assert_allclose(np.asarray(a.state.cost), np.asarray(total.cost), rtol=1e-9,
                                 atol=1e-15)
      np.testing.assert_allclose(a.epsilon, float(total.epsilon(delta)[0]), rtol=1e-9,
                                 atol=1e-12)
      np.testing.assert_allclose(a.private_epsilon, float(private.epsilon(delta)[0]),
                                 rtol=1e-9, atol=1e-12)
    else:
      assert a.epsilon == eps_empty
    if first_refused is not None:  # Refusal was necessary: answering it could overrun.
      r, ch, an = first_refused
      before = empty.compose(m.cost(pool, an, p, orders, False), mask=ch)
      worst_r = m.cost(pool[r:r + 1], np.ones(1, bool), p, orders, False)
      worst = float(before.compose(worst_r).epsilon(delta)[0])
      assert worst > eps_max * (1 - 1e-9), (s, worst, eps_max)
    exercised.append({
        "refused": num_refused, "answered": int(answered.sum()), "repeats": num_repeats,
        "floor": int(eps_empty > eps_max), "refusal_checked": int(first_refused is not None),
        "charged": int(charged.any()),
        "kind": (mechanism, consistent, dd, conversion)})
  return exercised


@pytest.mark.slow
def test_random_sessions_never_overrun_and_match_recomputation():
  """NUM_LEDGER_SESSIONS random sessions: ε ≤ ε_max always (no overrun), ε = a fresh
  accountant's, prefix maximal."""
  exercised = _random_sessions(NUM_LEDGER_SESSIONS)
  total = lambda k: sum(e[k] for e in exercised)  # noqa: E731
  assert total("floor") > 40, total("floor")  # The floor case is exercised.
  # The sessions exercise refusals (each checked necessary), answers and repeats.
  assert min(total("refused"), total("answered"), total("repeats")) > 2500, (
      total("refused"), total("answered"), total("repeats"))
  assert total("refusal_checked") > 200 and total("charged") > 400, (
      total("refusal_checked"), total("charged"))
  # Every mechanism, mode, accounting and conversion, many times.
  kinds = collections.Counter(e["kind"] for e in exercised)
  assert len(kinds) == 24 and min(kinds.values()) >= 5, kinds


def _neighbours(h):
  """All histograms one teacher away from ``h``: one vote moved from class i to j."""
  c = h.shape[0]
  return np.array([h + np.eye(c, dtype=h.dtype)[j] - np.eye(c, dtype=h.dtype)[i]
                   for i in range(c) for j in range(c) if i != j and h[i] > 0])


def _renyi(p, q, orders):
  """Exact ``D_λ(p ‖ q) = log Σ_k p_k^λ q_k^{1-λ} / (λ - 1)`` of two distributions ``[..., K]``
  at ``orders[L]`` -> ``[..., L]`` (log space)."""
  lp, lq = np.log(p)[..., None, :], np.log(q)[..., None, :]
  lam = orders[:, None]
  terms = np.where(p[..., None, :] > 0, lam * lp + (1 - lam) * lq, -np.inf)
  return special.logsumexp(terms, axis=-1) / (orders - 1)


# Histograms of 12 teachers over 3 classes: unanimous to split.
_HISTS = np.array([[12, 0, 0], [11, 1, 0], [10, 2, 0], [9, 2, 1], [8, 3, 1], [7, 5, 0],
                   [6, 5, 1], [5, 4, 3], [4, 4, 4]])
_DIVERGENCE_CASES = [
    ("gnmax", {"sigma": 1.0}), ("gnmax", {"sigma": 2.5}),
    ("lnmax", {"gamma": 0.5}), ("lnmax", {"gamma": 1.5}),
    ("confident_gnmax", {"threshold": 9.0, "sigma_threshold": 1.5, "sigma": 1.0}),
    ("confident_gnmax", {"threshold": 6.0, "sigma_threshold": 3.0, "sigma": 2.5}),
]


@pytest.mark.parametrize("mechanism, params", _DIVERGENCE_CASES)
def test_costs_bound_the_exact_renyi_divergence(mechanism, params):
  """Each registered cost bounds the exact divergence of the answer distributions.

  For every histogram H and every neighbour H' (one teacher changes its vote) the
  answer distribution Q(H) is computed exactly (the attack's accurate quadrature of
  Theorem 1 of the histogram-leakage paper), independently of the accountants:
  RDP mechanisms must satisfy D_λ(Q(H) ‖ Q(H')) ≤ cost(H)[λ]; the moments
  accountant bounds α(l) = l · D_{l+1}(Q(H) ‖ Q(H')) (Papernot et al. 2017).
  Confident-GNMax releases ⊥ with probability 1 - p(H), p(H) = Φ((max H - T)/σ_T),
  else GNMax: the cost if not answered bounds the threshold bit's divergence, the
  cost if answered that of the whole output (⊥ or a label).
  """
  m = mechanisms.get(mechanism)
  moments = m.accountant == "moments"
  orders = np.arange(1.0, 9.0) if moments else ORDERS
  hists = np.repeat(_HISTS, [len(_neighbours(h)) for h in _HISTS], axis=0)
  neigh = np.concatenate([_neighbours(h) for h in _HISTS])
  if mechanism == "lnmax":
    scale, noise = 1.0 / params["gamma"], "laplace"
  else:
    scale, noise = params["sigma"], "gaussian"
  q = np.asarray(attacks.output_distribution(hists.astype(float), scale, "accurate", noise))
  q2 = np.asarray(attacks.output_distribution(neigh.astype(float), scale, "accurate", noise))
  if mechanism == "confident_gnmax":
    p_ans = stats.norm.cdf((hists.max(1) - params["threshold"]) / params["sigma_threshold"])
    p_ans2 = stats.norm.cdf((neigh.max(1) - params["threshold"]) / params["sigma_threshold"])
    bit, bit2 = np.stack([1 - p_ans, p_ans], 1), np.stack([1 - p_ans2, p_ans2], 1)
    full = np.concatenate([bit[:, :1], p_ans[:, None] * q], 1)
    full2 = np.concatenate([bit2[:, :1], p_ans2[:, None] * q2], 1)
    cases = [(_renyi(bit, bit2, orders), False), (_renyi(full, full2, orders), True)]
  else:
    lam = orders + 1 if moments else orders
    exact = _renyi(q, q2, lam)
    cases = [(exact * orders if moments else exact, True)]
  tightest = 0.0
  for exact, answered in cases:
    for dd in (True, False):
      bound = np.asarray(m.cost(hists, np.full(len(hists), answered), params, orders, dd))
      excess = exact - bound * (1 + 1e-9) - 1e-10
      i, k = np.unravel_index(np.argmax(excess), excess.shape)
      assert excess[i, k] <= 0, (f"{mechanism} dd={dd} answered={answered}: exact "
                                 f"{exact[i, k]:.6g} > bound {bound[i, k]:.6g} at order "
                                 f"{orders[k]:g}, H={hists[i]}, H'={neigh[i]}")
      tightest = max(tightest, float(np.max(exact / np.maximum(bound, 1e-300))))
  # The check is not vacuous: somewhere the bound is within a factor 4 of the truth.
  assert tightest > 0.25, tightest


# --- experiments/aggregate.py smoke test -------------------------------------------------


def _load_by_path(*parts):
  """Imports a config or experiment script of this repository by path."""
  return experiment.load_script(pathlib.Path(__file__).resolve().parent.parent.joinpath(*parts))


@pytest.mark.slow
def test_aggregate_experiment_on_synthetic_votes(tmp_path):
  import json

  from pate_jax import votes as votes_lib
  rng = np.random.default_rng(11)
  votes = _votes(rng, POOL + 32, 250, concentration=0.1)  # MNIST-like: 250 teachers.
  labels = votes.argmax(1)
  labels[::5] = (labels[::5] + 1) % C  # The teachers are wrong on 20 % of the inputs.
  votes_lib.save_votes(tmp_path / "votes.npz", votes, labels, num_pool=POOL,
                       dataset="synthetic")
  experiment = _load_by_path("experiments", "aggregate.py")
  config = _load_by_path("configs", "aggregate_mnist.py").get_config("cpu")
  config.num_queries, config.chunk_size = POOL, CHUNK
  config.orders = tuple(ORDERS)  # Shapes shared with the tests above: no new compilation.
  config.votes_dir = str(tmp_path)
  delta = config.delta

  config.noise_seed = 0  # A research seed: each workdir measures in its own ledger.
  config.epsilon_max = float("inf")
  res = experiment.run(config, tmp_path / "lnmax")  # Default: LNMax, gamma = 0.05.
  eps, private = res["epsilon"], res["private"]["epsilon"]
  assert set(eps) == {"moments_data_independent", "strong_composition"}
  assert set(private) == {"moments_data_dependent"}
  assert res["num_answered"] == POOL and res["delta"] == delta
  dd, di = private["moments_data_dependent"], eps["moments_data_independent"]
  assert 0 < dd["epsilon"] < di["epsilon"] and 1 <= dd["best_moment"] <= 8
  t, g = POOL, 0.05
  np.testing.assert_allclose(eps["strong_composition"]["epsilon"],
                             4 * t * g**2 + 2 * g * np.sqrt(2 * t * np.log(1 / delta)))
  # The budget is spent on the data-independent bound; the data-dependent ε is private.
  np.testing.assert_allclose(res["ledger"]["epsilon"], di["epsilon"], rtol=1e-9)
  np.testing.assert_allclose(res["private"]["ledger"]["epsilon_data_dependent"],
                             dd["epsilon"], rtol=1e-9)
  with np.load(tmp_path / "lnmax" / "labels.npz") as f:
    # Every pool row, in the class-balanced order (votes.query_rows).
    np.testing.assert_array_equal(np.sort(f["query_index"]), np.arange(POOL))
    np.testing.assert_array_equal(f["true_labels"], labels[f["query_index"]])
    assert f["answered"].all() and f["labels"].shape == (POOL,)
    np.testing.assert_allclose(res["label_accuracy_overall"],
                               np.mean(f["labels"] == labels[f["query_index"]]))
  assert 0.5 < res["label_accuracy_answered"] <= 1.0
  assert res["private"]["plurality_accuracy"] == pytest.approx(
      np.mean(votes[:POOL].argmax(1) == labels[:POOL]))
  record = json.loads((tmp_path / "lnmax" / "results.json").read_text())
  assert record["results"]["private"]["epsilon"]["moments_data_dependent"][
      "epsilon"] == pytest.approx(dd["epsilon"])
  assert record["config"]["mechanism"] == "lnmax" and record["seed"] == 0

  config.mechanism = "gnmax"
  res = experiment.run(config, tmp_path / "gnmax")
  e = {k: v["epsilon"] for k, v in res["epsilon"].items()}
  p = {k: v["epsilon"] for k, v in res["private"]["epsilon"].items()}
  assert set(e) == {"rdp_data_independent_classic", "rdp_data_independent_improved"}
  assert set(p) == {"rdp_data_dependent_classic", "rdp_data_dependent_improved"}
  assert p["rdp_data_dependent_improved"] <= e["rdp_data_independent_improved"]
  assert p["rdp_data_dependent_improved"] <= p["rdp_data_dependent_classic"]
  # The budget: the labels' bound and the (prepaid) release of their private ε.
  assert res["ledger"]["epsilon"] > e["rdp_data_independent_improved"]
  assert res["epsilon_release"]["release"] == 1

  config.mechanism = "confident_gnmax"
  config.threshold, config.sigma_threshold, config.sigma = 180.0, 40.0, 20.0
  full = experiment.run(config, tmp_path / "confident")
  assert full["num_refused_budget"] == 0 and full["num_not_confident"] > 0
  # A budget half-way between the empty ledger and the whole run refuses a suffix.
  empty = L.PrivateAggregator(KEY, "gnmax", sigma=1.0, epsilon_max=1.0, delta=delta,
                              orders=ORDERS).epsilon
  config.epsilon_max = 0.5 * (empty + full["ledger"]["epsilon"])
  with pytest.raises(ValueError, match="epsilon_max"):  # Not the recorded budget's.
    experiment.run(config, tmp_path / "confident")
  config.data_dependent = False  # No release to reserve room for: labels only.
  res = experiment.run(config, tmp_path / "budget")
  assert 0 < res["num_refused_budget"] < POOL
  assert res["ledger"]["epsilon"] <= config.epsilon_max
  with np.load(tmp_path / "budget" / "labels.npz") as f:
    assert f["answered"].sum() == res["num_answered"] < POOL


def _confident_bound(num_checked, num_answered):
  """Confident-GNMax's data-independent RDP (σ_T = 10, σ = 20): λ/(2σ_T²) per query checked,
  λ/σ² per query answered."""
  return num_checked * ORDERS / (2 * 10.0**2) + num_answered * ORDERS / 20.0**2


def test_a_consistent_repeat_in_a_later_batch_is_free_and_recorded_once():
  """Across calls, an id already charged returns its recorded outcome, marked repeated,
  and costs nothing: the budget, the private accountant, the counters and the record are
  those of the six distinct queries, each charged once (closed forms)."""
  votes = np.zeros((6, C), np.int32)
  votes[:, :5] = 10  # split: not confident (10 + N(0, 10²) rarely reaches 30)
  votes[::2, 0], votes[::2, 1:5] = 46, 1  # confident: answered
  a = _make("confident_gnmax", epsilon_max=float("inf"), consistent=True)
  first = a.answer(votes[:4], query_ids=[10, 11, 12, 13])
  again = a.answer(votes[[2, 0, 2, 4, 5]], query_ids=[12, 10, 12, 14, 15])
  np.testing.assert_array_equal(again.repeated, [True, True, True, False, False])
  np.testing.assert_array_equal(again.status[:3], first.status[[2, 0, 2]])
  np.testing.assert_array_equal(again.labels[:3], first.labels[[2, 0, 2]])
  ans = np.concatenate([first.status, again.status[3:]]) == ANSWERED
  assert 0 < ans.sum() < 6  # both outcomes occur
  assert a.num_charged == 6 and a.num_answered == ans.sum()
  np.testing.assert_allclose(np.asarray(a.state.cost), _confident_bound(6, ans.sum()),
                             rtol=1e-10)
  private = (np.asarray(acc.confident_threshold_rdp(votes, 30.0, 10.0, ORDERS)).sum(0)
             + np.asarray(acc.gnmax_rdp(votes, 20.0, ORDERS))[ans].sum(0))
  np.testing.assert_allclose(np.asarray(a.state.private_accountant.cost), private, rtol=1e-10)
  assert int(a.state.size) == 6
  np.testing.assert_array_equal(np.asarray(a.state.ids)[:6], np.arange(10, 16))


def test_consistent_ids_are_keyed_by_every_word():
  """Two-word ids (hashed inputs) that share a word, or whose words would overlap if
  shifted by less than 32 bits, are different queries, each charged; the largest id (the
  record's padding value) is a query like any other; only the exact repeat is free."""
  votes = _votes(np.random.default_rng(13), 5, 20)
  top = 2**32 - 1
  ids = np.array([[1, 7], [2, 7], [0, 2**16], [1, 0], [top, top], [2, 7], [top, top]],
                 np.uint32)
  a = _make("gnmax", epsilon_max=float("inf"), consistent=True)
  out = a.answer(votes[[0, 1, 2, 3, 4, 1, 4]], query_ids=ids)
  np.testing.assert_array_equal(out.repeated, [False] * 5 + [True] * 2)
  np.testing.assert_array_equal(out.status, [ANSWERED] * 7)
  assert a.num_charged == 5 and int(a.state.size) == 5
  np.testing.assert_allclose(np.asarray(a.state.cost), 5 * ORDERS / 20.0**2, rtol=1e-12)
  again = a.answer(votes[[4, 0]], query_ids=ids[[4, 0]])
  assert again.repeated.all() and a.num_charged == 5
  np.testing.assert_array_equal(again.labels, out.labels[[4, 0]])


def test_a_resumed_consistent_ledger_answers_from_its_record_for_free():
  """A persisted ledger resumed under another (secret) key answers a recorded id with the
  recorded outcome, not a fresh draw of the new key, and charges nothing for it."""
  votes = _votes(np.random.default_rng(14), 8, 50)
  ids = np.arange(20, 28)
  a = _make("confident_gnmax", epsilon_max=float("inf"), consistent=True)
  first = a.answer(votes, query_ids=ids)
  other = jax.random.key(99)
  b = L.PrivateAggregator(other, "confident_gnmax", threshold=30.0, sigma_threshold=10.0,
                          sigma=20.0, orders=ORDERS, delta=1e-5, epsilon_max=float("inf"),
                          consistent=True, chunk_size=CHUNK, capacity=CAP,
                          ledger=a.ledger_record())
  cost = np.asarray(b.state.cost)
  again = b.answer(votes[::-1], query_ids=ids[::-1])
  assert again.repeated.all()
  np.testing.assert_array_equal(again.status, first.status[::-1])
  np.testing.assert_array_equal(again.labels, first.labels[::-1])
  np.testing.assert_array_equal(np.asarray(b.state.cost), cost)
  assert b.num_charged == 8 and int(b.state.size) == 8
  # Not vacuous: the new key answers these votes otherwise.
  labels, _ = agg.confident_gnmax(other, votes, 30.0, 10.0, 20.0, ids)
  assert not np.array_equal(np.asarray(labels), first.labels)


def test_the_aggregators_record_grows_instead_of_refusing():
  """``PrivateAggregator`` doubles its record when a chunk may not fit: more distinct
  queries than the initial capacity are all answered (REFUSED_CAPACITY is the functional
  API's only)."""
  votes = _votes(np.random.default_rng(15), 20, 20)
  a = _make("gnmax", epsilon_max=float("inf"), consistent=True, capacity=CAP // 2)
  out = a.answer(votes, query_ids=np.arange(20))
  np.testing.assert_array_equal(out.status, [ANSWERED] * 20)
  assert a.num_charged == 20 and a.state.ids.shape[0] == CAP


def test_restore_refuses_a_cache_that_is_not_the_charged_queries():
  """A consistent ledger's record holds one entry per charged query: a record with an
  entry dropped (its query would be charged again and answered anew), added (a query
  never charged would be answered for free, with a label nobody paid for) or replaced by
  a copy of another (dropped, with the count kept) is refused."""
  votes = _votes(np.random.default_rng(16), 4, 20)
  a = _make("gnmax", epsilon_max=float("inf"), consistent=True)
  a.answer(votes, query_ids=[3, 5, 8, 9])
  record = a.ledger_record()
  assert int(L.restore_ledger(record).cache.size) == 4
  keys = ("ledger_cache_ids", "ledger_cache_labels", "ledger_cache_status")
  dropped = {k: record[k][:3] for k in keys}
  added = {k: np.append(record[k], x).astype(record[k].dtype)
           for k, x in zip(keys, (12, 0, ANSWERED))}
  # An entry replaced by a copy of its neighbour: as many entries, one query dropped.
  copied = {k: record[k][[0, 1, 1, 3]] for k in keys}
  for forged in (dropped, added, copied):
    with pytest.raises(ValueError, match="ledger_cache_ids"):
      L.restore_ledger({**record, **forged})


def test_restore_refuses_a_cache_entry_recorded_as_refused():
  """Only charged queries are recorded, each answered or not confident: an entry whose
  outcome is a refusal (budget or capacity: never charged) or not a status at all is a
  forged record (its repeats would be given that outcome), refused like any other."""
  votes = _votes(np.random.default_rng(16), 4, 20)
  a = _make("gnmax", epsilon_max=float("inf"), consistent=True)
  a.answer(votes, query_ids=[3, 5, 8, 9])
  record = a.ledger_record()
  labels = record["ledger_cache_labels"].copy()
  labels[1] = -1  # Unanswered, as a refusal's label is.
  for outcome in (REFUSED, int(L.Status.REFUSED_CAPACITY), 7):
    status = record["ledger_cache_status"].copy()
    status[1] = outcome
    with pytest.raises(ValueError, match="ledger_cache_ids"):
      L.restore_ledger({**record, "ledger_cache_labels": labels,
                        "ledger_cache_status": status})


def test_non_consistent_ids_out_of_order_cannot_reuse_a_noise_draw():
  """Without consistent answers the ids of a batch must be strictly increasing: [5, 3, 5]
  would answer two queries with the draw of id 5 (a decrease hid the repeat)."""
  state = L.init_ledger(orders=ORDERS, delta=1e-5, mechanism="gnmax", params={"sigma": 20.0},
                        epsilon_max=np.inf)
  votes = _votes(np.random.default_rng(17), 3, 20)
  for ids in ([5, 3, 5], [5, 3]):
    with pytest.raises(ValueError, match="query_ids must be fresh"):
      L.answer_batch(state, KEY, votes[:len(ids)], np.asarray(ids, np.uint32))


def test_restore_refuses_an_unsorted_cache():
  """The record's cache must be sorted (the look-up is a binary search): out of order, a
  recorded id is not found, so its repeat is charged again and answered with new noise."""
  votes = _votes(np.random.default_rng(16), 4, 20)
  a = _make("gnmax", epsilon_max=float("inf"), consistent=True)
  a.answer(votes, query_ids=[3, 5, 8, 9])
  record = a.ledger_record()
  for order in ([1, 0, 2, 3], [0, 1, 3, 2]):
    forged = {k: record[k][order] for k in ("ledger_cache_ids", "ledger_cache_labels",
                                            "ledger_cache_status")}
    with pytest.raises(ValueError, match="ledger_cache_ids"):
      L.restore_ledger({**record, **forged})


def test_restore_refuses_a_next_id_below_the_charged_queries():
  """Without consistent answers query i draws fold_in(key, id_i): a record whose next_id
  went back (0 after 8 charged) answered the next queries with the first ones' noise."""
  votes = _votes(np.random.default_rng(18), 16, 20)
  kw = dict(sigma=1e6, epsilon_max=np.inf, delta=1e-5, orders=ORDERS, chunk_size=CHUNK)
  a = L.PrivateAggregator(KEY, "gnmax", **kw)
  a.answer(votes[:8])
  record = a.ledger_record()
  assert int(L.restore_ledger(record).next_id) == 8
  with pytest.raises(ValueError, match="ledger_next_id"):
    L.restore_ledger({**record, "ledger_next_id": np.uint64(0)})


def test_restore_refuses_cache_entries_that_a_cast_would_wrap():
  """int64 id -1 became the uint64 key 2**64-1 (the padding's), an int64 label 2**32 + 1
  became label 1, a float label 1.5 became 1."""
  votes = _votes(np.random.default_rng(16), 4, 20)
  a = _make("gnmax", epsilon_max=float("inf"), consistent=True)
  a.answer(votes, query_ids=[3, 5, 8, 9])
  record = a.ledger_record()
  for forged in ({"ledger_cache_ids": np.array([3, 5, 8, -1], np.int64)},
                 {"ledger_cache_labels": record["ledger_cache_labels"].astype(np.int64)
                  + np.array([0, 0, 0, 2**32])},
                 {"ledger_cache_labels": record["ledger_cache_labels"] + 0.5}):
    with pytest.raises(ValueError, match="ledger_cache_ids"):
      L.restore_ledger({**record, **forged})


# --- From a fast-tier mutation audit of the ledger's bookkeeping ---------------------------


def test_charge_fits_a_cost_whose_epsilon_is_exactly_epsilon_max():
  """charge: ε(bound + cost) <= ε_max is allowed (not <), the cost goes into both the
  accountant and extra_cost, and a cost that overshoots or is negative changes nothing."""
  settings = dict(orders=ORDERS, delta=1e-5, mechanism="gnmax", params={"sigma": 20.0})
  cost = 50 * ORDERS / 20.0**2   # 50 GNMax answers at σ = 20 (Proposition 8 of 2018)
  exact = float(L.init_ledger(cost, epsilon_max=np.inf, **settings).epsilon)
  state = L.init_ledger(epsilon_max=exact, **settings)
  charged, ok = L.charge(state, cost)
  assert ok and float(charged.epsilon) == exact
  np.testing.assert_array_equal(np.asarray(charged.cost), cost)
  np.testing.assert_array_equal(np.asarray(charged.extra_cost), cost)
  again, ok = L.charge(charged, np.full(ORDERS.shape, 1e-6))
  assert not ok and again is charged
  below = L.init_ledger(epsilon_max=float(np.nextafter(exact, 0.0)), **settings)
  assert L.charge(below, cost) == (below, False)
  with pytest.raises(ValueError, match="non-negative curve"):
    L.charge(state, np.where(ORDERS == 2.0, -1e-3, 0.0))


@pytest.mark.parametrize("change, named", [
    (dict(conversion="classic"), "conversion: 'classic' asked, 'improved' recorded"),
    (dict(epsilon_max=50.0), "epsilon_max: 50.0 asked, 20.0 recorded"),
    (dict(delta=1e-6), "delta: 1e-06 asked, 1e-05 recorded"),
    (dict(sigma=21.0), "params: {'sigma': 21.0} asked, {'sigma': 20.0} recorded"),
])
def test_a_ledger_is_resumed_only_under_the_settings_it_was_spent_under(change, named):
  """A record resumed with another conversion, ε_max, δ or σ would report (or spend) a
  budget under settings it was not spent under: refused, naming the setting."""
  spent = _make("gnmax", epsilon_max=20.0)
  spent.answer(_votes(np.random.default_rng(0), 4, 50))
  record = spent.ledger_record()
  with pytest.raises(ValueError, match="spent under other settings") as e:
    _make("gnmax", **{"epsilon_max": 20.0, **change}, ledger=record)
  assert named in str(e.value) and str(e.value).count(" asked, ") == 1
  resumed = _make("gnmax", epsilon_max=20.0, ledger=record)
  assert resumed.num_charged == 4 and resumed.epsilon == spent.epsilon


def test_a_record_round_trip_keeps_every_counter_and_the_number_of_teachers():
  """Confident-GNMax (answered < charged): the record keeps both counters and T, and a
  resumed ledger refuses rows of another T and a private ε that is not its cost's."""
  votes = np.zeros((6, C), np.int32)
  votes[:3, 0] = 50                 # unanimous: passes the threshold (30 ± 10 noise)
  votes[3:] = 5                     # flat: max 5, never passes
  a = _make("confident_gnmax", epsilon_max=np.inf)
  out = a.answer(votes)
  np.testing.assert_array_equal(out.status, [ANSWERED] * 3 + [NOT_CONFIDENT] * 3)
  record = a.ledger_record()
  assert int(record["ledger_num_charged"]) == 6 and int(record["ledger_num_answered"]) == 3
  state = L.restore_ledger(record)
  assert (int(state.num_charged), int(state.num_answered), int(state.num_teachers),
          int(state.next_id)) == (6, 3, 50, 6)
  resumed = _make("confident_gnmax", epsilon_max=np.inf, ledger=record)
  with pytest.raises(ValueError, match="ledger's number of teachers 50"):
    resumed.answer(votes[:2] * 2)
  forged = {**record, "ledger_private_epsilon": record["ledger_private_epsilon"] * 1.01}
  with pytest.raises(ValueError, match="ledger_private_epsilon is not the"):
    L.restore_ledger(forged)
  with pytest.raises(ValueError, match="0 <= answered <= charged"):
    L.restore_ledger({**record, "ledger_num_answered": np.int64(7)})


def test_after_a_refusal_the_rest_of_the_batch_is_refused_recorded_repeats_too():
  """The answered set is a prefix of the batch: once a chunk refuses a query, a later chunk
  of the batch is not processed, not even the repeats that its record would answer free."""
  votes = _votes(np.random.default_rng(21), 2 * CHUNK, 40)
  kw = dict(consistent=True, data_dependent=False, conversion="classic")
  first = _make("gnmax", epsilon_max=float("inf"), **kw)
  first.answer(votes[:5], query_ids=np.arange(5))
  a = _make("gnmax", epsilon_max=float(first.epsilon), **kw)
  assert np.all(a.answer(votes[:5], query_ids=np.arange(5)).status == ANSWERED)
  ids = np.concatenate([np.arange(100, 100 + CHUNK), np.arange(5), np.arange(200, 211)])
  out = a.answer(votes, query_ids=ids)   # chunk 1: new ids over budget; chunk 2: repeats
  np.testing.assert_array_equal(out.status, [REFUSED] * (2 * CHUNK))
  assert not out.repeated.any() and np.all(out.labels == -1) and a.num_charged == 5


def test_a_partly_refused_chunk_records_the_cost_of_its_answers_only():
  """The state keeps the cumulative cost at the last processed query: 5 GNMax answers at
  σ = 20 cost 5·λ/σ² (Proposition 8 of 2018), not the refused queries' too, and the record
  restores (its ε is its cost's)."""
  votes = _votes(np.random.default_rng(22), CHUNK, 40)
  kw = dict(data_dependent=False, conversion="classic")
  first = _make("gnmax", epsilon_max=float("inf"), **kw)
  first.answer(votes[:5])
  a = _make("gnmax", epsilon_max=float(first.epsilon), **kw)
  out = a.answer(votes)
  np.testing.assert_array_equal(out.status, [ANSWERED] * 5 + [REFUSED] * (CHUNK - 5))
  np.testing.assert_allclose(np.asarray(a.state.cost), 5 * ORDERS / 20.0**2, rtol=1e-12)
  assert a.epsilon == first.epsilon and a.num_charged == 5
  assert float(L.restore_ledger(a.ledger_record()).epsilon) == a.epsilon


def test_an_older_record_is_refused_once_a_newer_one_is_resumed(monkeypatch):
  """In a fresh process (no generation spent yet), resuming generation 2 marks it newest:
  generation 1 of the same lineage, resumed after it, is refused before it can spend."""
  votes = _votes(np.random.default_rng(23), 4, 20)
  a = _make("gnmax", epsilon_max=float("inf"))
  a.answer(votes[:2])
  older = a.ledger_record()
  a.answer(votes[2:])
  newer = a.ledger_record()
  assert (int(older["ledger_generation"]), int(newer["ledger_generation"])) == (1, 2)
  monkeypatch.setattr("pate_jax.ledger._aggregator._NEWEST", {})
  resumed = _make("gnmax", epsilon_max=float("inf"), ledger=newer)
  with pytest.raises(L.StaleLedgerError, match="generation 1 of its ledger, but generation 2"):
    _make("gnmax", epsilon_max=float("inf"), ledger=older)
  assert resumed.generation == 2 and resumed.num_charged == 4


def test_two_aggregators_resumed_from_one_record_cannot_both_spend():
  """Both resume generation 1 (allowed: neither has spent); the first to spend makes the
  other's copy of the budget stale."""
  votes = _votes(np.random.default_rng(24), 4, 20)
  a = _make("gnmax", epsilon_max=float("inf"))
  a.answer(votes[:2])
  record = a.ledger_record()
  x = _make("gnmax", epsilon_max=float("inf"), ledger=record)
  y = _make("gnmax", epsilon_max=float("inf"), ledger=record)
  x.answer(votes[2:])
  with pytest.raises(L.StaleLedgerError, match="another aggregator has spent"):
    y.answer(votes[2:])
  assert (x.num_charged, y.num_charged, y.generation) == (4, 2, 1)
