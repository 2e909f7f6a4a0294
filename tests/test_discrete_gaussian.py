"""The exact discrete Gaussian sampler: its distribution against the closed-form pmf, its
Bernoulli pieces against their probabilities, its keys, and bad input."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from pate_jax import discrete_gaussian as dg


def _bits(seed: int) -> dg._Bits:  # pylint: disable=protected-access
  first = np.asarray(dg._first_blocks(jax.random.key(seed), np.arange(1, dtype=np.uint32),
                                      dg.WORDS))[0]
  return dg._Bits(jax.random.key(seed), 0, first)


def _pmf(variance: int, radius: int) -> tuple[np.ndarray, np.ndarray]:
  """The reference ``(x, P[x])`` of ``N_Z(0, variance)`` for ``|x| <= radius``:
  ``exp(−x²/(2σ²))`` normalised by its sum over ``|x| <= radius + 40σ``."""
  wide = radius + int(40 * math.sqrt(variance)) + 1
  x = np.arange(-wide, wide + 1)
  w = np.exp(-x.astype(np.float64) ** 2 / (2.0 * variance))
  keep = np.abs(x) <= radius
  return x[keep], w[keep] / w.sum()


@pytest.mark.parametrize("variance", [1, 2, 7])
def test_samples_follow_the_discrete_gaussians_pmf(variance):
  """50,000 draws against ``P[x] ∝ exp(−x²/(2σ²))``: a chi-square test over the values
  within 4σ (and the tail beyond, pooled), and the variance, which for small σ is below
  σ² (e.g. 0.9 for σ² = 1), not σ²."""
  x = dg.sample(jax.random.key(variance), np.arange(5_000), 10, variance).ravel()
  radius = int(4 * math.sqrt(variance))
  values, p = _pmf(variance, radius)
  observed = np.array([(x == v).sum() for v in values] + [(np.abs(x) > radius).sum()])
  expected = np.append(p, 1.0 - p.sum()) * x.size
  keep = expected > 5
  chi2 = (((observed - expected) ** 2 / expected)[keep]).sum()
  assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-3, (chi2, keep.sum())
  wide, pw = _pmf(variance, radius + 40 * variance)
  var = float(pw @ wide.astype(np.float64) ** 2)
  assert x.mean() == pytest.approx(0.0, abs=4 * math.sqrt(var / x.size))
  assert (x**2).mean() == pytest.approx(var, rel=0.03)


def test_a_large_variance_gives_the_normals_moments():
  """At ``σ² = 2·3²·2^32`` (the sound soft labels' σ 3): mean 0, std σ, and the
  normal's 2.5 % / 97.5 % quantiles within 3 %."""
  variance = 2 * 9 * 2**32
  x = dg.sample(jax.random.key(1), np.arange(2_000), 10, variance).ravel().astype(np.float64)
  sigma = math.sqrt(variance)
  assert abs(x.mean()) < 4 * sigma / math.sqrt(x.size)
  assert x.std() == pytest.approx(sigma, rel=0.03)
  np.testing.assert_allclose(np.quantile(x, [0.025, 0.975]) / sigma, [-1.96, 1.96], rtol=0.03)


def test_bernoulli_pieces_have_their_probabilities():
  """``Bernoulli(n/d)`` and ``Bernoulli(exp(−γ))`` (γ below and above 1) over 20,000
  draws each, within 4.5 standard errors."""
  bits = _bits(3)
  draws = 20_000
  bern, bern_exp = dg._bernoulli, dg._bernoulli_exp  # pylint: disable=protected-access
  for make, p in ((lambda: bern(bits, 1, 3), 1 / 3), (lambda: bern(bits, 0, 5), 0.0),
                  (lambda: bern(bits, 5, 5), 1.0),
                  (lambda: bern_exp(bits, 1, 2), math.exp(-0.5)),
                  (lambda: bern_exp(bits, 7, 3), math.exp(-7 / 3)),
                  (lambda: bern_exp(bits, 0, 1), 1.0)):
    mean = np.mean([make() for _ in range(draws)])
    assert abs(mean - p) <= 4.5 * math.sqrt(p * (1 - p) / draws) + 1e-12, (mean, p)


def test_a_row_depends_on_its_key_and_id_only_and_reads_more_blocks_when_it_needs_them():
  """Rows drawn alone, in another order or beside others are the same; another key or id
  gives other values; a row that uses up its first block reads block 1 of its own key
  (one word per block here, so every row does)."""
  key = jax.random.key(5)
  out = dg.sample(key, np.array([3, 9, 4]), 6, 10**6)
  np.testing.assert_array_equal(dg.sample(key, np.array([9]), 6, 10**6)[0], out[1])
  np.testing.assert_array_equal(dg.sample(key, np.array([4, 3]), 6, 10**6), out[[2, 0]])
  assert not np.array_equal(dg.sample(jax.random.key(6), np.array([3]), 6, 10**6)[0], out[0])
  assert not np.array_equal(out[0], out[1])
  small = dg.sample(key, np.array([3, 9]), 40, 10**6, words=1)
  assert small.std() == pytest.approx(1000, rel=0.35)
  np.testing.assert_array_equal(dg.sample(key, np.array([9]), 40, 10**6, words=1)[0],
                                small[1])
  # Block b of row r is jax.random.bits(fold_in(fold_in(key, r), b)): with one word per
  # block, a row's second 32 bits are block 1 of its own id, not block 0 again nor
  # another row's.
  def word(row, block):
    k = jax.random.fold_in(jax.random.fold_in(key, row), block)
    return int(np.asarray(jax.random.bits(k, (1,), jnp.uint32))[0])

  # pylint: disable=protected-access
  first = np.asarray(dg._first_blocks(key, np.array([9], np.uint32), 1))[0]
  assert int(first[0]) == word(9, 0)
  bits = dg._Bits(key, 9, first)
  assert [bits.take(32) for _ in range(3)] == [word(9, 0), word(9, 1), word(9, 2)]
  assert word(9, 1) not in (word(9, 0), word(0, 1), word(3, 1))  # the check can tell


def test_no_noise_and_bad_input():
  assert not dg.sample(jax.random.key(0), np.arange(3), 4, 0).any()
  assert dg.sample(jax.random.key(0), np.arange(0), 4, 9).shape == (0, 4)
  assert dg.check_variance(9.0) == 9
  for bad in (-1, 2.5, float("nan"), "9", None):
    with pytest.raises(ValueError, match="variance"):
      dg.sample(jax.random.key(0), np.arange(3), 4, bad)
  with pytest.raises(ValueError, match="ids"):
    dg.sample(jax.random.key(0), np.array([-1, 2]), 4, 9)
  with pytest.raises(ValueError, match="ids"):
    dg.sample(jax.random.key(0), np.array([[1, 2]]), 4, 9)
  with pytest.raises(ValueError, match="num_values"):
    dg.sample(jax.random.key(0), np.arange(3), -1, 9)
  with pytest.raises(ValueError, match="words"):
    dg.sample(jax.random.key(0), np.arange(3), 4, 9, words=0)
