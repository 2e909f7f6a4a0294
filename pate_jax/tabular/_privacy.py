"""ε of the tabular students' labels: totals and prefixes (the first ``n`` queries).

Thin glue over :mod:`pate_jax.accounting` (no new privacy maths here): LNMax is
charged with the 2017 moments accountant (Papernot et al. 2017, Theorems 1-3,
Lemma 4), GNMax with data-dependent RDP (Papernot et al. 2018, Theorem 6) and an
RDP -> ``(ε, δ)`` conversion (classic, or Balle et al. 2020 "improved").

Per-query costs compose by summation over queries, so the cost of the first
``n`` answered queries is a cumulative sum: ``total[n] = Σ_{i<n} cost[i]``
(:func:`prefix_totals`), converted to ε at each ``n``.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np

from pate_jax import accounting

MECHANISMS = ("lnmax", "gnmax")


class Accountant(NamedTuple):
  """How ε is computed for both mechanisms (all fields plain Python values).

  Attributes:
    delta: target ``δ`` in (0, 1).
    max_moment: LNMax moments ``l = 1..max_moment`` (the 2017 analysis uses 8).
    orders: GNMax RDP orders ``λ > 1``.
    conversion: GNMax RDP -> ``(ε, δ)`` conversion, ``"improved"`` or ``"classic"``.
    max_moment_wide: optionally, LNMax's bound also over moments ``1..max_moment_wide``.
  """
  delta: float
  max_moment: int = 8
  orders: Sequence[float] = tuple(float(o) for o in accounting.DEFAULT_ORDERS)
  conversion: str = "improved"
  max_moment_wide: int | None = None


def _check_mechanism(mechanism: str) -> None:
  if mechanism not in MECHANISMS:
    raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")


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


def epsilon(accountant: Accountant, mechanism: str, votes: Any, scale: float, *,
            data_dependent: bool = True) -> tuple[float, float | int]:
  """ε of answering every row of ``votes`` and the order that achieved it.

  LNMax (``scale`` = γ): :func:`pate_jax.accounting.lnmax_moments_epsilon` over
  moments ``1..accountant.max_moment``; returns ``(ε, best moment: int)``.
  GNMax (``scale`` = σ): ``ε = conv(Σ_i RDP_i(λ), λ, δ)`` minimised over
  ``accountant.orders`` with the per-query RDP of
  :func:`pate_jax.accounting.gnmax_rdp` summed in float64; returns ``(ε, best order: float)``.

  Args:
    accountant: δ, orders and conversion.
    mechanism: ``"lnmax"`` or ``"gnmax"``.
    votes: int ``[Q, C]`` vote histograms.
    scale: γ (LNMax) or σ (GNMax), > 0.
    data_dependent: the data-dependent bound (True) or the worst case (False).
  """
  _check_mechanism(mechanism)
  if mechanism == "lnmax":
    eps, moment = accounting.lnmax_moments_epsilon(
        votes, scale, accountant.delta, data_dependent=data_dependent,
        max_moment=accountant.max_moment)
    return float(eps), int(moment)
  orders = np.asarray(accountant.orders, np.float64)
  rdp = accounting.gnmax_rdp(votes, scale, orders, data_dependent=data_dependent)
  total = np.asarray(rdp, np.float64).sum(axis=0)  # Compose over queries (float64).
  eps, order = accounting.rdp_to_epsilon(total, orders, accountant.delta, accountant.conversion)
  return float(eps), float(order)


def prefix_epsilon(accountant: Accountant, mechanism: str, votes: Any, scale: float,
                   counts: Sequence[int]) -> np.ndarray:
  """Data-dependent ε of the first ``n`` queries (rows) of ``votes``, for each ``n`` in ``counts``.

  The per-query costs (LNMax log-moments ``α_i(l)``, :func:`pate_jax.accounting.lnmax_log_moments`;
  GNMax RDP, :func:`pate_jax.accounting.gnmax_rdp`) are composed by
  :func:`prefix_totals` and converted with
  :func:`pate_jax.accounting.moments_to_epsilon` (LNMax) or
  :func:`pate_jax.accounting.rdp_to_epsilon` (GNMax). The last entry equals
  :func:`epsilon` when ``counts[-1] = Q`` (up to float rounding: the sums differ in order).

  Args:
    accountant: δ, orders and conversion.
    mechanism: ``"lnmax"`` or ``"gnmax"``.
    votes: int ``[Q, C]``.
    scale: γ (LNMax) or σ (GNMax).
    counts: ``[N]`` prefix lengths in ``1..Q``.

  Returns:
    float64 ``[N]``; non-decreasing when ``counts`` is increasing.
  """
  _check_mechanism(mechanism)
  if mechanism == "lnmax":
    orders = np.arange(1, accountant.max_moment + 1, dtype=np.float64)
    per_query = accounting.lnmax_log_moments(votes, scale, orders, data_dependent=True)
    eps, _ = accounting.moments_to_epsilon(prefix_totals(per_query, counts), orders,
                                           accountant.delta)
  else:
    orders = np.asarray(accountant.orders, np.float64)
    per_query = accounting.gnmax_rdp(votes, scale, orders, data_dependent=True)
    eps, _ = accounting.rdp_to_epsilon(prefix_totals(per_query, counts), orders,
                                       accountant.delta, accountant.conversion)
  return np.asarray(eps, np.float64)
