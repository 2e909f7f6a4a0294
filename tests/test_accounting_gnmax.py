"""GNMax / Confident-GNMax data-dependent RDP: an independent mpmath reference of
Theorem 6 + Proposition 10 (Papernot et al. 2018), dp_accounting as oracle,
properties and gradients."""

from __future__ import annotations

import math

import dp_accounting
import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant
from jax.test_util import check_grads

from pate_jax import accounting as acc
from pate_jax.accounting import _numerics

ORDERS = np.array([1.5, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0, 32.0, 64.0, 128.0])


@pytest.fixture(autouse=True)
def _x64():
  with jax.enable_x64(True):
    yield


def _votes() -> np.ndarray:
  """[32, 10] histograms of 250 teachers: random concentrations plus edge cases."""
  rng = np.random.default_rng(1)
  rows = [rng.multinomial(250, rng.dirichlet(np.full(10, a)))
          for a in np.geomspace(0.01, 3.0, 26)]
  special = np.zeros((6, 10), np.int64)
  special[0, 0] = 250                      # unanimous
  special[1, [0, 1]] = [125, 125]          # tie
  special[2, [2, 3, 4]] = [240, 5, 5]
  special[3, :] = 25                       # uniform
  special[4, [0, 9]] = [249, 1]
  special[5, [6, 7]] = [180, 70]
  return np.concatenate([special, np.stack(rows)]).astype(np.int32)


VOTES = _votes()
UNANIMOUS = 0


# ------------------------------------------------------------------ independent reference
def ref_log_q(counts, sigma):
  mp.mp.dps = 40
  c = [mp.mpf(int(x)) for x in counts]
  top = int(np.argmax(counts))
  # Φ̄(Δ/(√2σ)) = erfc(Δ/(2σ))/2.
  q = mp.fsum(mp.erfc((c[top] - c[j]) / (2 * mp.mpf(sigma))) / 2
              for j in range(len(c)) if j != top)
  return min(mp.log(q), mp.log(1 - mp.mpf(1) / len(c)))


def ref_rdp_from_log_q(log_q, sigma, order):
  """Theorem 6 in its original form (A, B, q) with Proposition 10's μ1, μ2."""
  # Enough digits that 1 - q and friends are exact even for tiny q.
  mp.mp.dps = 40 + (int(-log_q / math.log(10)) if mp.isfinite(log_q) else 0)
  log_q = mp.mpf(log_q)
  sigma, lam = mp.mpf(sigma), mp.mpf(order)
  data_independent = lam / sigma**2
  if log_q == -mp.inf:
    return 0.0
  mu2 = sigma * mp.sqrt(-log_q)
  mu1 = mu2 + 1
  eps1, eps2 = mu1 / sigma**2, mu2 / sigma**2
  if not (mu1 > lam and mu2 > 1 and -log_q > eps2):
    return float(data_independent)
  if log_q > (mu2 - 1) * eps2 - mu2 * (mp.log(mu1 / (mu1 - 1)) + mp.log(mu2 / (mu2 - 1))):
    return float(data_independent)
  q = mp.exp(log_q)
  a = (1 - q) / (1 - (q * mp.exp(eps2))**((mu2 - 1) / mu2))
  b = mp.exp(eps1) / q**(1 / (mu1 - 1))
  dependent = mp.log((1 - q) * a**(lam - 1) + q * b**(lam - 1)) / (lam - 1)
  return float(min(dependent, data_independent))


def ref_gnmax_rdp(counts, sigma, orders):
  log_q = ref_log_q(counts, sigma)
  return np.array([ref_rdp_from_log_q(log_q, sigma, o) for o in orders])


def ref_confident(counts, threshold, sigma_threshold, sigma, orders):
  mp.mp.dps = 40
  pr = mp.erfc((threshold - int(np.max(counts))) / (mp.sqrt(2) * sigma_threshold)) / 2
  log_q = min(mp.log(pr), mp.log(1 - pr))
  thr = np.array([ref_rdp_from_log_q(log_q, math.sqrt(2) * sigma_threshold, o) for o in orders])
  return thr + float(pr) * ref_gnmax_rdp(counts, sigma, orders)


# ------------------------------------------------------------------ tests
@pytest.mark.parametrize("sigma", [5.0, 20.0, 60.0])
def test_gnmax_rdp_matches_mpmath_reference(sigma):
  got = np.asarray(acc.gnmax_rdp(VOTES, sigma, ORDERS))
  assert got.shape == (VOTES.shape[0], ORDERS.size) and got.dtype == np.float64
  ref = np.stack([ref_gnmax_rdp(row, sigma, ORDERS) for row in VOTES])
  np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-300)
  log_q = np.asarray(acc.gnmax_log_q(VOTES, sigma))
  np.testing.assert_allclose(log_q, [float(ref_log_q(r, sigma)) for r in VOTES], rtol=1e-12)


