"""Maximum-likelihood reconstruction of the vote histogram, and its Cramér–Rao bound.

Beyond the attack paper (issue 12). The attacker's ``n`` answers to one repeated
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

Accuracy of ``Q``'s derivatives (experiments/bench_attack.py, ``gradients``): the
autodiff Jacobian of the trapezoid ``Q`` against central finite differences of the
accurate quadrature (float64, Table 1).
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr

from pate_jax import _checks as v
from pate_jax.attacks import _output_distribution as od
from pate_jax.attacks._stop import Stop

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
# Line search: the step size of the grid that lowers -ℓ most (4 extrapolates, e.g.
# towards the boundary, where a Newton step shrinks H_k by only a factor e).
_STEP_SIZES = tuple(2.0 ** -k for k in range(-2, 10))
# A class is "near the boundary" when it is within this many standard deviations of 0.
BOUNDARY_STDS = 2.0


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
  return 1 << max(int(size) - 1, 0).bit_length()


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


def mle_frequencies(counts: Any, num_answered: Any, num_sent: Any) -> np.ndarray:
  """``[counts, num_sent - num_answered] / num_sent``: the ``C + 1`` frequencies of
  Confident-GNMax's outcomes (``⊥`` last) that :func:`reconstruct` with ``method="mle"``
  and a ``threshold`` reads. float64 numpy ``[..., C + 1]``."""
  counts = np.asarray(counts, np.float64)
  answered = np.asarray(num_answered, np.float64)
  sent = np.broadcast_to(np.asarray(num_sent, np.float64), answered.shape)
  if np.any(sent <= 0) or np.any(answered > sent):
    raise ValueError("num_sent must be > 0 and >= num_answered; got "
                     f"num_sent={num_sent!r}, num_answered={num_answered!r}")
  full = np.concatenate([counts, (sent - answered)[..., None]], -1)
  return full / sent[..., None]
