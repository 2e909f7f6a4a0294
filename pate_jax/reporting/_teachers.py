"""What the teachers stage reports: its accuracies and vote gap, and one summary line.

Owns :func:`vote_summary` and :func:`teachers_headline` (private values, for the data
owner only).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pate_jax import votes as votes_lib


def vote_summary(votes: np.ndarray, labels: np.ndarray, num_pool: int,
                 teacher_accuracy: np.ndarray) -> dict[str, Any]:
  """The teachers stage's accuracies on the test split (``votes [Q, C]``, ``labels [Q]``;
  its first ``num_pool`` rows are the student's public pool, the rest its evaluation
  set) and the mean normalized gap between the top two vote counts."""
  plurality = votes.argmax(axis=1)
  a = teacher_accuracy
  return {
      "teacher_test_accuracy": {"mean": a.mean(), "min": a.min(), "max": a.max()},
      "plurality_accuracy_eval": (plurality[num_pool:] == labels[num_pool:]).mean(),
      "plurality_accuracy_test": (plurality == labels).mean(),
      "num_eval": len(labels) - num_pool,
      "num_test": len(labels),
      "mean_normalized_gap": np.asarray(votes_lib.normalized_gap(votes)).mean(),
  }


def teachers_headline(r: dict[str, Any]) -> str:
  """One readable line of a teachers results dict (also the main job's): private values,
  for the data owner only (the caller prints it marked so)."""
  r = {**r, **r.get("private", {})}
  a = r["teacher_test_accuracy"]
  return (f"{r['num_teachers']} teachers × {r['examples_per_teacher']} examples "
          f"({r['dataset']}): test accuracy mean {a['mean']:.2%} ({a['min']:.2%}–{a['max']:.2%}),"
          f" plurality {r['plurality_accuracy_test']:.2%} (test) / "
          f"{r['plurality_accuracy_eval']:.2%} (eval); mean normalized gap "
          f"{r['mean_normalized_gap']:.3f}; wall {r['wall_seconds']:.0f} s"
          + (" (an earlier run's; votes.npz reused)" if r.get("reused_votes") else ""))
