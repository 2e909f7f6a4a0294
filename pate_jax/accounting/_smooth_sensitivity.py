"""Releasing data-dependent ε privately: smooth sensitivity of PATE's RDP (GNSS).

Reference: Papernot, Song, Mironov, Raghunathan, Talwar, Erlingsson, "Scalable
Private Learning with PATE", ICLR 2018 (arXiv 1802.08908), Section 4 and
Appendices B-C: Theorem 23 (Gaussian noise scaled by smooth sensitivity, "GNSS"). The
maths follows tf-privacy ``research/pate_2018`` (``smooth_sensitivity.py``,
``ICLR2018/smooth_sensitivity_table.py``); this is an independent vectorised
implementation. The local sensitivities ``A(d)`` (Algorithms 3-5, Proposition 13) are
:mod:`pate_jax.accounting._local_sensitivity`'s.

A data-dependent RDP value ``rdp(D)`` at order λ is a function of the private votes:
publishing it (or stopping on it) leaks. The GNSS mechanism releases
``rdp(D) + SS_β(D) · N(0, σ_ss²)`` where ``SS_β(D) = max_d e^{-βd} A(d)``, ``A(d)``
an upper bound on the local sensitivity of ``rdp`` at every dataset at distance
``d`` (teachers changed) from ``D``. It is ``(λ, ε_ss)``-RDP for ``1 < λ < 1/(2β)``,

  ε_ss(β, σ_ss, λ) = λ e^{2β} / σ_ss² + (βλ - ½ log(1 - 2λβ)) / (λ - 1),

and its cost is added to the total: the publishable ε is
``rdp(D) + ε_ss + noise + log(1/δ)/(λ-1)`` (classic conversion; the noise is the only
data-dependent part that leaves).

Release (tf-privacy ``smooth_sensitivity_table.py``): the per-query costs and local
sensitivities are summed over the answered set (the GNMax part weighted by the
probability that the query is answered, or by the realised answers), ``SS_β`` of
the sum is taken over a grid of β, ``σ_ss = (λ e^{2β} / SS)^{1/3}`` minimises
``λe^{2β}/σ² + 2·SS·σ``, and β is the grid point minimising ``rdp + ε_ss + 2·SS·σ_ss``
(the upper end of the released value's 2-std interval). A step whose
data-dependent bound equals the data-independent one at the extreme vote histograms
is accounted data-independently, with sensitivity 0. Every order of a release must
satisfy conditions C5 and C6 of Appendix B.4.2 for σ and the number of classes
(:mod:`pate_jax.accounting._conditions`); other orders are refused.

Deviation from tf-privacy, on purpose: with several orders, (λ, β) are chosen jointly by
the same cost (tf-privacy fixes λ first, at the smallest data-dependent ε); one order
reproduces it exactly.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks as v
from pate_jax._compile import bucket
from pate_jax.accounting import _gnmax
from pate_jax.accounting import _numerics as nm
from pate_jax.accounting._conditions import check_release_order, valid_release_orders
from pate_jax.accounting._conversion import CONVERSIONS, DEFAULT_ORDERS
from pate_jax.accounting._local_sensitivity import (
    _checked_constants,
    _threshold_rdp_table,
    _votes_and_teachers,
    gnmax_walk_core,
    threshold_local_sensitivity_core,
)


# β grid of the release, in units of 1/λ: 0.30/λ, 0.31/λ, ..., 0.49/λ (tf-privacy's
# ``np.arange(.3/λ, .495/λ, .01/λ)``), all inside Theorem 23's 1 < λ < 1/(2β).
BETA_GRID = tuple(0.30 + 0.01 * i for i in range(20))

# The votes of a release are padded to a few row counts (powers of two from 8 up to
# ROW_STEP, then multiples of ROW_STEP), so that one compiled release serves every
# number of queries in a bucket; the padding rows are left out of every sum.
ROW_STEP = 1024


# ----------------------------------------------------------------------------- SS_β, GNSS, release


def smooth_sensitivity_core(local_sensitivities: jax.Array, beta: jax.Array) -> jax.Array:
  """``max_d e^{-βd} A(d)`` over the last axis, ``β`` broadcast against ``A[..., 0]``."""
  d = jnp.arange(local_sensitivities.shape[-1], dtype=local_sensitivities.dtype)
  beta = jnp.asarray(beta)[..., None]
  return nm.max_and_argmax(local_sensitivities * jnp.exp(-beta * d), axis=-1)[0]


def gnss_rdp_core(beta, sigma, order):
  """Theorem 23: ``λe^{2β}/σ² + (βλ - ½ log(1 - 2λβ))/(λ - 1)`` (no validation)."""
  return (order * jnp.exp(2.0 * beta) / sigma**2
          + (beta * order - 0.5 * jnp.log1p(-2.0 * order * beta)) / (order - 1.0))


def _isclose(a, b):
  """numpy's ``isclose`` (rtol 1e-5, atol 1e-8), tf-privacy's test of a data-independent step."""
  return jnp.abs(a - b) <= 1e-8 + 1e-5 * jnp.abs(b)


class Release(NamedTuple):
  """Smooth-sensitivity release of one answered set's data-dependent ε (a pytree).

  Every field is float64. Only the noisy ε drawn by :func:`release_epsilon` may be
  published; ``epsilon_before``, ``epsilon``, ``rdp`` and ``smooth_sensitivity`` are
  functions of the private votes, and so are ``order``, ``beta`` and ``sigma_ss`` when
  they were chosen by minimising the cost below on these votes.

  Attributes:
    order: the Rényi order λ of the release.
    beta: the smoothing β (0 when both steps are data-independent).
    smooth_sensitivity: ``SS_β`` of the summed per-query RDP.
    sigma_ss: the GNSS noise multiplier σ_ss (``inf`` when nothing is data-dependent).
    noise_std: ``SS_β · σ_ss``, the standard deviation of the released noise.
    rdp: the data-dependent RDP of the answers at λ.
    rdp_release: ``ε_ss``, the GNSS mechanism's own RDP at λ (Theorem 23).
    epsilon_before: ε from ``rdp`` alone (the un-noised data-dependent ε).
    epsilon: ε from ``rdp + rdp_release`` (the expectation of the released ε).
    cost: ``rdp + rdp_release + 2·noise_std``, the quantity minimised.
    answered: the (expected or realised) number of answered queries.
    data_independent_threshold: the threshold step was accounted data-independently.
    data_independent_answer: the GNMax step was accounted data-independently.
  """
  order: jax.Array
  beta: jax.Array
  smooth_sensitivity: jax.Array
  sigma_ss: jax.Array
  noise_std: jax.Array
  rdp: jax.Array
  rdp_release: jax.Array
  epsilon_before: jax.Array
  epsilon: jax.Array
  cost: jax.Array
  answered: jax.Array
  data_independent_threshold: jax.Array
  data_independent_answer: jax.Array


def _delta_term(orders, delta, conversion):
  """``ε - rdp`` of the RDP -> (ε, δ) conversion at each order (classic or improved)."""
  if conversion == "classic":
    return -jnp.log(delta) / (orders - 1.0)
  return jnp.log1p(-1.0 / orders) - (jnp.log(delta) + jnp.log(orders)) / (orders - 1.0)


def padded_rows(num_queries: int) -> int:
  """The row count a release of ``num_queries`` queries is padded to (see ``ROW_STEP``)."""
  if num_queries > ROW_STEP:
    return -(-num_queries // ROW_STEP) * ROW_STEP
  return bucket(num_queries, minimum=8)


def _pad_rows(votes, weights):
  """``votes[Q, C]`` and ``weights[Q]`` padded to :func:`padded_rows` rows: copies of row 0
  (a histogram already in the release, so no new numerical case) and weight 0."""
  q = votes.shape[0]
  extra = padded_rows(q) - q
  if not extra:
    return votes, weights
  xp = np if isinstance(votes, np.ndarray) else jnp
  votes = xp.concatenate([votes, xp.broadcast_to(votes[:1], (extra, votes.shape[1]))])
  xp = np if isinstance(weights, np.ndarray) else jnp
  return votes, xp.concatenate([weights, xp.zeros((extra,), weights.dtype)])


def _rows_sum(per_row, num_rows):
  """``per_row[:num_rows].sum(0)`` with a traced ``num_rows``: the padding rows are
  selected out (``where``, so that nothing they hold, even a NaN, reaches the sum)."""
  valid = jnp.arange(per_row.shape[0]) < num_rows
  return jnp.sum(jnp.where(valid.reshape((-1,) + (1,) * (per_row.ndim - 1)), per_row, 0.0),
                 axis=0)


def _gnmax_at_trace(confident) -> bool:
  """Whether ``confident`` is a static False: a GNMax release or order choice, whose
  program then holds no threshold step (``confident`` traced: one program for both)."""
  return not v.is_traced(confident) and not confident


def _answer_weights(votes, weights, threshold, sigma_threshold, confident, realised):
  """GNMax-step weights ``[Q]``: the realised answers; else ``Pr[answered] = Φ((round(max_j
  n_j) - T)/σ_T)`` (tf-privacy's rounding) for Confident-GNMax, 1 for GNMax."""
  if _gnmax_at_trace(confident):
    return jnp.where(realised, nm.as_float(weights), 1.0)
  top = jnp.round(nm.max_and_argmax(votes, axis=-1)[0])
  expected = jnp.where(confident, jnp.exp(nm.log_ndtr((top - threshold) / sigma_threshold)),
                       1.0)
  return jnp.where(realised, nm.as_float(weights), expected)


@functools.partial(jax.jit, static_argnames=("num_teachers", "conversion", "confident"))
def release_core(votes, weights, num_rows, threshold, sigma_threshold, sigma, orders, betas,
                 delta, sigma_ss, constants, confident, realised, fixed_sigma_ss, *,
                 num_teachers: int, conversion: str) -> Release:
  """Smooth-sensitivity release over ``orders[K]`` × ``betas[K, B]`` (no validation).

  Only the first ``num_rows`` rows of ``votes`` (an int scalar, traced) are released: the
  others are padding. ``realised``, ``fixed_sigma_ss``: boolean scalars (traced, so one
  compiled program serves both values of each). ``confident``: a static numpy bool (it
  may also be traced, one program for both mechanisms): a GNMax release's program then
  holds none of the threshold step, whose selects would discard it, and compiles in
  two thirds of the time (2.1 s instead of 3.4 s of CPU on a 2-core CPU).
  ``weights[Q]``: the realised answers (used where ``realised``). ``sigma_ss``: used
  where ``fixed_sigma_ss``. ``constants``: :func:`gnmax_constants` of ``(sigma, orders)``.
  """
  votes = nm.as_float(votes)
  num_queries, num_classes = votes.shape
  zeros = lambda: jnp.zeros((num_queries, orders.shape[0], num_teachers))
  ind_answer = orders / sigma**2
  unanimous = jnp.zeros((1, num_classes)).at[0, 0].set(num_teachers)
  data_ind_answer = _isclose(
      _gnmax.gnmax_rdp_core(unanimous, sigma, orders)[0], ind_answer)             # [K]
  rdp_answer = jnp.where(data_ind_answer, ind_answer,
                         _gnmax.gnmax_rdp_core(votes, sigma, orders))             # [Q, K]
  ls_answer = jax.lax.cond(
      jnp.all(data_ind_answer), zeros,
      lambda: jnp.where(data_ind_answer[:, None], 0.0, gnmax_walk_core(
          votes, sigma, orders, *constants, num_teachers=num_teachers)))         # [Q, K, T]
  if _gnmax_at_trace(confident):  # no threshold step: what the selects below give then
    data_ind_threshold = jnp.ones(orders.shape, bool)
    rdp_threshold = jnp.zeros((num_queries, orders.shape[0]))
    ls_threshold = zeros()
  else:
    ind_threshold = orders / (2.0 * sigma_threshold**2)
    table = _threshold_rdp_table(threshold, sigma_threshold, orders, num_teachers)
    data_ind_threshold = (_isclose(table[0], ind_threshold)
                          & _isclose(table[-1], ind_threshold) | jnp.logical_not(confident))
    rdp_threshold = jnp.where(confident, jnp.where(
        data_ind_threshold, ind_threshold,
        _gnmax.confident_threshold_rdp_core(votes, threshold, sigma_threshold, orders)), 0.0)
    ls_threshold = jax.lax.cond(
        jnp.all(data_ind_threshold), zeros,
        lambda: jnp.where(data_ind_threshold[:, None], 0.0, threshold_local_sensitivity_core(
            votes, threshold, sigma_threshold, orders, num_teachers=num_teachers)))
  weights = _answer_weights(votes, weights, threshold, sigma_threshold, confident, realised)
  rdp = _rows_sum(rdp_threshold + weights[:, None] * rdp_answer, num_rows)       # [K]
  ls = _rows_sum(ls_threshold + weights[:, None, None] * ls_answer, num_rows)    # [K, T]
  ss = smooth_sensitivity_core(ls[:, None, :], betas)                            # [K, B]
  col = lambda a: a[:, None]
  # σ_ss = argmin_σ λe^{2β}/σ² + 2·SS·σ, unless fixed.
  optimal = (col(orders) * jnp.exp(2.0 * betas) / jnp.where(ss > 0, ss, 1.0))**(1.0 / 3.0)
  sig = jnp.where(fixed_sigma_ss, sigma_ss, optimal)
  rdp_ss = gnss_rdp_core(betas, sig, col(orders))
  cost = col(rdp) + rdp_ss + 2.0 * ss * sig
  nothing = jnp.all(ls == 0.0, axis=-1)                           # [K]: no data-dependence
  rdp_ss = jnp.where(col(nothing), 0.0, rdp_ss)
  cost = jnp.where(col(nothing), col(rdp), cost)
  # (λ, β) minimise the cost plus the conversion's δ term (a constant for one order).
  delta_term = _delta_term(orders, delta, conversion)
  total = cost + col(delta_term)
  flat = jnp.argmin(total.reshape(-1))
  ki, bi = flat // cost.shape[1], flat % cost.shape[1]
  none_k = nothing[ki]
  beta = jnp.where(none_k, 0.0, betas[ki, bi])
  ss_k = jnp.where(none_k, 0.0, ss[ki, bi])
  sig_k = jnp.where(none_k, jnp.inf, sig[ki, bi])
  return Release(
      order=orders[ki], beta=beta, smooth_sensitivity=ss_k, sigma_ss=sig_k,
      noise_std=jnp.where(none_k, 0.0, ss_k * sig[ki, bi]), rdp=rdp[ki],
      rdp_release=rdp_ss[ki, bi], epsilon_before=rdp[ki] + delta_term[ki],
      epsilon=rdp[ki] + rdp_ss[ki, bi] + delta_term[ki], cost=cost[ki, bi],
      answered=_rows_sum(weights, num_rows), data_independent_threshold=data_ind_threshold[ki],
      data_independent_answer=data_ind_answer[ki])


# ----------------------------------------------------------------------------- public API


def _beta(beta, name="beta"):
  """Concrete β values must all be finite and > 0 (float64; tracers as they are)."""
  if v.is_traced(beta):
    return nm.as_float(beta)
  arr = np.asarray(beta, np.float64)
  bad = ~(np.isfinite(arr) & (arr > 0))
  if bad.any():
    raise ValueError(f"{name} must be finite and > 0; got {arr[bad].reshape(-1)[0]}")
  return arr


@nm.with_x64
def smooth_sensitivity(local_sensitivities, beta) -> jax.Array:
  """β-smooth sensitivity ``SS_β = max_d e^{-βd} A(d)`` (Nissim, Raskhodnikova, Smith 2007).

  Args:
    local_sensitivities: ``[..., T]`` bounds ``A(d)`` at distances ``d = 0..T-1``, ``>= 0``.
    beta: ``β > 0``, broadcast against ``local_sensitivities[..., 0]``.

  Returns:
    float64 ``[...]`` (the broadcast shape).
  """
  ls = v.float64_array(local_sensitivities)
  if ls.ndim == 0:
    raise ValueError("local_sensitivities must have a distance axis [..., T]; got a scalar")
  if not v.is_traced(ls):
    arr = np.asarray(ls)
    if not (np.isfinite(arr) & (arr >= 0)).all():
      raise ValueError("local_sensitivities must be finite and >= 0; got "
                       f"{arr[~(np.isfinite(arr) & (arr >= 0))].reshape(-1)[0]}")
  return smooth_sensitivity_core(ls, _beta(beta))


@nm.with_x64
def gnss_rdp(beta, sigma, order) -> jax.Array:
  """RDP of the Gaussian-noise-with-smooth-sensitivity release (2018, Theorem 23).

  Releasing ``f(D) + SS_β(D) · N(0, σ²)`` is ``(λ, ε)``-RDP with
  ``ε = λe^{2β}/σ² + (βλ - ½ log(1 - 2λβ))/(λ - 1)`` for ``1 < λ < 1/(2β)``.

  Args:
    beta: smoothing ``β > 0``.
    sigma: noise multiplier ``σ > 0``.
    order: Rényi order(s) ``λ``, each in ``(1, 1/(2β))``.

  Returns:
    float64, the broadcast shape of the arguments.

  Raises:
    ValueError: ``β <= 0``, ``σ <= 0``, or an order outside ``(1, 1/(2β))``.
  """
  beta = _beta(beta)
  sigma = _beta(sigma, "sigma")
  orders = order if v.is_traced(order) else np.asarray(order, np.float64)
  if not v.is_traced(orders) and not v.is_traced(beta):
    limit = 1.0 / (2.0 * np.broadcast_to(beta, np.broadcast_shapes(beta.shape, orders.shape)))
    o = np.broadcast_to(orders, limit.shape)
    bad = ~((o > 1.0) & (o < limit))
    if bad.any():
      i = np.argwhere(bad)[0] if bad.ndim else ()
      raise ValueError(f"order must lie in (1, 1/(2·beta)) (Theorem 23); got order "
                       f"{o[tuple(i)]} with beta {np.broadcast_to(beta, o.shape)[tuple(i)]} "
                       f"(1/(2·beta) = {limit[tuple(i)]:g})")
  return gnss_rdp_core(beta, sigma, nm.as_float(orders))


@functools.partial(jax.jit, static_argnames=("conversion", "confident"))
def _best_order_core(votes, weights, num_rows, threshold, sigma_threshold, sigma, orders, delta,
                     confident, realised, *, conversion: str) -> jax.Array:
  """tf-privacy's order: the one with the smallest data-dependent ε before the release (of
  the first ``num_rows`` rows, as in :func:`release_core`). ``confident``: static, as in
  :func:`release_core` (a GNMax choice compiles no threshold step), or traced."""
  votes = nm.as_float(votes)
  weights = _answer_weights(votes, weights, threshold, sigma_threshold, confident, realised)
  rdp = weights[:, None] * _gnmax.gnmax_rdp_core(votes, sigma, orders)
  if not _gnmax_at_trace(confident):
    rdp = rdp + jnp.where(confident, _gnmax.confident_threshold_rdp_core(
        votes, threshold, sigma_threshold, orders), 0.0)
  eps = _rows_sum(rdp, num_rows) + _delta_term(orders, delta, conversion)
  return orders[nm.min_and_argmin(eps)[1]]


@nm.with_x64
def smooth_sensitivity_release(votes, *, num_teachers=None, threshold=None,
                               sigma_threshold=None, sigma, order=None, delta, betas=None,
                               answered=None, sigma_ss=None,
                               conversion: str = "classic") -> Release:
  """Parameters of the smooth-sensitivity release of an answered set's data-dependent ε.

  Confident-GNMax (``threshold`` and ``sigma_threshold`` given) or plain GNMax
  (both ``None``). Per query, the data-dependent RDP at λ and its ``A(d)`` are the
  threshold step's plus the GNMax step's weighted by ``Pr[answered]`` (tf-privacy's
  expected cost; GNMax: 1) or by the realised ``answered``; summed over the queries
  they give ``rdp`` and ``SS_β``; ``σ_ss = (λe^{2β}/SS_β)^{1/3}`` and β (and λ, if
  several orders are given) minimise ``rdp + ε_ss(β, σ_ss, λ) + 2·SS_β·σ_ss`` plus the
  conversion's δ term (module docstring). A step whose data-dependent bound equals
  ``λ/σ²`` (or ``λ/(2σ_T²)``) at the extreme histograms is accounted
  data-independently, with sensitivity 0; if both are, nothing is released
  (``beta = 0``, ``sigma_ss = inf``, ``epsilon = epsilon_before``). The votes are padded
  to one of a few row counts (:func:`padded_rows`), so that one compiled program serves
  every number of queries in a bucket; the padding rows are in no sum.

  Args:
    votes: ``[Q, C]`` non-negative integer votes of the queries asked (for
      Confident-GNMax every row sums to the number of teachers).
    num_teachers: ``T`` (default: the largest row total).
    threshold: Confident-GNMax's threshold (votes), or ``None`` for GNMax.
    sigma_threshold: the threshold noise ``σ_T > 0`` (with ``threshold``).
    sigma: the GNMax noise ``σ > 0``.
    order: ``None``: the order of :data:`pate_jax.accounting.DEFAULT_ORDERS` with the
      smallest data-dependent ε before the release (tf-privacy's choice), among those
      where conditions C5 and C6 hold; a scalar ``λ > 1``; or ``[K]`` orders, chosen
      jointly with β by the cost. Every order given must satisfy C5 and C6 for ``sigma``
      and the number of classes (:func:`pate_jax.accounting.smooth_sensitivity_conditions`,
      2018 App. B.4.2): the analysis of the release holds only there.
    delta: ``δ`` in (0, 1) of the reported ``(ε, δ)``.
    betas: ``[B]`` smoothing parameters, each ``< 1/(2λ)`` for every order; default
      ``0.30/λ, 0.31/λ, ..., 0.49/λ`` (tf-privacy's grid).
    answered: optional bool ``[Q]``: the realised answers (a ledger's accounting);
      ``None`` weighs GNMax by ``Pr[answered]`` (tf-privacy's table analysis: an estimate
      for comparison, not a valid release: its ``A(d)`` weighs the GNMax step's by
      ``Pr[answered]`` and leaves out how ``Pr[answered]`` itself moves with the votes).
    sigma_ss: optional fixed noise multiplier ``> 0`` (else the optimum per β).
    conversion: RDP -> (ε, δ): ``"classic"`` (the paper, tf-privacy) or ``"improved"``.

  Returns:
    A :class:`Release` of float64 scalars.

  Raises:
    ValueError: naming the argument: bad votes (negative, fractional), ``num_teachers``
      below a row total, a β outside ``(0, 1/(2λ))``, an order ``<= 1``, an order at
      which condition C5 or C6 fails (or a traced ``sigma`` / ``order``, which cannot be
      checked), a missing or lone threshold parameter, a bad ``answered`` shape, ...
  """
  confident = threshold is not None or sigma_threshold is not None
  if confident and (threshold is None or sigma_threshold is None):
    raise ValueError("threshold and sigma_threshold must be given together (Confident-GNMax)"
                     f" or both be None (GNMax); got threshold={threshold!r}, "
                     f"sigma_threshold={sigma_threshold!r}")
  if np.ndim(votes) != 2:
    raise ValueError(f"votes must have shape [Q, C] (queries, classes); got shape "
                     f"{np.shape(votes)}")
  if num_teachers is None:
    if v.is_traced(votes):
      raise ValueError("num_teachers must be given when votes are traced")
    num_teachers = int(np.asarray(v.votes(votes)).astype(np.float64).sum(axis=-1).max())
  votes, num_teachers, _ = _votes_and_teachers(votes, num_teachers, equal_totals=confident)
  conversion = v.choice(conversion, "conversion", CONVERSIONS)
  sigma = v.positive(sigma, "sigma")
  delta = v.delta(delta)
  thr = v.scalar(threshold, "threshold") if confident else np.float64(0.0)
  sig_thr = v.positive(sigma_threshold, "sigma_threshold") if confident else np.float64(1.0)
  realised = answered is not None
  if realised:
    if np.shape(answered) != (votes.shape[0],):
      raise ValueError(f"answered must have shape [{votes.shape[0]}] (one flag per query); "
                       f"got shape {np.shape(answered)}")
    weights = (nm.as_float(answered) if v.is_traced(answered)
               else np.asarray(answered, np.float64))
  else:
    weights = np.zeros((votes.shape[0],), np.float64)
  num_rows = np.int32(votes.shape[0])
  votes, weights = _pad_rows(votes, weights)
  if order is None:  # Among DEFAULT_ORDERS where C5 and C6 hold (a new array: see with_x64).
    pool = valid_release_orders(sigma, votes.shape[-1], DEFAULT_ORDERS)
    if not pool.size:
      raise ValueError(f"order None: no order of DEFAULT_ORDERS satisfies conditions C5 and C6 "
                       f"(Papernot et al. 2018, App. B.4.2) with sigma {float(sigma):g} and "
                       f"{votes.shape[-1]} classes; no release is supported there")
    orders = _best_order_core(votes, weights, num_rows, thr, sig_thr, sigma, pool, delta,
                              np.bool_(confident), np.bool_(realised),
                              conversion=conversion)[None]
  else:
    orders = v.orders(order, "order")
  if betas is None:
    grid = nm.as_float(BETA_GRID)
    beta_grid = grid[None, :] / jnp.asarray(orders)[:, None]
  else:
    betas = _beta(betas, "betas")
    if np.ndim(betas) != 1 or np.shape(betas)[0] == 0:
      raise ValueError(f"betas must be a non-empty 1-D array; got shape {np.shape(betas)}")
    if not v.is_traced(betas) and not v.is_traced(orders):
      o = np.asarray(orders)
      if (o.max() * betas.max()) >= 0.5:
        raise ValueError(f"betas must be < 1/(2·order) for every order (Theorem 23); got "
                         f"beta {betas.max():g} with order {o.max():g}")
    beta_grid = jnp.broadcast_to(jnp.asarray(betas)[None, :], (orders.shape[0], betas.shape[0]))
  fixed = sigma_ss is not None
  sig_ss = v.positive(sigma_ss, "sigma_ss") if fixed else np.float64(1.0)
  if order is not None:  # (order None chose among the orders that pass.)
    check_release_order(sigma, votes.shape[-1], orders, "order")
  constants = _checked_constants(sigma, orders, votes.shape[-1])
  return release_core(votes, weights, num_rows, thr, sig_thr, sigma, orders, beta_grid, delta,
                      sig_ss, constants, np.bool_(confident), np.bool_(realised), np.bool_(fixed),
                      num_teachers=num_teachers, conversion=conversion)


# The grid a released ε is rounded to (2^-10 ≈ 0.001): see :func:`on_release_grid`.
RELEASE_GRID = 2.0 ** -10


@nm.with_x64
def on_release_grid(x: Any) -> jax.Array:
  """``x`` rounded to the nearest multiple of :data:`RELEASE_GRID`: the fixed grid every
  published noisy ε (the smooth-sensitivity release) lies on.

  A float64 ``e + s · z``, with ``z`` drawn from a 52-bit uniform grid, can take only a
  sparse set of values for each ``(e, s)``, so its exact bits tell neighbouring votes
  apart (Mironov 2012, "On significance of the least significant bits for differential
  privacy"): one who knows every vote but one finds which neighbour can produce the
  published value. Rounded to a grid far coarser than those gaps, each cell holds the
  mass the real-valued mechanism gives it up to the sampler's error at the cell's edges
  (:func:`release_epsilon` rounds the sum exactly; what is left is charged by
  :func:`pate_jax.mechanisms.release_sampler_delta`). The grid is fixed, not drawn from
  the data.
  """
  return jnp.round(nm.as_float(x) / RELEASE_GRID) * RELEASE_GRID


def _round_sum(a: jax.Array, b: jax.Array) -> jax.Array:
  """The integer nearest the exact real ``a + b`` (float64 ``a``, ``b``; ties to even),
  where ``round(a + b)`` could err by one cell when the float sum rounds onto a half.

  Knuth's two-sum gives ``a + b = s + t`` exactly; ``round`` is monotone, so ``round(s)``
  is the exact answer unless ``s`` is itself a half-integer, where the sign of ``t``
  decides. Exact for ``|a + b| < 2^52`` where ``t`` is not subnormal (XLA flushes
  subnormals to zero): a published ε is clipped far inside that range.
  """
  s = a + b
  bb = s - a
  t = (a - (s - bb)) + (b - bb)
  k = jnp.round(s)
  r = s - k  # Exact: k is s's nearest integer.
  return k + jnp.where((r == 0.5) & (t > 0), 1.0, 0.0) - jnp.where((r == -0.5) & (t < 0),
                                                                   1.0, 0.0)


@nm.with_x64
def release_epsilon(key: jax.Array, release: Release, upper: Any = np.inf) -> jax.Array:
  """The publishable ε: ``release.epsilon + release.noise_std · N(0, 1)`` (GNSS), rounded
  to the grid of :func:`on_release_grid` and clipped to ``[0, upper]``.

  The noise is added to the data-dependent RDP; the GNSS cost and the conversion's
  δ term are data-independent constants. Where nothing was data-dependent
  (``noise_std = 0``) the result is ``release.epsilon`` itself (data-independent: not
  rounded, so never below the bound; clipped to ``upper``).

  The draw is float64, and the cell it falls in is that of the exact real sum
  ``release.epsilon + noise_std · z`` (no rounding of the sum can move it across a cell
  edge), so the released cell differs from the real-valued mechanism's only where the
  sampler's ``z`` does at an edge: at most :data:`pate_jax.mechanisms.SAMPLER_CDF_ERROR`
  plus the product's rounding for each edge. Clipping to a public ``upper`` (the budget's
  data-independent ε, which bounds the privacy loss whatever the draw) leaves a fixed
  number of edges, ``upper / RELEASE_GRID + 2``, so that what the sampler adds to δ is
  public (:func:`pate_jax.mechanisms.release_sampler_delta`); with ``upper = inf`` it is
  not bounded. Clipping at 0 too: a negative ε says nothing. Both are post-processing.

  Refused inside a caller's trace (``jax.jit``) begun in 32-bit mode: the noise would be
  float32, one of 2^23 values.

  Args:
    key: a PRNG key (use a stream of its own, e.g. ``rng.stream(root, ...)``).
    release: from :func:`smooth_sensitivity_release`.
    upper: the largest value published (public, not drawn from the data); ``inf`` for
      none.

  Returns:
    float64 scalar.
  """
  if not v.is_traced(upper):
    value = v.real_number(upper)
    if value is None or not value >= 0:
      raise ValueError(f"upper must be a real number >= 0 (inf for none); got {upper!r}")
  if nm.float_dtype() != jnp.float64:
    raise RuntimeError("release_epsilon draws float64 noise: call it outside a 32-bit jit, "
                       "or trace it under jax.enable_x64(True)")
  # The sampler's z as drawn (the barrier keeps a compiler from folding its √2 into the
  # scaling below, which would round the product more than once).
  noise = jax.lax.optimization_barrier(jax.random.normal(key, (), jnp.float64))
  std = nm.as_float(release.noise_std)
  exact = nm.as_float(release.epsilon)
  upper = nm.as_float(upper)
  # Exact scalings by the grid (a power of two); only the product's rounding is left.
  cell = _round_sum(exact / RELEASE_GRID, (std / RELEASE_GRID) * noise)
  released = jnp.clip(cell * RELEASE_GRID, 0.0, upper)
  # No noise, nothing data-dependent: the bound itself, not rounded below it (but clipped).
  # A negative or NaN std, or a traced upper below 0, gives NaN: nothing is published.
  out = jnp.where(std > 0, released, jnp.where(std == 0, jnp.minimum(exact, upper), jnp.nan))
  return jnp.where(upper >= 0, out, jnp.nan)
