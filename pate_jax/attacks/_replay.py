"""The attack replayed against the realised-cost ledger.

The Monte Carlo attacker (:mod:`pate_jax.attacks._monte_carlo`) spends a number
of queries fixed in advance from the *expected* per-query cost. A deployed PATE
charges the *realised* cost instead (:class:`pate_jax.ledger.PrivateAggregator`),
answers until its budget ``ε_max`` is spent and then refuses. These replays send
the same input to a real ledger:

* :func:`replay_until_refused` (budget-limited attacker, attack paper Figure 4):
  Confident-GNMax, batches of ``batch_size`` repeats until the first refusal;
  the attacker keeps the answered labels.
* :func:`replay_consistency` (defense, Section 5): GNMax with or without
  consistent answers; with them every repeat gets one answer and is charged once.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np

from pate_jax import ledger
from pate_jax.attacks import _privacy


class BudgetReplay(NamedTuple):
  """Outcome of :func:`replay_until_refused`.

  Attributes:
    num_charged: queries the ledger charged (answered or not confident).
    num_answered: queries that released a label.
    epsilon, best_order: the ledger's final ε and the RDP order achieving it.
    counts: int64 ``[C]`` answer counts the attacker observed.
  """
  num_charged: int
  num_answered: int
  epsilon: float
  best_order: float
  counts: np.ndarray


def replay_until_refused(key: jax.Array, histogram: Any, *, epsilon_max: float, delta: float,
                         threshold: float, sigma_threshold: float, sigma: float,
                         conversion: str = "improved", batch_size: int = 8192,
                         orders: Any = None) -> BudgetReplay:
  """Asks a Confident-GNMax ledger the same query until it refuses for budget.

  Args:
    key: the ledger's PRNG key.
    histogram: ``[C]`` vote counts of the repeated query.
    epsilon_max, delta, conversion: the ledger's budget, δ and RDP conversion.
    threshold, sigma_threshold, sigma: Confident-GNMax's ``T``, ``σ_T``, σ.
    batch_size: repeats sent per call.
    orders: RDP orders (default :data:`pate_jax.attacks.ATTACK_ORDERS`).

  Returns:
    :class:`BudgetReplay`.
  """
  hist = np.asarray(histogram)
  agg = ledger.PrivateAggregator(
      key, "confident_gnmax", epsilon_max=epsilon_max, delta=delta, threshold=threshold,
      sigma_threshold=sigma_threshold, sigma=sigma,
      orders=_privacy.ATTACK_ORDERS if orders is None else orders,
      conversion=conversion, chunk_size=1024)
  labels = []
  while True:
    out = agg.answer(np.tile(hist, (batch_size, 1)))
    labels.append(out.labels[out.status == int(ledger.Status.ANSWERED)])
    if np.any(out.status >= int(ledger.Status.REFUSED_BUDGET)):
      break
  counts = np.bincount(np.concatenate(labels), minlength=hist.shape[-1])
  return BudgetReplay(agg.num_charged, agg.num_answered, agg.epsilon, agg.best_order, counts)


def replay_consistency(key: jax.Array, histogram: Any, *, sigma: float, num_queries: int,
                       delta: float, consistent: bool) -> dict[str, Any]:
  """Sends ``num_queries`` repeats of one input to an unlimited GNMax ledger.

  With ``consistent=True`` every repeat carries the same query id, so the
  ledger answers it once and charges it once (the caching defense).

  Returns:
    ``{"consistent", "num_queries", "num_charged", "epsilon", "distinct_labels",
    "repeated"}``.
  """
  agg = ledger.PrivateAggregator(key, "gnmax", sigma=sigma, epsilon_max=np.inf, delta=delta,
                                 consistent=consistent, chunk_size=1024, capacity=16)
  kwargs = {"query_ids": np.full((num_queries, 2), 7, np.uint32)} if consistent else {}
  out = agg.answer(np.tile(np.asarray(histogram), (num_queries, 1)), **kwargs)
  return {"consistent": consistent, "num_queries": num_queries, "num_charged": agg.num_charged,
          "epsilon": agg.epsilon, "distinct_labels": int(np.unique(out.labels).size),
          "repeated": int(np.sum(out.repeated))}
