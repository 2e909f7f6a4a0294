"""Consensus of a vote histogram and the paper's low-consensus classifier (Section 2).

The consensus of a histogram is the share of teachers voting for the top class,
``max_i H_i / Σ_i H_i`` (attack paper, Section 4.1: "a histogram's consensus
as its maximum value"; Section 2 uses it as a percentage). The Section-2
attacker labels an individual a minority-group member ("PhD") iff the consensus
of its histogram is below 75 %.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks as v

PAPER_THRESHOLD = 0.75


def consensus(histograms: Any) -> jax.Array:
  """``max_i H_i / Σ_i H_i`` over the last axis, ``[..., C] -> [...]``.

  Reconstructed histograms may hold small negative entries; only the totals must
  be positive.
  """
  h = v.histograms(histograms, allow_negative=True)
  if not v.is_traced(h) and np.any(np.sum(h, -1) <= 0):
    raise ValueError("histograms must have a positive total number of votes")
  h = jnp.asarray(h, jnp.result_type(float))
  return h.max(-1) / h.sum(-1)


def classify_low_consensus(histograms: Any, threshold: float = PAPER_THRESHOLD) -> jax.Array:
  """``consensus(H) < threshold`` (True: predicted minority member), ``[...]`` bool."""
  if not (np.isscalar(threshold) and 0.0 < threshold <= 1.0):
    raise ValueError(f"threshold must be a number in (0, 1], got {threshold!r}")
  return consensus(histograms) < threshold


def group_rates(low: Any, minority: Any) -> dict[str, Any]:
  """How well "low consensus" predicts minority membership (attack paper, Figures 1 and 8).

  With ``low`` the prediction and ``minority`` the truth (both bool ``[n]``):
  ``precision = TP / (TP + FP)``, ``recall = TP / #minority``, ``accuracy =
  mean(low == minority)``, and the share of each group with low / high consensus
  (``None`` for an empty group). Empty denominators count as 1.

  Returns:
    ``{"precision", "recall", "accuracy", "num_predicted_minority", "minority_low",
    "minority_high", "majority_low", "majority_high", "num_minority", "num_majority"}``.
  """
  low, minority = np.asarray(low, bool), np.asarray(minority, bool)
  if low.shape != minority.shape:
    raise ValueError(f"low and minority must have the same shape, got {low.shape} and "
                     f"{minority.shape}")
  tp = int(np.sum(low & minority))
  fp = int(np.sum(low & ~minority))
  share = lambda x, group: float(np.mean(x[group])) if group.any() else None
  return {"precision": tp / max(tp + fp, 1), "recall": tp / max(int(minority.sum()), 1),
          "accuracy": float(np.mean(low == minority)), "num_predicted_minority": tp + fp,
          "minority_low": share(low, minority), "minority_high": share(~low, minority),
          "majority_low": share(low, ~minority), "majority_high": share(~low, ~minority),
          "num_minority": int(minority.sum()), "num_majority": int((~minority).sum())}
