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

from pate_jax.attacks import _validate as v

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
