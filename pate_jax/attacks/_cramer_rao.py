"""The information the answers carry about the vote histogram: its Cramér–Rao bound.

Beyond the attack paper; ``π(H)`` is the answer distribution of
:mod:`pate_jax.attacks._answer_probabilities` (GNMax, or Confident-GNMax with ``⊥``).

Information bound (:func:`fisher_information`, :func:`cramer_rao`): the Fisher
information per query is ``I(H) = Σ_k π_k ∇log π_k ∇log π_kᵀ`` (= ``Jᵀ diag(1/Q) J``
for GNMax, ``J = ∂Q/∂H``; computed from ``∇ log π`` so that vanishing ``π_k`` stay
finite; float64 for concrete inputs). For GNMax ``I·1 = 0`` (Theorem 2); the
constraint ``Σ H = N`` removes that direction too, so with an orthonormal basis
``U`` of ``{v : Σ v = 0}`` the
constrained Cramér–Rao bound is ``Cov(Ĥ) ⪰ Σ_n = U (Uᵀ n I U)⁻¹ Uᵀ`` for unbiased
estimators (Gorman & Hero 1990; Stoica & Ng 1998). **Gaussian approximation:** the
MLE is asymptotically ``N(H, Σ_n)``, so its expected normalised L1 error is about
``Σ_i √(2/π) √(Σ_n)_ii / (2N)`` -- what :func:`cramer_rao` reports. It decreases
as ``1/√n``, so the queries needed for an error ``e`` are
``⌈(error at n = 1 / e)²⌉``. It is a guide, not a floor, near the boundary: a class
within two standard deviations of 0 (``near_boundary``) can be estimated better
by a constrained (biased) estimator such as the MLE on the simplex. For classes
with no votes the plain bound explodes (``Q_k`` is tiny, so the answers carry little
information about ``H_k``) while the MLE pins them at 0, so the bound with those
classes known (``U`` restricted to ``v_k = 0`` there) is reported beside it.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks as v
from pate_jax.attacks._answer_probabilities import (
    _flat,
    _thresholds,
    _x64_if_concrete,
    log_answer_probabilities,
    pad_rows,
)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


# A class is "near the boundary" when it is within this many standard deviations of 0.
BOUNDARY_STDS = 2.0


# ----------------------------------------------------------------------------- Fisher information


def fisher_single(h: jax.Array, sigma: jax.Array, threshold: jax.Array,
                  sigma_threshold: jax.Array, *, confident: bool, width: float | None = None,
                  num_points: int | None = None) -> jax.Array:
  """Per-query Fisher information ``I(H) = Gᵀ diag(π) G``, ``G = ∂ log π / ∂H``: ``[C, C]``."""
  fn = functools.partial(log_answer_probabilities, sigma=sigma, threshold=threshold,
                         sigma_threshold=sigma_threshold, confident=confident, width=width,
                         num_points=num_points)
  log_p = fn(h)
  g = jax.jacfwd(fn)(h)                                            # [K, C]
  return g.T @ (jnp.exp(log_p)[:, None] * g)


def cramer_rao_covariance_single(fisher: jax.Array, num_queries: jax.Array,
                                 free: jax.Array | None = None) -> jax.Array:
  """``Σ_n = U (Uᵀ n I U)⁻¹ Uᵀ`` ``[C, C]``, ``U`` an orthonormal basis of the tangent space.

  The tangent space is ``{v : Σ v = 0}``, or with a boolean mask ``free[C]``
  ``{v : Σ v = 0, v_k = 0 where not free_k}`` (classes known to the attacker). With
  ``P`` the orthogonal projector onto it, ``Σ_n = P (P n I P + s (1 - P))⁻¹ P`` for any
  ``s > 0``. ``inf`` on the diagonal where ``n I`` is singular on the tangent space.
  """
  c = fisher.shape[-1]
  m = jnp.ones((c,), fisher.dtype) if free is None else free.astype(fisher.dtype)
  proj = jnp.diag(m) - jnp.outer(m, m) / jnp.maximum(jnp.sum(m), 1.0)
  a = proj @ (num_queries * fisher) @ proj
  scale = jnp.maximum(jnp.max(jnp.abs(jnp.diagonal(a))), jnp.finfo(fisher.dtype).tiny)
  lam, vecs = jnp.linalg.eigh(a + scale * (jnp.eye(c, dtype=fisher.dtype) - proj))
  ok = lam > 1e-12 * jnp.max(lam)
  cov = proj @ (vecs @ ((1.0 / jnp.where(ok, lam, 1.0))[:, None] * vecs.T)) @ proj
  return jnp.where(jnp.all(ok), cov, jnp.diag(jnp.full((c,), jnp.inf, fisher.dtype)))


@functools.partial(jax.jit, static_argnames=("confident", "width", "num_points"))
def fisher_core(h, sigma, threshold, sigma_threshold, *, confident: bool,
                width: float | None, num_points: int | None):
  """Batched :func:`fisher_single`: ``[B, C] -> [B, C, C]``."""
  fn = functools.partial(fisher_single, confident=confident, width=width,
                         num_points=num_points)
  return jax.vmap(fn)(h, sigma, threshold, sigma_threshold)


@jax.jit
def cramer_rao_core(fisher, h, num_queries, targets):
  """Batched bound: ``[B, C, C], [B, C], [B], [E] ->`` the fields of :class:`CramerRao`."""
  total = jnp.sum(h, -1)
  scale = 1.0 / jnp.sqrt(num_queries)
  one = jnp.ones((), fisher.dtype)

  def bound(free):
    cov1 = jax.vmap(cramer_rao_covariance_single, (0, None, 0))(fisher, one, free)
    std1 = jnp.sqrt(jnp.diagonal(cov1, axis1=-2, axis2=-1))
    err1 = _SQRT_2_OVER_PI * jnp.sum(std1, -1) / (2.0 * total)
    return std1, err1, jnp.ceil((err1[:, None] / targets) ** 2)

  std1, err1, needed = bound(jnp.ones(h.shape, bool))
  _, err1_kz, needed_kz = bound(h > 0)
  std = std1 * scale[:, None]
  return (err1 * scale, std, jnp.any(h < BOUNDARY_STDS * std, -1), needed, err1_kz * scale,
          needed_kz)


# ----------------------------------------------------------------------------- public API


class CramerRao(NamedTuple):
  """Cramér–Rao bound of :func:`cramer_rao` (batch shape ``[...]``).

  Attributes:
    error: expected normalised L1 error of an efficient unbiased estimator in the
      Gaussian approximation, ``Σ_i √(2/π) std_i / (2N)``.
    std: ``[..., C]`` standard deviations ``√(Σ_n)_ii`` (votes).
    near_boundary: some class has ``H_i < 2 std_i`` (the bound is only a guide).
    queries_for_error: ``[..., E]`` queries needed for the errors ``targets``
      (``⌈(error(n=1)/e)²⌉``; float, ``inf`` when ``I`` is singular on the tangent space).
    error_known_zeros, queries_for_error_known_zeros: the same bound for an
      attacker who knows which classes have no votes (tangent space restricted
      to the others). Classes with no votes make the plain bound explode
      (``Q_k`` is tiny, so the answers say little about ``H_k``), while the MLE on the
      simplex pins them at 0; this oracle bound is the guide for such histograms.
  """
  error: jax.Array
  std: jax.Array
  near_boundary: jax.Array
  queries_for_error: jax.Array
  error_known_zeros: jax.Array
  queries_for_error_known_zeros: jax.Array


def fisher_information(histograms: Any, sigma: Any, *, threshold: Any = None,
                       sigma_threshold: Any = None, width: float | None = None,
                       num_points: int | None = None) -> jax.Array:
  """Fisher information per query of the answers about ``H``: ``I[..., C, C]``.

  ``I(H) = Σ_k π_k ∇log π_k ∇log π_kᵀ`` with ``π`` the answer distribution of GNMax
  (``Jᵀ diag(1/Q) J``, ``J = ∂Q/∂H``) or, with ``threshold``, of Confident-GNMax
  including the ``⊥`` outcome (module docstring). ``n`` i.i.d. queries carry ``n·I``.
  ``Q`` is the differentiable trapezoid rule (``width``, ``num_points``); float64
  for concrete inputs.

  Args:
    histograms: ``[..., C]`` vote counts (real, ``>= 0``).
    sigma: GNMax noise ``σ > 0``, broadcastable with ``histograms.shape[:-1]``.
    threshold, sigma_threshold: Confident-GNMax's ``T`` and ``σ_T`` (both or none).

  Returns:
    ``[batch, C, C]`` symmetric positive semi-definite; for GNMax ``I·1 = 0``.

  Raises:
    ValueError: bad histograms, ``σ <= 0``, only one of the thresholds, shapes
      that do not broadcast.
  """
  h = v.histograms(histograms)
  s = v.positive_array(sigma, "sigma")
  confident, thr = _thresholds(threshold, sigma_threshold)
  shapes = {"histograms[:-1]": np.shape(h)[:-1], "sigma": np.shape(s)}
  shapes.update({k: np.shape(x) for k, x in thr.items()})
  batch = v.batch_shape(shapes)
  c = np.shape(h)[-1]

  def run():
    dtype = jnp.result_type(float)
    b = int(np.prod(batch, dtype=int))
    zeros = jnp.zeros((b,), dtype)
    args = pad_rows(_flat(h, batch, dtype, (c,)), _flat(s, batch, dtype),
                    _flat(thr["threshold"], batch, dtype) if confident else zeros,
                    _flat(thr["sigma_threshold"], batch, dtype) if confident else zeros + 1)
    out = fisher_core(*args, confident=confident,
                      width=None if width is None else float(width), num_points=num_points)
    return out[:b].reshape(batch + (c, c))

  return _x64_if_concrete((h, s, thr), run)


def cramer_rao(histograms: Any, sigma: Any, num_queries: Any, *, threshold: Any = None,
               sigma_threshold: Any = None, targets: Any = (0.05, 0.10),
               width: float | None = None, num_points: int | None = None) -> CramerRao:
  """Cramér–Rao bound on the normalised L1 error after ``num_queries`` queries.

  The constrained bound ``Cov(Ĥ) ⪰ Σ_n = U (Uᵀ n I(H) U)⁻¹ Uᵀ`` on ``{Σ H = N}``
  (module docstring), turned into an expected normalised L1 error by the
  **Gaussian approximation** ``Ĥ ~ N(H, Σ_n)`` (the MLE's asymptotic law):
  ``E|Ĥ_i - H_i| = √(2/π) √(Σ_n)_ii``, error ``= Σ_i E|Ĥ_i - H_i| / (2 Σ_i H_i)``.
  For unbiased estimators away from the simplex's boundary; ``near_boundary``
  flags histograms with a class within two standard deviations of 0, where a
  constrained estimator can do better (a guide there, not a floor).

  Args:
    histograms: ``[..., C]`` true vote counts (``N = Σ_i H_i > 0``).
    sigma: GNMax ``σ > 0``; num_queries: ``n > 0`` (queries *sent*; with
      Confident-GNMax the ``⊥`` answers count). Both broadcast with the batch.
    threshold, sigma_threshold: Confident-GNMax (both or none).
    targets: errors ``e`` for which to report the queries needed.

  Returns:
    :class:`CramerRao`.
  """
  h = v.histograms(histograms)
  n = v.positive_array(num_queries, "num_queries")
  tg = v.positive_array(np.asarray(targets, np.float64), "targets")
  if np.ndim(tg) != 1:
    raise ValueError(f"targets must be a 1-d sequence of errors; got shape {np.shape(tg)}")
  if not v.is_traced(h) and np.any(h.sum(-1) <= 0):
    raise ValueError("histograms must have at least one vote (the error divides by Σ H)")
  fisher = fisher_information(h, sigma, threshold=threshold, sigma_threshold=sigma_threshold,
                              width=width, num_points=num_points)
  batch = v.batch_shape({"fisher": fisher.shape[:-2], "num_queries": np.shape(n)})
  c = np.shape(h)[-1]

  def run():
    dtype = jnp.result_type(float)
    b = int(np.prod(batch, dtype=int))
    args = pad_rows(_flat(fisher, batch, dtype, (c, c)), _flat(h, batch, dtype, (c,)),
                    _flat(n, batch, dtype))
    out = cramer_rao_core(*args, jnp.asarray(tg, dtype))
    return CramerRao(*(x[:b].reshape(batch + x.shape[1:]) for x in out))

  return _x64_if_concrete((fisher, n), run)


def cramer_rao_l1(histograms: Any, sigma: Any, num_queries: Any, **kwargs: Any) -> jax.Array:
  """The expected normalised L1 error of :func:`cramer_rao` alone: ``[...]``."""
  return cramer_rao(histograms, sigma, num_queries, **kwargs).error
