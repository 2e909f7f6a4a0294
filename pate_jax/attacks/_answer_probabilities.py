"""The attacker's model of the answers, ``log π(H)``, and the batching of its cores.

Beyond the attack paper. The attacker's answers to one repeated input are
i.i.d. draws from a categorical distribution ``π(H)`` over

* GNMax: the ``C`` classes, ``π = Q(H)`` (Theorem 1 of the attack paper);
* Confident-GNMax: the ``C`` classes and ``⊥`` (not answered),
  ``π = [P(H)·Q(H), 1 - P(H)]`` with ``P(H) = Φ((max_i H_i - T)/σ_T)``
  (Papernot et al. 2018, Algorithm 1: the threshold noise is independent of
  the answer noise).

:func:`log_answer_probabilities` is ``log π(H)`` for one histogram (pure jnp, through the
differentiable trapezoid ``log Q`` of :func:`log_output_distribution`): the likelihood
of the maximum-likelihood reconstruction (:mod:`pate_jax.attacks._likelihood`) and of
the Fisher information (:mod:`pate_jax.attacks._cramer_rao`). Also owned here: the
helpers that batch their jitted cores (the thresholds' check, flattening, padding to a
power of two, float64 for concrete inputs).

Accuracy of ``Q``'s derivatives (experiments/bench_attack.py, ``gradients``): the
autodiff Jacobian of the trapezoid ``Q`` against central finite differences of the
accurate quadrature (float64, Table 1).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.scipy.special import log_ndtr

from pate_jax import _checks as v
from pate_jax._compile import bucket
from pate_jax.attacks import _output_distribution as od


# ----------------------------------------------------------------------------- π(H), one histogram


def log_output_distribution(h: jax.Array, sigma: jax.Array, width: float | None = None,
                            num_points: int | None = None) -> jax.Array:
  """``log Q(H)[C]`` of GNMax by the trapezoid rule, in log space (pure jnp).

  The same quadrature as :func:`pate_jax.attacks.output_distribution` (Gaussian,
  default ±6σ, 49 nodes) summed by ``logsumexp``, so that tiny ``Q_k`` keep finite
  logarithms and gradients.
  """
  width = od.DEFAULT_WIDTH["gaussian"] if width is None else float(width)
  num_points = od.DEFAULT_POINTS["gaussian"] if num_points is None else int(num_points)
  t = jnp.linspace(-width, width, num_points, dtype=h.dtype)
  log_w = jnp.full((num_points,), math.log(2.0 * width / (num_points - 1)), h.dtype)
  log_w = log_w.at[0].add(-math.log(2.0)).at[-1].add(-math.log(2.0))
  diffs = (h[:, None] - h[None, :]) / sigma
  return jax.nn.logsumexp(od._log_integrand(t, diffs, "gaussian") + log_w, axis=-1)


def log_answer_probabilities(h: jax.Array, sigma: jax.Array, threshold: jax.Array,
                             sigma_threshold: jax.Array, *, confident: bool,
                             width: float | None = None,
                             num_points: int | None = None) -> jax.Array:
  """``log π(H)``: ``[C]`` (GNMax) or ``[C+1]`` (Confident-GNMax, ``⊥`` last).

  ``Q`` is renormalised to sum to 1 (the trapezoid's truncation leaves it ~2e-9
  short), so that ``π`` is a distribution and ``Σ_k π_k ∇log π_k = 0`` exactly. The
  most likely class gets ``log1p(-Σ_{k≠top} Q_k)``: near-unanimous histograms have
  ``log Q_top ≈ -Σ_{k≠top} Q_k`` tiny, which the quadrature's logarithm resolves
  only to ~1e-6 in float32 -- as much as the whole signal of the small classes.
  """
  log_q = log_output_distribution(h, sigma, width, num_points)
  log_q = log_q - jax.nn.logsumexp(log_q)
  top = jnp.arange(log_q.shape[-1]) == jnp.argmax(log_q)
  rest = jnp.sum(jnp.where(top, 0.0, jnp.exp(log_q)))
  # rest = 1 - Q_top <= 1 - 1/C; the cap only guards rounding.
  log_q = jnp.where(top, jnp.log1p(-jnp.minimum(rest, 1.0 - 0.5 / log_q.shape[-1])), log_q)
  if not confident:
    return log_q
  z = (jnp.max(h) - threshold) / sigma_threshold
  return jnp.concatenate([log_ndtr(z) + log_q, log_ndtr(-z)[None]])


# ----------------------------------------------------------------------------- batching


def _thresholds(threshold, sigma_threshold):
  confident = threshold is not None
  if confident != (sigma_threshold is not None):
    raise ValueError("threshold and sigma_threshold must be given together, got "
                     f"threshold={threshold!r}, sigma_threshold={sigma_threshold!r}")
  if not confident:
    return False, {}
  return True, {"threshold": v.finite_array(threshold, "threshold"),
                "sigma_threshold": v.positive_array(sigma_threshold, "sigma_threshold")}


def _flat(x, batch, dtype, trailing=()):
  return jnp.broadcast_to(jnp.asarray(x, dtype), batch + trailing).reshape((-1,) + trailing)


def padded_size(size: int) -> int:
  """The batch size a core is compiled for: the next power of two (one program
  serves every batch size up to it; the padding repeats row 0)."""
  return bucket(size)


def pad_rows(*arrays: jax.Array) -> tuple[jax.Array, ...]:
  """Pads ``[B, ...]`` arrays to :func:`padded_size` rows by repeating row 0."""
  b = arrays[0].shape[0]
  extra = padded_size(b) - b
  return tuple(jnp.concatenate([a, jnp.repeat(a[:1], extra, 0)]) if extra else a
               for a in arrays)


def _x64_if_concrete(args, fn):
  if any(v.is_traced(a) for a in jax.tree.leaves(args)):
    return fn()
  with jax.enable_x64(True):
    return fn()
