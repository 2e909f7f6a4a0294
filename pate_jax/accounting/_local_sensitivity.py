"""Local sensitivities of PATE's data-dependent RDP at every distance ``d``.

Reference: Papernot, Song, Mironov, Raghunathan, Talwar, Erlingsson, "Scalable
Private Learning with PATE", ICLR 2018 (arXiv 1802.08908), Appendix B: Algorithms 3-5
and Proposition 13 (local sensitivity of GNMax's data-dependent RDP at distance d). The
maths follows tf-privacy ``research/pate_2018`` (``smooth_sensitivity.py``); this is an
independent vectorised implementation.

``A(d)`` is an upper bound on the local sensitivity of a data-dependent RDP value
``rdp`` at every dataset at distance ``d`` (teachers changed) from the votes ``D``; the
smooth-sensitivity release of ``rdp`` (:mod:`pate_jax.accounting._smooth_sensitivity`)
takes ``SS_β(D) = max_d e^{-βd} A(d)``.

GNMax (Algorithm 3, Proposition 13). Let ``β(q)`` be Theorem 6's bound at
``log q`` below ``log q0`` and ``λ/σ²`` above, where ``q0(σ, λ)`` is the point at
which the two meet (bisection; data-independent). One teacher changes every gap
by at most 2, so ``q`` of a neighbour lies in ``[bl(q), bu(q)]`` with

  bl(q) = (C-1) Φ̄(s + √2/σ),  bu(q) = min(1, (C-1) Φ̄(s - √2/σ)),  Φ̄(s) = q/(C-1),

and ``LS(q) = max(β(bu(q)) - β(q), β(q) - β(bl(q)))``, with ``q`` moved to ``q1 =
bl(q0)`` inside ``[q1, q0]`` (the plateau, where LS is largest). At distance ``d``
(Algorithms 4-5) the votes walk towards the plateau: if ``q > q0``, one vote per
step moves from the largest other class to the top ("left"); if ``q < q1``, one
vote moves from the top to the largest other class ("right"); ``A(d) = LS(q_d)`` while
the walk lasts (including the step that ends it), the plateau value after. Here the
walk is in closed form -- after ``d`` left steps the other classes are levelled from
the top (the ``k`` largest share ``S_k - d`` votes as evenly as possible) -- so
every query × distance × order is one elementwise expression, with no loop.

Threshold (Confident-GNMax's first step). Its data-dependent RDP depends only on
``m = max_j n_j``: with ``r(v)`` the cost at ``m = v`` and ``ls(v) = max_{v'=v±1}
|r(v') - r(v)|``, ``A(d) = max_{|k| <= d} ls(m+k)`` over the valid ``0 <= v <= T``: d
teachers moved leave the top count anywhere in ``[m-d, m+d]``.

Deviations from tf-privacy, on purpose:

* the threshold's ``A(d)`` is the running maximum of ``ls`` over ``[m-d, m+d]``, not
  ``max(ls(m+d), ls(m-d))`` (tf-privacy's): ``ls`` rises and falls around the threshold,
  so the two ends alone can miss the largest step within reach. For one query the smooth
  sensitivity ``max_d e^{-βd} A(d)`` is the same either way; for the sum over queries a
  release smooths, it is not: one neighbour at distance ``d`` can move each query's top
  count by a different ``k``, and the ends-only sum is then below the local sensitivity
  there and not β-smooth (40 teachers, 3 classes, threshold 20, σ_T 2, λ 8, β 0.05, top
  counts 32 and 27: 0.2602 against a true smooth sensitivity of at least 0.2929;
  ``tests/test_smooth_sensitivity.py``);

* the threshold's ``A(d)`` also covers the last reachable distance ``d = max(m, T-m)``
  (tf-privacy stops one short and leaves it 0, an under-estimate);
* its ``compute_smooth_sensitivity_gnmax`` passes ``(counts, sigma, order,
  num_teachers)`` to a function taking ``(votes, num_teachers, sigma, order)``; here
  every argument is passed by keyword at the boundary.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks as v
from pate_jax.accounting import _gnmax
from pate_jax.accounting import _numerics as nm


_BRACKET_STEPS = 48      # q0's lower bracket: 2·log(ub)·1.5^k, k < 48 (down to ~-1e8·|ub|)
_BISECTION_STEPS = 128   # float64 bisection of log q0 (the bracket shrinks by 2^-128)
_NEWTON_STEPS = 2        # Newton polish of the inverse normal tail
_LOG_2PI = math.log(2.0 * math.pi)
_SQRT_PI_OVER_2 = math.sqrt(math.pi / 2.0)


# ----------------------------------------------------------------------------- GNMax pieces


def _theorem6(log_q: jax.Array, sigma: jax.Array, orders: jax.Array) -> jax.Array:
  """Theorem 6's bound with Proposition 10's orders, without its validity checks or the
  data-independent minimum (callers only pass ``log q <= log q0``, where it holds)."""
  var = sigma**2
  mu2 = sigma * jnp.sqrt(-log_q)
  mu1 = mu2 + 1.0
  eps1 = mu1 / var
  eps2 = mu2 / var
  log1q = nm.log1mexp(log_q)
  log_a = log1q - nm.log1mexp((log_q + eps2) * (1.0 - 1.0 / mu2))
  log_b = eps1 - log_q / (mu1 - 1.0)
  lam1 = orders - 1.0
  return nm.logaddexp(log1q + lam1 * log_a, log_q + lam1 * log_b) / lam1


def _rdp_gnmax(log_q, log_q0, sigma, orders, shift=0.0):
  """``β(q)``: Theorem 6 below ``log q0``, ``λ/σ²`` from there on (tf-privacy's rule);
  ``shift`` moves where the rule switches (not where Theorem 6 is evaluated)."""
  dependent = log_q < log_q0 + shift
  # Theorem 6 holds on (-inf, log q0]; log q below -big is treated as -big (the bound is 0).
  safe = jnp.clip(log_q, -nm.big(log_q.dtype), log_q0)
  return jnp.where(dependent, _theorem6(safe, sigma, orders), orders / sigma**2)


def _log_q0(sigma: jax.Array, orders: jax.Array) -> jax.Array:
  """``log q0(σ, λ)`` ``[K]``: where Theorem 6's bound meets ``λ/σ²`` (NaN if not found).

  Bracketed as in tf-privacy (upper end ``min(-(1+1/σ)², -((λ-.99)/σ)², -1/σ²)``, lower
  end ``2·upper·1.5^k``), then bisected. The result is ``x - f(x)/f'(x)`` with ``x`` and
  ``f'(x)`` held constant: the same value, and the implicit-function derivative
  ``-∂_θ f / ∂_x f`` with respect to ``σ`` and the orders.
  """
  var = sigma**2
  f = lambda lq: _theorem6(lq, sigma, orders) - orders / var
  upper = jnp.minimum(jnp.minimum(-(1.0 + 1.0 / sigma)**2, -((orders - 0.99) / sigma)**2),
                      -1.0 / var)
  f_upper = f(upper)
  steps = 1.5**jnp.arange(_BRACKET_STEPS, dtype=nm.float_dtype())[:, None]
  candidates = 2.0 * upper * steps                                     # [S, K], decreasing
  below = jax.lax.stop_gradient(f(candidates) <= 0.0)
  first = jnp.argmax(below, axis=0)
  found = jnp.any(below, axis=0)
  lo = jnp.take_along_axis(candidates, first[None], axis=0)[0]
  hi = jnp.where(first == 0, upper,
                 jnp.take_along_axis(candidates, jnp.maximum(first - 1, 0)[None], axis=0)[0])
  lo, hi = jax.lax.stop_gradient(lo), jax.lax.stop_gradient(hi)
  f_const = lambda lq: jax.lax.stop_gradient(f(lq))

  def bisect(_, bounds):
    lo, hi = bounds
    mid = 0.5 * (lo + hi)
    neg = f_const(mid) <= 0.0
    return jnp.where(neg, mid, lo), jnp.where(neg, hi, mid)

  lo, hi = jax.lax.fori_loop(0, _BISECTION_STEPS, bisect, (lo, hi))
  x = jax.lax.stop_gradient(0.5 * (lo + hi))
  slope = jax.lax.stop_gradient(jax.jvp(f, (x,), (jnp.ones_like(x),))[1])
  root = x - f(x) / slope
  return jnp.where(f_upper < 0.0, upper, jnp.where(found, root, jnp.nan))


def _log_sf(y: jax.Array) -> jax.Array:
  """``log Φ̄(y)`` for ``y >= 0``: ``log ½ + log erfcx(y/√2) - y²/2``, exact at any depth."""
  return nm.LOG_HALF + jnp.log(nm.erfcx(y / nm.SQRT2)) - 0.5 * y * y


def _normal_tail_inverse(log_p: jax.Array) -> jax.Array:
  """``s >= 0`` with ``log Φ̄(s) = log_p``, for ``log_p <= log ½`` at any depth.

  Start: ``ndtri`` where ``p`` is a normal float, the tail asymptote ``s² ≈ t - log t -
  log 2π`` (``t = -2 log p``) below; then Newton steps on ``log Φ̄``, whose slope is
  ``-φ/Φ̄ = -√(2/π) / erfcx(s/√2)``. "Normal" is ``log p >= -700`` in float64 and
  ``>= -80`` in float32 (``e^-87`` is float32's smallest normal number).
  """
  limit = -700.0 if jnp.finfo(log_p.dtype).bits == 64 else -80.0
  deep = log_p < limit
  p = jnp.exp(jnp.where(deep, -1.0, log_p))
  t = -2.0 * jnp.where(deep, log_p, limit - 1.0)
  s = jnp.where(deep, jnp.sqrt(t - jnp.log(t) - _LOG_2PI), -jax.scipy.special.ndtri(p))

  def newton(_, s):
    s = jnp.maximum(s, 0.0)
    scaled = nm.erfcx(s / nm.SQRT2)
    log_sf = nm.LOG_HALF + jnp.log(scaled) - 0.5 * s * s
    return s + (log_sf - log_p) * scaled * _SQRT_PI_OVER_2

  # A loop, not unrolled: one copy of erfcx's series in the compiled program.
  return jnp.maximum(jax.lax.fori_loop(0, _NEWTON_STEPS, newton, s), 0.0)


def _log_bl_bu(log_q, sigma, num_classes):
  """``(log bl(q), log bu(q))``: the range of ``log q`` one teacher away (Prop. 13);
  ``num_classes`` a static int or a traced number."""
  log_other = jnp.log(jnp.asarray(num_classes, log_q.dtype) - 1.0)
  s = _normal_tail_inverse(log_q - log_other)
  shift = nm.SQRT2 / sigma
  y = s - shift
  tails = _log_sf(jnp.stack([s + shift, jnp.abs(y)]))   # one series for both ends
  log_bl = log_other + tails[0]
  log_bu = jnp.minimum(log_other + jnp.where(y >= 0.0, tails[1], nm.log1mexp(tails[1])), 0.0)
  return log_bl, log_bu


# Where a neighbour's ``log q`` lies within this (relative) distance of ``log q0``, it is
# taken on the side that makes the local sensitivity larger. β can jump at ``q0`` (where
# the bracket's end is taken for it: Theorem 6 still below λ/σ² there), and ``bu(bl(q0))``,
# ``q0`` in exact arithmetic, rounds a few ulps to either side of it: on the wrong side the
# plateau missed the jump (C 100, σ 0.889, λ 1.25: a bound of 0.575 where one teacher
# moves the RDP by 1.086).
_Q0_TOLERANCE = 1e-9


def _ls_at_log_q(log_q, log_q0, log_q1, sigma, orders, num_classes):
  """Algorithm 3: the local sensitivity bound at ``log q`` (the plateau inside [q1, q0]).

  The upper neighbour ``bu(q)`` counts as past ``q0`` from ``(1 - 1e-9)`` of its distance
  on, and the lower one ``bl(q)`` as below ``q0`` up to ``(1 + 1e-9)`` of it
  (:data:`_Q0_TOLERANCE`): rounding never hides β's jump at ``q0``, at the cost of
  counting it for neighbours within 1e-9 of it."""
  log_q = jnp.where((log_q >= log_q1) & (log_q <= log_q0), log_q1, log_q)
  log_bl, log_bu = _log_bl_bu(log_q, sigma, num_classes)
  both = jnp.stack(jnp.broadcast_arrays(log_q, log_bu, log_bl))
  tol = _Q0_TOLERANCE * (1.0 + jnp.abs(log_q0))
  shift = jnp.array([0.0, -1.0, 1.0], both.dtype).reshape((3,) + (1,) * (both.ndim - 1)) * tol
  b, b_up, b_low = _rdp_gnmax(both, log_q0, sigma, orders, shift)  # one Theorem 6 for all
  return jnp.maximum(b_up - b, b - b_low)


def _log_tail_table(sigma: jax.Array, size: int) -> jax.Array:
  """``log Φ̄(g/(√2σ))`` for the integer gaps ``g = 0..size-1`` (the union-bound terms)."""
  g = jnp.arange(size, dtype=nm.float_dtype())
  return nm.log_ndtr(-g / (nm.SQRT2 * sigma))


def _log_q_of_gaps(gaps: jax.Array, table: jax.Array, num_classes: int) -> jax.Array:
  """``log q`` from integer gaps ``[..., C-1]`` of the other classes, the smallest first:
  ``min(log Σ_j Φ̄(g_j/(√2σ)), log(1 - 1/C))`` through the table (exact in log space)."""
  terms = table[jnp.clip(gaps, 0, table.shape[0] - 1).astype(jnp.int32)]
  first = terms[..., :1]
  log_q = first[..., 0] + jnp.log(jnp.sum(jnp.exp(terms - first), axis=-1))
  return jnp.minimum(log_q, math.log1p(-1.0 / num_classes))


def _walk_gaps(votes: jax.Array, num_teachers: int):
  """Gaps to the top along both walks of Algorithms 4-5, in closed form.

  Left, after ``d`` steps the top holds ``n_0 + d`` and the others (sorted, ``m_1 >=
  m_2 >= ...``) have lost ``d`` votes from the largest down: with ``A = max_k (S_k -
  d)/k`` (``S_k = m_1 + ... + m_k``; the maximiser is the number of levelled classes),
  ``L = floor(A)`` and ``rem = S - d - Σ_j min(m_j, L)``, class ``j`` holds
  ``min(m_j, L + [j < rem])``. Right: ``(n_0 - d, m_1 + d, m_2, ...)``.

  Args:
    votes: float ``[Q, C]`` integer counts (float64; float32 under a 32-bit jit).
    num_teachers: ``T``; steps ``d = 0..T-1``.

  Returns:
    ``(left[Q, T, C-1], right[Q, T, C-1], others[Q])``: the gaps of the other classes
    (the smallest first) after ``d`` steps each way, and the number of votes outside
    the top class (the left walk's length limit).
  """
  num_classes = votes.shape[-1]
  ordered = -jnp.sort(-votes, axis=-1)
  top = ordered[:, :1, None]                                       # [Q, 1, 1]
  others = ordered[:, 1:]                                          # [Q, C-1]
  m = others[:, None, :]                                           # [Q, 1, C-1]
  d = jnp.arange(num_teachers, dtype=votes.dtype)[None, :, None]   # [1, T, 1]
  j = jnp.arange(num_classes - 1, dtype=votes.dtype)               # [C-1]
  right = top - d - m - jnp.where(j == 0, d, 0.0)
  cum = jnp.cumsum(others, axis=-1)[:, None, :]                    # S_k
  level = jnp.floor(jnp.max((cum - d) / (j + 1.0), axis=-1, keepdims=True))  # [Q, T, 1]
  rem = cum[..., -1:] - d - jnp.sum(jnp.minimum(m, level), axis=-1, keepdims=True)
  left = top + d - jnp.minimum(m, level + (j < rem))
  return left, right, cum[:, 0, -1]


def _previous(x: jax.Array, fill: float) -> jax.Array:
  """``x`` shifted one step along the last axis (``fill`` at ``d = 0``)."""
  return jnp.concatenate([jnp.full_like(x[..., :1], fill), x[..., :-1]], axis=-1)


@functools.partial(jax.jit, static_argnames=("num_classes",))
def gnmax_constants(sigma: jax.Array, orders: jax.Array,
                    num_classes: int) -> tuple[jax.Array, jax.Array, jax.Array]:
  """``(log q0, log q1, plateau)``, each ``[K]``: the data-independent part of Algorithm 3.

  Compiled apart from the per-query work (it depends on σ, the orders and C only).
  """
  log_q0 = _log_q0(sigma, orders)
  log_q1 = _log_bl_bu(log_q0, sigma, num_classes)[0]
  plateau = _ls_at_log_q(log_q1, log_q0, log_q1, sigma, orders, num_classes)
  return log_q0, log_q1, plateau


@functools.partial(jax.jit, static_argnames=("num_teachers",))
def gnmax_walk_core(votes: jax.Array, sigma: jax.Array, orders: jax.Array, log_q0: jax.Array,
                    log_q1: jax.Array, plateau: jax.Array, num_teachers: int) -> jax.Array:
  """``A(d)`` ``[Q, K, T]`` given :func:`gnmax_constants` (the walks and Algorithm 3)."""
  votes = jnp.round(nm.as_float(votes))
  num_classes = votes.shape[-1]
  table = _log_tail_table(sigma, 2 * num_teachers + 1)
  log_q_of = lambda gaps: _log_q_of_gaps(gaps, table, num_classes)
  left_gaps, right_gaps, others = _walk_gaps(votes, num_teachers)
  start = log_q_of(left_gaps[:, 0])[:, None]                        # [Q, 1]: the votes' log q
  go_left = start > log_q0                                          # [Q, K]
  go_right = start < log_q1
  if orders.shape[0] == 1:  # One walk per query: choose it before the table look-ups.
    log_q = log_q_of(jnp.where(go_left[:, :, None], left_gaps, right_gaps))[:, None, :]
    prev_left = prev_right = _previous(log_q, 0.0)
  else:
    left, right = log_q_of(left_gaps)[:, None, :], log_q_of(right_gaps)[:, None, :]
    log_q = jnp.where(go_left[..., None], left, right)              # [Q, K, T]
    prev_left, prev_right = _previous(left, 0.0), _previous(right, 0.0)
  row = lambda a: a[None, :, None]                                 # [K] -> [1, K, 1]
  # Step d is taken while step d-1 is still outside the plateau (and, left, votes remain).
  d = jnp.arange(num_teachers, dtype=nm.float_dtype())
  walk_left = (go_left[..., None] & (prev_left > row(log_q0))
               & (d <= others[:, None, None]))
  walk_right = go_right[..., None] & (prev_right < row(log_q1))
  walking = walk_left | walk_right | (d == 0.0)
  ls = _ls_at_log_q(log_q, row(log_q0), row(log_q1), sigma, row(orders), num_classes)
  return jnp.where(walking, ls, row(plateau))


# ----------------------------------------------------------------------------- threshold


def _threshold_rdp_table(threshold, sigma_threshold, orders, num_teachers):
  """``r(v)``: data-dependent threshold RDP at ``max_j n_j = v``, ``v = 0..T``: ``[T+1, K]``."""
  v_max = jnp.arange(num_teachers + 1, dtype=nm.float_dtype())
  lower, upper = nm.log_ndtr_pair((v_max - threshold) / sigma_threshold)
  return _gnmax.rdp_from_log_q(jnp.minimum(lower, upper), nm.SQRT2 * sigma_threshold, orders)


@functools.partial(jax.jit, static_argnames=("num_teachers",))
def threshold_local_sensitivity_core(votes: jax.Array, threshold: jax.Array,
                                     sigma_threshold: jax.Array, orders: jax.Array,
                                     num_teachers: int) -> jax.Array:
  """``A(d)`` of the threshold step's RDP: ``[Q, C], [K] -> [Q, K, T]`` (no validation).

  The top count is rounded to the nearest integer (half to even), as in tf-privacy.
  """
  votes = nm.as_float(votes)
  r = _threshold_rdp_table(threshold, sigma_threshold, orders, num_teachers)  # [T+1, K]
  step = jnp.abs(r[1:] - r[:-1])                                   # [T, K]
  none = jnp.full_like(step[:1], -jnp.inf)
  ls_at = jnp.maximum(jnp.concatenate([none, step]), jnp.concatenate([step, none]))
  top = jnp.round(nm.max_and_argmax(votes, axis=-1)[0])[:, None]    # [Q, 1]
  d = jnp.arange(num_teachers, dtype=nm.float_dtype())
  up, down = top + d, top - d                                      # [Q, T]

  def at(v_max):
    ok = (v_max >= 0) & (v_max <= num_teachers)
    idx = jnp.clip(v_max, 0, num_teachers).astype(jnp.int32)
    return jnp.where(ok[:, None, :], jnp.moveaxis(ls_at[idx], -1, 1), -jnp.inf)

  ls = jnp.maximum(at(up), at(down))                                # [Q, K, T]
  ls = jnp.where(jnp.isfinite(ls), ls, 0.0)
  # Running maximum over the distance: d teachers moved can leave the top count anywhere
  # in [top - d, top + d], and the steps |r(v+1) - r(v)| rise and fall around the
  # threshold, so A(d) = max_{|k| <= d} ls(top + k). With the two ends alone (tf-privacy's
  # table) a sum over queries is not beta-smooth: one neighbour moves each query's top count
  # by a different k at the same distance.
  return jax.lax.cummax(ls, axis=2)


# ----------------------------------------------------------------------------- public API


def _votes_and_teachers(votes, num_teachers, *, equal_totals: bool = False):
  """Validated ``[Q, C]`` votes (a ``[C]`` histogram becomes ``[1, C]``), ``T`` and
  whether the input was a single histogram. Concrete rows must not sum above ``T``."""
  single = np.ndim(votes) == 1
  if single:
    votes = votes[None] if v.is_traced(votes) else np.asarray(votes)[None]
  votes = v.votes(votes, equal_totals=equal_totals)
  num_teachers = v.positive_int(num_teachers, "num_teachers")
  if not v.is_traced(votes):
    totals = np.asarray(votes).astype(np.float64).sum(axis=-1)
    if totals.max() > num_teachers:
      i = int(np.argmax(totals))
      raise ValueError(f"num_teachers must be at least every row's total of votes; got "
                       f"{num_teachers}, but row {i} of votes sums to {totals[i]:g}")
  return votes, num_teachers, single


def _orders(order):
  """``(orders[K], scalar)`` from one order or a 1-D array of orders (each > 1)."""
  return v.orders(order, "order"), np.ndim(order) == 0


def _checked_constants(sigma, orders, num_classes):
  """:func:`gnmax_constants`, refusing (concrete) orders for which no q0 was found."""
  constants = gnmax_constants(sigma, orders, num_classes=num_classes)
  if not (v.is_traced(constants[0]) or v.is_traced(orders)):
    bad = ~np.isfinite(np.asarray(constants[0]))
    if bad.any():
      raise ValueError(f"order {np.asarray(orders)[bad][0]:g} with sigma "
                       f"{float(np.asarray(sigma)):g}: no q0 found (Theorem 6's bound does not "
                       "meet λ/σ² in the bracket); use another order")
  return constants


def _shape_out(ls, single, scalar_order):
  """``[Q, K, T]`` -> ``[T]``, ``[K, T]``, ``[Q, T]`` or ``[Q, K, T]``."""
  if scalar_order:
    ls = ls[:, 0]
  return ls[0] if single else ls


@nm.with_x64
def gnmax_local_sensitivity(votes, num_teachers, sigma, order) -> jax.Array:
  """Upper bounds ``A(d)`` on the local sensitivity of GNMax's data-dependent RDP at
  distance ``d = 0..T-1`` (Papernot et al. 2018, Algorithms 3-5, Proposition 13).

  ``A(d)`` bounds ``|β(D') - β(D'')|`` over neighbours ``D'' ~ D'`` with ``D'`` at most
  ``d`` teachers from the votes ``D``, ``β`` the per-query RDP of
  :func:`pate_jax.accounting.gnmax_rdp` below ``q0`` and ``λ/σ²`` above (module
  docstring). All queries, distances and orders are one compiled expression. The bound
  holds, and its smooth sensitivity is β-smooth, only at orders where conditions C5 and C6
  hold (:func:`pate_jax.accounting.valid_release_orders`); other orders are computed but
  not checked here (:func:`pate_jax.accounting.smooth_sensitivity_release` refuses them).

  Args:
    votes: ``[C]`` or ``[Q, C]`` non-negative integer vote counts (reals under
      tracing); no row may hold more than ``num_teachers`` votes.
    num_teachers: ``T``, the number of teachers (static: the output length).
    sigma: GNMax noise ``σ > 0``.
    order: a Rényi order ``λ > 1``, or ``[K]`` orders.

  Returns:
    float64 ``[..., T]`` with the leading axes of ``votes`` (``Q``) and ``order``
    (``K``), in that order.
  """
  votes, num_teachers, single = _votes_and_teachers(votes, num_teachers)
  orders, scalar = _orders(order)
  sigma = v.positive(sigma, "sigma")
  constants = _checked_constants(sigma, orders, votes.shape[-1])
  ls = gnmax_walk_core(votes, sigma, orders, *constants, num_teachers=num_teachers)
  return _shape_out(ls, single, scalar)


@nm.with_x64
def threshold_local_sensitivity(votes, num_teachers, threshold, sigma, order) -> jax.Array:
  """``A(d)``, ``d = 0..T-1``, for the data-dependent RDP of Confident-GNMax's threshold
  step (noise ``σ`` = σ_T); see the module docstring.

  Args:
    votes: ``[C]`` or ``[Q, C]`` non-negative integer vote counts, rows summing to at
      most ``num_teachers``.
    num_teachers: ``T`` (static).
    threshold: the threshold (in votes).
    sigma: the threshold noise ``σ_T > 0``.
    order: a Rényi order ``λ > 1``, or ``[K]`` orders.

  Returns:
    float64 ``[..., T]`` as :func:`gnmax_local_sensitivity`.
  """
  votes, num_teachers, single = _votes_and_teachers(votes, num_teachers)
  orders, scalar = _orders(order)
  ls = threshold_local_sensitivity_core(votes, v.scalar(threshold, "threshold"),
                                        v.positive(sigma, "sigma"), orders,
                                        num_teachers=num_teachers)
  return _shape_out(ls, single, scalar)
