"""Log-space numerics shared by the accountants (private).

Every helper here is safe under ``jax.grad``: branches that are not selected by a
``jnp.where`` are fed harmless arguments (the "double-where" trick), so an
unselected ``log(0)`` never turns into a ``0 * inf = nan`` cotangent.

Reductions to a minimum or maximum whose value is differentiated go through
:func:`min_and_argmin` / :func:`max_and_argmax`, never ``jnp.min`` / ``jnp.max``: JAX
differentiates ``reduce_min``/``reduce_max`` by the equality test ``operand == min``
and divides by the number of matches. When XLA computes the operand of that test and
the minimum in different fusions that round differently (GPU), no entry matches:
``ct / 0 = inf``, ``inf * 0 = nan`` in every gradient (seen on an H100 for the
composed LNMax ε; tests/test_accounting_numerics.py replays it on CPU).
"""

from __future__ import annotations

import functools
import inspect
import math
import warnings
from typing import Callable, TypeVar

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np

_F = TypeVar("_F", bound=Callable)

LOG_HALF = math.log(0.5)
SQRT2 = math.sqrt(2.0)


def with_x64(fn: _F) -> _F:
  """Runs ``fn`` with 64-bit floats enabled locally (``jax.enable_x64``).

  The accountants need float64 (log-probabilities of order -1e15, sums of 1e6
  per-query costs); the rest of the library keeps JAX's 32-bit default. The
  context only changes how arrays are created and traced inside ``fn``; the
  float64 arrays it returns stay float64.

  Except inside a staged trace (a caller's ``jax.jit``, ``lax.scan``,
  ``jax.checkpoint``, ...) begun with 64-bit mode off: that program is lowered
  after ``fn`` returns, in 32-bit mode, which cannot hold the float64 values
  traced here (JAX fails with an internal ``TypeError``, jax-ml/jax#5982). There
  ``fn`` runs in the caller's mode and computes in float32, the best precision that
  program has (:func:`float_dtype`); JAX's notices that float64 is truncated are
  silenced, as that is the documented behaviour. Eager calls, ``grad`` and ``vmap``
  keep float64.

  In that 32-bit case the numpy arrays among the arguments (defaults included) are
  copied first: JAX (0.10) caches the float32 version of a numpy array canonicalised in
  32-bit mode and hands it to a later 64-bit call of the same array object, which
  then fails (``RuntimeProgramInputMismatch``); so the caller's arrays and
  :data:`DEFAULT_ORDERS` never meet a core in 32-bit mode.
  """
  signature = inspect.signature(fn)

  @functools.wraps(fn)
  def wrapped(*args, **kwargs):
    if jax.config.jax_enable_x64:
      return fn(*args, **kwargs)
    if staged_in_32_bit():
      bound = signature.bind(*args, **kwargs)
      bound.apply_defaults()
      args, kwargs = jax.tree.map(_copy_numpy, (bound.args, bound.kwargs))
      with warnings.catch_warnings():
        warnings.filterwarnings("ignore", _TRUNCATION_WARNING, UserWarning)
        return fn(*args, **kwargs)
    with jax.enable_x64(True):
      return fn(*args, **kwargs)

  return wrapped  # type: ignore[return-value]


def _copy_numpy(x):
  """A private copy of a numpy array (other leaves as they are); see :func:`with_x64`."""
  return np.array(x) if isinstance(x, np.ndarray) else x


_TRUNCATION_WARNING = "Explicitly requested dtype .*float64.* is not available"


def staged_in_32_bit() -> bool:
  """True while a staged trace (``jit``, ``scan``, ...) begun in 32-bit mode is running.

  JAX's own probe of its trace stack (``jax.extend.core``; ``grad`` and ``vmap``
  alone do not stage, so they answer False).
  """
  return (not jax.config.jax_enable_x64
          and jax.extend.core.unsafe_am_i_under_a_jit_DO_NOT_USE())


def float_dtype() -> jnp.dtype:
  """The accountants' float: float64, or float32 in 32-bit mode (see :func:`with_x64`)."""
  return jnp.dtype(jnp.float64 if jax.config.jax_enable_x64 else jnp.float32)


def as_float(x: jax.Array) -> jax.Array:
  """``x`` as :func:`float_dtype` (a no-op for float64 in 64-bit mode). The cores call
  it on the votes, so that integer counts cross to the device at their own width and
  are converted inside the compiled program."""
  return jnp.asarray(x, dtype=float_dtype())


