"""Teacher ensembles of scikit-learn-style models (random forests by default).

PATE only needs each teacher's predicted label on a query (Papernot et al.
2017, Section 2; Appendix C trains random forests as teachers and student), so
any object with ``fit(X, y)`` and ``predict(X)`` can be a teacher. Teacher
``t`` is fitted on the ``t``-th disjoint shard of
:func:`pate_jax.data._partition.partition_indices`, and the ensemble's
predictions ``[T, Q]`` reduce to the same ``votes[Q, C]`` histograms
(:func:`pate_jax.votes.histogram`) as the vmapped Flax teachers, so
aggregation, accounting, students and attacks work unchanged.

Determinism: the shards come from ``fold_in(key, 0)`` and teacher ``t`` gets
the integer seed ``bits(fold_in(fold_in(key, 1), t))`` (uint32) as its
``random_state``, so the ensemble is a function of the key alone — independent
of ``n_jobs``, of the joblib backend and of the global NumPy state.
"""

from __future__ import annotations

import copy
import os
import warnings
from typing import Any, Callable, Iterable, NamedTuple, Protocol, Sequence

import jax
import jax.numpy as jnp
import joblib
import numpy as np

from pate_jax import io
from pate_jax import votes as votes_lib
from pate_jax.data import partition_indices


class Estimator(Protocol):
  def fit(self, x: Any, y: Any) -> Any: ...
  def predict(self, x: Any) -> Any: ...


# ``estimator`` arguments: a prototype with fit/predict (cloned per teacher, its
# ``random_state`` set if it has one) or a factory ``random_state -> estimator``.
EstimatorSpec = Estimator | Callable[[int], Estimator]


def random_forest(n_estimators: int = 100, **kwargs: Any) -> Estimator:
  """An unfitted ``sklearn.ensemble.RandomForestClassifier`` prototype (the paper's model).

  Appendix C keeps scikit-learn's defaults except ``n_estimators`` (100 in the
  published version). Each forest is single-threaded (``n_jobs=1``) unless
  ``kwargs`` says otherwise: the parallelism is across teachers. Pass it as
  ``estimator``; each teacher gets a clone with its own ``random_state``.
  """
  from sklearn.ensemble import RandomForestClassifier
  kwargs.setdefault("n_jobs", 1)
  return RandomForestClassifier(n_estimators=n_estimators, **kwargs)


def random_states(key: jax.Array, num: int) -> np.ndarray:
  """``int64 [num]`` seeds in ``[0, 2**32)``: ``bits(fold_in(key, i))`` (uint32), ``i < num``."""
  idx = jnp.arange(num, dtype=jnp.uint32)
  bits = jax.vmap(lambda i: jax.random.bits(jax.random.fold_in(key, i), (), jnp.uint32))(idx)
  return np.asarray(bits, dtype=np.int64)


def make_estimator(estimator: EstimatorSpec | None, random_state: int) -> Estimator:
  """A fresh, unfitted estimator seeded with ``random_state`` (see module doc)."""
  if estimator is None:
    estimator = random_forest()
  is_class = isinstance(estimator, type)  # A class is a factory, not a prototype.
  if not is_class and hasattr(estimator, "fit") and hasattr(estimator, "predict"):
    if hasattr(estimator, "get_params"):
      from sklearn.base import clone
      model = clone(estimator)
      if "random_state" in model.get_params(deep=False):
        model.set_params(random_state=int(random_state))
      return model
    return copy.deepcopy(estimator)
  if callable(estimator):
    model = estimator(int(random_state))
    if not (hasattr(model, "fit") and hasattr(model, "predict")):
      raise ValueError(f"estimator factory returned {type(model).__name__}, which lacks "
                       "fit/predict")
    return model
  raise ValueError(f"estimator must have fit/predict or be a factory random_state -> "
                   f"estimator; got {estimator!r}")


