"""Why a reconstruction stopped (shared by the paper's solvers and the MLE)."""

from __future__ import annotations

import enum


class Stop(enum.IntEnum):
  """Why a reconstruction stopped."""
  CONVERGED = 0      # J < tol (MLE: Newton decrement per query < tol).
  NO_DECREASE = 1    # The smallest step (1 vote, or min_step) did not lower J.
  NEGATIVE = 2       # The next 1-vote step would make an estimate negative.
  MAX_ITER = 3       # max_iter trial steps.
  ZERO_GRADIENT = 4  # ∇J = 0 (e.g. σ so small that Q is flat at Ĥ).
