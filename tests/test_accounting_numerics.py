"""Min/max reductions of the accountants: values, one-hot gradients, and no gradient
through JAX's ``reduce_min``/``reduce_max`` JVP (which gives NaN on GPU, see
``pate_jax/accounting/_numerics.py``)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src.interpreters import ad
from jax._src.lax import lax as lax_internal

from pate_jax import accounting as acc
from pate_jax.accounting import _numerics as nm

ORDERS = np.array([1.5, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0, 32.0, 64.0, 128.0])
MOMENTS = np.arange(1.0, 9.0)


@pytest.fixture(autouse=True)
def _x64():
  with jax.enable_x64(True):
    yield


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_min_max_helpers_match_jnp_values_and_indices(axis, keepdims):
  x = np.array([[3.0, -1.0, -1.0, np.inf], [np.inf, np.inf, np.inf, np.inf],
                [2.0, 5.0, -np.inf, 0.0]])
  for helper, ref, arg in ((nm.min_and_argmin, jnp.min, jnp.argmin),
                           (nm.max_and_argmax, jnp.max, jnp.argmax)):
    value, idx = helper(jnp.asarray(x), axis=axis, keepdims=keepdims)
    np.testing.assert_array_equal(value, ref(x, axis=axis, keepdims=keepdims))
    np.testing.assert_array_equal(idx, arg(x, axis=axis, keepdims=keepdims))
  # NaN is the minimum and the maximum, as in jnp.min / jnp.max.
  value, idx = nm.min_and_argmin(jnp.array([1.0, np.nan, 0.0]))
  assert np.isnan(float(value)) and int(idx) == 1


def test_gradient_is_the_one_hot_of_the_first_extremum():
  x = jnp.array([[2.0, 0.5, 0.5, 1.0], [4.0, 4.0, 1.0, 4.0]])
  g_min = jax.grad(lambda x: nm.min_and_argmin(x, axis=-1)[0].sum())(x)
  g_max = jax.grad(lambda x: nm.max_and_argmax(x, axis=-1)[0].sum())(x)
  np.testing.assert_array_equal(g_min, [[0, 1, 0, 0], [0, 0, 1, 0]])
  np.testing.assert_array_equal(g_max, [[1, 0, 0, 0], [1, 0, 0, 0]])
  # jnp.min splits ties evenly (equality test + division by the count of matches).
  np.testing.assert_array_equal(jax.grad(lambda x: jnp.min(x[0]))(x)[0], [0, 0.5, 0.5, 0])


@pytest.fixture
def chooser_jvp_gives_nan():
  """``reduce_min``/``reduce_max`` differentiate as they do on GPU when XLA recomputes the
  operand in another fusion and no entry equals the returned minimum: ``ct/0 * 0 = NaN``."""
  prims = (lax_internal.reduce_min_p, lax_internal.reduce_max_p)
  saved = {p: ad.primitive_jvps[p] for p in prims}

  def nan_rule(g, ans, operand, *, axes, **params):
    del ans, operand, params  # e.g. out_sharding (newer JAX)
    return jax.lax.reduce_sum(g * jnp.asarray(np.nan, g.dtype), axes)

  jax.clear_caches()  # programs traced with the real rule must not be reused
  for p in prims:
    ad.defjvp2(p, nan_rule)
  try:
    yield
  finally:
    ad.primitive_jvps.update(saved)
    jax.clear_caches()


def _finite(tree) -> bool:
  return all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree_util.tree_leaves(tree))


def _lnmax(v, gamma):
  alpha = acc.lnmax_log_moments(v, gamma, MOMENTS).sum(0)
  eps_dd = acc.lnmax_moments_epsilon(v, gamma, 1e-5)[0]
  eps_di = acc.lnmax_moments_epsilon(v, gamma, 1e-5, data_dependent=False)[0]
  eps_m = acc.moments_to_epsilon(alpha, MOMENTS, 1e-5)[0]
  return alpha.sum() + eps_dd + eps_di + eps_m + acc.lnmax_log_q(v, gamma).sum()


def _gnmax(v, sigma_threshold, sigma):
  rdp_gn = acc.gnmax_rdp(v, sigma, ORDERS).sum(0)
  rdp_conf = acc.confident_gnmax_rdp(v, 200.0, sigma_threshold, sigma, ORDERS).sum(0)
  rdp_thr = acc.confident_threshold_rdp(v, 200.0, sigma_threshold, ORDERS).sum(0)
  return (acc.rdp_to_epsilon(rdp_gn, ORDERS, 1e-5)[0]
          + acc.rdp_to_epsilon(rdp_conf, ORDERS, 1e-5, conversion="classic")[0]
          + rdp_thr.sum() + acc.confident_log_pr_answered(v, 200.0, sigma_threshold).sum()
          + acc.gnmax_log_q(v, sigma).sum())


@pytest.mark.slow
@pytest.mark.parametrize("fn,args", [(_lnmax, (0.05,)), (_gnmax, (150.0, 40.0))],
                         ids=["lnmax", "gnmax_confident_conversion"])
def test_accountant_gradients_never_use_the_min_max_reduction_jvp(chooser_jvp_gives_nan, fn,
                                                                 args):
  # The fixture does poison the reductions...
  assert not _finite(jax.grad(lambda x: jnp.min(x))(jnp.arange(3.0)))
  # ...and no gradient of the accountants goes through one.
  rng = np.random.default_rng(0)
  votes = rng.multinomial(250, rng.dirichlet(np.full(10, 0.3), size=16)) + rng.uniform(
      0.1, 0.4, (16, 10))
  argnums = tuple(range(1 + len(args)))
  assert _finite(jax.jit(jax.grad(fn, argnums=argnums))(votes, *args))


def test_log1mexp_keeps_relative_precision_at_both_ends():
  x = np.array([-1e-300, -1e-20, -1e-10, -1e-5, -0.5, -math.log(2.0), -1.0, -30.0, -700.0])
  with jax.enable_x64(True):
    got = np.asarray(nm.log1mexp(jnp.asarray(x)))
  # Reference (Mächler 2012): log(-expm1(x)) near 0, log1p(-exp(x)) far from it; numpy's
  # expm1/log1p are accurate to ~1 ulp, and both forms are exact maths.
  with np.errstate(divide="ignore"):  # np.where evaluates both forms: log1p(-1) near 0
    want = np.where(x > -1.0, np.log(-np.expm1(x)), np.log1p(-np.exp(x)))
  np.testing.assert_allclose(got, want, rtol=1e-13)


def test_the_improved_conversion_is_floored_at_zero():
  """Balle et al.'s ε = rdp + log1p(-1/λ) - (log δ + log λ)/(λ - 1) (numpy) is negative for
  a tiny RDP and a large δ; rdp_to_epsilon returns max(0, min_λ ε) and its argmin order."""
  for rdp, delta in ((np.zeros_like(ORDERS), 0.5), (1e-4 * ORDERS, 0.5), (1e-4 * ORDERS, 1e-5)):
    raw = rdp + np.log1p(-1.0 / ORDERS) - (np.log(delta) + np.log(ORDERS)) / (ORDERS - 1.0)
    eps, order = acc.rdp_to_epsilon(rdp, ORDERS, delta)
    np.testing.assert_allclose(float(eps), max(raw.min(), 0.0), rtol=1e-12, atol=0)
    assert float(order) == ORDERS[np.argmin(raw)]
    assert (raw.min() < 0) == (delta == 0.5)


def test_log1mexp_is_accurate_to_a_few_ulp_between_minus_log2_and_zero():
  """log(1 - e^x) against mpmath (50 digits) for x in (-log 2, 0), where log1p(-e^x) would lose
  relative precision ~ eps/|x| (Mächler 2012): the switch to log(-expm1(x)) is at -log 2."""
  import mpmath  # pylint: disable=g-import-not-at-top
  x = -np.geomspace(1e-3, 0.6, 25)
  with mpmath.workdps(50):
    want = np.array([float(mpmath.log(1 - mpmath.exp(mpmath.mpf(float(v))))) for v in x])
  got = np.asarray(nm.log1mexp(jnp.asarray(x)))
  np.testing.assert_allclose(got, want, rtol=2e-15, atol=0)
