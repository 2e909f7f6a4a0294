"""Tests for pate_jax.mechanisms (the registry) and the accounting.Accountant pytree.

That every registered cost bounds the exact Rényi divergence of its answers is tested
in test_ledger.py (test_costs_bound_the_exact_renyi_divergence)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from pate_jax import accounting as acc
from pate_jax import aggregation as agg
from pate_jax import ledger as L
from pate_jax import mechanisms

KEY = jax.random.key(0)
ORDERS = np.array([1.5, 2.0, 3.0, 5.0, 8.0, 16.0, 32.0, 64.0])
VOTES = np.array([[8, 1, 1], [5, 3, 2], [4, 4, 2], [10, 0, 0]], np.int32)
PARAMS = {"lnmax": {"gamma": 0.5}, "gnmax": {"sigma": 2.0},
          "confident_gnmax": {"threshold": 6.0, "sigma_threshold": 2.0, "sigma": 2.0}}


def test_registry_names_and_lookup():
  assert mechanisms.names()[:3] == ("lnmax", "gnmax", "confident_gnmax")
  assert mechanisms.get("gnmax") is mechanisms.GNMAX
  assert mechanisms.CONFIDENT_GNMAX.param_names == ("threshold", "sigma_threshold", "sigma")
  with pytest.raises(ValueError, match=r"mechanism must be one of .*; got 'laplace'"):
    mechanisms.get("laplace")
  with pytest.raises(ValueError, match="already registered"):
    mechanisms.register(mechanisms.GNMAX)


def test_objects_are_accepted_and_names_looked_up_once():
  assert mechanisms.get(mechanisms.GNMAX) is mechanisms.GNMAX
  stray = mechanisms.GNMAX._replace(name="stray")
  with pytest.raises(ValueError, match="mechanism must be a registered mechanism"):
    mechanisms.get(stray)
  with pytest.raises(ValueError, match="mechanism.noise_param must be one of"):
    mechanisms.register(stray._replace(noise_param="gamma"))
  assert "stray" not in mechanisms.names()


def test_noise_scale_convention():
  # s is the scale, in votes, of the noise on each count: Laplace b = 1/γ, Gaussian σ.
  assert mechanisms.params_at(mechanisms.LNMAX, 20.0, 250) == {"gamma": 0.05}
  assert mechanisms.params_at(mechanisms.GNMAX, 40.0, 250) == {"sigma": 40.0}
  # 2018 MNIST: T = 200 and σ_T = 150 of 250 teachers are fractions 0.8 and 0.6.
  assert mechanisms.params_at(mechanisms.CONFIDENT_GNMAX, 40.0, 250.0) == {
      "threshold": 200.0, "sigma_threshold": 150.0, "sigma": 40.0}
  for m in (mechanisms.LNMAX, mechanisms.GNMAX, mechanisms.CONFIDENT_GNMAX):
    assert mechanisms.noise_scale(m, mechanisms.params_at(m, 8.0, 10.0)) == pytest.approx(8.0)
  assert mechanisms.describe(mechanisms.LNMAX, {"gamma": 0.05}) == "γ=0.05"
  assert mechanisms.describe(mechanisms.CONFIDENT_GNMAX, PARAMS["confident_gnmax"]) == (
      "T=6, σ_T=2, σ=2")


def _difference_cdf(m, gap, scale):
  """P(the top class of a two-class row with this vote gap wins): the noise difference of
  two Laplace(b) or two N(0, σ²) variables exceeds -gap."""
  if m is mechanisms.LNMAX:  # Difference of two Laplace(b): P(D < d) = 1 - (1 + d/2b) e^{-d/b} / 2.
    return 1.0 - 0.5 * (1.0 + gap / (2 * scale)) * np.exp(-gap / scale)
  return stats.norm.cdf(gap / (scale * np.sqrt(2.0)))


@pytest.mark.parametrize("m", [mechanisms.LNMAX, mechanisms.GNMAX])
def test_answers_follow_the_noise_distribution(m):
  # 20,000 queries with the same two-class row, one noise draw each (per-query keys): the
  # fraction answering the top class matches the closed form within 5 standard errors.
  n, scale = 20_000, 3.0
  for gap in (0, 2, 6):
    votes = np.tile(np.array([[10 + gap, 10]], np.int32), (n, 1))
    labels, answered = agg.answer(m, KEY, votes, mechanisms.params_at(m, scale, 20 + gap))
    p = _difference_cdf(m, gap, scale)
    assert bool(np.all(answered))
    assert abs(np.mean(np.asarray(labels) == 0) - p) < 5 * np.sqrt(p * (1 - p) / n) + 1e-9


def test_an_answer_depends_only_on_key_id_and_row():
  ids = np.array([7, 3, 11, 5], np.uint32)
  perm = np.array([2, 0, 3, 1])
  for name, params in PARAMS.items():
    labels, answered = agg.answer(name, KEY, VOTES, params, ids)
    labels_p, answered_p = agg.answer(name, KEY, VOTES[perm], params, ids[perm])
    np.testing.assert_array_equal(np.asarray(labels)[perm], labels_p)
    np.testing.assert_array_equal(np.asarray(answered)[perm], answered_p)
  # Confident-GNMax: a vanishing threshold noise answers exactly the rows whose top count
  # reaches the threshold; unanswered rows carry NOT_ANSWERED.
  labels, answered = agg.answer(mechanisms.CONFIDENT_GNMAX, KEY, VOTES,
                                {"threshold": 6.0, "sigma_threshold": 1e-6, "sigma": 1e-6})
  np.testing.assert_array_equal(answered, VOTES.max(1) >= 6)
  np.testing.assert_array_equal(labels, np.where(VOTES.max(1) >= 6, VOTES.argmax(1),
                                                 mechanisms.NOT_ANSWERED))


def test_data_independent_costs_are_the_closed_forms():
  answered = np.array([True, False, True, False])
  moments = np.arange(1.0, 5.0)
  # LNMax (2γ-DP answers): α(l) ≤ min(2γ² l(l+1), 2γ l) (2017, Theorem 2 and pure DP).
  gamma = PARAMS["lnmax"]["gamma"]
  want = np.minimum(2 * gamma**2 * moments * (moments + 1), 2 * gamma * moments)
  np.testing.assert_allclose(
      mechanisms.LNMAX.cost(VOTES, answered, PARAMS["lnmax"], moments, False),
      np.broadcast_to(want, (4, 4)), rtol=1e-12)
  # GNMax: λ/σ² per query, answered or not (it always answers).
  np.testing.assert_allclose(mechanisms.GNMAX.cost(VOTES, answered, PARAMS["gnmax"], ORDERS,
                                                   False),
                             np.broadcast_to(ORDERS / 4.0, (4, len(ORDERS))), rtol=1e-12)
  # Confident-GNMax: λ/(2σ_T²) for the check, plus λ/σ² where answered.
  cost = np.asarray(mechanisms.CONFIDENT_GNMAX.cost(VOTES, answered, PARAMS["confident_gnmax"],
                                                    ORDERS, False))
  np.testing.assert_allclose(cost, ORDERS / 8.0 + answered[:, None] * ORDERS / 4.0, rtol=1e-15)
  # The data-dependent costs never exceed them.
  for name, params in PARAMS.items():
    m = mechanisms.get(name)
    orders = moments if m.accountant == "moments" else ORDERS
    dd = np.asarray(m.cost(VOTES, answered, params, orders, True))
    di = np.asarray(m.cost(VOTES, answered, params, orders, False))
    assert np.all(dd <= di * (1 + 1e-12))


@pytest.mark.slow
def test_calibrated_noise_spends_the_target_under_the_mechanisms_own_cost():
  # The calibration reads the mechanism's cost and noise convention: at the noise scale it
  # returns (σ; LNMax's Laplace scale b = 1/γ), the mechanism's own accounting spends ε.
  for m in (mechanisms.GNMAX, mechanisms.LNMAX):
    for kw in ({"num_queries": 4}, {"votes": VOTES}):
      s = float(acc.calibrate_noise(1.5, 1e-5, mechanism=m, orders=ORDERS, **kw))
      votes = VOTES if "votes" in kw else np.zeros((4, 3), np.int32)
      empty = mechanisms.make_accountant(m, ORDERS if m.accountant == "rdp" else None)
      cost = m.cost(votes, np.ones(len(votes), bool), mechanisms.params_at(m, s, 10),
                    empty.orders, "votes" in kw)
      assert float(empty.compose(cost).epsilon(1e-5)[0]) == pytest.approx(1.5, rel=1e-6)


def test_check_params():
  assert mechanisms.check_params(mechanisms.GNMAX, {"sigma": 2}) == {"sigma": 2.0}
  with pytest.raises(ValueError, match=r"params of 'gnmax' must be exactly \('sigma',\)"):
    mechanisms.check_params(mechanisms.GNMAX, {"gamma": 2.0})
  with pytest.raises(ValueError, match="sigma_threshold must be > 0; got -1.0"):
    mechanisms.check_params(mechanisms.CONFIDENT_GNMAX,
                            {"threshold": 1.0, "sigma_threshold": -1.0, "sigma": 1.0})
  with pytest.raises(ValueError, match="threshold must be finite; got inf"):
    mechanisms.check_params(mechanisms.CONFIDENT_GNMAX,
                            {"threshold": np.inf, "sigma_threshold": 1.0, "sigma": 1.0})


# --- Accountant --------------------------------------------------------------------------


def test_accountant_composes_in_float64_outside_x64():
  # 10^6 costs of 1e-9 each: a float32 sum would lose most of them; the accountant's is exact
  # to float64 rounding even though 64-bit mode is off around it.
  costs = np.full((10**6, 2), 1e-9)
  with jax.enable_x64(False):
    a = acc.rdp_accountant([2.0, 4.0]).compose(costs)
    assert a.cost.dtype == jnp.float64
    np.testing.assert_allclose(np.asarray(a.cost), [1e-3, 1e-3], rtol=1e-12)
    eps, order = a.epsilon(1e-5)
  want = acc.rdp_to_epsilon(np.array([1e-3, 1e-3]), [2.0, 4.0], 1e-5)
  np.testing.assert_allclose([eps, order], want, rtol=1e-12)


def test_accountant_epsilon_by_kind_and_conversion():
  rdp = np.array([0.1, 0.2, 0.5])
  orders = np.array([2.0, 4.0, 8.0])
  for conversion in acc.CONVERSIONS:
    a = acc.make_accountant("rdp", orders, conversion, cost=rdp)
    np.testing.assert_array_equal(a.epsilon(1e-5),
                                  acc.rdp_to_epsilon(rdp, orders, 1e-5, conversion))
  m = acc.moments_accountant(3).compose(np.array([[0.1, 0.3, 0.9]]), mask=[True])
  np.testing.assert_array_equal(m.epsilon(1e-5),
                                acc.moments_to_epsilon([0.1, 0.3, 0.9], [1.0, 2.0, 3.0], 1e-5))
  # A masked row costs nothing.
  z = acc.moments_accountant(3).compose(np.ones((2, 3)), mask=[False, True])
  np.testing.assert_array_equal(np.asarray(z.cost), [1.0, 1.0, 1.0])


def test_accountant_is_a_pytree_with_static_kind():
  a = acc.rdp_accountant(ORDERS, "classic")
  leaves, treedef = jax.tree.flatten(a)
  assert len(leaves) == 2 and "classic" in str(treedef)
  with jax.enable_x64(True):
    step = jax.jit(lambda acc_, c: acc_.compose(c))
    b = step(step(a, np.ones(len(ORDERS))), np.ones(len(ORDERS)))
    size = step._cache_size()
    b = step(b, np.ones(len(ORDERS)))
    assert step._cache_size() == size  # A composed accountant does not retrace.
  assert b.kind == "rdp" and b.conversion == "classic"
  np.testing.assert_array_equal(np.asarray(b.cost), 3.0)
  assert float(dataclasses.replace(b, cost=np.zeros(len(ORDERS))).epsilon(1e-5)[0]) >= 0


@pytest.mark.parametrize("call, match", [
    (lambda: acc.make_accountant("pld", ORDERS), "kind"),
    (lambda: acc.make_accountant("rdp", [1.0, 2.0]), "orders"),
    (lambda: acc.make_accountant("rdp", ORDERS, "tight"), "conversion"),
    (lambda: acc.make_accountant("moments", [0.0, 1.0]), "moments"),
    (lambda: acc.make_accountant("rdp", [2.0], cost=[-1.0]), "cost"),
    (lambda: acc.rdp_accountant([2.0]).compose(np.ones(3)), "costs"),
    (lambda: acc.rdp_accountant([2.0]).epsilon(0.0), "delta"),
])
def test_bad_accountant_arguments(call, match):
  with pytest.raises(ValueError, match=match):
    call()


# --- Report (the aggregate experiment's accountants) -------------------------------------


def test_epsilon_report_uses_the_registry():
  answered = np.array([True, False, True, True])
  charged = np.array([True, True, True, False])
  rep = mechanisms.epsilon_report(mechanisms.CONFIDENT_GNMAX, PARAMS["confident_gnmax"], VOTES,
                                  answered, charged, delta=1e-5, orders=ORDERS)
  assert set(rep) == {f"rdp_data_{d}_{c}" for d in ("dependent", "independent")
                      for c in ("classic", "improved")}
  # Data-independent: 3 checks at λ/(2σ_T²), 2 answers at λ/σ².
  want = acc.rdp_to_epsilon(3 * ORDERS / 8.0 + 2 * ORDERS / 4.0, ORDERS, 1e-5, "classic")
  got = rep["rdp_data_independent_classic"]
  np.testing.assert_allclose([got["epsilon"], got["best_order"]], want, rtol=1e-12)
  rep = mechanisms.epsilon_report(mechanisms.LNMAX, PARAMS["lnmax"], VOTES, answered | charged,
                                  answered | charged, delta=1e-5)
  assert set(rep) == {"moments_data_dependent", "moments_data_independent",
                      "strong_composition"}
  want, moment = acc.lnmax_moments_epsilon(VOTES, 0.5, 1e-5)
  assert rep["moments_data_dependent"]["epsilon"] == pytest.approx(float(want), rel=1e-12)
  assert rep["moments_data_dependent"]["best_moment"] == int(moment)
  assert mechanisms.epsilon_report(mechanisms.GNMAX, PARAMS["gnmax"], VOTES, answered,
                                   np.zeros(4, bool), delta=1e-5) == {}


def test_epsilon_reports_of_20_and_21_queries_share_their_compiled_costs():
  # Rows are padded as in a ledger's cost check: 21 queries compile nothing new.
  from pate_jax._checks import _votes  # pylint: disable=g-import-not-at-top
  from pate_jax.accounting import _gnmax  # pylint: disable=g-import-not-at-top
  gen = np.random.default_rng(0)
  votes = np.stack([gen.multinomial(50, np.full(10, 0.1)) for _ in range(21)]).astype(np.int32)
  report = lambda n: mechanisms.epsilon_report(
      mechanisms.GNMAX, {"sigma": 4.0}, votes[:n], np.ones(n, bool), np.ones(n, bool),
      delta=1e-5)
  report(20)
  jitted = (_gnmax.gnmax_rdp_core, _votes._votes_flags)
  sizes = [f._cache_size() for f in jitted]  # pylint: disable=protected-access
  rep = report(21)
  assert [f._cache_size() for f in jitted] == sizes  # pylint: disable=protected-access
  # The padding rows are not composed: the costs of the 21 queries alone.
  for dd in (False, True):
    with jax.enable_x64(True):
      rdp = acc.gnmax_rdp(votes, 4.0, acc.DEFAULT_ORDERS, data_dependent=dd).sum(0)
    got = rep[f"rdp_data_{'dependent' if dd else 'independent'}_classic"]
    assert [got["epsilon"], got["best_order"]] == [
        float(x) for x in acc.rdp_to_epsilon(rdp, acc.DEFAULT_ORDERS, 1e-5, "classic")]


def test_ledger_state_splits_accountant_and_cache():
  state = L.init_ledger(np.zeros(len(ORDERS)), orders=ORDERS, delta=1e-5, mechanism="gnmax",
                        params={"sigma": 1.0}, epsilon_max=1.0, conversion="classic",
                        consistent=True, capacity=4)
  assert isinstance(state.accountant, acc.Accountant)
  assert state.accountant.conversion == "classic" and state.cache.ids.shape == (4,)
  assert state.cost is state.accountant.cost and state.size is state.cache.size
  with pytest.raises(ValueError, match="'lnmax' composes in a 'moments' accountant; got a ledger with a 'rdp'"):
    L.answer_batch(state, KEY, VOTES, np.arange(4), mechanism="lnmax", params={"gamma": 1.0},
                   orders=ORDERS, delta=1e-5, epsilon_max=1.0)
  with pytest.raises(ValueError, match="conversion must be the ledger's 'classic'"):
    L.answer_batch(state, KEY, VOTES, np.arange(4), mechanism="gnmax", params={"sigma": 1.0},
                   orders=ORDERS, delta=1e-5, epsilon_max=1.0, conversion="improved")
  with pytest.raises(ValueError, match="orders must be the ledger's"):
    L.answer_batch(state, KEY, VOTES, np.arange(4), mechanism="gnmax", params={"sigma": 1.0},
                   orders=ORDERS * 2, delta=1e-5, epsilon_max=1.0)
  with pytest.raises(ValueError, match="data_dependent must be a boolean; got 'False'"):
    L.answer_batch(state, KEY, VOTES, np.arange(4), mechanism="gnmax", params={"sigma": 1.0},
                   orders=ORDERS, delta=1e-5, epsilon_max=1.0, data_dependent="False")


# ----------------------------------------------------------------------------- the sampler


def test_answers_are_refused_outside_64_bit_mode():
  """Traced without 64-bit mode the noise would be float32 (2**23 values, none past 5.4σ):
  refused rather than drawn."""
  ids = jnp.arange(VOTES.shape[0], dtype=jnp.uint32)
  for m in mechanisms.REGISTRY.values():
    with pytest.raises(RuntimeError, match="float64 noise"):
      m.answer(KEY, jnp.asarray(VOTES), ids, PARAMS[m.name])
    with jax.enable_x64(True):
      labels, _ = m.answer(KEY, jnp.asarray(VOTES), ids, PARAMS[m.name])
    np.testing.assert_array_equal(labels, agg.answer(m, KEY, VOTES, PARAMS[m.name])[0])


def test_the_float64_samplers_cdf_is_within_the_charged_error():
  """JAX's float64 normal and Laplace samplers are ``√2 erf_inv(u)`` and ``sign(u)
  log1p(-|u|)`` of a uniform ``u`` of 52 random bits: checked on this backend against the
  samplers themselves, then ``|F(z(u)) - P[U <= u]|`` against mpmath at 200 bits on points
  across ``(-1, 1)`` and in both tails to ``1 - 2**-52``, below SAMPLER_CDF_ERROR."""
  mpmath = pytest.importorskip("mpmath")
  mpmath.mp.prec = 200
  with jax.enable_x64(True):
    lo = np.nextafter(-1.0, 0.0)
    u = jax.random.uniform(KEY, (64,), jnp.float64, lo, 1.0)
    np.testing.assert_allclose(jax.random.normal(KEY, (64,), jnp.float64),
                               np.sqrt(2.0) * jax.lax.erf_inv(u), rtol=1e-15)
    u = jax.random.uniform(KEY, (64,), jnp.float64, -1.0 + np.finfo(np.float64).epsneg, 1.0)
    np.testing.assert_allclose(jax.random.laplace(KEY, (64,), jnp.float64),
                               jnp.sign(u) * jnp.log1p(-jnp.abs(u)), rtol=1e-15)
    tails = 1.0 - 2.0 ** -np.arange(1, 53)
    points = np.concatenate([np.random.default_rng(0).uniform(-1, 1, 1500), tails, -tails,
                             np.linspace(0.40, 0.43, 100), -np.linspace(0.40, 0.43, 100)])
    normal = np.asarray(np.sqrt(2.0) * jax.lax.erf_inv(jnp.asarray(points)))
    laplace = np.asarray(jnp.sign(points) * jnp.log1p(-jnp.abs(jnp.asarray(points))))
  worst = {"normal": 0.0, "laplace": 0.0}
  for p, zn, zl in zip(points, normal, laplace):
    p = mpmath.mpf(float(p))
    worst["normal"] = max(worst["normal"], float(abs(mpmath.ncdf(zn) - (p + 1) / 2)))
    x = mpmath.mpf(float(zl))  # sign(u) log1p(-|u|) decreases in u: P[Z <= z(u)] = P[U >= u]
    cdf = mpmath.exp(x) / 2 if x < 0 else 1 - mpmath.exp(-x) / 2
    worst["laplace"] = max(worst["laplace"], float(abs(cdf - (1 - p) / 2)))
  assert max(worst.values()) < mechanisms.SAMPLER_CDF_ERROR, worst
  assert worst["normal"] > 0  # the check sees the rounding


def test_sampler_delta_counts_every_noise_value_drawn():
  def each(teachers, scale):  # a value's sampler error and its scores' rounding
    return mechanisms.SAMPLER_CDF_ERROR + 2.0**-52 * (teachers / scale + 38.0)

  gnmax = mechanisms.sampler_delta(mechanisms.GNMAX, {"sigma": 40.0}, 100, 10, 250, 2.0)
  assert gnmax == pytest.approx((1 + np.exp(2.0)) * 1000 * each(250, 40.0), rel=1e-12, abs=0)
  lnmax = mechanisms.sampler_delta(mechanisms.LNMAX, {"gamma": 0.05}, 100, 10, 250, 2.0)
  assert lnmax == pytest.approx((1 + np.exp(2.0)) * 1000 * each(250, 20.0), rel=1e-12, abs=0)
  # Confident-GNMax: the threshold check's value too, at the smaller of its two scales.
  cgn = {"threshold": 200.0, "sigma_threshold": 150.0, "sigma": 40.0}
  assert mechanisms.sampler_delta(mechanisms.CONFIDENT_GNMAX, cgn, 100, 10, 250,
                                  2.0) == pytest.approx(gnmax * 1.1, rel=1e-12, abs=0)
  assert mechanisms.sampler_delta(mechanisms.LNMAX, {"gamma": 0.05}, 0, 10, 250, 2.0) == 0.0
  # The main job's scale: far below its δ of 1e-5.
  assert mechanisms.sampler_delta(mechanisms.GNMAX, {"sigma": 40.0}, 1000, 10, 250,
                                  2.04) < 1e-8


def test_release_sampler_delta_counts_the_cell_edges_below_the_clip():
  """A release clipped to [0, upper] changes at upper / 2^-10 + 2 edges at most, each
  charged the sampler's CDF error and the product's rounding (2^-51)."""
  per_edge = mechanisms.SAMPLER_CDF_ERROR + 2.0**-51
  one = mechanisms.release_sampler_delta(1, 2.0, 2.0)
  assert one == pytest.approx((1 + np.exp(2.0)) * (2.0 * 1024 + 2) * per_edge, rel=1e-12, abs=0)
  assert mechanisms.release_sampler_delta(3, 2.0, 2.0) == pytest.approx(3 * one, rel=1e-12, abs=0)
  assert mechanisms.release_sampler_delta(0, 2.0, 2.0) == 0.0
  assert mechanisms.release_sampler_delta(1, np.inf, 2.0) == np.inf
  # At the main job's budget (ε_max 2.04 is its ε), a release adds about 2.6e-10.
  assert 2e-10 < mechanisms.release_sampler_delta(1, 2.04, 2.04) < 3e-10


def test_confident_gnmax_answers_a_noisy_max_equal_to_the_threshold():
  """Algorithm 1 of the 2018 paper answers iff max_j n_j + N(0, σ_T²) >= T: a noisy max
  exactly at T is answered (built from the same threshold draw the answer uses)."""
  votes = jnp.asarray([[7, 2, 1]])
  ids = jnp.asarray([3], jnp.uint32)
  with jax.enable_x64(True):
    k_threshold, _ = jax.random.split(mechanisms.query_keys(KEY, ids)[0])
    z = jax.random.normal(k_threshold, (), jnp.float64)
    sigma_t = jnp.asarray(2.5, jnp.float64)
    at = float(jnp.asarray(7.0, jnp.float64) + sigma_t * z)
    for threshold, want in ((at, True), (np.nextafter(at, np.inf), False)):
      params = {"threshold": threshold, "sigma_threshold": 2.5, "sigma": 1.0}
      _, answered = mechanisms.CONFIDENT_GNMAX.answer(KEY, votes, ids, params)
      assert bool(answered[0]) == want


def test_sampler_deltas_are_their_closed_forms_at_full_relative_precision():
  """δ terms near 1e-10 lie inside ``pytest.approx``'s default absolute slack of 1e-12: the
  closed forms ``(1 + e^ε) R (upper / 2^-10 + 2)(η + 2^-51)`` and ``(1 + e^ε) Q (C + extra)
  (η + 2^-52 (T/s + 38))`` are checked relative only, so one cell edge (1 in 2,050) or one
  noise value per query shows."""
  eta = mechanisms.SAMPLER_CDF_ERROR
  for releases, upper, eps in ((1, 2.0, 2.0), (3, 0.5, 1.0), (2, 1.0, 0.0)):
    want = (1 + np.exp(eps)) * releases * (upper * 1024 + 2) * (eta + 2.0**-51)
    assert mechanisms.release_sampler_delta(releases, upper, eps) == pytest.approx(
        want, rel=1e-12, abs=0)
  cgn = {"threshold": 200.0, "sigma_threshold": 30.0, "sigma": 40.0}
  want = (1 + np.exp(2.0)) * 100 * 11 * (eta + 2.0**-52 * (250 / 30.0 + 38.0))
  assert mechanisms.sampler_delta(mechanisms.CONFIDENT_GNMAX, cgn, 100, 10, 250,
                                  2.0) == pytest.approx(want, rel=1e-12, abs=0)
  want = (1 + np.exp(1.0)) * 7 * 3 * (eta + 2.0**-52 * (50 / 4.0 + 38.0))
  assert mechanisms.sampler_delta(mechanisms.LNMAX, {"gamma": 0.25}, 7, 3, 50,
                                  1.0) == pytest.approx(want, rel=1e-12, abs=0)


def test_query_keys_fold_in_each_id_word_in_order():
  """A ``[Q, W]`` id's key is ``fold_in(fold_in(key, w_0), w_1) …``, its words in order (a
  ``[Q]`` id is one word): two ids of the same words in another order get other keys."""
  key = jax.random.key(7)
  ids = np.array([[3, 11], [11, 3], [0, 5]], np.uint32)
  got = jax.random.key_data(mechanisms.query_keys(key, jnp.asarray(ids)))
  for g, (w0, w1) in zip(np.asarray(got), ids):
    want = jax.random.fold_in(jax.random.fold_in(key, w0), w1)
    np.testing.assert_array_equal(g, jax.random.key_data(want))
  one = jax.random.key_data(mechanisms.query_keys(key, jnp.asarray(ids[:, 0])))
  np.testing.assert_array_equal(one[0], jax.random.key_data(jax.random.fold_in(key, 3)))
  assert not np.array_equal(got[0], got[1])
