"""Conditions C5 and C6 of GNMax's smooth-sensitivity analysis, checked before a release.

Reference: Papernot, Song, Mironov, Raghunathan, Talwar, Erlingsson, "Scalable
Private Learning with PATE", ICLR 2018 (arXiv 1802.08908), Appendix B.4.2. The local
sensitivity bound of GNMax's data-dependent RDP (Algorithm 3, Proposition 13), and so
the smooth-sensitivity release built on it (Theorem 23), holds only where

  C5: ``β(q)`` is non-decreasing in ``q`` on ``(0, q0)``, and
  C6: ``β(bu(q)) - β(q)`` is non-decreasing in ``q`` on ``(0, bl(q0))``,

with ``β(q)`` Theorem 6's bound at order λ (Proposition 10's ``μ1``, ``μ2``), ``q0(σ, λ)``
where it meets the data-independent ``λ/σ²``, and ``bl``, ``bu`` the range of ``q`` one
teacher away with ``m`` classes (:mod:`pate_jax.accounting._local_sensitivity`). Both
are statements about ``(σ, m, λ)`` only, never about the votes, so they are checked once
per setting (and cached). tf-privacy (``research/pate_2018``) checks them with a bounded
scalar minimiser of a symbolic derivative; this is an independent check.

How they are checked here: the derivative with respect to ``log q`` (forward-mode
autodiff of the float64 log-space bound, through ``bu`` and the normal tail's inverse; it
has the sign of the derivative in ``q``) is evaluated on a fixed grid of each interval
(``q_hi = q0`` for C5, ``bl(q0)`` for C6): ``_LINEAR`` points ``q = q_hi·i/_LINEAR``,
``i = 1.._LINEAR`` (the upper end included: in most settings checked against tf-privacy
the smallest derivative is there), and ``_DEEP`` points with ``-log q`` geometric from
``-log q_hi`` to 650 (towards 0). Below ``q = e^-650`` nothing is checked: the bound and
its derivative underflow in float64 (tf-privacy's bounded minimiser works on ``q``
itself, to an absolute tolerance of 1e-5). A condition holds where the smallest derivative on its
grid is ``> 0`` (an underflow to 0 proves nothing); NaN, no ``q0``, or ``q_hi <
e^-650`` fails. The reported margin is that smallest derivative in ``d/dq`` units, the
scale of tf-privacy's minimum. On the 885 settings of tests/test_release_conditions.py the
verdicts equal tf-privacy's ``check_conditions``; where both fail, the grid can find a far
more negative derivative than tf-privacy's local minimiser.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks as v
from pate_jax._compile import bucket
from pate_jax.accounting._local_sensitivity import _log_bl_bu, _log_q0, _theorem6


_LINEAR = 2048     # grid points linear in q on (0, q_hi]
_DEEP = 512        # grid points with -log q geometric from -log q_hi ...
_DEPTH = 650.0     # ... to 650: below e^-650 the bound and its slope underflow in float64
_MIN_ORDERS = 64   # orders are padded to at least this many (one compiled shape for most)


def _grid(log_hi: jax.Array) -> jax.Array:
  """``log q`` grid ``[N, K]`` of ``[e^-650, q_hi]`` for each ``log q_hi`` ``[K]`` (< 0)."""
  dtype = log_hi.dtype
  frac = jnp.arange(1, _LINEAR + 1, dtype=dtype) / _LINEAR
  step = jnp.linspace(0.0, 1.0, _DEEP + 1, dtype=dtype)[1:, None]
  deep = -jnp.exp(jnp.log(-log_hi) + step * (jnp.log(_DEPTH) - jnp.log(-log_hi)))
  return jnp.concatenate([log_hi + jnp.log(frac)[:, None], jnp.minimum(deep, log_hi)])


def _min_slope(fn, log_hi: jax.Array) -> jax.Array:
  """The smallest ``d fn / dq`` on :func:`_grid` ``(log_hi)`` (``fn`` elementwise in log q);
  NaN where ``q_hi`` is itself below the grid's floor (nothing could be checked)."""
  grid = _grid(log_hi)
  slope = jax.jvp(fn, (grid,), (jnp.ones_like(grid),))[1]          # d/dlog q
  smallest = jnp.min(slope * jnp.exp(-grid), axis=0)                # NaN propagates
  return jnp.where(log_hi > -_DEPTH, smallest, jnp.nan)


