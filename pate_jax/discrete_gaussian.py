"""The discrete Gaussian, sampled exactly from a key's bits (Canonne, Kamath, Steinke 2020).

A floating-point normal is not the normal that a Gaussian mechanism's analysis assumes.
JAX's float32 normal takes 2^23 values, none beyond about ±5.4σ: an output that one
dataset makes possible and its neighbour impossible is an unbounded privacy loss. A
float64 sampler is close to the normal only up to about 2^-46 per cell edge, which a
release of many values must charge to δ (:func:`pate_jax.mechanisms.sampler_delta`).

The discrete Gaussian ``N_Z(0, σ²)``, ``P[x] ∝ exp(−x²/(2σ²))`` on the integers, added to
an integer-valued query of L2 sensitivity ``Δ`` is ``Δ²/(2σ²)``-zCDP, that is
``RDP(α) = α Δ²/(2σ²)`` at every order: the continuous Gaussian mechanism's curve
(Canonne, Kamath, Steinke 2020, Theorems 4 and 15, the latter for independent
coordinates). :func:`sample` draws it exactly, with the paper's Algorithms 1–3: integer
arithmetic on uniform bits only, so the distribution of what is released is the one the
analysis assumes and no sampler term is charged.

The bits are the key's, as every other noise of the library (threefry's for a seeded key,
the XOR of two threefry streams for a secret one, :data:`pate_jax.rng.SECRET_IMPL`): row
``i`` of a draw reads block ``b = 0, 1, …`` of :data:`WORDS` uint32 words from
``jax.random.bits(fold_in(fold_in(key, ids[i]), b))``, so a row depends only on
``(key, ids[i])``, not on the other rows drawn with it.

Its running time follows the noise it draws (the rejection rounds, the bits read), not
the query it is added to; a caller keeps it out of what it publishes beside a release,
as every sampler's.

Reference: C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
Privacy", NeurIPS 2020 (arXiv:2004.00010).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

WORDS = 64
"""uint32 words per block of a row's bits (about 40 values of variance 1e10 per block)."""


class _Bits:
  """The uniform bits of one row: block ``b`` is :data:`WORDS` words of
  ``jax.random.bits(fold_in(fold_in(key, row_id), b))``; block 0 is given."""

  def __init__(self, key: jax.Array, row_id: int, first: np.ndarray):
    self._key, self._id, self._width = key, row_id, len(first)
    self._words, self._pos, self._block = [int(w) for w in first], 0, 0
    self._buffer, self._size = 0, 0

  def take(self, m: int) -> int:
    """``m`` fresh uniform bits as an integer in ``[0, 2^m)``."""
    while self._size < m:
      if self._pos == len(self._words):
        self._block += 1
        self._words, self._pos = [int(w) for w in np.asarray(_block(
            self._key, jnp.uint32(self._id), jnp.uint32(self._block), self._width))], 0
      self._buffer |= self._words[self._pos] << self._size
      self._pos, self._size = self._pos + 1, self._size + 32
    out = self._buffer & ((1 << m) - 1)
    self._buffer >>= m
    self._size -= m
    return out


@functools.partial(jax.jit, static_argnums=3)
def _block(key, row_id, block, words: int):
  return jax.random.bits(jax.random.fold_in(jax.random.fold_in(key, row_id), block),
                         (words,), jnp.uint32)


@functools.partial(jax.jit, static_argnums=2)
def _first_blocks(key, row_ids, words: int):
  return jax.vmap(_block, in_axes=(None, 0, None, None))(key, row_ids, jnp.uint32(0), words)


def _bernoulli(bits: _Bits, num: int, den: int) -> bool:
  """``Bernoulli(num/den)`` for ``0 <= num <= den``: the uniform ``U = 0.b₁b₂…`` is
  compared with ``num/den`` one binary digit at a time (two bits expected)."""
  while True:
    num <<= 1
    digit = num >= den
    if digit:
      num -= den
    if bits.take(1) != digit:
      return digit  # the first differing digit: U < p where p's digit is 1