def big(dtype: jnp.dtype) -> float:
  """A finite number above every cost or log-probability, with room to spare in ``dtype``:
  ``1e300`` in float64, ``1e30`` in float32 (``1e300`` would be ``inf`` there, and a
  penalty ``0 · inf`` NaN)."""
  return 1e300 if jnp.finfo(dtype).bits == 64 else 1e30


def log_ndtr_pair(x: jax.Array) -> tuple[jax.Array, jax.Array]:
  """``(log Φ(x), log Φ(-x))``, both to ~1e-16 relative, for any real ``x``.

  ``jax.scipy.special.log_ndtr`` computes ``log(ndtr(x))`` for ``-20 < x < 8``, which
  for ``x > 0`` loses relative precision (``log Φ(x) ≈ -Φ(-x)`` is tiny), and its
  default 3-term asymptotic series below ``-20`` has absolute errors up to ~4e-9. Here
  the lower tail ``log Φ(-|x|)`` comes from ``log_ndtr`` with 10 series terms (accurate
  there) and the upper tail from ``log(1 - Φ(-|x|))``.
  """
  x = jnp.asarray(x)
  pos = x >= 0.0
  lower = jax.scipy.special.log_ndtr(jnp.where(pos, -x, x), series_order=10)  # log Φ(-|x|)
  upper = log1mexp(lower)                                                     # log Φ(|x|)
  return jnp.where(pos, upper, lower), jnp.where(pos, lower, upper)


def log_ndtr(x: jax.Array) -> jax.Array:
  """``log Φ(x)``, the standard normal log-CDF, to ~1e-16 relative (see
  :func:`log_ndtr_pair`)."""
  return log_ndtr_pair(x)[0]


# Chebyshev coefficients c_j of h(s) = (x + K) erfcx(x), s = (x - K)/(x + K), K = 4, on
# x in [0, inf) (s in [-1, 1)); h(s) = c_0/2 + Σ_{j>=1} c_j T_j(s). Computed for this module
# at 50 digits with mpmath (96 Chebyshev nodes); the dropped terms are below 4e-20, so the
# series is exact to float64 round-off. tests/test_accounting_gnmax.py recomputes them.
ERFCX_K = 4.0
ERFCX_CHEBYSHEV = (
    3.2641957563930517, -1.5054329427054698, 0.5903214182888945, -0.19828527172011035,
    0.0569084302284687, -0.013773973050870096, 0.002729016733135232, -0.00041361807903024755,
    3.89141838079606e-05, 4.795485503364818e-07, -8.699107081379825e-07, 1.2116707094396558e-07,
    3.79196702608182e-09, -3.4533646779963824e-09, 2.748862570381361e-10, 6.813959375318511e-11,
    -1.3568522747316355e-11, -1.0463235067416098e-12, 4.851070321243456e-13,
    8.458758172979236e-15, -1.6469363733616713e-14, 2.5314850886802834e-16,
    5.757244393379938e-16, -1.8245979193136522e-17, -2.135637703191254e-17,
    6.940368035838818e-19, 8.435502572469419e-19, -1.5207240360686836e-20)


def erfcx(x: jax.Array) -> jax.Array:
  """Scaled complementary error function ``e^{x²} erfc(x)`` for ``x >= 0``.

  A 28-term Chebyshev series in ``s = (x - 4)/(x + 4)`` (Clenshaw recurrence):
  no transcendental function, no branch, relative error ~1e-16 on ``[0, inf)``.
  """
  x = jnp.asarray(x)
  s = (x - ERFCX_K) / (x + ERFCX_K)
  b1 = jnp.zeros_like(s)
  b2 = jnp.zeros_like(s)
  for c in ERFCX_CHEBYSHEV[:0:-1]:
    b1, b2 = 2.0 * s * b1 - b2 + c, b1
  return (s * b1 - b2 + 0.5 * ERFCX_CHEBYSHEV[0]) / (x + ERFCX_K)


def log1mexp(x: jax.Array) -> jax.Array:
  """``log(1 - exp(x))`` for ``x <= 0``, accurate at both ends (Mächler 2012).

  Uses ``log(-expm1(x))`` for ``x > -log 2`` and ``log1p(-exp(x))`` otherwise.
  ``x = 0`` gives ``-inf``; ``x = -inf`` gives ``0``. Gradient-safe.
  """
  x = jnp.asarray(x)
  near = x > -math.log(2.0)
  x_near = jnp.where(near, x, -1.0)
  x_far = jnp.where(near, -1.0, x)
  return jnp.where(near, jnp.log(-jnp.expm1(x_near)), jnp.log1p(-jnp.exp(x_far)))


