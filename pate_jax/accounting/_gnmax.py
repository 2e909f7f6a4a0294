"""GNMax and Confident-GNMax data-dependent Rényi-DP accounting.

Reference: Papernot, Song, Mironov, Raghunathan, Talwar, Erlingsson, "Scalable
Private Learning with PATE", ICLR 2018: Theorem 6 (data-dependent RDP from a
bound on ``Pr[M(D) ≠ i*]``), Proposition 10 (choice of the higher orders for
the Gaussian mechanism), Section 4.1 (Confident-GNMax).

GNMax answers ``argmax_j n_j + N(0, σ²)``; moving one teacher changes two counts
by one, so each answer is ``(λ, λ/σ²)``-RDP for every order ``λ > 1``.

Data-dependent bound. For a query with gaps ``Δ_j = n_{j*} - n_j``,

  log q = min( logsumexp_{j≠j*} log Φ̄(Δ_j / (√2 σ)),  log(1 - 1/C) ),

``Φ̄`` the standard normal survival function. With ``μ2 = σ √(-log q)``,
``μ1 = μ2 + 1`` and ``ε_i = μ_i / σ²`` (Proposition 10), Theorem 6 applies where
``μ1 > λ``, ``μ2 > 1``, ``-log q > ε2`` and
``log q ≤ (μ2-1) ε2 - μ2 (log(1 + 1/(μ1-1)) + log(1 + 1/(μ2-1)))``; there

  rdp(λ) = log( (1-q) A^{λ-1} + q B^{λ-1} ) / (λ-1),
  log A = log(1-q) - log(1 - exp((log q + ε2)(1 - 1/μ2))),
  log B = ε1 - log q / (μ1 - 1),

and the answer is ``min(rdp(λ), λ/σ²)``; elsewhere ``λ/σ²``. ``log q = -inf``
costs 0. The per-query parts (``log q``, ``log A``, ``log B``, validity) are computed
once per query and broadcast over the orders, so the ``[Q, K]`` work is one ``exp``
and one ``log1p`` per entry, without selects. ``log Φ̄`` is summed through the scaled
complementary error function (``erfcx``), exact for any gap.

Confident-GNMax answers a query only if ``max_j n_j + N(0, σ_T²) ≥ T``. Its
expected per-query cost is the threshold cost plus ``Pr[answered]`` times the
GNMax cost at ``σ``, with ``Pr[answered] = Φ̄((T - max_j n_j)/σ_T)``. The threshold
step is a Gaussian mechanism of sensitivity 1 (data-independent ``λ/(2σ_T²)``),
whose data-dependent bound is the one above at noise ``√2 σ_T`` and
``log q_T = min(log Pr[answered], log(1 - Pr[answered]))``.
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
def gnmax_log_q_core(votes: jax.Array, sigma: jax.Array) -> jax.Array:
  """``log q`` for GNMax per query: ``[Q, C] -> [Q]`` (no validation)."""
  votes = nm.as_float(votes)
  # Φ̄(Δ/(√2σ)) = ½ erfc(x) = ½ erfcx(x) e^{-x²} with x = Δ/(2σ). Scaling by the
  # smallest x among j ≠ j*, log Σ_j Φ̄ = log ½ - x_min² + log Σ_j erfcx(x_j) e^{-(x_j² - x_min²)}:
  # one exp per class, no log, and exact for any gap (nothing underflows).
  gaps, is_top = nm.gaps_to_top(votes)
  x = jnp.where(is_top, jnp.inf, gaps / (2.0 * sigma))
  x_min, _ = nm.min_and_argmin(x, axis=-1, keepdims=True)
  x_safe = jnp.where(is_top, x_min, x)           # double-where: no inf in the unused branch
  scaled = nm.erfcx(x_safe) * jnp.exp(-(x_safe - x_min) * (x_safe + x_min))
  total = jnp.sum(jnp.where(is_top, 0.0, scaled), axis=-1)
  log_q = math.log(0.5) - x_min[..., 0]**2 + jnp.log(total)
  return jnp.minimum(log_q, jnp.log1p(-1.0 / votes.shape[-1]))


@jax.jit
def rdp_from_log_q(log_q: jax.Array, sigma: jax.Array, orders: jax.Array) -> jax.Array:
  """Theorem 6 + Proposition 10 for a Gaussian noisy max: ``[...], [K] -> [..., K]``.

  Args:
    log_q: log of an upper bound on ``Pr[M(D) ≠ i*]`` (``<= 0``; ``-inf`` allowed).
    sigma: the Gaussian noise scale of a sensitivity-``√2`` mechanism (GNMax); pass
      ``√2 σ_T`` for a sensitivity-1 threshold step.
    orders: ``[K]`` Rényi orders ``λ > 1``.

  Returns:
    ``min(data-dependent bound, λ/σ²)`` where Theorem 6 applies, else ``λ/σ²``;
    0 where ``log_q = -inf``.
  """
  log_q = jnp.asarray(log_q)
  var = sigma**2
  # Per-query quantities (shape [...]); all selects happen here, on 1-D arrays.
  usable = jnp.isfinite(log_q) & (log_q < 0.0)
  lq = jnp.where(usable, log_q, -1.0)                              # double-where guard
  mu2 = sigma * jnp.sqrt(-lq)
  mu2_ok = mu2 > 1.0
  mu2_s = jnp.where(mu2_ok, mu2, 2.0)                              # keeps 1/(μ2-1) finite
  mu1_s = mu2_s + 1.0
  eps1 = mu1_s / var
  eps2 = mu2_s / var
  q_ok = lq <= (mu2_s - 1.0) * eps2 - mu2_s * (
      jnp.log1p(1.0 / (mu1_s - 1.0)) + jnp.log1p(1.0 / (mu2_s - 1.0)))
  query_ok = usable & mu2_ok & q_ok & (-lq > eps2)
  x = jnp.where(query_ok, (lq + eps2) * (1.0 - 1.0 / mu2_s), -1.0)
  log1mq = nm.log1mexp(lq)
  log_a = log1mq - nm.log1mexp(x)                                  # log A
  log_b = eps1 - lq / (mu1_s - 1.0)                                # log B
  # Theorem 6 holds for orders λ < μ1 = μ2 + 1; never where the query conditions fail.
  mu1 = jnp.where(query_ok, mu2 + 1.0, -jnp.inf)
  # log q = -inf: the bound below is exactly 0 (log1p(e^{-inf}) = 0) at every order.
  certain = log_q == -jnp.inf
  log1mq, log_a, log_b = (jnp.where(certain, 0.0, a) for a in (log1mq, log_a, log_b))
  lq = jnp.where(certain, -jnp.inf, lq)
  mu1 = jnp.where(certain, jnp.inf, mu1)
  # Per-(query, order) part, select-free (XLA's CPU selects cost more than an exp):
  # orders with λ ≥ μ1 get a +huge penalty so that the minimum picks λ/σ².
  # log((1-q) A^{λ-1} + q B^{λ-1}) / (λ-1) = log_a + (log1mq + softplus(d)) / (λ-1) with
  # d = (log q - log1mq) + (λ-1)(log_b - log_a): one exp and one log1p per entry.
  col = lambda a: a[..., None]
  lam1 = orders - 1.0
  d = col(lq - log1mq) + lam1 * col(log_b - log_a)
  dependent = col(log_a) + (col(log1mq) + nm.softplus(d)) * (1.0 / lam1)
  # (No gradient flows through the penalty: it only switches between two branches.)
  penalty = jax.lax.stop_gradient(jnp.maximum(
      orders * (1.0 + jnp.finfo(orders.dtype).eps) - col(mu1), 0.0) * nm.big(orders.dtype))
  return jnp.minimum(dependent + penalty, orders / var)


@functools.partial(jax.jit, static_argnames=("data_dependent",))
def gnmax_rdp_core(votes: jax.Array, sigma: jax.Array, orders: jax.Array,
                   data_dependent: bool = True) -> jax.Array:
  """Per-query GNMax RDP ``[Q, K]`` (no validation)."""
  votes = nm.as_float(votes)
  if not data_dependent:
    return jnp.broadcast_to(orders / sigma**2, votes.shape[:-1] + orders.shape)
  return rdp_from_log_q(gnmax_log_q_core(votes, sigma), sigma, orders)


@jax.jit
def confident_log_pr_answered_core(votes: jax.Array, threshold: jax.Array,
                                   sigma_threshold: jax.Array) -> jax.Array:
  """``log Pr[max_j n_j + N(0, σ_T²) ≥ T] = log Φ((max_j n_j - T)/σ_T)``: ``[Q]``."""
  votes = nm.as_float(votes)
  return nm.log_ndtr((nm.max_and_argmax(votes, axis=-1)[0] - threshold) / sigma_threshold)


@jax.jit
def confident_threshold_rdp_core(votes: jax.Array, threshold: jax.Array,
                                 sigma_threshold: jax.Array, orders: jax.Array) -> jax.Array:
  """RDP of the threshold step ``[Q, K]`` (paid by every query, answered or not)."""
  votes = nm.as_float(votes)
  z = (nm.max_and_argmax(votes, axis=-1)[0] - threshold) / sigma_threshold
  log_q = jnp.minimum(nm.log_ndtr(z), nm.log_ndtr(-z))  # min(log Pr[ans], log(1 - Pr[ans]))
  return rdp_from_log_q(log_q, nm.SQRT2 * sigma_threshold, orders)


@jax.jit
def confident_gnmax_rdp_core(votes: jax.Array, threshold: jax.Array, sigma_threshold: jax.Array,
                             sigma: jax.Array, orders: jax.Array) -> jax.Array:
  """Expected per-query Confident-GNMax RDP ``[Q, K]`` (no validation)."""
  votes = nm.as_float(votes)
  thr = confident_threshold_rdp_core(votes, threshold, sigma_threshold, orders)
  pr = jnp.exp(confident_log_pr_answered_core(votes, threshold, sigma_threshold))
  return thr + pr[:, None] * gnmax_rdp_core(votes, sigma, orders, data_dependent=True)


# ----------------------------------------------------------------------------- public API


@nm.with_x64
def gnmax_log_q(votes, sigma) -> jax.Array:
  """Union bound on ``Pr[GNMax answer ≠ plurality]``, in log space (2018, Sec. 4).

  ``log q = min(logsumexp_{j≠j*} log Φ̄(Δ_j/(√2σ)), log(1 - 1/C))``, ``Δ_j =
  n_{j*} - n_j``, ``j*`` the first argmax.

  Args:
    votes: ``[Q, C]`` vote counts.
    sigma: GNMax noise standard deviation ``σ > 0``.

  Returns:
    float64 ``[Q]``.
  """
  return gnmax_log_q_core(v.votes(votes), v.positive(sigma, "sigma"))


@nm.with_x64
def gaussian_rdp_from_log_q(log_q, sigma, orders) -> jax.Array:
  """Data-dependent RDP of a Gaussian noisy mechanism from ``log q`` (2018, Thm 6 + Prop 10).

  See the module docstring for the formula; ``sigma`` is the noise of a mechanism
  with sensitivity ``√2`` (GNMax: ``σ``; a sensitivity-1 threshold: ``√2 σ_T``).

  Args:
    log_q: ``[...]`` values ``<= 0`` (``-inf`` allowed: cost 0).
    sigma: noise scale ``> 0``.
    orders: ``[K]`` orders ``> 1``.

  Returns:
    float64 ``[..., K]``.
  """
  log_q_arr = v.float64_array(log_q)
  if not v.is_traced(log_q_arr) and v.any_nan(log_q_arr, positive_is_bad=True):
    raise ValueError(f"log_q must be <= 0 and not NaN; got {np.asarray(log_q)}")
  return rdp_from_log_q(log_q_arr, v.positive(sigma, "sigma"), v.orders(orders))


@nm.with_x64
def gnmax_rdp(votes, sigma, orders, data_dependent: bool = True) -> jax.Array:
  """Per-query Rényi-DP cost of GNMax (Papernot et al. 2018, Theorem 6 + Prop. 10).

  Data-independent: ``λ/σ²`` for every query. Data-dependent: ``min`` of that and
  Theorem 6's bound from :func:`gnmax_log_q` wherever its conditions hold
  (module docstring). Costs compose by summing over queries.

  Args:
    votes: ``[Q, C]`` vote counts (reals accepted under tracing, for gradients).
    sigma: noise standard deviation ``σ > 0``.
    orders: ``[K]`` Rényi orders ``λ > 1``.
    data_dependent: use the data-dependent bound.

  Returns:
    float64 ``rdp[Q, K]``.
  """
  return gnmax_rdp_core(v.votes(votes), v.positive(sigma, "sigma"),
                        v.orders(orders),
                        data_dependent=v.boolean(data_dependent, "data_dependent"))


@nm.with_x64
def confident_log_pr_answered(votes, threshold, sigma_threshold) -> jax.Array:
  """``log Pr[answered] = log Φ̄((T - max_j n_j)/σ_T)`` per query (2018, Sec. 4.1): ``[Q]``."""
  return confident_log_pr_answered_core(v.votes(votes), v.scalar(threshold, "threshold"),
                                        v.positive(sigma_threshold, "sigma_threshold"))


@nm.with_x64
def confident_threshold_rdp(votes, threshold, sigma_threshold, orders) -> jax.Array:
  """Per-query RDP of Confident-GNMax's threshold check (paid answered or not).

  Gaussian mechanism of sensitivity 1: data-independent ``λ/(2σ_T²)``, tightened
  by Theorem 6 at noise ``√2σ_T`` with ``log q_T = min(log Pr[answered],
  log(1 - Pr[answered]))``. A ledger that knows which queries were answered pays
  this for every query plus :func:`gnmax_rdp` for the answered ones.

  Returns:
    float64 ``[Q, K]``.
  """
  return confident_threshold_rdp_core(
      v.votes(votes, equal_totals=True), v.scalar(threshold, "threshold"),
      v.positive(sigma_threshold, "sigma_threshold"), v.orders(orders))


@nm.with_x64
def confident_gnmax_rdp(votes, threshold, sigma_threshold, sigma, orders) -> jax.Array:
  """Expected per-query RDP of Confident-GNMax (Papernot et al. 2018, Section 4.1).

  ``rdp = threshold_rdp + Pr[answered] · gnmax_rdp(σ)``, with ``Pr[answered] =
  Φ̄((T - max_j n_j)/σ_T)``, the threshold cost of
  :func:`confident_threshold_rdp`, and the data-dependent :func:`gnmax_rdp`.

  Args:
    votes: ``[Q, C]`` vote counts; every row must sum to the same teacher count
      (the threshold ``T`` is a number of teachers).
    threshold: the threshold ``T`` (in votes).
    sigma_threshold: noise ``σ_T > 0`` of the threshold check.
    sigma: noise ``σ > 0`` of the GNMax answer.
    orders: ``[K]`` Rényi orders ``λ > 1``.

  Returns:
    float64 ``rdp[Q, K]``.
  """
  return confident_gnmax_rdp_core(
      v.votes(votes, equal_totals=True), v.scalar(threshold, "threshold"),
      v.positive(sigma_threshold, "sigma_threshold"), v.positive(sigma, "sigma"),
      v.orders(orders))
