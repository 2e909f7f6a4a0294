"""Noise calibration: the noise scale at which a mechanism spends exactly a target ε.

``ε(noise)`` is the total ``(ε, δ)`` of answering the queries with GNMax (RDP,
converted with :func:`rdp_to_epsilon`) or LNMax (2017 moments accountant) at the
given noise scale: ``σ`` for GNMax, the Laplace scale ``b = 1/γ`` for LNMax. It is
evaluated either data-independently for ``num_queries`` queries or
data-dependently for a votes matrix.

The mechanism is a registered :class:`pate_jax.mechanisms.Mechanism` with one parameter
(``mechanisms.GNMAX``, ``mechanisms.LNMAX``): its own ``cost`` is charged at the noise
scale's parameter (its ``noise_param``, the scale's inverse when ``inverse_scale``), in
the accountant of its ``accountant`` kind. This module reads those fields and never
imports :mod:`pate_jax.mechanisms`, which is built on this package: there is one table of
mechanisms, the registry.

The root is sought in ``s = log(noise)``. Walking a log-spaced grid over
``noise_range`` down from the largest noise brackets the *largest* root:
``[s_lo, s_hi]`` with ``ε(s_lo) ≥ target > ε(s_hi)`` and ``ε < target`` at every grid
point above. (Data-dependent ε need not be monotone in the noise:
with large gaps very little noise is cheap too. The largest root is the smallest
noise above which the whole grid respects the budget.) Inside the bracket,
safeguarded Newton steps ``s ← s - f(s)/f'(s)`` with ``f = ε - target`` and ``f'`` from
``jax.grad`` are taken, falling back to bisection whenever a step leaves the
current bracket; ``method="bisection"`` only bisects. Everything after
validation is one jitted ``lax.while_loop``.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks as v
from pate_jax.accounting import _accountant
from pate_jax.accounting import _conversion
from pate_jax.accounting import _numerics as nm

DEFAULT_ORDERS = _conversion.DEFAULT_ORDERS
CONVERSIONS = _conversion.CONVERSIONS


def _noise_params(mechanism, noise):
  """The mechanism's parameters at noise scale ``noise`` (σ, or γ = 1/b)."""
  return {mechanism.noise_param: 1.0 / noise if mechanism.inverse_scale else noise}


def _epsilon_fn(mechanism, data_dependent: bool, conversion: str, max_moment: int):
  """``(log_noise, data, delta, orders) -> ε`` for one calibratable mechanism (pure jnp).

  ``data`` is the votes (data-dependent) or the number of queries; RDP mechanisms
  compose at ``orders``, moments-accountant ones at ``l = 1..max_moment``.
  """

  def eps(log_noise, data, delta, orders):
    params = _noise_params(mechanism, jnp.exp(log_noise))
    kind = _accountant.accountant_kind(mechanism.accountant, "mechanism.accountant")
    accountant = _accountant.make_accountant(kind.name, kind.orders_of(orders, max_moment),
                                             conversion)
    if data_dependent:
      answered = jnp.ones(data.shape[0], bool)
      costs = mechanism.cost(data, answered, params, accountant.orders, True)
    else:  # Every query costs the same: one query's cost, times their number.
      one = mechanism.cost(jnp.zeros((1, 2), jnp.int32), jnp.ones(1, bool), params,
                           accountant.orders, False)
      costs = data * one[0]
    return accountant.compose(costs).epsilon(delta)[0]

  return eps


@functools.partial(jax.jit, static_argnames=(
    "mechanism", "data_dependent", "conversion", "max_moment", "num_grid", "max_iter"))
