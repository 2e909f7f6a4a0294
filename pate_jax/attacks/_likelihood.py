"""Maximum-likelihood reconstruction of the vote histogram from the answer frequencies.

Beyond the attack paper. The attacker's ``n`` answers to one repeated
input are i.i.d. draws from a categorical distribution ``π(H)`` over

* GNMax: the ``C`` classes, ``π = Q(H)`` (Theorem 1 of the attack paper);
* Confident-GNMax: the ``C`` classes and ``⊥`` (not answered),
  ``π = [P(H)·Q(H), 1 - P(H)]`` with ``P(H) = Φ((max_i H_i - T)/σ_T)``
  (Papernot et al. 2018, Algorithm 1: the threshold noise is independent of
  the answer noise).

With observed frequencies ``q̄`` (of all sent queries: ``C`` or ``C + 1`` entries) the
log-likelihood per query is ``ℓ(H) = Σ_k q̄_k log π_k(H)`` and the maximum-likelihood
estimate is ``argmax ℓ`` over ``{H ≥ 0, Σ H = N}``. (The answer frequencies alone
suffice for the point estimate: ``n`` only scales ``ℓ``.) For GNMax, ``log Q_k`` is
concave in ``H`` (``Q_k`` is a Gaussian orthant probability of affine functions of
``H``: Prékopa's theorem), so the problem is convex; the ``⊥`` term ``log P`` is not
concave in general.

Solver (:func:`mle_single`): the mirror (softmax) parametrisation ``H = N softmax(θ)``
keeps ``H`` in the simplex; a class on the boundary (``H_k = 0``) is ``θ_k → -∞``.
Each step is a damped "saddle-free" Newton step on the tangent space ``Σθ = 0``:
the exact Hessian of ``-ℓ`` in ``H`` (forward-over-reverse autodiff of the
trapezoid ``log Q``) pulled back through the chart with its curvature term
(:func:`chart_newton_system`), scaled to unit diagonal, eigenvalues replaced by
``max(|λ|, damping·max|λ|)`` (the chart makes the Hessian indefinite near the
boundary even where ``ℓ(H)`` is concave), the step capped at ``max_step`` in ``θ``;
then the best step size of the grid ``4, 2, 1, 1/2, ..., 2⁻⁹`` (one batched
evaluation; ``> 1`` extrapolates towards the boundary, where a Newton step shrinks
``H_k`` by only a factor ``e``). It stops when the Newton decrement per query
``-∇fᵀδ < tol`` or no step size lowers ``-ℓ`` while the decrement is below what
``-ℓ``'s rounding resolves (both ``CONVERGED``), when no step size lowers it
otherwise (``NO_DECREASE``), or after
``max_iter`` steps. It runs in the default float dtype (float32 unless x64 is on;
10-20 steps from the uniform histogram on the acceptance set).

The Fisher information and the Cramér–Rao bound are in :mod:`pate_jax.attacks._cramer_rao`,
``log π(H)`` in :mod:`pate_jax.attacks._answer_probabilities`; the names that
:mod:`pate_jax.attacks` and its modules import from here are re-exported.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax.attacks._answer_probabilities import (  # noqa: F401  (re-exported)
    _flat,
    _thresholds,
    log_answer_probabilities,
    log_output_distribution,
    pad_rows,
    padded_size,
)
from pate_jax.attacks._cramer_rao import (  # noqa: F401  (re-exported)
    BOUNDARY_STDS,
    CramerRao,
    cramer_rao,
    cramer_rao_l1,
    fisher_information,
)
from pate_jax.attacks._stop import Stop


# Line search: the step size of the grid that lowers -ℓ most (4 extrapolates, e.g.
# towards the boundary, where a Newton step shrinks H_k by only a factor e).
_STEP_SIZES = tuple(2.0 ** -k for k in range(-2, 10))


# ----------------------------------------------------------------------------- the MLE, one histogram


def negative_log_likelihood(h: jax.Array, q_bar: jax.Array, sigma: jax.Array,
                            threshold: jax.Array, sigma_threshold: jax.Array, **kw) -> jax.Array:
  """``-ℓ(H) = -Σ_k q̄_k log π_k(H)`` per query (``kw``: confident, width, num_points)."""
  return -jnp.sum(q_bar * log_answer_probabilities(h, sigma, threshold, sigma_threshold, **kw))


def _value_grad_hessian(fn, x):
  """``(f, ∇f, ∇²f)`` at ``x`` in one forward-over-reverse pass."""
  def grad_aux(y):
    val, g = jax.value_and_grad(fn)(y)
    return g, (val, g)
  hess, (val, g) = jax.jacfwd(grad_aux, has_aux=True)(x)
  return val, g, hess


def chart_newton_system(theta: jax.Array, total: jax.Array, grad_h: jax.Array,
                        hess_h: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Gradient and Hessian in ``θ`` of ``f(N softmax θ)`` from those in ``H``.

  With ``p = softmax θ``, ``A = ∂H/∂θ = N (diag p - p pᵀ)`` and ``a = ∇_H f``:
  ``∇_θ f = A a`` and ``∇²_θ f = A ∇²_H f A + N [Σ_k a_k p_k (e_k - p)(e_k - p)ᵀ
  - (aᵀp)(diag p - p pᵀ)]`` (the second term: the curvature of the chart). Both
  annihilate ``1`` (``f(θ + c1) = f(θ)``).
  """
  p = jax.nn.softmax(theta)
  cov = jnp.diag(p) - jnp.outer(p, p)
  jac = total * cov
  m = jnp.eye(p.shape[0], dtype=p.dtype) - p[None, :]             # rows e_k - p
  curvature = total * ((m.T * (grad_h * p)) @ m - jnp.dot(grad_h, p) * cov)
  return jac @ grad_h, jac @ hess_h @ jac + curvature


