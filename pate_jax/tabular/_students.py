"""Student models trained on (noisy) labels of a query pool, scored on held-out inputs.

Papernot et al. 2017, Appendix C: the student is a random forest trained on the
first ``num_pool`` test inputs labelled by the aggregation and evaluated on the
remaining ones. A student trained on ``n < num_pool`` labels uses the first
``n`` pool inputs (the labels of the first ``n`` queries).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import jax
import joblib
import numpy as np

from pate_jax.tabular._teachers import Estimator, EstimatorSpec, make_estimator


class StudentTask(NamedTuple):
  """What every student of one experiment shares.

  Attributes:
    x_pool: ``[P, F]`` the pool inputs (queries whose labels train the student).
    x_eval: ``[E, F]`` held-out inputs.
    y_eval: ``int [E]`` their true labels.
    estimator: the student prototype or factory (see :func:`make_estimator`).
    n_jobs: joblib workers (-1: all cores).
  """
  x_pool: np.ndarray
  x_eval: np.ndarray
  y_eval: np.ndarray
  estimator: EstimatorSpec
  n_jobs: int = -1


def accuracy(model: Estimator, features: Any, labels: Any) -> float:
  """``mean_i [model.predict(features)_i == labels_i]``; NaN when there are no labels."""
  labels = np.asarray(labels)
  if not len(labels):
    return float("nan")
  return float(np.mean(np.asarray(model.predict(features)) == labels))


def fit_and_score(estimator: EstimatorSpec, random_state: int, features: Any, labels: Any,
                  eval_features: Any, eval_labels: Any) -> float:
  """Fits ``make_estimator(estimator, random_state)`` on ``(features, labels)``; its
  :func:`accuracy` on ``(eval_features, eval_labels)``."""
  model = make_estimator(estimator, int(random_state)).fit(np.asarray(features),
                                                           np.asarray(labels))
  return accuracy(model, eval_features, eval_labels)


def student_accuracies(task: StudentTask, random_states: Sequence[int],
                       label_sets: Sequence[Any]) -> np.ndarray:
  """Held-out accuracy of one student per ``(random_states[i], label_sets[i])`` pair.

  Student ``i`` is fitted on ``(task.x_pool[:n_i], label_sets[i])`` with
  ``n_i = len(label_sets[i]) <= P`` and seed ``random_states[i]``, and scored on
  ``(task.x_eval, task.y_eval)``. Students are fitted in parallel (joblib,
  ``task.n_jobs`` workers); the result does not depend on ``n_jobs``.

  Returns:
    float64 ``[N]``, ``N = len(label_sets)``.
  """
  if len(random_states) != len(label_sets):
    raise ValueError(f"random_states and label_sets must have the same length, got "
                     f"{len(random_states)} and {len(label_sets)}")
  num_pool = len(task.x_pool)
  too_long = [len(lab) for lab in label_sets if len(lab) > num_pool]
  if too_long:
    raise ValueError(f"label_sets: a set of {too_long[0]} labels is longer than the pool "
                     f"({num_pool} inputs)")
  tasks = [joblib.delayed(fit_and_score)(task.estimator, int(s), task.x_pool[:len(lab)],
                                         np.asarray(lab), task.x_eval, task.y_eval)
           for s, lab in zip(random_states, label_sets)]
  return np.asarray(joblib.Parallel(n_jobs=task.n_jobs)(tasks), dtype=np.float64)


def random_pool_accuracies(key: Any, estimator: EstimatorSpec, features: Any, labels: Any,
                           num_pool: int, num_pools: int, random_state: int,
                           n_jobs: int = -1) -> np.ndarray:
  """How much the choice of the labelled pool moves a student: held-out accuracy of one
  student per random pool, on the pool's true labels.

  Pool ``k`` is ``num_pool`` rows of ``features`` drawn without replacement with
  ``jax.random.fold_in(key, k)``; its student (seed ``random_state``) is scored on every
  other row. The papers label the *first* ``num_pool`` rows; this places that one choice
  among the others (a non-private reference: true labels of the public query inputs).

  Returns:
    float64 ``[num_pools]``.
  """
  features, labels = np.asarray(features), np.asarray(labels)
  n = len(labels)
  if not 0 < num_pool < n:
    raise ValueError(f"num_pool must lie in (0, {n}) (the rows given), got {num_pool}")
  if num_pools < 1:
    raise ValueError(f"num_pools must be >= 1, got {num_pools}")
  tasks = []
  for k in range(int(num_pools)):
    order = np.asarray(jax.random.permutation(jax.random.fold_in(key, k), n))
    pool, rest = order[:num_pool], order[num_pool:]
    tasks.append(joblib.delayed(fit_and_score)(estimator, int(random_state), features[pool],
                                               labels[pool], features[rest], labels[rest]))
  return np.asarray(joblib.Parallel(n_jobs=n_jobs)(tasks), dtype=np.float64)