@jax.jit
def condition_margins_core(sigma: jax.Array, orders: jax.Array,
                           num_classes: jax.Array) -> tuple[jax.Array, jax.Array]:
  """``(C5 margin, C6 margin)``, each ``[K]``: the smallest derivative in ``q`` of ``β(q)``
  on ``(0, q0]`` and of ``β(bu(q)) - β(q)`` on ``(0, bl(q0)]`` (no validation; one
  compiled program per number of orders)."""
  log_q0 = _log_q0(sigma, orders)
  log_q1 = _log_bl_bu(log_q0, sigma, num_classes)[0]
  beta = lambda lq: _theorem6(lq, sigma, orders)
  gap = lambda lq: beta(_log_bl_bu(lq, sigma, num_classes)[1]) - beta(lq)
  return _min_slope(beta, log_q0), _min_slope(gap, log_q1)


@functools.lru_cache(maxsize=256)
def _margins_cached(sigma: float, num_classes: int,
                    orders: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
  """Margins of concrete settings, computed once (the orders padded to 64 or a power of 2,
  so that few shapes are compiled); read-only arrays."""
  k = len(orders)
  padded = np.resize(np.asarray(orders, np.float64), bucket(k, minimum=_MIN_ORDERS))
  # Compiled ahead of time and called on the constants: concrete even inside a caller's
  # trace (jit, eval_shape), and one program (ensure_compile_time_eval ran its operations
  # one by one, each compiled on its own, before compiling it whole).
  args = (np.float64(sigma), padded, np.float64(num_classes))
  with jax.enable_x64(True):
    m5, m6 = condition_margins_core.lower(*args).compile()(*args)
    out = np.array(m5)[:k], np.array(m6)[:k]
  for a in out:
    a.setflags(write=False)
  return out


def _settings(sigma, num_classes, order) -> tuple[float, int, tuple[float, ...], bool]:
  """Validated concrete ``(σ, m, orders, scalar)``; traced values cannot be checked."""
  if v.is_traced(sigma) or v.is_traced(order):
    raise ValueError("sigma and order must be concrete values to check conditions C5 and C6 "
                     "of the smooth-sensitivity analysis (Papernot et al. 2018, App. B.4.2); "
                     "got a traced value")
  sigma = float(v.positive(sigma, "sigma"))
  num_classes = v.positive_int(num_classes, "num_classes", minimum=2)
  orders = v.orders(order, "order")
  return sigma, num_classes, tuple(float(o) for o in np.asarray(orders)), np.ndim(order) == 0


def _shaped(values: np.ndarray, scalar: bool) -> Any:
  return values[0] if scalar else values


def smooth_sensitivity_condition_margins(sigma, num_classes, order) -> tuple[Any, Any]:
  """The smallest derivatives behind conditions C5 and C6 (2018, App. B.4.2).

  Args:
    sigma: the GNMax noise ``σ > 0``.
    num_classes: the number of classes ``m >= 2``.
    order: one Rényi order ``λ > 1`` or a 1-D array ``[K]`` of them.

  Returns:
    ``(c5_margin, c6_margin)``, float64 scalars or ``[K]``: the smallest ``dβ(q)/dq`` on
    ``(0, q0]`` and ``d(β(bu(q)) - β(q))/dq`` on ``(0, bl(q0)]`` over the module's grid;
    a condition holds where its margin is ``> 0``. NaN where no ``q0`` exists or the
    interval lies below ``e^-650`` (nothing could be checked).

  Raises:
    ValueError: naming the argument: ``σ <= 0``, ``num_classes < 2``, an order ``<= 1``,
      or a traced ``sigma`` / ``order``.
  """
  sigma, num_classes, orders, scalar = _settings(sigma, num_classes, order)
  m5, m6 = _margins_cached(sigma, num_classes, orders)
  return _shaped(m5, scalar), _shaped(m6, scalar)


def smooth_sensitivity_conditions(sigma, num_classes, order) -> tuple[Any, Any]:
  """Whether conditions C5 and C6 of the smooth-sensitivity analysis hold (2018, B.4.2).

  C5: Theorem 6's bound ``β(q)`` is non-decreasing on ``(0, q0)``; C6: ``β(bu(q)) -
  β(q)`` is non-decreasing on ``(0, bl(q0))``. Checked by the sign of the derivative
  (forward-mode autodiff in float64) on a fixed grid of each interval, linear in ``q``
  up to its upper end and geometric in ``-log q`` towards 0 (module docstring); NaN or
  no ``q0`` fails. The two verdicts are computed independently (tf-privacy reports C6 as
  failing, unchecked, wherever C5 fails).

  Args:
    sigma: the GNMax noise ``σ > 0``.
    num_classes: the number of classes ``m >= 2``.
    order: one Rényi order ``λ > 1`` or a 1-D array ``[K]`` of them.

  Returns:
    ``(c5, c6)``: numpy bools, scalars or ``[K]``.

  Raises:
    ValueError: as :func:`smooth_sensitivity_condition_margins`.
  """
  m5, m6 = smooth_sensitivity_condition_margins(sigma, num_classes, order)
  return np.asarray(m5 > 0.0), np.asarray(m6 > 0.0)


def valid_release_orders(sigma, num_classes, orders) -> np.ndarray:
  """The orders of ``orders`` (1-D, float64) at which both C5 and C6 hold, in order
  (possibly none): the only ones at which a smooth-sensitivity release may be made."""
  orders = np.asarray(v.orders(orders, "orders"), np.float64)
  c5, c6 = smooth_sensitivity_conditions(sigma, num_classes, orders)
  return orders[c5 & c6]


def check_release_order(sigma, num_classes, order, name: str = "order") -> None:
  """Refuses (``ValueError``) an order at which C5 or C6 fails (2018, App. B.4.2).

  Args:
    sigma: the GNMax noise ``σ > 0``.
    num_classes: the number of classes ``m >= 2``.
    order: one Rényi order or a 1-D array of them; every one must pass.
    name: the argument named in the error.

  Raises:
    ValueError: naming ``name``, the first failing order, σ, the classes and the failing
      condition(s) (and any error of :func:`smooth_sensitivity_condition_margins`).
  """
  sigma, num_classes, orders, _ = _settings(sigma, num_classes, order)
  m5, m6 = _margins_cached(sigma, num_classes, orders)
  bad = ~((m5 > 0.0) & (m6 > 0.0))
  if not bad.any():
    return
  i = int(np.argmax(bad))
  failing = " and ".join(c for c, m in (("C5", m5[i]), ("C6", m6[i])) if not m > 0.0)
  why = ("no q0, or an interval below e^-650: nothing could be checked"
         if np.isnan(m5[i]) or np.isnan(m6[i])
         else f"smallest derivative: C5 {m5[i]:.3g}, C6 {m6[i]:.3g}")
  raise ValueError(
      f"{name} {orders[i]:g} with sigma {sigma:g} and {num_classes} classes: condition "
      f"{failing} of the smooth-sensitivity analysis (Papernot et al. 2018, App. B.4.2) fails "
      f"({why}), so the released bound is not supported there; use an order where both "
      "hold (pate_jax.accounting.valid_release_orders)")