def calibrate_noise_core(target_eps, delta, data, orders, log_lo, log_hi, tol, use_newton, *,
                         mechanism: Any, data_dependent: bool, conversion: str = "improved",
                         max_moment: int = 8, num_grid: int = 161, max_iter: int = 200):
  """Returns ``(noise, status, iterations)``.

  status 0: converged; 1: ε < target at every grid noise (even the least noise
  spends less); 2: ε ≥ target at the largest noise; 3: iteration cap reached.
  One ``lax.while_loop`` (one compiled copy of ``ε`` and its gradient): phase 0 walks
  the log-spaced grid down from the largest noise until ``ε ≥ target``, which
  brackets the largest root; phase 1 refines it by safeguarded Newton steps
  (``use_newton``) or bisection.
  """
  eps = _epsilon_fn(mechanism, data_dependent, conversion, max_moment)
  # The root is sought 16 ulps under the target: the ε a ledger or a report computes for the
  # noise returned rounds in its own compiled order, a few ulps from this loop's.
  goal = target_eps * (1.0 - 16.0 * jnp.finfo(jnp.result_type(float)).eps)
  f = lambda s: eps(s, data, delta, orders) - goal  # noqa: E731
  f_and_df = jax.value_and_grad(f)
  grid = jnp.linspace(log_lo, log_hi, num_grid)

  def cond(state):
    phase, _, lo, hi, _, step, it, status = state
    refining = (phase == 0) | ((jnp.abs(step) > tol) & (hi - lo > tol))
    return (status == 0) & refining & (it < max_iter + num_grid)

  def body(state):
    phase, k, lo, hi, s, _, it, status = state
    fs, dfs = f_and_df(s)
    spent = fs >= 0.0  # ε ≥ target: too little noise
    # Phase 0: scan the grid downwards.
    found = (phase == 0) & spent
    status = jnp.where((phase == 0) & spent & (k == num_grid - 1), 2, status)
    status = jnp.where((phase == 0) & ~spent & (k == 0), 1, status)
    k_next = jnp.where((phase == 0) & ~spent, jnp.maximum(k - 1, 0), k)
    lo = jnp.where(found, s, lo)
    hi = jnp.where(found, grid[jnp.minimum(k + 1, num_grid - 1)], hi)
    # Phase 1: shrink the bracket and step.
    refine = phase == 1
    lo = jnp.where(refine & spent, s, lo)
    hi = jnp.where(refine & ~spent, s, hi)
    mid = 0.5 * (lo + hi)
    newton = s - fs / dfs
    take = use_newton & refine & jnp.isfinite(newton) & (newton > lo) & (newton < hi)
    s_refined = jnp.where(fs == 0.0, s, jnp.where(take, newton, mid))
    s_next = jnp.where(phase == 0, jnp.where(found, mid, grid[k_next]), s_refined)
    step = jnp.where(phase == 0, jnp.inf, s_next - s)
    phase = jnp.where(found, 1, phase)
    return phase, k_next, lo, hi, s_next, step, it + 1, status

  init = (jnp.int32(0), jnp.int32(num_grid - 1), log_lo, log_hi, grid[-1],
          jnp.asarray(jnp.inf, grid.dtype), jnp.int32(0), jnp.int32(0))
  phase, _, _, hi, s, step, it, status = jax.lax.while_loop(cond, body, init)
  capped = (status == 0) & (it >= max_iter + num_grid)
  status = jnp.where(capped, 3, status)
  # The last iterate may sit a rounding error on the overspending side of the root: return
  # a noise that spends at most the target, s itself or s nudged up by twice its Newton
  # step, else the bracket's end (which never overspends).
  fs, dfs = f_and_df(s)
  nudged = s + 2.0 * jnp.abs(fs / dfs) + 4.0 * jnp.finfo(s.dtype).eps * jnp.abs(s)
  safe = jnp.where(fs <= 0.0, s,
                   jnp.where(jnp.isfinite(nudged) & (f(nudged) <= 0.0)
                             & (nudged < hi), nudged, hi))
  s = jnp.where(status == 0, safe, s)
  return jnp.exp(s), status, it