def _check_xy(features: Any, labels: Any, num_classes: int | None) -> tuple[np.ndarray,
                                                                            np.ndarray, int]:
  x = np.asarray(features)
  y = np.asarray(labels)
  if x.ndim != 2:
    raise ValueError(f"features must have shape [N, F], got {x.shape}")
  if y.shape != (x.shape[0],):
    raise ValueError(f"labels must have shape [N] with N = {x.shape[0]}, got {y.shape}")
  if not np.issubdtype(y.dtype, np.integer):
    raise ValueError(f"labels must be integer class ids, got dtype {y.dtype}")
  if num_classes is None:  # a check of labels alone (fit_teachers always names C)
    num_classes = int(y.max()) + 1 if y.size else 0
  elif (not isinstance(num_classes, (int, np.integer)) or isinstance(num_classes, bool)
        or num_classes < 1):
    raise ValueError(f"num_classes must be a positive int, got {num_classes!r}")
  if y.size and (y.min() < 0 or y.max() >= num_classes):
    raise ValueError(f"labels must lie in [0, num_classes={num_classes}), got range "
                     f"[{y.min()}, {y.max()}]")
  return x, y.astype(np.int64), int(num_classes)


def fit_model(key: jax.Array, features: Any, labels: Any, *,
              estimator: EstimatorSpec | None = None) -> Estimator:
  """Fits one model (the non-private baseline or the student), seeded from ``key``."""
  x, y, _ = _check_xy(features, labels, None)
  if x.shape[0] == 0:
    raise ValueError("features: cannot fit a model on 0 examples")
  model = make_estimator(estimator, int(random_states(key, 1)[0]))
  model.fit(x, y)
  return model


class TeacherEnsemble(NamedTuple):
  """Fitted teachers and the partition they were fitted on.

  Attributes:
    teachers: the ``T`` fitted estimators.
    index: ``int64 [T, n]`` training rows of each teacher (disjoint).
    dropped: training rows left out so that all shards have ``n`` rows.
    random_states: ``int64 [T]`` the seed given to each teacher.
    num_classes: ``C``, the width of the vote histograms.
  """
  teachers: tuple[Estimator, ...]
  index: np.ndarray
  dropped: int
  random_states: np.ndarray
  num_classes: int

  @property
  def num_teachers(self) -> int:
    return len(self.teachers)


def _caught(fn: Callable[..., Any], *args: Any) -> tuple[Any, list[tuple[str, type, str, int]]]:
  """``fn(*args)`` and the warnings it raised, as ``(message, category, file, line)``. A
  joblib worker process writes its warnings to its own stderr, past the caller's handling
  (a run marks every warning line private: one about a teacher's shard, such as its class
  counts in a cross-validation, is a fact of the private data); :func:`_shown` shows them
  again in the caller."""
  with warnings.catch_warnings(record=True) as caught:
    out = fn(*args)
  return out, [(str(w.message), w.category, w.filename, w.lineno) for w in caught]


def _shown(result: tuple[Any, list[tuple[str, type, str, int]]], seen: set) -> Any:
  """The result of :func:`_caught`, its warnings shown in this process, each once per call
  of many tasks (``seen``: the call's), not once per teacher."""
  out, caught = result
  for warning in caught:
    if warning not in seen:
      seen.add(warning)
      warnings.warn_explicit(*warning)
  return out


def _fit_one(estimator: EstimatorSpec | None, random_state: int, x: np.ndarray,
             y: np.ndarray) -> Estimator:
  model = make_estimator(estimator, random_state)
  model.fit(x, y)
  return model