def newton_direction(grad: jax.Array, hess: jax.Array, damping: float) -> jax.Array:
  """Saddle-free Newton step ``-|∇²f|⁻¹ ∇f`` on the tangent space ``Σθ = 0``.

  The Hessian is first scaled to unit diagonal (``S = diag(|∇²f|_kk)^-1/2``), so that
  a class near the boundary, whose row scales with its share ``p_k``, keeps its
  own Newton step (about ``-1`` in ``θ_k``); eigenvalues are replaced by
  ``max(|λ|, damping · max|λ|)``. The null direction ``S⁻¹1`` maps back to ``1``,
  removed by centring.
  """
  d = jnp.abs(jnp.diagonal(hess))
  scale = 1.0 / jnp.sqrt(jnp.maximum(d, jnp.maximum(jnp.max(d), 1.0) * 1e-30))
  lam, vecs = jnp.linalg.eigh(scale[:, None] * hess * scale[None, :])
  floor = damping * jnp.max(jnp.abs(lam)) + jnp.finfo(grad.dtype).tiny
  y = -vecs @ ((vecs.T @ (scale * grad)) / jnp.maximum(jnp.abs(lam), floor))
  delta = scale * y
  return delta - jnp.mean(delta)


def mle_single(q_bar: jax.Array, sigma: jax.Array, threshold: jax.Array,
               sigma_threshold: jax.Array, total: jax.Array, theta0: jax.Array, *,
               confident: bool, tol: float, max_iter: int, damping: float, max_step: float,
               width: float | None = None, num_points: int | None = None):
  """Damped saddle-free Newton on ``-ℓ(N softmax θ)`` (module docstring; pure jnp).

  Returns:
    ``(Ĥ[C], KL(q̄ ‖ π(Ĥ)) = -ℓ(Ĥ) - entropy(q̄) ≥ 0, steps, status)``.
  """
  kw = dict(confident=confident, width=width, num_points=num_points)
  nll_h = lambda h: negative_log_likelihood(h, q_bar, sigma, threshold, sigma_threshold, **kw)
  nll = lambda th: nll_h(total * jax.nn.softmax(th))
  alphas = jnp.asarray(_STEP_SIZES, theta0.dtype)

  def cond(state):
    return state[3] < 0

  def body(state):
    theta, _, it, _ = state
    f, g_h, hess_h = _value_grad_hessian(nll_h, total * jax.nn.softmax(theta))
    g, hess = chart_newton_system(theta, total, g_h, hess_h)
    delta = newton_direction(g, hess, damping)
    big = jnp.max(jnp.abs(delta))
    delta = delta * jnp.minimum(1.0, max_step / jnp.where(big > 0, big, 1.0))
    decrement = -jnp.dot(g, delta)
    usable = jnp.all(jnp.isfinite(delta)) & (decrement > 0)
    f_try = jax.vmap(lambda a: nll(theta + a * delta))(alphas)
    f_try = jnp.where(jnp.isfinite(f_try), f_try, jnp.inf)
    pick = jnp.argmin(f_try)                # exact line search on the grid of step sizes
    accept = usable & (f_try[pick] < f)
    theta = jnp.where(accept, theta + alphas[pick] * delta, theta)
    it = it + 1
    # Converged: the predicted decrease is below tol, or below what f resolves.
    unresolved = decrement <= 64 * jnp.finfo(theta.dtype).eps * jnp.abs(f)
    converged = (decrement < tol) | (~accept & unresolved)
    status = jnp.where(
        converged, int(Stop.CONVERGED),
        jnp.where(~usable, int(Stop.ZERO_GRADIENT),
                  jnp.where(~accept, int(Stop.NO_DECREASE),
                            jnp.where(it >= max_iter, int(Stop.MAX_ITER), -1))))
    return theta, jnp.where(accept, f_try[pick], f), it, status.astype(jnp.int32)

  state = (theta0, nll(theta0), jnp.zeros((), jnp.int32), jnp.asarray(-1, jnp.int32))
  theta, f, it, status = jax.lax.while_loop(cond, body, state)
  entropy = -jnp.sum(jnp.where(q_bar > 0, q_bar * jnp.log(jnp.where(q_bar > 0, q_bar, 1.0)),
                               0.0))
  return total * jax.nn.softmax(theta), f - entropy, it, status


