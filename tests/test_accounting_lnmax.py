"""LNMax / 2017 moments accountant: paper numbers, an independent mpmath reference,
closed forms, gradients."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest
from jax.test_util import check_grads

from pate_jax import accounting as acc

MOMENTS = np.arange(1.0, 9.0)


@pytest.fixture(autouse=True)
def _x64():
  with jax.enable_x64(True):
    yield


def _votes() -> np.ndarray:
  """[32, 10] histograms: unanimity, ties, tiny and huge gaps, 250 teachers mostly."""
  rng = np.random.default_rng(0)
  rows = [rng.multinomial(250, rng.dirichlet(np.full(10, a))) for a in np.geomspace(0.02, 3, 25)]
  special = np.zeros((7, 10), np.int64)
  special[0, 0] = 250                          # unanimous
  special[1, :2] = [125, 125]                  # tie at the top
  special[2, [3, 4]] = [126, 124]              # gap 2
  special[3, :] = 25                           # all equal
  special[4, [0, 9]] = [100000, 0]             # gap 1e5
  special[5, [1, 2]] = [50001, 49999]          # big counts, gap 2
  special[6, [5, 6, 7]] = [200, 40, 10]
  return np.concatenate([special, np.stack(rows)]).astype(np.int32)


VOTES = _votes()
UNANIMOUS, GAP_1E5 = 0, 4


def ref_log_moments(counts, gamma, moments, data_dependent=True):
  """Straightforward Theorems 1, 3 and Lemma 4 of Papernot et al. 2017, in mpmath."""
  mp.mp.dps = 50
  c = [mp.mpf(int(x)) for x in counts]
  top = int(np.argmax(counts))
  g = mp.mpf(gamma)
  eps = 2 * g
  if data_dependent:
    q = mp.fsum((2 + g * (c[top] - c[j])) / (4 * mp.exp(g * (c[top] - c[j])))
                for j in range(len(c)) if j != top)
    q = min(q, 1 - mp.mpf(1) / len(c))
  else:
    q = mp.mpf(1)
  out = []
  for l in moments:
    l = mp.mpf(l)
    if q < mp.mpf(0.5) and mp.exp(eps) * q < 1:
      log_t = mp.log((1 - q) * ((1 - q) / (1 - mp.exp(eps) * q))**l + q * mp.exp(eps * l))
    else:
      log_t = eps * l
    out.append(float(min(eps**2 * l * (l + 1) / 2, log_t, eps * l)))
  return np.array(out)


def test_strong_composition_reproduces_paper_appendix_b():
  # "γ = 0.05, T = 1000, δ = 1e-6 gives ε ≈ 26"; "γ = 0.05, T = 100, δ = 1e-5 gives ε ≈ 5.80".
  eps_svhn = float(acc.strong_composition_epsilon(1000, 0.05, 1e-6))
  eps_mnist = float(acc.strong_composition_epsilon(100, 0.05, 1e-5))
  assert 26.0 <= eps_svhn < 27.0
  assert eps_mnist == pytest.approx(5.80, abs=0.005)
  assert eps_svhn == pytest.approx(10.0 + 0.1 * math.sqrt(2000 * math.log(1e6)), rel=1e-14)


@pytest.mark.parametrize("gamma", [0.05, 0.3, 2.0])
def test_log_moments_match_mpmath_reference(gamma):
  got = np.asarray(acc.lnmax_log_moments(VOTES, gamma, MOMENTS))
  assert got.shape == (VOTES.shape[0], MOMENTS.size) and got.dtype == np.float64
  ref = np.stack([ref_log_moments(row, gamma, MOMENTS) for row in VOTES])
  # The 50-digit reference resolves values above ~1e-40; the tiny ones are checked
  # against the first-order expansion below.
  np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-40)


def test_tiny_costs_keep_relative_precision():
  # Gap 1e5 to nine classes: q = 9 (2 + γΔ) / (4 e^{γΔ}) underflows float64, but to first
  # order in q, α(l) = q (e^{εl} + l e^ε - l - 1), ε = 2γ.
  for gamma in (0.005, 0.05, 2.0):
    eps = 2 * gamma
    log_q = math.log(9 * (2 + gamma * 1e5) / 4) - gamma * 1e5
    assert float(acc.lnmax_log_q(VOTES, gamma)[GAP_1E5]) == pytest.approx(log_q, rel=1e-13)
    log_alpha = log_q + np.log(np.exp(eps * MOMENTS) + MOMENTS * np.exp(eps) - MOMENTS - 1)
    got = np.asarray(acc.lnmax_log_moments(VOTES, gamma, MOMENTS))[GAP_1E5]
    if log_alpha.max() > -700:
      np.testing.assert_allclose(np.log(got), log_alpha, rtol=1e-10)
    else:  # below float64's range: the cost is 0, not NaN
      assert np.all(got == 0.0)


def test_data_independent_closed_form():
  gamma, delta = 0.05, 1e-5
  votes = VOTES
  alpha = np.asarray(acc.lnmax_log_moments(votes, gamma, MOMENTS, data_dependent=False))
  closed = np.minimum(2 * gamma**2 * MOMENTS * (MOMENTS + 1), 2 * gamma * MOMENTS)
  np.testing.assert_allclose(alpha, np.broadcast_to(closed, alpha.shape), rtol=1e-14)
  eps, best = acc.lnmax_moments_epsilon(votes, gamma, delta, data_dependent=False)
  per_l = (votes.shape[0] * closed + math.log(1 / delta)) / MOMENTS
  assert float(eps) == pytest.approx(per_l.min(), rel=1e-14)
  assert int(best) == int(MOMENTS[np.argmin(per_l)])


def test_epsilon_composes_reference_moments():
  gamma, delta = 0.05, 1e-6
  eps, best = acc.lnmax_moments_epsilon(VOTES, gamma, delta, max_moment=8)
  alpha = np.stack([ref_log_moments(r, gamma, MOMENTS) for r in VOTES]).sum(0)
  per_l = (alpha + math.log(1 / delta)) / MOMENTS
  assert float(eps) == pytest.approx(per_l.min(), rel=1e-10)
  assert int(best) == int(MOMENTS[np.argmin(per_l)])
  eps_tot, l_tot = acc.moments_to_epsilon(alpha, MOMENTS, delta)
  assert float(eps_tot) == pytest.approx(per_l.min(), rel=1e-12) and float(l_tot) == int(best)


def test_dependent_never_exceeds_independent_and_unanimity_is_nearly_free():
  for gamma in (0.01, 0.05, 0.5):
    dd = np.asarray(acc.lnmax_log_moments(VOTES, gamma, MOMENTS))
    di = np.asarray(acc.lnmax_log_moments(VOTES, gamma, MOMENTS, data_dependent=False))
    assert np.all(dd <= di * (1 + 1e-12))
  unanimous = np.asarray(acc.lnmax_log_moments(VOTES, 0.05, MOMENTS))[UNANIMOUS]
  indep = np.minimum(2 * 0.05**2 * MOMENTS * (MOMENTS + 1), 0.1 * MOMENTS)
  assert np.all(unanimous < 0.01 * indep)
  assert float(acc.lnmax_log_moments(VOTES, 1.0, MOMENTS)[UNANIMOUS, -1]) < 1e-90


@jax.jit
def composed(votes, gamma, delta):
  """Summed log-moments (data-dependent) and ε, data-dependent and independent: [L + 2]."""
  alpha = acc.lnmax_log_moments(votes, gamma, MOMENTS).sum(axis=0)
  eps_dd = acc.lnmax_moments_epsilon(votes, gamma, delta)[0]
  eps_di = acc.lnmax_moments_epsilon(votes, gamma, delta, data_dependent=False)[0]
  return jnp.concatenate([alpha, jnp.stack([eps_dd, eps_di])])


def test_gradients_wrt_gamma_and_votes_match_finite_differences():
  # Votes as reals (traced under jit: no integer check); a jitter breaks the ties.
  votes = VOTES + np.random.default_rng(0).uniform(0.1, 0.4, VOTES.shape)
  check_grads(lambda v, g: composed(v, g, 1e-5), (votes, 0.05), order=1, modes=("rev",),
              eps=1e-6)
  # More Laplace noise (smaller γ), less privacy loss.
  assert float(composed(votes, 0.049, 1e-5)[-2]) < float(composed(votes, 0.05, 1e-5)[-2])


def test_extreme_gaps_noise_and_delta_stay_finite():
  """Gaps up to 1e5, Laplace scale b = 1/γ from 1e-3 to 1e5, δ down to 1e-12."""
  extreme = np.zeros(VOTES.shape, np.float64)
  extreme[:, 0] = 100000
  extreme[1:6] = 0
  extreme[1, :2] = [50001, 49999]
  extreme[2, :] = 10000
  extreme[3, :2] = [99999, 1]
  extreme[4, [1, 3]] = [60000, 40000]
  ct = np.zeros(MOMENTS.size + 2)
  ct[-2:] = 1.0  # d(ε_dependent + ε_independent)
  for scale in (1e-3, 1e-1, 1.0, 30.0, 1e3, 1e5):
    for delta in (1e-5, 1e-12):
      # The same vjp path as check_grads above, so its compiled programs are reused.
      out, vjp = jax.vjp(lambda v, g: composed(v, g, delta), extreme, 1.0 / scale)
      assert np.all(np.isfinite(out)) and np.all(out >= 0), (scale, delta)
      for g in vjp(jnp.asarray(ct)):
        assert np.all(np.isfinite(np.asarray(g))), (scale, delta)