def fit_teachers(key: jax.Array, features: Any, labels: Any, num_teachers: int, *,
                 num_classes: int, estimator: EstimatorSpec | None = None,
                 n_jobs: int = -1, progress: Callable[..., Iterable] | None = None
                 ) -> TeacherEnsemble:
  """Fits ``T`` teachers on disjoint shards of ``(features, labels)`` in parallel.

  The shards come from ``partition_indices(fold_in(key, 0), N, T)`` (``n =
  N // T`` rows each, the ``N mod T`` rest dropped); teacher ``t`` is seeded with
  ``random_states(fold_in(key, 1), T)[t]``. Teachers are fitted with joblib's
  process backend over ``n_jobs`` workers (-1: all cores); the result does not
  depend on ``n_jobs``.

  Args:
    key: PRNG key; the only source of randomness.
    features: ``[N, F]`` training features (e.g. ``TabularSplit.features``).
    labels: ``int [N]`` training labels in ``0 .. C-1``.
    num_teachers: ``T``, at most ``N``.
    estimator: a scikit-learn-style prototype or factory (default:
      :func:`random_forest` with 100 trees).
    num_classes: ``C``, the width of the votes: required, from the task's coding (e.g.
      :data:`pate_jax.tabular.NUM_CLASSES`), never counted on the private labels, where
      one record's label could widen the votes.
    n_jobs: joblib workers.
    progress: optional wrapper ``progress(iterable, total=T, desc=...)`` of the
      fitted teachers as they complete (e.g. :func:`pate_jax.experiment.progress`).

  Returns:
    A :class:`TeacherEnsemble`.

  Raises:
    ValueError: for malformed inputs, or ``num_teachers`` larger than the
      training set (every teacher needs at least one example).
  """
  x, y, num_classes = _check_xy(features, labels, num_classes)
  if not isinstance(num_teachers, (int, np.integer)) or isinstance(num_teachers, bool) \
      or num_teachers <= 0:
    raise ValueError(f"num_teachers must be a positive int, got {num_teachers!r}")
  if num_teachers > x.shape[0]:
    raise ValueError(f"num_teachers={num_teachers} is larger than the training set "
                     f"({x.shape[0]} examples): every teacher needs at least one example; "
                     "use fewer teachers or more data")
  part = partition_indices(jax.random.fold_in(key, 0), x.shape[0], int(num_teachers))
  seeds = random_states(jax.random.fold_in(key, 1), int(num_teachers))
  tasks = (joblib.delayed(_caught)(_fit_one, estimator, int(s), x[idx], y[idx])
           for s, idx in zip(seeds, part.index))
  shown: set = set()
  fitted = (_shown(r, shown) for r in joblib.Parallel(n_jobs=n_jobs, prefer="processes",
                                                       return_as="generator")(tasks))
  if progress is not None:
    fitted = progress(fitted, total=int(num_teachers), desc="teachers")
  teachers = list(fitted)
  return TeacherEnsemble(tuple(teachers), part.index, part.dropped, seeds, num_classes)


def _predict_chunk(models: Sequence[Estimator], x: np.ndarray) -> np.ndarray:
  return np.stack([np.asarray(m.predict(x)) for m in models])


def predict_teachers(ensemble: TeacherEnsemble, features: Any, *, n_jobs: int = -1
                     ) -> np.ndarray:
  """Each teacher's predicted label on each query: ``int32 [T, Q]``.

  Raises:
    ValueError: for features that are not ``[Q, F]`` or predictions outside
      ``0 .. C-1``.
  """
  x = np.asarray(features)
  if x.ndim != 2:
    raise ValueError(f"features must have shape [Q, F], got {x.shape}")
  teachers = ensemble.teachers
  if x.shape[0] == 0:
    return np.zeros((len(teachers), 0), np.int32)
  workers = joblib.effective_n_jobs(n_jobs)
  chunks = np.array_split(np.arange(len(teachers)), min(len(teachers), 4 * workers))
  shown: set = set()
  parts = [_shown(r, shown) for r in joblib.Parallel(n_jobs=n_jobs, prefer="processes")(
      joblib.delayed(_caught)(_predict_chunk, [teachers[i] for i in c], x)
      for c in chunks if len(c))]
  preds = np.concatenate(parts, axis=0)
  if not np.issubdtype(preds.dtype, np.integer):
    if not np.all(np.equal(np.mod(preds, 1), 0)):
      raise ValueError(f"teachers predicted non-integer labels (dtype {preds.dtype})")
  preds = preds.astype(np.int64)
  if preds.min() < 0 or preds.max() >= ensemble.num_classes:
    raise ValueError(f"teachers predicted labels in [{preds.min()}, {preds.max()}], outside "
                     f"[0, num_classes={ensemble.num_classes})")
  return preds.astype(np.int32)


