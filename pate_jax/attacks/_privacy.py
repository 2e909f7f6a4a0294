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

``ε(M) = max(0, min_λ [M r(λ) + c(λ)])``, with ``c(λ)`` the conversion's
offset, is a minimum of lines in ``M``, so the number of queries a budget
allows, ``max{M : ε(M) ≤ budget}``, is ``max_λ ⌊(budget − c(λ)) / r(λ)⌋`` in
closed form (vectorised over histograms).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from scipy import stats

from pate_jax import accounting as acc
from pate_jax import _checks as v

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
  eps, order = acc.make_accountant("rdp", orders, conversion, cost=total).epsilon(delta)
  return np.asarray(eps), np.asarray(order)


def _conversion_offset(orders: np.ndarray, delta: float, conversion: str) -> np.ndarray:
  """``c[K]`` with ``ε = max(0, min_λ [rdp(λ) + c(λ)])`` (:func:`pate_jax.accounting.rdp_to_epsilon`)."""
  log_delta = np.log(delta)
  if conversion == "classic":  # Mironov 2017, Proposition 3.
    return -log_delta / (orders - 1.0)
  # Balle et al. 2020, Theorem 21.
  return np.log1p(-1.0 / orders) - (log_delta + np.log(orders)) / (orders - 1.0)


def max_queries_within_budget(rdp: Any, budget: float, *, delta: float, orders: Any = None,
                              conversion: str = "improved",
                              max_queries: int = 10**7) -> np.ndarray:
  """Largest ``M <= max_queries`` with ``ε(M · rdp) <= budget`` (0 if none), per row.

  ``ε(M) = max(0, min_λ [M r_λ + c_λ])`` (:func:`queries_epsilon`) is at most
  ``budget > 0`` iff ``M r_λ + c_λ <= budget`` for some order ``λ``, so

    ``M* = max_λ ⌊(budget − c_λ) / r_λ⌋``  over the orders with ``c_λ <= budget``

  (``+∞`` where ``r_λ = 0``, none where ``r_λ = +∞``), clipped to
  ``[0, max_queries]``. One evaluation of ``ε`` at ``M*`` and ``M* + 1`` absorbs
  the rounding of the division, so the result agrees with :func:`queries_epsilon`:
  ``ε(M*) <= budget < ε(M* + 1)`` unless ``M*`` is 0 or ``max_queries``.

  Args:
    rdp: ``[B, K]`` per-query RDP (e.g. :func:`per_query_rdp`), ``>= 0``, ``+inf`` allowed.
    budget: the privacy budget ``ε_max > 0``.
    delta, orders, conversion: as in :func:`queries_epsilon`.
    max_queries: cap (a row at the cap may allow more).

  Returns:
    int64 ``[B]``.
  """
  if not (np.isscalar(budget) and np.isfinite(budget) and budget > 0):
    raise ValueError(f"budget must be a finite number > 0, got {budget!r}")
  delta = float(v.delta(delta))
  v.positive_int(max_queries, "max_queries")
  conversion = v.choice(conversion, "conversion", ("classic", "improved"))
  orders = ATTACK_ORDERS if orders is None else np.asarray(orders, np.float64)
  rdp = np.asarray(rdp, np.float64)
  if rdp.ndim != 2 or rdp.shape[1] != orders.shape[0]:
    raise ValueError(f"rdp must have shape [B, {orders.shape[0]}] (one value per order), got "
                     f"{rdp.shape}")
  if np.any(np.isnan(rdp) | (rdp < 0)):
    raise ValueError(f"rdp must be >= 0 (+inf allowed), got {rdp}")

  slack = budget - _conversion_offset(orders, delta, conversion)  # [K]
  with np.errstate(divide="ignore", invalid="ignore"):
    per_order = np.where(rdp == 0, np.inf, np.floor(slack / rdp))  # [B, K]
  per_order = np.where(slack >= 0, per_order, -1.0)
  m = np.clip(per_order.max(-1), 0, max_queries).astype(np.int64)

  def ok(num):
    return queries_epsilon(rdp, num, delta=delta, orders=orders,
                           conversion=conversion)[0] <= budget

  m = np.where((m > 0) & ~ok(np.maximum(m, 1)), m - 1, m)
  return np.where((m < max_queries) & ok(m + 1), m + 1, m)


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
