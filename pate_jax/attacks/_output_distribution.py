"""Output distribution of the noisy argmax, Q(H) (Theorem 1 of the attack paper).

For a vote histogram ``H = [H_1, ..., H_C]`` and i.i.d. noise ``Z_i`` of scale
``s`` (Gaussian: ``N(0, s²)``, GNMax; Laplace: ``Lap(s)``, LNMax with
``s = 1/γ``), the aggregator answers ``argmax_i H_i + Z_i`` and

  [Q(H)]_k = P(answer = k) = ∫ f_k(α) Π_{i≠k} F_i(α) dα,

``f_k``/``F_i`` the pdf/cdf of ``H_k + Z``/``H_i + Z`` (histogram-leakage paper,
Theorem 1). Substituting ``α = H_k + s t``,

  [Q(H)]_k = ∫ f(t) Π_{i≠k} F(t + d_ki) dt,   d_ki = (H_k - H_i) / s,

with ``f``/``F`` the standard pdf/cdf, so Q depends on H only through the
scaled differences (Theorem 2: shifting H by a constant leaves Q unchanged).
The product is accumulated in log space (``log F``) and exponentiated once.

Two quadratures:

* ``"trapezoid"`` (the paper's Section 3.2): the trapezoid rule over
  ``α ∈ H_k ± width·s`` (``t ∈ [-width, width]``), ``num_points`` equally spaced
  nodes. The paper uses ``width = 6`` and 1-vote spacing (``12 s + 1`` nodes; its
  code evaluates every node in a Python loop). In the scaled variable the
  integrand is smooth on the scale of one ``s``, so a fixed node count suffices
  for every σ (see DEFAULT_POINTS). For Laplace noise the kink of ``f`` at
  ``t = 0`` (a node) is corrected by its Euler–Maclaurin term. Differentiable in H
  and s; this is the one the reconstruction optimises.
* ``"accurate"``: composite Gauss–Legendre over ``t ∈ [-W, W]`` (``W`` = 12 for
  Gaussian, 45 for Laplace: neglected mass < 1e-19), with panel boundaries at
  every ``t = -d_ki`` (where a factor ``F(t + d_ki)`` bends, and the Laplace
  kinks) and each panel cut into equal sub-panels; the sum is a ``logsumexp``.
  Computed in float64 for concrete inputs. It serves to measure the trapezoid's
  error and as the "true" Q in tests and experiments.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr

from pate_jax import _checks as v

METHODS = ("trapezoid", "accurate")
NOISES = ("gaussian", "laplace")

# Trapezoid defaults, per noise: half-width of the window in noise scales and
# the number of nodes. Gaussian: the paper's ±6σ; 49 nodes (spacing σ/4) put the
# quadrature error below the truncation error 2Φ(-6) ≈ 2e-9 (float64: max
# |Q_trap - Q_acc| = 2.3e-9 over Table 1 × σ ∈ [0.01, 400]; 25 nodes: 4e-8,
# 17 nodes: 7e-5; float32 rounding is ~1e-7). Laplace: heavier tails (mass e^-w
# beyond ±w) and kinks, so a wider window, a finer grid, and an Euler–Maclaurin
# correction of the kink of f at t = 0 (error 8e-8 at 801 nodes, 2e-4 without the
# correction). Measured by experiments/bench_attack.py (quadrature table).
DEFAULT_WIDTH = {"gaussian": 6.0, "laplace": 20.0}
DEFAULT_POINTS = {"gaussian": 49, "laplace": 801}

# Accurate method: window, panels per breakpoint interval, Gauss–Legendre order.
_ACCURATE_WIDTH = {"gaussian": 12.0, "laplace": 45.0}
_ACCURATE_PANELS = {"gaussian": 8, "laplace": 16}
_ACCURATE_ORDER = 16

_LOG_HALF = math.log(0.5)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


# ----------------------------------------------------------------------------- standard noise


def log_cdf(x: jax.Array, noise: str) -> jax.Array:
  """``log F(x)`` of the standard noise (gradient-safe)."""
  if noise == "gaussian":
    return log_ndtr(x)
  neg = x < 0
  x_neg = jnp.where(neg, x, 0.0)
  x_pos = jnp.where(neg, 0.0, x)
  return jnp.where(neg, _LOG_HALF + x_neg, jnp.log1p(-0.5 * jnp.exp(-x_pos)))


def log_pdf(t: jax.Array, noise: str) -> jax.Array:
  """``log f(t)`` of the standard noise."""
  if noise == "gaussian":
    return -0.5 * t * t - _LOG_SQRT_2PI
  return _LOG_HALF - jnp.abs(t)


def _log_integrand(nodes: jax.Array, diffs: jax.Array, noise: str) -> jax.Array:
  """``log f(t) + Σ_{i≠k} log F(t + d_ki)`` at ``nodes[k, n]`` (or ``[n]``): ``[C, n]``."""
  c = diffs.shape[0]
  nodes = jnp.broadcast_to(nodes, (c,) + nodes.shape[-1:])
  lc = log_cdf(nodes[:, None, :] + diffs[:, :, None], noise)  # [C(k), C(i), n]
  lc = jnp.where(jnp.eye(c, dtype=bool)[:, :, None], 0.0, lc)
  return log_pdf(nodes, noise) + lc.sum(axis=1)


# ----------------------------------------------------------------------------- one histogram


def trapezoid_single(h: jax.Array, scale: jax.Array, noise: str = "gaussian",
                     width: float | None = None, num_points: int | None = None,
                     kink_correction: bool = True) -> jax.Array:
  """Q(H) for one histogram ``h[C]`` by the trapezoid rule (pure jnp, no checks)."""
  width = DEFAULT_WIDTH[noise] if width is None else float(width)
  num_points = DEFAULT_POINTS[noise] if num_points is None else int(num_points)
  t = jnp.linspace(-width, width, num_points, dtype=h.dtype)
  step = 2.0 * width / (num_points - 1)
  w = jnp.full((num_points,), step, h.dtype).at[0].set(step / 2).at[-1].set(step / 2)
  diffs = (h[:, None] - h[None, :]) / scale
  g = jnp.exp(_log_integrand(t, diffs, noise))                    # [C, n]
  q = g @ w
  if noise == "laplace" and kink_correction:
    # Euler–Maclaurin: f = e^{-|t|}/2 has f'(0-) - f'(0+) = 1, so the rule
    # overestimates by (step²/12) G_k(0) = (step²/6) g_k(0) (node 0 is on the grid).
    q = q - (step * step / 6.0) * g[:, num_points // 2]
  return q


def accurate_single(h: jax.Array, scale: jax.Array, noise: str = "gaussian") -> jax.Array:
  """Q(H) for one histogram by panelled Gauss–Legendre in log space (pure jnp)."""
  c = h.shape[0]
  width = _ACCURATE_WIDTH[noise]
  x, wq = np.polynomial.legendre.leggauss(_ACCURATE_ORDER)
  diffs = (h[:, None] - h[None, :]) / scale                       # d[k, i]
  # Breakpoints of class k's integrand: t = -d_ki (includes t = 0 for i = k).
  bp = jnp.clip(-diffs, -width, width)
  ends = jnp.full((c, 1), width, h.dtype)
  bp = jnp.sort(jnp.concatenate([bp, -ends, ends], axis=1), axis=1)    # [C, C+2]
  frac = jnp.linspace(0.0, 1.0, _ACCURATE_PANELS[noise] + 1, dtype=h.dtype)
  edges = bp[:, :-1, None] + (bp[:, 1:] - bp[:, :-1])[..., None] * frac  # [C, C+1, P+1]
  a, b = edges[..., :-1], edges[..., 1:]
  half, mid = (b - a) / 2, (a + b) / 2
  nodes = (mid[..., None] + half[..., None] * jnp.asarray(x, h.dtype)).reshape(c, -1)
  weights = (half[..., None] * jnp.asarray(wq, h.dtype)).reshape(c, -1)
  log_f = _log_integrand(nodes, diffs, noise)
  return jnp.exp(jax.nn.logsumexp(log_f, axis=-1, b=weights))


def single(h: jax.Array, scale: jax.Array, method: str = "trapezoid", noise: str = "gaussian",
           width: float | None = None, num_points: int | None = None) -> jax.Array:
  if method == "trapezoid":
    return trapezoid_single(h, scale, noise, width, num_points)
  return accurate_single(h, scale, noise)


@functools.partial(jax.jit, static_argnames=("method", "noise", "width", "num_points"))
def output_distribution_core(histograms: jax.Array, scales: jax.Array, *, method: str,
                             noise: str, width: float | None,
                             num_points: int | None) -> jax.Array:
  """``[B, C], [B] -> [B, C]`` (no validation)."""
  fn = functools.partial(single, method=method, noise=noise, width=width,
                         num_points=num_points)
  if method == "accurate":  # Large per-histogram node sets: bound the memory.
    return jax.lax.map(lambda a: fn(*a), (histograms, scales), batch_size=16)
  return jax.vmap(fn)(histograms, scales)


# ----------------------------------------------------------------------------- public API


def _float_dtype():
  return jnp.result_type(float)


def output_distribution(histograms: Any, sigma: Any, method: str = "trapezoid",
                        noise: str = "gaussian", *, width: float | None = None,
                        num_points: int | None = None) -> jax.Array:
  """Output distribution ``Q(H)`` of the noisy argmax (attack paper, Theorem 1).

  ``[Q(H)]_k = ∫ f_k(α) Π_{i≠k} F_i(α) dα = P(argmax_i H_i + Z_i = k)`` with i.i.d.
  noise ``Z_i`` of scale σ (module docstring for the quadratures).

  Args:
    histograms: ``[..., C]`` vote counts (real, finite, ``>= 0``; ``C >= 2``).
    sigma: noise scale ``> 0`` broadcastable to ``histograms.shape[:-1]``:
      Gaussian standard deviation (GNMax) or Laplace scale ``1/γ`` (LNMax).
      Broadcasting vectorises over histograms and σ at once, e.g.
      ``histograms[None]`` with ``sigma[:, None]`` gives ``Q[S, B, C]``.
    method: ``"trapezoid"`` (the paper's, differentiable, what the attack
      optimises) or ``"accurate"`` (composite Gauss–Legendre; float64 when the
      inputs are concrete).
    noise: ``"gaussian"`` (GNMax) or ``"laplace"`` (LNMax).
    width: trapezoid half-width in noise scales (default 6 Gaussian, 20 Laplace).
    num_points: trapezoid nodes (default 49 Gaussian, 801 Laplace; odd for Laplace,
      whose kink correction needs the node t = 0).

  Returns:
    ``Q[broadcast batch, C]``; rows sum to 1 up to the quadrature error.

  Raises:
    ValueError: bad histograms (NaN, negative, < 2 classes), σ ≤ 0 or not
      finite, unknown method/noise, bad width/num_points, shapes that do not
      broadcast.
  """
  v.choice(method, "method", METHODS)
  v.choice(noise, "noise", NOISES)
  if width is not None and not (np.isscalar(width) and np.isfinite(width) and width > 0):
    raise ValueError(f"width must be a finite number > 0, got {width!r}")
  if num_points is not None:
    v.positive_int(num_points, "num_points")
    if num_points < 3 or (noise == "laplace" and num_points % 2 == 0):
      raise ValueError(f"num_points must be >= 3 (and odd for Laplace noise), got {num_points}")
  h = v.histograms(histograms)
  s = v.positive_array(sigma, "sigma")
  batch = v.batch_shape({"histograms[:-1]": np.shape(h)[:-1], "sigma": np.shape(s)})
  c = np.shape(h)[-1]
  concrete = not (v.is_traced(h) or v.is_traced(s))

  def run():
    dtype = _float_dtype()
    hb = jnp.broadcast_to(jnp.asarray(h, dtype), batch + (c,)).reshape(-1, c)
    sb = jnp.broadcast_to(jnp.asarray(s, dtype), batch).reshape(-1)
    q = output_distribution_core(hb, sb, method=method, noise=noise,
                                 width=None if width is None else float(width),
                                 num_points=num_points)
    return q.reshape(batch + (c,))

  if method == "accurate" and concrete:
    with jax.enable_x64(True):
      return run()
  return run()
