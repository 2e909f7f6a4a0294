"""LNMax (Laplace noisy max) accounting with the 2017 moments accountant.

Reference: Papernot, Abadi, Erlingsson, Goodfellow, Talwar, "Semi-supervised
Knowledge Transfer for Deep Learning from Private Training Data", ICLR 2017,
Section 3 and Appendix B (Theorems 1-3, Lemma 4).

The aggregator answers ``argmax_j n_j + Lap(1/γ)``; each answer is
``(ε, 0)``-DP with ``ε = 2γ`` (Theorem 3). For a query with counts ``n`` and
first argmax ``j*``, let ``Δ_j = n_{j*} - n_j``. Lemma 4 (a union bound), and the
fact that the noisy max returns the plurality class with probability at least
``1/C``, bound

  q = min( Σ_{j≠j*} (2 + γΔ_j) / (4 exp(γΔ_j)),  1 - 1/C ) ≥ Pr[M(d) ≠ j*].

For a moment ``l`` the log-moment of one answer is bounded by (Theorems 1, 3)

  α(l) = min( ½ε² l(l+1),  log_t,  ε l ),
  log_t = log( (1-q) ((1-q)/(1-e^ε q))^l + q e^{εl} )   if q < ½ (else ε l).

Where ``e^ε q ≥ 1`` Theorem 1's bound is vacuous (its denominator is not
positive) and ``ε l`` is used. The data-independent analysis takes ``q = 1``.
Moments add over queries (Theorem 2.1) and the tail bound (Theorem 2.2) gives

  ε_total = min_{l} (Σ_queries α(l) + log(1/δ)) / l.

Everything is computed from ``log q`` in float64 so that gaps up to 1e5 stay
finite (``q`` itself underflows long before).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax.accounting import _numerics as nm
from pate_jax import _checks as v


# ----------------------------------------------------------------------------- jitted cores


@jax.jit
def lnmax_log_q_core(votes: jax.Array, gamma: jax.Array) -> jax.Array:
  """``log q`` of Lemma 4 (capped at ``log(1 - 1/C)``) per query: ``[Q, C] -> [Q]``."""
  votes = nm.as_float(votes)
  # Σ_j (2 + z_j) e^{-z_j} / 4 with z_j = γΔ_j, scaled by the smallest z among j ≠ j*:
  # log q = -z_min + log Σ_j (2 + z_j) e^{-(z_j - z_min)} - log 4 (one exp per class, no
  # underflow for any gap).
  gaps, is_top = nm.gaps_to_top(votes)
  z = gamma * gaps
  z_min, _ = nm.min_and_argmin(jnp.where(is_top, jnp.inf, z), axis=-1, keepdims=True)
  z = jnp.where(is_top, z_min, z)                # double-where: no overflow in the unused term
  scaled = (2.0 + z) * jnp.exp(z_min - z)
  total = jnp.sum(jnp.where(is_top, 0.0, scaled), axis=-1)
  log_q = jnp.log(total) - z_min[..., 0] - math.log(4.0)
  return jnp.minimum(log_q, jnp.log1p(-1.0 / votes.shape[-1]))


@jax.jit
def log_moments_from_log_q(log_q: jax.Array, gamma: jax.Array, moments: jax.Array) -> jax.Array:
  """``α(l)`` of Theorems 1 and 3 from ``log q``: ``[...], [L] -> [..., L]``.

  ``log_q = 0`` (``q = 1``) gives the data-independent ``min(½ε²l(l+1), εl)``.
  """
  eps = 2.0 * gamma
  lq = jnp.asarray(log_q)
  # Per-query part (all selects on 1-D arrays). Theorem 1 applies for q < 1/2 and is
  # non-vacuous only while e^ε q < 1; elsewhere log_t = εl is wanted, which the
  # per-query values (log(1-q), ratio) = (0, ε) produce: log_t ≥ l ε, so the
  # minimum below returns min(½ε²l(l+1), εl).
  valid = (lq < nm.LOG_HALF) & (lq + eps < 0.0)
  lq_safe = jnp.where(valid, lq, -1.0 - eps)  # double-where: keeps the unused branch finite
  log1mq = nm.log1mexp(lq_safe)
  log_ratio = log1mq - nm.log1mexp(lq_safe + eps)  # log((1-q)/(1-e^ε q))
  log1mq = jnp.where(valid, log1mq, 0.0)
  log_ratio = jnp.where(valid, log_ratio, eps)
  lq_term = jnp.where(valid, lq_safe, -jnp.inf)
  # Per-(query, moment) part.
  col = lambda a: a[..., None]
  gauss = 0.5 * eps**2 * moments * (moments + 1.0)
  pure = eps * moments
  log_t = nm.logaddexp(col(log1mq) + moments * col(log_ratio), col(lq_term) + pure)
  return jnp.minimum(jnp.minimum(gauss, log_t), pure)


@functools.partial(jax.jit, static_argnames=("data_dependent",))
def lnmax_log_moments_core(votes: jax.Array, gamma: jax.Array, moments: jax.Array,
                           data_dependent: bool = True) -> jax.Array:
  """Per-query log-moment bounds ``α(l)``: ``[Q, C] -> [Q, L]`` (no validation)."""
  votes = nm.as_float(votes)
  if data_dependent:
    log_q = lnmax_log_q_core(votes, gamma)
  else:
    log_q = jnp.zeros(votes.shape[:-1], dtype=votes.dtype)
  return log_moments_from_log_q(log_q, gamma, moments)


@jax.jit
def moments_to_epsilon_core(total_log_moments: jax.Array, moments: jax.Array,
                            delta: jax.Array) -> tuple[jax.Array, jax.Array]:
  """``min_l (α(l) + log(1/δ)) / l`` over the last axis; returns ``(ε, l*)``."""
  eps = (total_log_moments - jnp.log(delta)) / moments
  eps_min, idx = nm.min_and_argmin(eps, axis=-1)
  return eps_min, moments[idx]


@functools.partial(jax.jit, static_argnames=("data_dependent", "max_moment"))
def lnmax_moments_epsilon_core(votes: jax.Array, gamma: jax.Array, delta: jax.Array,
                               data_dependent: bool = True,
                               max_moment: int = 8) -> tuple[jax.Array, jax.Array]:
  """Composed ``(ε, best moment)`` of all queries of ``votes[Q, C]`` (no validation)."""
  votes = nm.as_float(votes)
  moments = jnp.arange(1, max_moment + 1, dtype=votes.dtype)
  alpha = lnmax_log_moments_core(votes, gamma, moments, data_dependent).sum(axis=0)
  eps, best = moments_to_epsilon_core(alpha, moments, delta)
  return eps, best.astype(jnp.int32)


# ----------------------------------------------------------------------------- public API


@nm.with_x64
def lnmax_log_q(votes, gamma) -> jax.Array:
  """Lemma 4 bound on ``Pr[LNMax answer ≠ plurality]``, in log space.

  ``log q = min(log Σ_{j≠j*} (2 + γΔ_j) e^{-γΔ_j} / 4, log(1 - 1/C))`` with
  ``Δ_j = n_{j*} - n_j`` and ``j*`` the first argmax (Papernot et al. 2017,
  Lemma 4).

  Args:
    votes: ``[Q, C]`` vote counts (reals accepted under tracing, for gradients).
    gamma: inverse Laplace scale ``γ = 1/b > 0``.

  Returns:
    ``log q``, float64 ``[Q]``.
  """
  return lnmax_log_q_core(v.votes(votes), v.positive(gamma, "gamma"))


@nm.with_x64
def lnmax_log_moments(votes, gamma, moments, data_dependent: bool = True) -> jax.Array:
  """Per-query bounds on the log-moments ``α(l)`` of LNMax (2017, Theorems 1, 3).

  ``α(l) = min(½ε²l(l+1), log_t, εl)`` with ``ε = 2γ`` and
  ``log_t = log((1-q)((1-q)/(1-e^ε q))^l + q e^{εl})`` for ``q < ½`` (and
  ``e^ε q < 1``), else ``εl``; ``q`` from :func:`lnmax_log_q`, or ``q = 1`` when
  ``data_dependent=False``. Moments of a sequence of answers add up.

  Args:
    votes: ``[Q, C]`` vote counts.
    gamma: inverse Laplace scale ``γ > 0``.
    moments: ``[L]`` moment orders ``l > 0`` (the paper uses 1..8).
    data_dependent: use Lemma 4's ``q`` (True) or ``q = 1`` (False).

  Returns:
    float64 ``[Q, L]``.
  """
  return lnmax_log_moments_core(v.votes(votes), v.positive(gamma, "gamma"),
                                v.moments(moments),
                                data_dependent=v.boolean(data_dependent, "data_dependent"))


@nm.with_x64
def moments_to_epsilon(total_log_moments, moments, delta) -> tuple[jax.Array, jax.Array]:
  """Moments-accountant tail bound ``ε = min_l (α(l) + log(1/δ)) / l`` (2017, Thm 2.2).

  Args:
    total_log_moments: ``[L]`` log-moments already summed over queries; each is
      ``≥ 0`` (``α(l) = log E[exp(l c)] ≥ l E[c] ≥ 0`` for a privacy loss ``c``), so a
      negative or NaN value is refused rather than turned into a negative ε.
    moments: ``[L]`` the moment orders ``l``.
    delta: target ``δ`` in (0, 1).

  Returns:
    ``(ε, best l)`` as float64 scalars.
  """
  moments = v.moments(moments)
  total = v.float64_array(total_log_moments)
  if total.shape[-1:] != moments.shape:
    raise ValueError(f"total_log_moments must end in the moments axis {moments.shape}; got "
                     f"shape {total.shape}")
  if not v.is_traced(total) and v.any_nan(-total, positive_is_bad=True):
    raise ValueError(f"total_log_moments must be non-negative log-moments (not NaN); got "
                     f"{np.asarray(total)}")
  return moments_to_epsilon_core(total, moments, v.delta(delta))


@nm.with_x64
def lnmax_moments_epsilon(votes, gamma, delta, data_dependent: bool = True,
                          max_moment: int = 8) -> tuple[jax.Array, jax.Array]:
  """Total ``(ε, δ)`` of answering every row of ``votes`` with LNMax (2017 accountant).

  ``ε = min_{l=1..max_moment} (Σ_queries α(l) + log(1/δ)) / l`` with ``α(l)`` from
  :func:`lnmax_log_moments` (Papernot et al. 2017, Theorems 1-3, Lemma 4).

  Args:
    votes: ``[Q, C]`` vote counts.
    gamma: inverse Laplace scale ``γ > 0`` (the MNIST setting is ``γ = 0.05``).
    delta: target ``δ`` in (0, 1).
    data_dependent: Lemma 4's data-dependent ``q`` (True) or ``q = 1`` (False).
    max_moment: largest moment order ``l``.

  Returns:
    ``(ε, best_moment)``: float64 scalar and int32 scalar.
  """
  max_moment = v.positive_int(max_moment, "max_moment")
  return lnmax_moments_epsilon_core(v.votes(votes), v.positive(gamma, "gamma"),
                                    v.delta(delta),
                                    data_dependent=v.boolean(data_dependent, "data_dependent"),
                                    max_moment=max_moment)


@nm.with_x64
def strong_composition_epsilon(num_queries, gamma, delta) -> jax.Array:
  """The paper's strong-composition baseline ``4Tγ² + 2γ √(2T ln(1/δ))``.

  ``T`` answers, each ``(2γ, 0)``-DP, composed with the strong composition
  theorem (Dwork, Rothblum, Vadhan 2010) as written in Papernot et al. 2017,
  Appendix B: ``γ = 0.05, T = 1000, δ = 1e-6`` gives ``ε ≈ 26``.

  Args:
    num_queries: number of answers ``T >= 1``.
    gamma: inverse Laplace scale ``γ > 0``.
    delta: ``δ`` in (0, 1).

  Returns:
    float64 scalar ``ε``.
  """
  t = v.positive(num_queries, "num_queries")
  gamma = v.positive(gamma, "gamma")
  delta = v.delta(delta)
  return 4.0 * t * gamma**2 + 2.0 * gamma * jnp.sqrt(2.0 * t * jnp.log(1.0 / delta))