def test_erfcx_series_coefficients_and_accuracy():
  # Recompute the Chebyshev coefficients of h(s) = (x + K) erfcx(x), s = (x - K)/(x + K).
  mp.mp.dps = 40
  k, n = mp.mpf(_numerics.ERFCX_K), 64
  h = []
  for i in range(n):
    s = mp.cos(mp.pi * (i + mp.mpf(1) / 2) / n)
    x = k * (1 + s) / (1 - s)
    h.append((x + k) * mp.exp(x * x) * mp.erfc(x))
  coef = [2 * mp.fsum(h[i] * mp.cos(mp.pi * j * (i + mp.mpf(1) / 2) / n) for i in range(n)) / n
          for j in range(len(_numerics.ERFCX_CHEBYSHEV))]
  np.testing.assert_allclose(_numerics.ERFCX_CHEBYSHEV, [float(c) for c in coef], rtol=0,
                             atol=1e-18)
  x = np.concatenate([np.linspace(0.0, 30.0, 61), np.geomspace(30.0, 1e12, 12)])
  ref = [float(mp.exp(mp.mpf(v)**2) * mp.erfc(mp.mpf(v))) for v in x]
  np.testing.assert_allclose(_numerics.erfcx(jnp.asarray(x)), ref, rtol=2e-15)


def test_the_data_dependent_bound_is_exercised():
  # Guard against a vacuous reference comparison: at σ = 20 some entries are strictly
  # below λ/σ² and some equal it.
  got = np.asarray(acc.gnmax_rdp(VOTES, 20.0, ORDERS))
  di = ORDERS / 400.0
  assert np.any(got < 0.5 * di) and np.any(got == di)


def test_data_independent_equals_dp_accounting_gaussian_event():
  for sigma in (0.5, 4.0, 40.0):  # noqa: B007
    ours = np.asarray(acc.gnmax_rdp(VOTES, sigma, ORDERS, data_dependent=False))
    accountant = rdp_privacy_accountant.RdpAccountant(ORDERS)
    accountant.compose(dp_accounting.GaussianDpEvent(noise_multiplier=sigma / math.sqrt(2)))
    np.testing.assert_allclose(ours, np.broadcast_to(accountant.rdp, ours.shape), rtol=1e-13)
    np.testing.assert_allclose(ours[0], ORDERS / sigma**2, rtol=1e-15)
    # Composing all queries and converting agrees with dp_accounting's own ε.
    accountant = rdp_privacy_accountant.RdpAccountant(ORDERS)
    accountant.compose(dp_accounting.SelfComposedDpEvent(
        dp_accounting.GaussianDpEvent(noise_multiplier=sigma / math.sqrt(2)), VOTES.shape[0]))
    eps, _ = acc.rdp_to_epsilon(ours.sum(0), ORDERS, 1e-5)
    assert float(eps) == pytest.approx(accountant.get_epsilon(1e-5), rel=1e-10)


def test_confident_gnmax_matches_reference():
  for threshold, sigma_threshold, sigma in ((200.0, 50.0, 20.0), (150.0, 30.0, 10.0)):
    got = np.asarray(acc.confident_gnmax_rdp(VOTES, threshold, sigma_threshold, sigma, ORDERS))
    ref = np.stack([ref_confident(r, threshold, sigma_threshold, sigma, ORDERS) for r in VOTES])
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-300)
  # Pieces: Pr[answered] and the threshold cost.
  log_pr = np.asarray(acc.confident_log_pr_answered(VOTES, 200.0, 50.0))
  np.testing.assert_allclose(
      np.exp(log_pr), [0.5 * math.erfc((200 - r.max()) / (50 * math.sqrt(2))) for r in VOTES],
      rtol=1e-12)
  thr = np.asarray(acc.confident_threshold_rdp(VOTES, 200.0, 50.0, ORDERS))
  assert np.all(thr <= ORDERS / (2 * 50.0**2) * (1 + 1e-12))


def test_log_q_minus_infinity_costs_nothing():
  out = np.asarray(acc.gaussian_rdp_from_log_q(np.array([-np.inf, -50.0, 0.0]), 10.0, ORDERS))
  assert np.all(out[0] == 0.0)
  np.testing.assert_allclose(out[1], [ref_rdp_from_log_q(-50.0, 10.0, o) for o in ORDERS],
                             rtol=1e-9)
  np.testing.assert_allclose(out[2], ORDERS / 100.0)