def logaddexp(a: jax.Array, b: jax.Array) -> jax.Array:
  """``log(e^a + e^b)`` as ``max + log1p(e^{-|a-b|})``, select-free.

  Several times faster than ``jnp.logaddexp`` on CPU (XLA's CPU selects cost more
  than an ``exp``). One argument may be ``-inf``; not both (that gives NaN).
  """
  m = jnp.maximum(a, b)
  return m + jnp.log1p(jnp.exp(-jnp.abs(a - b)))


def softplus(x: jax.Array) -> jax.Array:
  """``log(1 + e^x)`` (see :func:`logaddexp`)."""
  return jnp.maximum(x, 0.0) + jnp.log1p(jnp.exp(-jnp.abs(x)))


def log_expm1(x: jax.Array) -> jax.Array:
  """``log(exp(x) - 1)`` for ``x >= 0``, accurate for tiny and huge ``x``.

  ``log(expm1(x))`` for ``x <= 1`` (keeps full relative precision as x -> 0),
  ``x + log1p(-exp(-x))`` above (no overflow). ``x = 0`` gives ``-inf``.
  """
  x = jnp.asarray(x)
  small = x <= 1.0
  x_small = jnp.where(small, x, 1.0)
  x_big = jnp.where(small, 2.0, x)
  return jnp.where(small, jnp.log(jnp.expm1(x_small)), x_big + jnp.log1p(-jnp.exp(-x_big)))


def min_and_argmin(x: jax.Array, axis: int = -1,
                   keepdims: bool = False) -> tuple[jax.Array, jax.Array]:
  """``(min, argmin)`` of ``x`` along ``axis``; the gradient goes to the argmin alone.

  The value is read at ``argmin`` through its one-hot mask
  (``Σ where(onehot, x, 0)``, exact: one non-zero term), so its derivative is that
  one-hot: no equality test against a recomputed operand, no division by a count (see
  the module docstring), and no gather whose transpose would need 64-bit mode in the
  backward pass. Ties go wholly to the first index (``jnp.min`` splits them evenly);
  NaN is the minimum if present, as in ``jnp.min``.

  Args:
    x: ``[..., N, ...]`` array, ``N >= 1`` along ``axis``.
    axis: the reduced axis.
    keepdims: keep ``axis`` with length 1 in both outputs.

  Returns:
    ``(value, index)``, each of ``x``'s shape without ``axis`` (or with length 1).
  """
  return _select_along(x, jnp.argmin(x, axis=axis, keepdims=True), axis, keepdims)


def max_and_argmax(x: jax.Array, axis: int = -1,
                   keepdims: bool = False) -> tuple[jax.Array, jax.Array]:
  """``(max, argmax)`` of ``x`` along ``axis``; the gradient goes to the first argmax
  alone (see :func:`min_and_argmin`)."""
  return _select_along(x, jnp.argmax(x, axis=axis, keepdims=True), axis, keepdims)


def _select_along(x: jax.Array, idx: jax.Array, axis: int,
                  keepdims: bool) -> tuple[jax.Array, jax.Array]:
  """``x`` at ``idx`` (same rank, length 1 along ``axis``) by a one-hot sum."""
  axis = axis % x.ndim
  onehot = jax.lax.broadcasted_iota(idx.dtype, x.shape, axis) == idx
  value = jnp.sum(jnp.where(onehot, x, jnp.zeros_like(x)), axis=axis, keepdims=keepdims)
  return value, (idx if keepdims else jnp.squeeze(idx, axis))


def gaps_to_top(votes: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Gaps ``Δ_j = n_{j*} - n_j`` to the first argmax ``j*`` and the mask ``j == j*``.

  Args:
    votes: ``[..., C]`` counts (any real dtype; differentiable in the counts).

  Returns:
    ``(gaps[..., C], is_top[..., C])``; ``gaps`` is 0 at ``j*``.
  """
  n_top, top = max_and_argmax(votes, axis=-1, keepdims=True)
  is_top = jnp.arange(votes.shape[-1]) == top
  return n_top - votes, is_top