def _bernoulli_exp(bits: _Bits, num: int, den: int) -> bool:
  """``Bernoulli(exp(−γ))`` for ``γ = num/den >= 0`` (CKS Algorithm 1)."""
  while num > den:  # exp(−γ) = exp(−1) · exp(−(γ − 1))
    if not _bernoulli_exp(bits, 1, 1):
      return False
    num -= den
  k = 1
  while _bernoulli(bits, num, den * k):  # γ in [0, 1]: P[the first k with A = 0 is odd]
    k += 1
  return k % 2 == 1


def _uniform(bits: _Bits, n: int) -> int:
  """Uniform on ``{0, …, n − 1}`` by rejection."""
  m = (n - 1).bit_length()
  while True:
    x = bits.take(m)
    if x < n:
      return x


def _discrete_laplace(bits: _Bits, t: int) -> int:
  """``P[x] ∝ exp(−|x|/t)`` on the integers, ``t >= 1`` an integer (CKS Algorithm 2)."""
  while True:
    u = _uniform(bits, t)
    if not _bernoulli_exp(bits, u, t):
      continue
    v = 0
    while _bernoulli_exp(bits, 1, 1):
      v += 1
    x = u + t * v
    negative = bits.take(1)
    if negative and x == 0:
      continue
    return -x if negative else x


def _discrete_gaussian(bits: _Bits, variance: int) -> int:
  """``N_Z(0, σ²)`` with ``σ² = variance >= 1`` an integer (CKS Algorithm 3)."""
  t = math.isqrt(variance) + 1  # ⌊σ⌋ + 1
  while True:
    y = _discrete_laplace(bits, t)
    # Accept with probability exp(−(|y| − σ²/t)² / (2σ²)), that is
    # exp(−(|y|t − σ²)² / (2σ²t²)).
    if _bernoulli_exp(bits, (abs(y) * t - variance) ** 2, 2 * variance * t * t):
      return y


def check_variance(variance, name: str = "variance") -> int:
  """``variance`` as a Python int ``>= 0`` (an integral float is accepted); a
  ``ValueError`` naming ``name`` otherwise."""
  try:
    value = int(variance)
  except (TypeError, ValueError, OverflowError):
    value = None
  if value is None or value != variance or value < 0:
    raise ValueError(f"{name} must be an integer >= 0; got {variance!r}")
  return value


def sample(key: jax.Array, ids, num_values: int, variance, *, words: int = WORDS
           ) -> np.ndarray:
  """Exact ``N_Z(0, variance)`` noise, int64 ``[len(ids), num_values]``.

  Row ``i`` is drawn from the bits of ``fold_in(key, ids[i])`` (the module docstring),
  its values in order. ``variance``: the integer ``σ² >= 0`` (0: no noise). ``words``:
  uint32 words per block of a row's bits (the blocks' bits, so the values, depend on it).
  """
  ids = np.asarray(ids)
  if ids.ndim != 1 or (ids.size and (ids.dtype.kind not in "iu" or ids.min() < 0
                                     or ids.max() >= 2**32)):
    raise ValueError(f"ids must be a [Q] array of integers in [0, 2^32); got {ids.dtype} "
                     f"{ids.shape}")
  if not isinstance(num_values, (int, np.integer)) or num_values < 0:
    raise ValueError(f"num_values must be an integer >= 0; got {num_values!r}")
  variance = check_variance(variance)
  if not isinstance(words, (int, np.integer)) or words < 1:
    raise ValueError(f"words must be a positive integer; got {words!r}")
  out = np.zeros((ids.size, int(num_values)), np.int64)
  if variance == 0 or out.size == 0:
    return out
  first = np.asarray(_first_blocks(key, jnp.asarray(ids, jnp.uint32), int(words)))
  for i, row_id in enumerate(ids.tolist()):
    bits = _Bits(key, row_id, first[i])
    out[i] = [_discrete_gaussian(bits, variance) for _ in range(out.shape[1])]
  return out