def test_dependent_never_exceeds_independent_and_unanimity_is_nearly_free():
  for sigma in (1.0, 10.0, 40.0, 200.0):
    dd = np.asarray(acc.gnmax_rdp(VOTES, sigma, ORDERS))
    assert np.all(dd <= ORDERS / sigma**2 * (1 + 1e-12)) and np.all(dd >= 0)
  # Unanimous: near zero for every order below μ1 = σ √(-log q) + 1 (Proposition 10).
  unanimous = np.asarray(acc.gnmax_rdp(VOTES, 20.0, ORDERS))[UNANIMOUS]
  mu1 = 20.0 * math.sqrt(-float(acc.gnmax_log_q(VOTES, 20.0)[UNANIMOUS])) + 1
  low = ORDERS < mu1 / 2
  assert low.sum() >= 7
  assert np.all(unanimous[low] < 1e-8 * ORDERS[low] / 400.0)
  # Confident-GNMax on a unanimous vote far above the threshold: both parts nearly free.
  conf = np.asarray(acc.confident_gnmax_rdp(VOTES, 150.0, 15.0, 20.0, ORDERS))[UNANIMOUS]
  assert np.all(conf[low] < 1e-3 * (ORDERS[low] / (2 * 15.0**2) + ORDERS[low] / 400.0))


def test_vmap_over_sigma_equals_loop():
  sigmas = jnp.array([3.0, 10.0, 25.0, 80.0])
  batched = jax.vmap(lambda s: acc.gnmax_rdp(VOTES, s, ORDERS))(sigmas)
  looped = np.stack([np.asarray(acc.gnmax_rdp(VOTES, float(s), ORDERS)) for s in sigmas])
  np.testing.assert_allclose(batched, looped, rtol=1e-11)


@jax.jit
def composed(votes, sigma_threshold, sigma, delta):
  """Total RDP of GNMax and of Confident-GNMax (threshold 0.8 T) and their ε: [2K + 2]."""
  threshold = 0.8 * votes[0].sum()
  rdp_gn = acc.gnmax_rdp(votes, sigma, ORDERS).sum(axis=0)
  rdp_conf = acc.confident_gnmax_rdp(votes, threshold, sigma_threshold, sigma, ORDERS).sum(0)
  eps = jnp.stack([acc.rdp_to_epsilon(rdp_gn, ORDERS, delta)[0],
                   acc.rdp_to_epsilon(rdp_conf, ORDERS, delta)[0]])
  return jnp.concatenate([rdp_gn, rdp_conf, eps])


@pytest.mark.slow
def test_gradients_match_finite_differences():
  # Votes as reals (traced under jit: no integer check); a jitter breaks the ties.
  votes = VOTES + np.random.default_rng(0).uniform(0.1, 0.4, VOTES.shape)
  out = np.asarray(composed(votes, 40.0, 15.0, 1e-5))
  # The data-dependent bound is what is being differentiated at the low orders.
  assert np.all(out[:5] < 0.5 * VOTES.shape[0] * ORDERS[:5] / 225.0)
  check_grads(lambda v, st, s: composed(v, st, s, 1e-5), (votes, 40.0, 15.0), order=1,
              modes=("rev",), eps=1e-5)


@pytest.mark.slow
def test_extreme_gaps_noise_and_delta_stay_finite():
  """Gaps up to 1e5, σ = σ_T from 1e-3 to 1e5, δ down to 1e-12: finite values and
  finite gradients (same shapes as VOTES, so the compiled programs are reused)."""
  extreme = np.zeros(VOTES.shape, np.float64)
  extreme[:, 0] = 100000                               # gap 1e5 to every other class
  extreme[1:6] = 0
  extreme[1, :2] = [50001, 49999]                      # gap 2 at large counts
  extreme[2, :] = 10000                                # ten-way tie
  extreme[3, :2] = [99999, 1]
  extreme[4, [1, 3]] = [60000, 40000]
  extreme[5, :3] = [90000, 9000, 1000]
  assert np.all(extreme.sum(1) == 100000)
  ct = np.zeros(2 * ORDERS.size + 2)
  ct[-2:] = 1.0  # d(ε_GNMax + ε_Confident)
  for noise in (1e-3, 1e-1, 1.0, 30.0, 1e3, 1e5):
    for delta in (1e-5, 1e-12):
      # The same vjp path as check_grads above, so its compiled programs are reused.
      out, vjp = jax.vjp(lambda v, st, s: composed(v, st, s, delta), extreme, noise, noise)
      assert np.all(np.isfinite(out)) and np.all(out >= 0), (noise, delta)
      for g in vjp(jnp.asarray(ct)):
        assert np.all(np.isfinite(np.asarray(g))), (noise, delta)
