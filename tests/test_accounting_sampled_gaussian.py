"""Sampled Gaussian mechanism RDP (Mironov, Talwar, Zhang 2019): dp_accounting at integer
orders, direct numerical integration of the Rényi divergence at fractional orders."""

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
from scipy import integrate

from pate_jax import accounting as acc

INT_ORDERS = np.array([2.0, 3.0, 4.0, 5.0, 8.0, 10.0, 16.0, 32.0, 64.0, 128.0, 256.0])
FRAC_ORDERS = np.array([1.1, 1.5, 2.5, 3.7, 10.25, 31.5])


@pytest.fixture(autouse=True)
def _x64():
  with jax.enable_x64(True):
    yield


def renyi_by_quadrature(q, sigma, alpha, reverse=False):
  """D_α(μ || μ0) (or D_α(μ0 || μ)) for μ0 = N(0, σ²), μ = (1-q) μ0 + q N(1, σ²), by
  scipy.integrate.quad of the defining integral A = E_{μ0}[r^a], r = μ/μ0 =
  1 + q (e^{(2z-1)/(2σ²)} - 1), a = α (or 1 - α for the reverse direction, since
  E_μ[(μ0/μ)^α] = E_{μ0}[r^{1-α}]). Small A - 1 is integrated as such (no cancellation);
  large A as e^m ∫ e^{log w + a log r - m} (no overflow)."""
  a = 1 - alpha if reverse else alpha

  def log_terms(z):
    log_r = math.log1p(q * math.expm1((2 * z - 1) / (2 * sigma**2)))
    log_w = -z * z / (2 * sigma**2) - math.log(sigma * math.sqrt(2 * math.pi))
    return log_w, a * log_r

  z0 = sigma**2 * math.log(1 / q - 1) + 0.5
  lo, hi = -12 * sigma, 12 * sigma + alpha + max(z0, 0)
  points = sorted({0.0, 0.5, min(max(z0, lo), hi), min(alpha, hi)})
  grid = np.linspace(lo, hi, 2001)
  m = max(sum(log_terms(z)) for z in grid)
  if m > 1.0:  # log A = m + log ∫ exp(log w + a log r - m)
    integrand = lambda z: math.exp(sum(log_terms(z)) - m)
  else:        # A - 1 = ∫ w (r^a - 1)
    def integrand(z):
      log_w, t = log_terms(z)
      return math.exp(log_w) * math.expm1(t)
  total = 0.0
  for x0, x1 in zip([lo] + points, points + [hi]):
    if x1 > x0:
      total += integrate.quad(integrand, x0, x1, epsabs=0.0, epsrel=1e-13, limit=200)[0]
  log_a = m + math.log(total) if m > 1.0 else math.log1p(total)
  return log_a / (alpha - 1)


def test_integer_orders_match_dp_accounting():
  for q, sigma in ((0.01, 1.1), (0.1, 0.8), (0.5, 2.0), (0.9, 5.0), (0.02, 0.5), (1e-3, 3.0)):
    accountant = rdp_privacy_accountant.RdpAccountant(INT_ORDERS)
    accountant.compose(dp_accounting.PoissonSampledDpEvent(
        q, dp_accounting.GaussianDpEvent(noise_multiplier=sigma)))
    ours = np.asarray(acc.sampled_gaussian_rdp(q, sigma, INT_ORDERS))
    np.testing.assert_allclose(ours, accountant.rdp, rtol=1e-9)


@pytest.mark.parametrize("q,sigma", [(0.01, 1.0), (0.1, 0.7), (0.3, 2.0), (0.5, 1.0), (0.9, 3.0)])
def test_fractional_orders_match_numerical_integration(q, sigma):
  ours = np.asarray(acc.sampled_gaussian_rdp(q, sigma, FRAC_ORDERS))
  ref = np.array([renyi_by_quadrature(q, sigma, a) for a in FRAC_ORDERS])
  np.testing.assert_allclose(ours, ref, rtol=1e-8)
  # The other direction is never larger (MTZ 2019), so this is the RDP, not a bound.
  reverse = np.array([renyi_by_quadrature(q, sigma, a, reverse=True) for a in FRAC_ORDERS[:4]])
  assert np.all(reverse <= ours[:4] * (1 + 1e-9))


