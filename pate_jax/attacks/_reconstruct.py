"""Steps 2-3 of the attack: recover H from answer frequencies by gradient descent.

The attacker minimises ``J(Ĥ) = ‖Q(Ĥ) - q̄‖₂`` over real histograms ``Ĥ``, with
``Q`` the trapezoid output distribution (attack paper, Section 3.2, Step 2 and
Algorithm 2, lines 14-17), then shifts ``Ĥ`` to sum to the number of teachers
``N`` (Step 3; Theorem 2: Q is invariant to adding a constant to every class).

Methods (all ``jit``-compiled, ``vmap``-ped over histograms and σ):

* ``"paper"``: the paper's normalised steps ``Ĥ ← Ĥ - η ∇J/‖∇J‖₂``, first with
  ``η = 10`` votes while a step lowers the loss, then (after the first 10-vote step
  that does not) ``η = 1`` vote (Section 4.1, "Attack parameterization"). It stops
  when ``J < tol`` (0.01), when a 1-vote step does not lower the loss, when a
  1-vote step would make an entry negative (``stop_on_negative``: the paper's rule
  for the budget-limited attacker), or after ``max_iter`` trial steps. A rejected
  step leaves ``Ĥ`` unchanged, so the result is the last accepted iterate (a
  10-vote step that would turn an estimate negative also switches to 1-vote
  steps). Extension: ``min_step < 1`` keeps halving the step after a failed
  1-vote step, down to ``min_step`` (the paper's rule resolves Ĥ to about a vote).
  ``Ĥ`` starts at ``N/C`` in every class: the paper's all-zero start shifted by
  Theorem 2 (the trajectory is the same up to that shift, since ``Σ_i ∂Q/∂H_i = 0``
  keeps every step's sum at zero), which is what makes "an estimate turned
  negative" meaningful; the paper's released code also starts at ``N/C = 25``.
* ``"optax"``: any ``optax.GradientTransformation`` on ``J`` (default: Adam with a
  cosine-decayed step size), keeping the best iterate; stops at ``J < tol`` or
  ``max_iter`` steps.
* ``project=True`` (either method): after every step ``Ĥ`` is projected onto
  ``{Ĥ ≥ 0, Σ Ĥ = N}`` (Euclidean projection onto the scaled simplex, Duchi et
  al. 2008), so the estimate never turns negative.

``normalize=True`` uses the objective of the paper's released code,
``‖Q/‖Q‖ - q̄/‖q̄‖‖₂``, instead of the paper's ``‖Q - q̄‖₂``.

* ``"mle"`` (beyond the paper): the maximum-likelihood estimate
  ``argmax Σ_k q̄_k log π_k(H)`` over ``{H ≥ 0, Σ H = N}`` by a damped Newton method
  in the softmax chart (:mod:`pate_jax.attacks._likelihood`); with
  ``threshold``/``sigma_threshold`` the answers are Confident-GNMax's and ``q̄`` has
  ``C + 1`` entries, the last the fraction of queries not answered (``⊥``).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from pate_jax.attacks import _likelihood as lk
from pate_jax.attacks._stop import Stop
from pate_jax.attacks import _output_distribution as od
from pate_jax import _checks as v

METHODS = ("paper", "optax", "mle")


_RUNNING = -1


class Reconstruction(NamedTuple):
  """Result of :func:`reconstruct_details` (batch shape ``[...]``).

  Attributes:
    histogram: ``Ĥ[..., C]`` shifted to sum to ``N``.
    loss: final objective ``J``.
    num_steps: trial steps taken (int32).
    status: :class:`Stop` code (int32).
  """
  histogram: jax.Array
  loss: jax.Array
  num_steps: jax.Array
  status: jax.Array


def default_optimizer(max_iter: int = 400) -> optax.GradientTransformation:
  """Adam, step size 4 votes cosine-decayed to 0.04 over ``max_iter`` steps."""
  return optax.adam(optax.cosine_decay_schedule(4.0, max_iter, alpha=0.01))


_DEFAULT_OPTIMIZERS: dict[int, optax.GradientTransformation] = {}


def _cached_default_optimizer(max_iter: int) -> optax.GradientTransformation:
  # One object per max_iter so that the jitted solver (static on the optimizer)
  # is compiled once.
  if max_iter not in _DEFAULT_OPTIMIZERS:
    _DEFAULT_OPTIMIZERS[max_iter] = default_optimizer(max_iter)
  return _DEFAULT_OPTIMIZERS[max_iter]


# ----------------------------------------------------------------------------- helpers


def project_to_simplex(x: jax.Array, total: jax.Array) -> jax.Array:
  """Euclidean projection of every row of ``x [..., C]`` onto ``{y ≥ 0, Σ y = total}``
  (sort-based, Duchi et al. 2008)."""
  u = -jnp.sort(-x, axis=-1)
  css = jnp.cumsum(u, axis=-1) - total
  j = jnp.arange(1, x.shape[-1] + 1, dtype=x.dtype)
  rho = jnp.sum(u - css / j > 0, axis=-1, keepdims=True)
  theta = jnp.take_along_axis(css, rho - 1, axis=-1) / rho.astype(x.dtype)
  return jnp.maximum(x - theta, 0.0)


def _safe_norm(x: jax.Array) -> jax.Array:
  ss = jnp.sum(x * x)
  pos = ss > 0
  return jnp.where(pos, jnp.sqrt(jnp.where(pos, ss, 1.0)), 0.0)


def objective(h_hat: jax.Array, q_bar: jax.Array, sigma: jax.Array, *, normalize: bool = False,
              noise: str = "gaussian", width: float | None = None,
              num_points: int | None = None) -> jax.Array:
  """``J(Ĥ) = ‖Q(Ĥ) - q̄‖₂`` for one histogram (``normalize``: unit-norm Q and q̄)."""
  q = od.trapezoid_single(h_hat, sigma, noise, width, num_points)
  target = q_bar
  if normalize:
    q = q / _safe_norm(q)
    target = q_bar / _safe_norm(q_bar)
  return _safe_norm(q - target)


# ----------------------------------------------------------------------------- solvers


def _solve_paper(q_bar, sigma, total, init, *, loss_fn, tol, max_iter, big_step, small_step,
                 min_step, stop_on_negative, project):
  vg = jax.value_and_grad(loss_fn)
  j0, g0 = vg(init, q_bar, sigma)
  status0 = jnp.where(j0 < tol, int(Stop.CONVERGED), _RUNNING)

  def cond(state):
    return state[5] == _RUNNING

  def body(state):
    x, j, g, eta, it, _ = state
    gnorm = _safe_norm(g)
    usable = (gnorm > 0) & jnp.all(jnp.isfinite(g))
    cand = x - eta * g / jnp.where(usable, gnorm, 1.0)
    if project:
      cand = project_to_simplex(cand, total)
    jc, gc = vg(cand, q_bar, sigma)
    negative = jnp.any(cand < 0) if stop_on_negative else jnp.zeros((), bool)
    accept = usable & jnp.isfinite(jc) & (jc < j) & ~negative
    big = eta > small_step
    # After a failed step: 10 -> 1 vote (paper), then halve down to min_step
    # (min_step == small_step, the default, is the paper's rule: stop).
    can_shrink = big | ((eta > min_step) & ~negative)
    next_eta = jnp.where(big, small_step, jnp.maximum(eta / 2, min_step))
    it = it + 1
    status = jnp.where(
        ~usable, int(Stop.ZERO_GRADIENT),
        jnp.where(accept & (jc < tol), int(Stop.CONVERGED),
                  jnp.where(~accept & ~can_shrink,
                            jnp.where(negative, int(Stop.NEGATIVE), int(Stop.NO_DECREASE)),
                            _RUNNING)))
    status = jnp.where((status == _RUNNING) & (it >= max_iter), int(Stop.MAX_ITER), status)
    x = jnp.where(accept, cand, x)
    j = jnp.where(accept, jc, j)
    g = jnp.where(accept, gc, g)
    eta = jnp.where(accept, eta, next_eta)
    return x, j, g, eta, it, status.astype(jnp.int32)

  state = (init, j0, g0, jnp.asarray(big_step, init.dtype), jnp.zeros((), jnp.int32),
           status0.astype(jnp.int32))
  x, j, _, _, it, status = jax.lax.while_loop(cond, body, state)
  return x, j, it, status


def _solve_optax(q_bar, sigma, total, init, *, loss_fn, tol, max_iter, optimizer, project):
  vg = jax.value_and_grad(loss_fn)

  def cond(state):
    return state[5] == _RUNNING

  def body(state):
    x, opt_state, best_x, best_j, it, _ = state
    j, g = vg(x, q_bar, sigma)
    better = jnp.isfinite(j) & (j < best_j)
    best_x = jnp.where(better, x, best_x)
    best_j = jnp.where(better, j, best_j)
    updates, opt_state = optimizer.update(g, opt_state, x)
    x = optax.apply_updates(x, updates)
    if project:
      x = project_to_simplex(x, total)
    it = it + 1
    status = jnp.where(best_j < tol, int(Stop.CONVERGED),
                       jnp.where(it >= max_iter, int(Stop.MAX_ITER), _RUNNING))
    return x, opt_state, best_x, best_j, it, status.astype(jnp.int32)

  state = (init, optimizer.init(init), init, jnp.asarray(jnp.inf, init.dtype),
           jnp.zeros((), jnp.int32), jnp.asarray(_RUNNING, jnp.int32))
  x, _, best_x, best_j, it, status = jax.lax.while_loop(cond, body, state)
  # The last iterate was never evaluated; score it too.
  j_last = loss_fn(x, q_bar, sigma)
  last_better = jnp.isfinite(j_last) & (j_last < best_j)
  return (jnp.where(last_better, x, best_x), jnp.where(last_better, j_last, best_j), it,
          status)


@functools.partial(jax.jit, static_argnames=(
    "method", "project", "stop_on_negative", "max_iter", "big_step", "small_step",
    "min_step", "optimizer", "normalize", "noise", "width", "num_points"))
def reconstruct_core(q_bar, sigma, total, init, tol, *, method: str, project: bool,
                     stop_on_negative: bool, max_iter: int, big_step: float, small_step: float,
                     min_step: float, optimizer: Any, normalize: bool, noise: str, width: float | None,
                     num_points: int | None):
  """Batched solver ``[B, C] -> (Ĥ [B, C], J [B], steps [B], status [B])`` (no checks)."""
  loss_fn = functools.partial(objective, normalize=normalize, noise=noise, width=width,
                              num_points=num_points)

  def one(q, s, n, x0):
    if method == "paper":
      x, j, it, status = _solve_paper(
          q, s, n, x0, loss_fn=loss_fn, tol=tol, max_iter=max_iter, big_step=big_step,
          small_step=small_step, min_step=min_step, stop_on_negative=stop_on_negative,
          project=project)
    else:
      x, j, it, status = _solve_optax(q, s, n, x0, loss_fn=loss_fn, tol=tol,
                                      max_iter=max_iter, optimizer=optimizer, project=project)
    x = x + (n - jnp.sum(x)) / x.shape[-1]   # Step 3 (Theorem 2): shift to sum N.
    return x, j, it, status

  return jax.vmap(one)(q_bar, sigma, total, init)


# ----------------------------------------------------------------------------- public API


def reconstruct_details(q_bar: Any, sigma: Any, num_teachers: Any, *, method: str = "paper",
                        project: bool = False, stop_on_negative: bool = False,
                        tol: float | None = None, max_iter: int | None = None,
                        big_step: float = 10.0, small_step: float = 1.0,
                        min_step: float | None = None,
                        optimizer: optax.GradientTransformation | None = None,
                        normalize: bool = False, num_classes: int | None = None,
                        init: Any = None, noise: str = "gaussian", width: float | None = None,
                        num_points: int | None = None, threshold: Any = None,
                        sigma_threshold: Any = None, damping: float = 1e-6,
                        max_step: float = 4.0) -> Reconstruction:
  """Reconstructs vote histograms from answer frequencies (see module docstring).

  Args:
    q_bar: ``[..., C]`` answer frequencies (rows in [0, 1] summing to 1), e.g.
      from :func:`pate_jax.attacks.sample_answers`.
    sigma: the aggregator's noise scale ``σ > 0`` (known to the attacker),
      broadcastable with ``q_bar.shape[:-1]``.
    num_teachers: ``N > 0`` (broadcastable likewise); the result sums to ``N``.
    method: ``"paper"`` (adaptive normalised steps), ``"optax"`` or ``"mle"``
      (maximum likelihood; ``project``, ``stop_on_negative``, ``normalize``,
      ``optimizer`` and the step lengths do not apply to it).
    project: keep ``Ĥ`` in ``{Ĥ ≥ 0, Σ Ĥ = N}`` by projection after each step.
    stop_on_negative: (``"paper"``) stop before an estimate turns negative (the
      paper's rule for the budget-limited attacker).
    tol: stop once ``J < tol`` (default 0.01, the paper's); ``"mle"``: once the
      Newton decrement per query is below ``tol`` (default 1e-10; in float32
      it usually stops first where the decrement is below -ℓ's rounding).
    max_iter: trial-step cap (default 1000 for ``"paper"``, 400 for ``"optax"``,
      100 Newton steps for ``"mle"``).
    big_step, small_step: the paper's step lengths in votes (10 and 1).
    min_step: (``"paper"``) an extension: after a failed ``small_step`` step,
      halve the step down to ``min_step`` votes before stopping (default
      ``small_step``: the paper's rule, which resolves Ĥ only to about one vote).
    optimizer: optax transformation for ``"optax"`` (default
      :func:`default_optimizer`). It is a static argument: reuse one object to
      avoid recompiling.
    normalize: use the released code's objective on unit-norm vectors.
    num_classes: if given, ``q_bar`` must have this many classes (the
      aggregator's class count).
    init: ``[..., C]`` starting histograms (default ``N/C`` everywhere).
    noise, width, num_points: the model of the aggregator's noise and the
      trapezoid rule (see :func:`pate_jax.attacks.output_distribution`).
    threshold, sigma_threshold: (``"mle"``) Confident-GNMax's ``T`` and ``σ_T``
      (both or none, broadcastable with the batch); then ``q_bar`` has ``C + 1``
      entries, ``⊥`` last (:func:`pate_jax.attacks.mle_frequencies`).
    damping, max_step: (``"mle"``) eigenvalue floor relative to the largest, and
      the largest Newton step in the softmax chart.

  Returns:
    :class:`Reconstruction` with batch shape ``broadcast(q_bar[:-1], σ, N)``;
    for ``"mle"``, ``loss`` is ``KL(q̄ ‖ π(Ĥ))`` and ``num_steps`` counts Newton steps.

  Raises:
    ValueError: frequencies that are NaN, negative, > 1 or do not sum to 1; a
      class count different from ``num_classes``; ``σ <= 0``; ``N <= 0``; bad
      options.
  """
  v.choice(method, "method", METHODS)
  v.choice(noise, "noise", od.NOISES)
  if num_classes is not None:
    v.positive_int(num_classes, "num_classes")
  if method == "mle":
    for name, val, default in (("project", project, False),
                               ("stop_on_negative", stop_on_negative, False),
                               ("normalize", normalize, False), ("optimizer", optimizer, None),
                               ("noise", noise, "gaussian")):
      if val != default:
        raise ValueError(f"{name} must be {default!r} with method='mle' (it does not apply to "
                         f"the maximum-likelihood solver); got {val!r}")
    return _reconstruct_mle(q_bar, sigma, num_teachers, tol=tol, max_iter=max_iter,
                            num_classes=num_classes, init=init, width=width,
                            num_points=num_points, threshold=threshold,
                            sigma_threshold=sigma_threshold, damping=damping,
                            max_step=max_step)
  if threshold is not None or sigma_threshold is not None:
    raise ValueError("threshold and sigma_threshold are only used with method='mle'; got "
                     f"method={method!r}")
  tol = 0.01 if tol is None else tol
  q = v.frequencies(q_bar, num_classes=num_classes)
  s = v.positive_array(sigma, "sigma")
  n = v.positive_array(num_teachers, "num_teachers")
  if not (np.isscalar(tol) and np.isfinite(tol) and tol >= 0):
    raise ValueError(f"tol must be a finite number >= 0, got {tol!r}")
  min_step = small_step if min_step is None else min_step
  for name, val in (("big_step", big_step), ("small_step", small_step),
                    ("min_step", min_step)):
    if not (np.isscalar(val) and np.isfinite(val) and val > 0):
      raise ValueError(f"{name} must be a finite number > 0, got {val!r}")
  if not min_step <= small_step <= big_step:
    raise ValueError(f"need min_step <= small_step <= big_step, got {min_step}, {small_step}, "
                     f"{big_step}")
  if max_iter is None:
    max_iter = 1000 if method == "paper" else 400
  v.positive_int(max_iter, "max_iter")
  if optimizer is not None and method != "optax":
    raise ValueError(f"optimizer is only used with method='optax', got method={method!r}")
  if method == "optax" and optimizer is None:
    optimizer = _cached_default_optimizer(int(max_iter))
  c = np.shape(q)[-1]
  shapes = {"q_bar[:-1]": np.shape(q)[:-1], "sigma": np.shape(s), "num_teachers": np.shape(n)}
  if init is not None:
    init = v.histograms(init, "init", num_classes=c, allow_negative=True)
    shapes["init[:-1]"] = np.shape(init)[:-1]
  batch = v.batch_shape(shapes)
  dtype = jnp.result_type(float)
  qb = jnp.broadcast_to(jnp.asarray(q, dtype), batch + (c,)).reshape(-1, c)
  sb = jnp.broadcast_to(jnp.asarray(s, dtype), batch).reshape(-1)
  nb = jnp.broadcast_to(jnp.asarray(n, dtype), batch).reshape(-1)
  if init is None:
    x0 = jnp.broadcast_to((nb / c)[:, None], (nb.shape[0], c))
  else:
    x0 = jnp.broadcast_to(jnp.asarray(init, dtype), batch + (c,)).reshape(-1, c)
  h, j, it, status = reconstruct_core(
      qb, sb, nb, x0, jnp.asarray(tol, dtype), method=method, project=bool(project),
      stop_on_negative=bool(stop_on_negative), max_iter=int(max_iter),
      big_step=float(big_step), small_step=float(small_step), min_step=float(min_step),
      optimizer=optimizer,
      normalize=bool(normalize), noise=noise,
      width=None if width is None else float(width), num_points=num_points)
  return Reconstruction(h.reshape(batch + (c,)), j.reshape(batch), it.reshape(batch),
                        status.reshape(batch))


def _scalar_option(val, name, *, positive=True):
  if not (np.isscalar(val) and np.isfinite(val) and (val > 0 if positive else val >= 0)):
    raise ValueError(f"{name} must be a finite number {'> 0' if positive else '>= 0'}, got "
                     f"{val!r}")
  return float(val)


def _reconstruct_mle(q_bar, sigma, num_teachers, *, tol, max_iter, num_classes, init, width,
                     num_points, threshold, sigma_threshold, damping, max_step):
  """``reconstruct_details(method="mle")`` (arguments there)."""
  confident, thr = lk._thresholds(threshold, sigma_threshold)
  dtype = jnp.result_type(float)
  if tol is None:
    tol = 1e-10
  tol = _scalar_option(tol, "tol", positive=False)
  max_iter = v.positive_int(100 if max_iter is None else max_iter, "max_iter")
  damping = _scalar_option(damping, "damping")
  max_step = _scalar_option(max_step, "max_step")
  k = None if num_classes is None else num_classes + int(confident)
  q = v.frequencies(q_bar, num_classes=k)
  c = np.shape(q)[-1] - int(confident)
  if c < 2:
    raise ValueError(f"q_bar must have C >= 2 class frequencies{' and ⊥' if confident else ''}"
                     f"; got shape {np.shape(q)}")
  s = v.positive_array(sigma, "sigma")
  n = v.positive_array(num_teachers, "num_teachers")
  shapes = {"q_bar[:-1]": np.shape(q)[:-1], "sigma": np.shape(s), "num_teachers": np.shape(n)}
  shapes.update({key: np.shape(x) for key, x in thr.items()})
  if init is not None:
    init = v.histograms(init, "init", num_classes=c)
    shapes["init[:-1]"] = np.shape(init)[:-1]
  batch = v.batch_shape(shapes)

  flat = lambda x, trailing=(): lk._flat(x, batch, dtype, trailing)
  nb = flat(n)
  zeros = jnp.zeros_like(nb)
  if init is None:
    theta0 = jnp.zeros(nb.shape + (c,), dtype)
  else:
    x0 = flat(init, (c,))
    theta0 = jnp.log(jnp.maximum(x0, 1e-3 * nb[:, None] / c))
    theta0 = theta0 - theta0.mean(-1, keepdims=True)
  args = lk.pad_rows(
      flat(q, (c + int(confident),)), flat(s), flat(thr["threshold"]) if confident else zeros,
      flat(thr["sigma_threshold"]) if confident else zeros + 1, nb, theta0)
  out = lk.mle_core(*args, confident=confident, tol=tol, max_iter=max_iter, damping=damping,
                    max_step=max_step, width=None if width is None else float(width),
                    num_points=num_points)
  b = nb.shape[0]
  return Reconstruction(*(x[:b].reshape(batch + x.shape[1:]) for x in out))


def reconstruct(q_bar: Any, sigma: Any, num_teachers: Any, **kwargs: Any) -> jax.Array:
  """``Ĥ[..., C]``: :func:`reconstruct_details` without the diagnostics."""
  return reconstruct_details(q_bar, sigma, num_teachers, **kwargs).histogram


def normalized_l1_error(histograms: Any, estimates: Any) -> jax.Array:
  """The paper's error ``Σ_i |H_i - Ĥ_i| / (2 Σ_i |H_i|)`` (Section 4.1, Metrics).

  Args:
    histograms: true ``H[..., C]`` (finite, not all zero).
    estimates: ``Ĥ[..., C]`` (finite), broadcastable with ``histograms``.

  Returns:
    ``[...]`` errors in ``[0, ...)``; 0.1 means 10 % of the votes mis-counted.

  Raises:
    ValueError: class counts differ, non-finite values, or an all-zero ``H``.
  """
  h = v.histograms(histograms, allow_negative=True)
  e = v.histograms(estimates, "estimates", num_classes=np.shape(h)[-1], allow_negative=True)
  v.batch_shape({"histograms[:-1]": np.shape(h)[:-1], "estimates[:-1]": np.shape(e)[:-1]})
  if not v.is_traced(h) and np.any(np.abs(h).sum(-1) == 0):
    raise ValueError("histograms must not be all zero (the error divides by Σ|H|)")
  h = jnp.asarray(h, jnp.result_type(float))
  e = jnp.asarray(e, jnp.result_type(float))
  return jnp.abs(h - e).sum(-1) / (2.0 * jnp.abs(h).sum(-1))