def teacher_votes(ensemble: TeacherEnsemble, features: Any, *, n_jobs: int = -1
                  ) -> tuple[np.ndarray, np.ndarray]:
  """Vote histograms and per-teacher predictions on queries.

  ``votes[q, c] = #{t : preds[t, q] = c}`` (:func:`pate_jax.votes.histogram`);
  every row sums to ``T``.

  Returns:
    ``(votes int32 [Q, C], preds int32 [T, Q])``.
  """
  preds = predict_teachers(ensemble, features, n_jobs=n_jobs)
  votes = np.asarray(votes_lib.histogram(preds, ensemble.num_classes), dtype=np.int32)
  return votes, preds


def save_teacher_predictions(path: str | os.PathLike, ensemble: TeacherEnsemble,
                             predictions: Any, *, num_pool: int) -> None:
  """Writes ``predictions [T, Q]`` with the partition and seeds that produced them.

  The file (``np.savez_compressed``) holds ``predictions`` (int8 when ``C < 128``,
  else int32), ``partition`` (``ensemble.index``), ``random_states``, ``index =
  arange(Q)`` and ``num_pool`` (rows ``[:num_pool]`` are the student pool), so
  ``votes.histogram(predictions, C)`` reproduces ``votes.npz``.
  """
  preds = np.asarray(predictions)
  if preds.ndim != 2 or preds.shape[0] != ensemble.num_teachers:
    raise ValueError(f"predictions must have shape [T={ensemble.num_teachers}, Q], got "
                     f"{preds.shape}")
  if not 0 <= int(num_pool) <= preds.shape[1]:
    raise ValueError(f"num_pool must lie in [0, {preds.shape[1]}], got {num_pool}")
  with io.open_private(path) as f:  # the teachers' predictions: readable by the owner only
    np.savez_compressed(f, predictions=preds.astype(np.int8 if ensemble.num_classes < 128
                                                    else np.int32),
                        partition=ensemble.index, random_states=ensemble.random_states,
                        index=np.arange(preds.shape[1]), num_pool=np.int64(num_pool))


def ensemble_summary(ensemble: TeacherEnsemble, predictions: Any, labels: Any,
                     plurality: Any, pool_votes: Any) -> dict[str, Any]:
  """Accuracy of the teachers and of their noiseless plurality vote.

  Teacher ``t``'s accuracy is ``mean_q [predictions[t, q] == labels[q]]``
  (mean / min / max over ``t`` reported); the plurality ``argmax_c votes[q, c]``
  is scored on the pool (the first ``P = len(pool_votes)`` queries) and on all
  ``Q``; the consensus of the pool is the median normalised gap
  (:func:`pate_jax.votes.normalized_gap`, top-two vote difference over ``T``).

  Args:
    ensemble: the fitted teachers.
    predictions: int ``[T, Q]``.
    labels: int ``[Q]`` true labels.
    plurality: int ``[Q]`` plurality labels.
    pool_votes: int ``[P, C]`` votes on the pool.
  """
  preds, labels, plurality = map(np.asarray, (predictions, labels, plurality))
  num_pool = len(pool_votes)
  teacher_acc = (preds == labels[None]).mean(axis=1)
  gap = np.asarray(votes_lib.normalized_gap(pool_votes))
  return {
      "num_teachers": ensemble.num_teachers,
      "examples_per_teacher": int(ensemble.index.shape[1]),
      "dropped_examples": ensemble.dropped,
      "teacher_accuracy_mean": float(teacher_acc.mean()),
      "teacher_accuracy_min": float(teacher_acc.min()),
      "teacher_accuracy_max": float(teacher_acc.max()),
      "plurality_accuracy_pool": float(np.mean(plurality[:num_pool] == labels[:num_pool])),
      "plurality_accuracy_all_queries": float(np.mean(plurality == labels)),
      "pool_normalized_gap_median": float(np.median(gap)),
  }
