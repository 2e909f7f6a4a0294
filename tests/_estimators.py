"""Stand-in estimators for the tabular students' tests.

Kept in a module of their own that imports NumPy alone: a student fitted in a joblib worker
(``n_jobs > 1``) is unpickled there by importing its class's module, and a test module would
bring JAX, scikit-learn and pate_jax into every worker (seconds each).
"""

from __future__ import annotations

import numpy as np


class FirstRows:
  """Remembers how many rows it was fitted on; predicts its first training label."""

  def __init__(self, random_state=None):
    self.random_state = random_state

  def fit(self, x, y):
    self.n_, self.label_ = len(x), int(np.asarray(y)[0])
    return self

  def predict(self, x):
    return np.full(len(x), self.label_)
