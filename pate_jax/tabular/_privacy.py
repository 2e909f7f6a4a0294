"""ε of the tabular students' labels: totals and prefixes (the first ``n`` queries).

Thin glue over :mod:`pate_jax.mechanisms` (no new privacy maths here): a
mechanism with one noise parameter (``mechanisms.names()`` with one ``Param``:
LNMax's γ, GNMax's σ) is charged its registered per-query ``cost`` and composed
in the accountant of its kind (:func:`pate_jax.mechanisms.make_accountant`) —
LNMax in the 2017 moments accountant (Papernot et al. 2017, Theorems 1-3,
Lemma 4), GNMax in data-dependent RDP (Papernot et al. 2018, Theorem 6) with an
RDP -> ``(ε, δ)`` conversion (classic, or Balle et al. 2020 "improved").

Per-query costs compose by summation over queries, so the cost of the first
``n`` answered queries is a cumulative sum: ``total[n] = Σ_{i<n} cost[i]``
(:func:`prefix_totals`), converted to ε at each ``n``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks as v
from pate_jax import accounting
from pate_jax import mechanisms


class Accountant(NamedTuple):
  """How ε is computed for every mechanism (all fields plain Python values).

  Attributes:
    delta: target ``δ`` in (0, 1).
    max_moment: moments-accountant orders ``l = 1..max_moment`` (the 2017 analysis uses 8).
    orders: RDP orders ``λ > 1``.
    conversion: RDP -> ``(ε, δ)`` conversion, ``"improved"`` or ``"classic"``.
    max_moment_wide: optionally, the moments bound also over moments ``1..max_moment_wide``.
  """
  delta: float
  max_moment: int = 8
  orders: Sequence[float] = tuple(float(o) for o in accounting.DEFAULT_ORDERS)
  conversion: str = "improved"
  max_moment_wide: int | None = None


def single_scale_mechanism(mechanism: Any) -> mechanisms.Mechanism:
  """The registered ``mechanism`` (object or name), which must have exactly one (noise)
  parameter (:data:`pate_jax.mechanisms.LNMAX`'s γ, :data:`~pate_jax.mechanisms.GNMAX`'s σ)."""
  m = mechanisms.get(mechanism)
  if len(m.params) != 1:
    raise ValueError(f"mechanism must have one (noise) parameter; {m.name!r} has "
                     f"{m.param_names}")
  return m


def _per_query_cost(accountant: Accountant, mechanism: mechanisms.Mechanism, votes: Any,
                    scale: float, data_dependent: bool):
  """``(empty accountant, per-query cost [Q, K])`` of answering every row of ``votes``."""
  empty = mechanisms.make_accountant(
      mechanism, mechanism.accountant_kind.orders_of(np.asarray(accountant.orders, np.float64),
                                                     accountant.max_moment),
      accountant.conversion)
  answered = np.ones(np.shape(votes)[0], bool)
  cost = mechanism.cost(votes, answered, {mechanism.noise_param: scale}, empty.orders,
                        data_dependent)
  return empty, cost


def prefix_totals(per_query_cost: Any, counts: Sequence[int]) -> np.ndarray:
  """Composed cost of the first ``n`` queries, for each ``n`` in ``counts``.

  ``totals[j, k] = Σ_{i < counts[j]} per_query_cost[i, k]`` (float64 cumulative sum).

  Args:
    per_query_cost: ``[Q, K]`` per-query log-moments or RDP at ``K`` orders.
    counts: ``[N]`` prefix lengths, each in ``1..Q``.

  Returns:
    float64 ``[N, K]``.
  """
  cost = np.asarray(per_query_cost, np.float64)
  n = np.asarray(counts, dtype=np.int64)
  if cost.ndim != 2:
    raise ValueError(f"per_query_cost must have shape [Q, K], got {cost.shape}")
  if n.ndim != 1 or (n.size and (n.min() < 1 or n.max() > cost.shape[0])):
    raise ValueError(f"counts must be a 1-D list of prefix lengths in [1, {cost.shape[0]}], "
                     f"got {n.tolist()}")
  return np.cumsum(cost, axis=0)[n - 1]


@functools.partial(jax.jit, static_argnames=("mechanism", "data_dependent", "conversion",
                                             "max_moment"))
def _epsilon_core(votes, scale, orders, delta, *, mechanism, data_dependent, conversion,
                  max_moment):
  """``(ε, best order)`` of every row of ``votes``: one compiled cost-compose-convert."""
  m = mechanisms.get(mechanism)
  empty = mechanisms.make_accountant(m, orders, conversion, max_moment)
  answered = jnp.ones(votes.shape[0], bool)
  cost = m.cost(votes, answered, {m.noise_param: scale}, empty.orders, data_dependent)
  return empty.compose(cost).epsilon(delta)


def epsilon(accountant: Accountant, mechanism: Any, votes: Any, scale: float, *,
            data_dependent: bool = True) -> tuple[float, float | int]:
  """ε of answering every row of ``votes`` and the order that achieved it.

  The registered per-query cost (``mechanisms.get(mechanism).cost``) of every row,
  composed in float64 by the mechanism's accountant and converted at ``δ``, in one
  compiled call. LNMax (``scale`` = γ): moments ``1..accountant.max_moment``, as
  :func:`pate_jax.accounting.lnmax_moments_epsilon`; returns ``(ε, best moment: int)``.
  GNMax (``scale`` = σ): ``accountant.orders`` and ``accountant.conversion``; returns
  ``(ε, best order: float)``.

  Args:
    accountant: δ, orders and conversion.
    mechanism: a registered one-parameter mechanism (``mechanisms.LNMAX``, ``GNMAX``) or
      its name.
    votes: int ``[Q, C]`` vote histograms.
    scale: its noise parameter, γ (LNMax) or σ (GNMax), > 0.
    data_dependent: the data-dependent bound (True) or the worst case (False).
  """
  m = single_scale_mechanism(mechanism)
  votes = v.votes(votes, equal_totals=m.equal_totals)
  params = mechanisms.check_params(m, {m.noise_param: scale})
  kind = m.accountant_kind
  with jax.enable_x64(True):
    eps, best = _epsilon_core(
        votes, params[m.noise_param], v.orders(accountant.orders) if kind.takes_orders else None,
        v.delta(accountant.delta), mechanism=m.name, data_dependent=bool(data_dependent),
        conversion=v.choice(accountant.conversion, "conversion", accounting.CONVERSIONS),
        max_moment=v.positive_int(accountant.max_moment, "max_moment"))
  return float(eps), kind.best_type(best)


def prefix_epsilon(accountant: Accountant, mechanism: Any, votes: Any, scale: float,
                   counts: Sequence[int]) -> np.ndarray:
  """Data-dependent ε of the first ``n`` queries (rows) of ``votes``, for each ``n`` in ``counts``.

  The registered per-query costs (LNMax log-moments, GNMax RDP) are composed by
  :func:`prefix_totals` and converted by the mechanism's accountant (over the last
  axis, one ε per prefix). The last entry equals :func:`epsilon` when ``counts[-1] =
  Q`` (up to float rounding: the sums differ in order).

  Args:
    accountant: δ, orders and conversion.
    mechanism: a registered one-parameter mechanism (``mechanisms.LNMAX``, ``GNMAX``) or
      its name.
    votes: int ``[Q, C]``.
    scale: γ (LNMax) or σ (GNMax).
    counts: ``[N]`` prefix lengths in ``1..Q``.

  Returns:
    float64 ``[N]``; non-decreasing when ``counts`` is increasing.
  """
  m = single_scale_mechanism(mechanism)
  empty, cost = _per_query_cost(accountant, m, votes, scale, True)
  totals = dataclasses.replace(empty, cost=prefix_totals(cost, counts))  # cost [N, K]
  eps, _ = totals.epsilon(accountant.delta)
  return np.asarray(eps, np.float64)