@nm.with_x64
def calibrate_noise(target_eps, delta, *, mechanism: Any, num_queries=None,
                    votes=None, orders=DEFAULT_ORDERS, conversion: str = "improved",
                    max_moment: int = 8, noise_range=(1e-3, 1e5), method: str = "newton",
                    num_grid: int = 161, tol: float = 1e-12, max_iter: int = 200) -> jax.Array:
  """Noise scale that spends exactly ``target_eps`` (see the module docstring).

  Args:
    target_eps: the budget ``ε > 0`` to spend.
    delta: ``δ`` in (0, 1).
    mechanism: a registered mechanism with one parameter: ``mechanisms.GNMAX`` (returns
      ``σ``; RDP accounting, Papernot et al. 2018) or ``mechanisms.LNMAX`` (returns the
      Laplace scale ``b = 1/γ``; 2017 moments accountant).
    num_queries: data-independent accounting for this many answers.
    votes: ``[Q, C]`` vote counts for data-dependent accounting (exactly one of
      ``num_queries`` and ``votes``).
    orders: Rényi orders for GNMax.
    conversion: RDP to ``(ε, δ)`` conversion for GNMax, ``"improved"`` or ``"classic"``.
    max_moment: largest moment for LNMax.
    noise_range: ``(low, high)`` noise scales searched.
    method: ``"newton"`` (safeguarded Newton on log-noise, gradient from ``jax.grad``)
      or ``"bisection"``.
    num_grid: bracketing grid size (log-spaced over ``noise_range``).
    tol: stopping tolerance on the step in ``log(noise)``.
    max_iter: iteration cap.

  Returns:
    float64 scalar noise scale (``NaN`` under tracing when no root is bracketed).

  Raises:
    ValueError: on bad arguments, or (concrete inputs) when ``ε = target_eps`` has
      no root in ``noise_range``.
  """
  target = v.positive(target_eps, "target_eps")
  delta = v.delta(delta)
  if not all(hasattr(mechanism, f) for f in ("cost", "accountant", "noise_param", "params")):
    raise ValueError("mechanism must be a registered pate_jax.mechanisms.Mechanism (e.g. "
                     f"mechanisms.GNMAX); got {mechanism!r}")
  if len(mechanism.params) != 1:
    raise ValueError(f"mechanism must have one (noise) parameter; {mechanism.name!r} has "
                     f"{len(mechanism.params)}")
  v.choice(method, "method", ("newton", "bisection"))
  conversion = v.choice(conversion, "conversion", CONVERSIONS)
  max_moment = v.positive_int(max_moment, "max_moment")
  num_grid = v.positive_int(num_grid, "num_grid", minimum=2)
  max_iter = v.positive_int(max_iter, "max_iter")
  if (num_queries is None) == (votes is None):
    raise ValueError("pass exactly one of num_queries (data-independent) and votes "
                     f"(data-dependent); got num_queries={num_queries!r}, "
                     f"votes={'None' if votes is None else 'an array'}")
  if votes is not None:
    data = v.votes(votes)
  else:
    data = v.positive(num_queries, "num_queries")
  orders = v.orders(orders)
  if np.shape(noise_range) != (2,):
    raise ValueError(f"noise_range must be (low, high); got {noise_range!r}")
  lo = v.positive(noise_range[0], "noise_range[0]")
  hi = v.positive(noise_range[1], "noise_range[1]")
  if not float(noise_range[0]) < float(noise_range[1]):
    raise ValueError(f"noise_range must satisfy low < high; got {noise_range!r}")
  tol_value = float(tol)
  tol = v.positive(tol, "tol")
  noise, status, _ = calibrate_noise_core(
      target, delta, data, orders, jnp.log(lo), jnp.log(hi), tol, jnp.asarray(method == "newton"),
      mechanism=mechanism, data_dependent=votes is not None, conversion=conversion,
      max_moment=max_moment, num_grid=num_grid, max_iter=max_iter)
  if v.is_traced(status):  # called under jit/vmap: no exceptions, NaN marks failure
    return jnp.where(status == 0, noise, jnp.nan)
  status = int(status)
  if status == 1:
    raise ValueError(f"target_eps={float(target_eps):g} is never reached: even the least noise in "
                     f"noise_range={tuple(noise_range)} spends less; lower noise_range[0]")
  if status == 2:
    raise ValueError(f"target_eps={float(target_eps):g} is exceeded even at the largest noise in "
                     f"noise_range={tuple(noise_range)}; raise noise_range[1]")
  if status == 3:
    raise ValueError(f"no convergence within max_iter={max_iter} steps (tol={tol_value:g}); "
                     "raise max_iter or tol")
  return noise