def test_tiny_fractional_cost_keeps_relative_precision():
  # A_α - 1 ≈ 1e-12: a plain log-sum-exp of the series would keep ~4 digits.
  q, sigma, alpha = 1e-3, 5.0, 1.01
  mp.mp.dps = 30
  f = lambda z: (mp.npdf(z, 0, sigma)
                 * ((1 - mp.mpf(q) + q * mp.exp((2 * z - 1) / (2 * mp.mpf(sigma)**2)))**alpha - 1))
  z0 = sigma**2 * math.log(1 / q - 1) + 0.5
  ref = mp.log1p(mp.quad(f, [-mp.inf, -10 * sigma, 0, z0, 10 * sigma + z0, mp.inf])) / (alpha - 1)
  ours = float(acc.sampled_gaussian_rdp(q, sigma, [alpha])[0])
  assert ours == pytest.approx(float(ref), rel=1e-9)


def test_integer_and_fractional_branches_agree_across_integers():
  orders = np.array([3.0 - 1e-9, 3.0, 3.0 + 1e-9, 16.0 - 1e-9, 16.0, 16.0 + 1e-9])
  out = np.asarray(acc.sampled_gaussian_rdp(0.05, 1.3, orders))
  np.testing.assert_allclose(out[:3], out[1], rtol=1e-7)
  np.testing.assert_allclose(out[3:], out[4], rtol=1e-7)


def test_edge_sampling_rates_and_extreme_noise():
  orders = np.concatenate([FRAC_ORDERS, INT_ORDERS])
  np.testing.assert_array_equal(acc.sampled_gaussian_rdp(0.0, 1.0, orders), 0.0)
  np.testing.assert_allclose(acc.sampled_gaussian_rdp(1.0, 2.0, orders), orders / 8.0, rtol=1e-15)
  for sigma in (1e-3, 1e-1, 1.0, 1e2, 1e5):
    for q in (1e-12, 1e-4, 0.5, 0.999):
      out = np.asarray(acc.sampled_gaussian_rdp(q, sigma, orders))
      assert np.all(np.isfinite(out)) and np.all(out >= 0), (q, sigma, out)
      # Never above the unsampled Gaussian mechanism.
      assert np.all(out <= orders / (2 * sigma**2) * (1 + 1e-9)), (q, sigma)
  # Large-σ limit: rdp ≈ α q² (e^{1/σ²} - 1) / 2 (χ² approximation).
  out = np.asarray(acc.sampled_gaussian_rdp(0.01, 1e3, orders))
  np.testing.assert_allclose(out, orders * 1e-4 * math.expm1(1e-6) / 2, rtol=1e-3)


def test_gradient_wrt_noise_multiplier():
  # Integer orders: jax.test_util.check_grads.
  ints = np.array([2.0, 8.0])
  check_grads(lambda s: acc.sampled_gaussian_rdp(0.01, s, ints), (1.1,), order=1,
              modes=("rev",), eps=1e-6)
  # Fractional orders: one jitted gradient against central differences of the value.
  fracs = np.array([1.5, 3.5, 10.25])
  weights = np.array([1.0, 0.5, 0.25])
  value = lambda s: jnp.dot(acc.sampled_gaussian_rdp(0.01, s, fracs), weights)
  grad = float(jax.jit(jax.grad(value))(1.1))
  h = 1e-5
  fd = (float(value(1.1 + h)) - float(value(1.1 - h))) / (2 * h)
  assert grad == pytest.approx(fd, rel=1e-7) and grad < 0  # more noise, less privacy loss
