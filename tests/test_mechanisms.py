"""Tests for pate_jax.mechanisms (the registry) and the accounting.Accountant pytree.

That every registered cost bounds the exact Rényi divergence of its answers is tested
in test_ledger.py (test_costs_bound_the_exact_renyi_divergence)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

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


@pytest.mark.parametrize("name", ["lnmax", "gnmax", "confident_gnmax"])
def test_answer_is_the_public_aggregator(name):
  m = mechanisms.get(name)
  ids = np.arange(4, dtype=np.uint32)
  labels, answered = jax.jit(m.answer)(KEY, VOTES, ids, PARAMS[name])
  public = getattr(agg, name)(KEY, VOTES, *PARAMS[name].values())
  want_labels, want_answered = public if name == "confident_gnmax" else (public, True)
  np.testing.assert_array_equal(labels, want_labels)
  np.testing.assert_array_equal(answered, np.broadcast_to(want_answered, (4,)))


def test_costs_match_the_accountants():
  # LNMax and GNMax pay their accountant's per-query cost whatever the outcome;
  # Confident-GNMax pays the threshold check, plus GNMax where answered.
  answered = np.array([True, False, True, False])
  for dd in (True, False):
    np.testing.assert_array_equal(
        mechanisms.LNMAX.cost(VOTES, answered, PARAMS["lnmax"], np.arange(1.0, 5.0), dd),
        acc.lnmax_log_moments(VOTES, 0.5, np.arange(1.0, 5.0), data_dependent=dd))
    np.testing.assert_array_equal(
        mechanisms.GNMAX.cost(VOTES, answered, PARAMS["gnmax"], ORDERS, dd),
        acc.gnmax_rdp(VOTES, 2.0, ORDERS, data_dependent=dd))
  p = PARAMS["confident_gnmax"]
  cost = np.asarray(mechanisms.CONFIDENT_GNMAX.cost(VOTES, answered, p, ORDERS, True))
  thr = np.asarray(acc.confident_threshold_rdp(VOTES, 6.0, 2.0, ORDERS))
  gn = np.asarray(acc.gnmax_rdp(VOTES, 2.0, ORDERS))
  np.testing.assert_allclose(cost, thr + answered[:, None] * gn, rtol=1e-15)
  # Data-independent: λ/(2σ_T²) for the check, λ/σ² for an answer.
  cost = np.asarray(mechanisms.CONFIDENT_GNMAX.cost(VOTES, answered, p, ORDERS, False))
  np.testing.assert_allclose(cost, ORDERS / 8.0 + answered[:, None] * ORDERS / 4.0, rtol=1e-15)


def test_calibration_charges_what_the_mechanism_charges():
  # The accounting layer calibrates without importing this registry: its table of the
  # mechanisms with one noise scale must charge what the registered mechanisms charge.
  from pate_jax.accounting import _calibrate  # pylint: disable=import-outside-toplevel
  answered = np.ones(VOTES.shape[0], bool)
  for name, noise in (("gnmax", 2.0), ("lnmax", 2.0)):  # σ = 2; Laplace scale 2: γ = 0.5
    m, charged = mechanisms.get(name), _calibrate.NOISE_ACCOUNTINGS[name]
    assert charged.accountant == m.accountant
    orders = ORDERS if m.accountant == "rdp" else np.arange(1.0, 5.0)
    for dd in (True, False):
      np.testing.assert_array_equal(charged.cost(VOTES, noise, orders, dd),
                                    m.cost(VOTES, answered, PARAMS[name], orders, dd))
  assert set(_calibrate.NOISE_ACCOUNTINGS) <= set(mechanisms.names())


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
