"""Privacy cost of the attacker's repeated queries, and the queries a budget allows.

The attacker asks the same input ``M`` times, so PATE's accountant composes
``M`` identical per-query Rényi-DP costs ``r(λ)`` (Papernot et al. 2018, Theorem
6 and Proposition 10; Section 4.1 for Confident-GNMax) and converts
``M · r(λ)`` to ``(ε, δ)``. This module only wires
:mod:`pate_jax.accounting` to that setting:

* GNMax: ``r = gnmax_rdp(H, σ)`` (data-dependent by default).
* Confident-GNMax: the *expected* per-query cost ``r = threshold_rdp +
  Pr[answered] · gnmax_rdp`` (:func:`pate_jax.accounting.confident_gnmax_rdp`),
  as in the 2018 paper's analysis and in the attack paper's released code
  (``analyze_multiclass_confident_gnmax``).

``ε(M) = min_λ [M r(λ) + conversion(λ, δ)]`` is non-decreasing in ``M``, so the
number of queries a budget allows, ``max{M : ε(M) ≤ budget}``, is found by
bisection on ``M`` (vectorised over histograms).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from scipy import stats

from pate_jax import accounting as acc
from pate_jax.attacks import _validate as v

# A dense grid of Rényi orders (the attack paper's code uses 2..100 step 0.5
# and 200 log-spaced orders up to 1000; we also go below 2).
ATTACK_ORDERS = np.concatenate([np.arange(1.1, 10.0, 0.1), np.arange(10.0, 100.0, 0.5),
                                np.logspace(2.0, 3.0, 100)])


def per_query_rdp(histograms: Any, *, sigma: float, threshold: float | None = None,
                  sigma_threshold: float | None = None, orders: Any = None,
                  data_dependent: bool = True) -> np.ndarray:
  """Per-query RDP ``r[B, K]`` of GNMax (or expected Confident-GNMax) on ``H[B, C]``.

  Args:
    histograms: ``[B, C]`` integer vote counts.
    sigma: GNMax noise σ.
    threshold, sigma_threshold: Confident-GNMax's ``T`` and ``σ_T`` (both or none).
    orders: Rényi orders (default :data:`ATTACK_ORDERS`).
    data_dependent: GNMax's data-dependent bound (Confident-GNMax always uses it,
      as :func:`pate_jax.accounting.confident_gnmax_rdp` does).

  Returns:
    float64 numpy ``[B, K]``.
  """
  orders = ATTACK_ORDERS if orders is None else np.asarray(orders, np.float64)
  if (threshold is None) != (sigma_threshold is None):
    raise ValueError("threshold and sigma_threshold must be given together, got "
                     f"threshold={threshold!r}, sigma_threshold={sigma_threshold!r}")
  h = np.asarray(v.histograms(histograms))
  if h.ndim != 2:
    raise ValueError(f"histograms must have shape [B, C], got {h.shape}")
  if threshold is None:
    return np.asarray(acc.gnmax_rdp(h, sigma, orders, data_dependent=data_dependent))
  return np.asarray(acc.confident_gnmax_rdp(h, threshold, sigma_threshold, sigma, orders))


def queries_epsilon(rdp: Any, num_queries: Any, *, delta: float, orders: Any = None,
                    conversion: str = "improved") -> tuple[np.ndarray, np.ndarray]:
  """``(ε, best order)`` of ``num_queries`` repeats of a query with per-query RDP ``rdp``.

  Args:
    rdp: ``[..., K]`` per-query RDP at ``orders``.
    num_queries: ``M`` broadcastable to ``rdp.shape[:-1]`` (``M >= 0``).
    delta: δ of the guarantee.
    orders: the orders of ``rdp`` (default :data:`ATTACK_ORDERS`).
    conversion: ``"improved"`` (Balle et al. 2020, as in the attack paper's code)
      or ``"classic"`` (Mironov 2017, as in the 2018 PATE paper).
  """
  orders = ATTACK_ORDERS if orders is None else np.asarray(orders, np.float64)
  m = np.asarray(num_queries, np.float64)
  if np.any(~np.isfinite(m) | (m < 0)):
    raise ValueError(f"num_queries must be finite and >= 0, got {num_queries!r}")
  total = m[..., None] * np.asarray(rdp, np.float64)
  eps, order = acc.rdp_to_epsilon(total, orders, delta, conversion=conversion)
  return np.asarray(eps), np.asarray(order)


def max_queries_within_budget(rdp: Any, budget: float, *, delta: float, orders: Any = None,
                              conversion: str = "improved",
                              max_queries: int = 10**7) -> np.ndarray:
  """Largest ``M <= max_queries`` with ``ε(M · rdp) <= budget`` (0 if none), per row.

  Args:
    rdp: ``[B, K]`` per-query RDP (e.g. :func:`per_query_rdp`).
    budget: the privacy budget ``ε_max > 0``.
    delta, orders, conversion: as in :func:`queries_epsilon`.
    max_queries: search cap (a row at the cap may allow more).

  Returns:
    int64 ``[B]``.
  """
  if not (np.isscalar(budget) and np.isfinite(budget) and budget > 0):
    raise ValueError(f"budget must be a finite number > 0, got {budget!r}")
  v.positive_int(max_queries, "max_queries")
  rdp = np.asarray(rdp, np.float64)
  b = rdp.shape[0]

  def ok(m):
    return queries_epsilon(rdp, m, delta=delta, orders=orders, conversion=conversion)[0] <= budget

  # Invariant: ε(lo) <= budget < ε(hi), except rows where even hi is allowed.
  lo = np.zeros(b, np.int64)
  hi = np.full(b, max_queries, np.int64)
  at_cap = ok(hi)
  lo = np.where(at_cap, hi, lo)
  none = ~ok(np.ones(b, np.int64)) & ~at_cap
  while np.any(hi - lo > 1):
    mid = (lo + hi) // 2
    good = ok(mid)
    active = hi - lo > 1
    lo = np.where(active & good, mid, lo)
    hi = np.where(active & ~good, mid, hi)
  return np.where(none, 0, lo).astype(np.int64)


def repeated_query_epsilon(histograms: Any, sigmas: Any, num_queries: Any, *, delta: float,
                           threshold: float | None = None, sigma_threshold: float | None = None,
                           conversion: str = "improved") -> tuple[np.ndarray, np.ndarray]:
  """``(ε, best order)`` of ``M`` repeats of each query, for every noise scale σ.

  ``ε_sb = min_λ [M r(H_b; σ_s, λ) + conversion(λ, δ)]`` with ``r`` from
  :func:`per_query_rdp` (GNMax, or expected Confident-GNMax when ``threshold``
  is given): the privacy cost of the fixed-query attacker (attack paper,
  Section 4.2, Figures 5-7).

  Args:
    histograms: ``[B, C]`` vote counts.
    sigmas: ``[S]`` GNMax noise scales.
    num_queries: ``M`` broadcastable to ``[B]``.
    delta, conversion: as in :func:`queries_epsilon`.
    threshold, sigma_threshold: Confident-GNMax's ``T`` and ``σ_T`` (both or none).

  Returns:
    float64 ``(ε [S, B], order [S, B])``.
  """
  out = [queries_epsilon(per_query_rdp(histograms, sigma=float(s), threshold=threshold,
                                       sigma_threshold=sigma_threshold),
                         num_queries, delta=delta, conversion=conversion)
         for s in np.atleast_1d(np.asarray(sigmas, np.float64))]
  return np.stack([e for e, _ in out]), np.stack([o for _, o in out])


class BudgetQueries(NamedTuple):
  """What a privacy budget allows a repeating attacker (per histogram, ``[B]``).

  Attributes:
    allowed: ``max{M : ε(M) ≤ budget}`` with the requested conversion.
    allowed_classic: the same with the classic conversion (Mironov 2017).
    epsilon, order: ``ε(allowed)`` and the order that achieves it.
    pr_answered: Confident-GNMax's ``Pr[answered] = Φ̄((T - max_i H_i) / σ_T)``.
  """
  allowed: np.ndarray
  allowed_classic: np.ndarray
  epsilon: np.ndarray
  order: np.ndarray
  pr_answered: np.ndarray


def budget_queries(histograms: Any, *, budget: float, sigma: float, threshold: float,
                   sigma_threshold: float, delta: float, conversion: str = "improved",
                   max_queries: int = 10**7) -> BudgetQueries:
  """Queries the expected Confident-GNMax cost allows within ``budget`` (attack paper, Fig. 4).

  Args:
    histograms: ``[B, C]`` vote counts.
    budget: ``ε_max > 0``.
    sigma, threshold, sigma_threshold: Confident-GNMax's σ, ``T``, ``σ_T``.
    delta, conversion, max_queries: as in :func:`max_queries_within_budget`.

  Returns:
    :class:`BudgetQueries` of ``[B]`` arrays.
  """
  rdp = per_query_rdp(histograms, sigma=sigma, threshold=threshold,
                      sigma_threshold=sigma_threshold)
  allowed = max_queries_within_budget(rdp, budget, delta=delta, conversion=conversion,
                                      max_queries=max_queries)
  classic = max_queries_within_budget(rdp, budget, delta=delta, conversion="classic",
                                      max_queries=max_queries)
  eps, order = queries_epsilon(rdp, allowed, delta=delta, conversion=conversion)
  # Φ̄ by scipy; pate_jax.accounting.confident_log_pr_answered is its log (agrees to ~1e-14).
  pr = stats.norm.sf((threshold - np.asarray(histograms).max(-1)) / sigma_threshold)
  return BudgetQueries(allowed, classic, eps, order, pr)