@functools.partial(jax.jit, static_argnames=("confident", "tol", "max_iter", "damping",
                                             "max_step", "width", "num_points"))
def mle_core(q_bar, sigma, threshold, sigma_threshold, total, theta0, *, confident: bool,
             tol: float, max_iter: int, damping: float, max_step: float,
             width: float | None, num_points: int | None):
  """Batched :func:`mle_single`: ``[B, C(+1)] -> (Ĥ [B, C], KL [B], steps [B], status [B])``."""
  fn = functools.partial(mle_single, confident=confident, tol=tol, max_iter=max_iter,
                         damping=damping, max_step=max_step, width=width,
                         num_points=num_points)
  return jax.vmap(fn)(q_bar, sigma, threshold, sigma_threshold, total, theta0)


# ----------------------------------------------------------------------------- public API


def mle_frequencies(counts: Any, num_answered: Any, num_sent: Any) -> np.ndarray:
  """``[counts, num_sent - num_answered] / num_sent``: the ``C + 1`` frequencies of
  Confident-GNMax's outcomes (``⊥`` last) that :func:`reconstruct` with ``method="mle"``
  and a ``threshold`` reads. float64 numpy ``[..., C + 1]``."""
  counts = np.asarray(counts, np.float64)
  try:
    if counts.ndim < 1:
      raise ValueError("counts is a scalar")
    rows = counts.shape[:-1]
    answered = np.broadcast_to(np.asarray(num_answered, np.float64), rows)
    sent = np.broadcast_to(np.asarray(num_sent, np.float64), rows)
  except ValueError as e:
    raise ValueError(f"counts [..., C], num_answered and num_sent must broadcast over the "
                     f"rows of counts; got shapes {counts.shape}, {np.shape(num_answered)}, "
                     f"{np.shape(num_sent)}") from e
  if (not np.all(np.isfinite(sent)) or np.any(sent <= 0) or np.any(answered < 0)
      or np.any(answered > sent)):
    raise ValueError("num_sent must be finite, > 0 and >= num_answered >= 0; got "
                     f"num_sent={num_sent!r}, num_answered={num_answered!r}")
  if np.any(counts < 0) or not np.allclose(counts.sum(-1), answered, rtol=0, atol=1e-9):
    raise ValueError("counts must be >= 0 and sum to num_answered on each row (the answered "
                     f"queries' labels); got row sums {counts.sum(-1).tolist()!r}, "
                     f"num_answered={num_answered!r}")
  full = np.concatenate([counts, (sent - answered)[..., None]], -1)
  return full / sent[..., None]
