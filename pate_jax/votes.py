"""Vote histograms: the hand-over between teachers and everything downstream.

A vote histogram ``votes[Q, C]`` (int32) counts, for each of ``Q`` query inputs,
how many of the ``T`` teachers predicted each of the ``C`` classes; every row
sums to ``T``. Teachers of any kind (vmapped Flax networks, scikit-learn
forests) reduce their predictions to this array and save it with
:func:`save_votes`; aggregation, accounting, students and attacks read it with
:func:`load_votes`.

``votes.npz`` layout (all arrays):
  votes        int32 [Q, C]  per-class teacher counts on the query inputs
  labels       int32 [Q]     true labels of the query inputs (for evaluation only)
  index        int64 [Q]     row of each query input in the dataset split it came from
  num_pool     int64 []      rows ``[:num_pool]`` are the student's public pool,
                             rows ``[num_pool:]`` its held-out evaluation set
  num_teachers int64 []      T
  dataset      str   []      dataset name
  probabilities float32 [K, Q, C]  optional: the teachers' averaged class probabilities
                             at each temperature (distillation, not private)
  temperatures float32 [K]   optional: those temperatures
"""

from __future__ import annotations

import functools
import os
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks


def histogram(predictions: jax.Array, num_classes: int,
              num_teachers: int | None = None) -> jax.Array:
  """Reduces teacher predictions ``[T, Q]`` to vote histograms ``[Q, C]`` (int32).

  ``num_teachers``: count only the first rows (a padded ensemble's real teachers).
  Pure ``jnp``: jit-able, and shards along ``Q`` or ``T`` — on a teacher-sharded
  (even multi-process) array the sum over teachers is a cross-device reduction.
  """
  predictions = jnp.asarray(predictions)
  if predictions.ndim != 2:
    raise ValueError(f"predictions must have shape [T, Q], got {predictions.shape}")
  return _histogram(predictions, num_classes, predictions.shape[0] if num_teachers is None
                    else num_teachers)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _histogram(predictions: jax.Array, num_classes: int, num_teachers: int) -> jax.Array:
  one_hot = jax.nn.one_hot(predictions, num_classes, dtype=jnp.int32)  # [T, Q, C]
  if num_teachers < predictions.shape[0]:
    real = (jnp.arange(predictions.shape[0]) < num_teachers).astype(jnp.int32)
    one_hot = one_hot * real[:, None, None]
  return one_hot.sum(axis=0)


def normalized_gap(votes: jax.Array) -> jax.Array:
  """(top count − second count) / T per query: the paper's Figure 3 quantity."""
  votes = jnp.asarray(votes)
  top2 = jax.lax.top_k(votes, 2)[0]
  return (top2[:, 0] - top2[:, 1]) / votes.sum(axis=1)


def save_votes(path: str | os.PathLike, votes: Any, labels: Any, *, index: Any | None = None,
               num_pool: int | None = None, dataset: str = "", probabilities: Any = None,
               temperatures: Any = None) -> pathlib.Path:
  """Writes ``votes.npz`` (see module docstring) atomically."""
  votes = np.asarray(votes)
  labels = np.asarray(labels)
  if votes.ndim != 2 or votes.shape[0] != labels.shape[0]:
    raise ValueError(f"votes must be [Q, C] with Q == len(labels); got votes {votes.shape}, "
                     f"labels {labels.shape}")
  _checks.check_equal_totals(votes)
  totals = votes.sum(axis=1)
  q = votes.shape[0]
  index = np.arange(q) if index is None else np.asarray(index)
  path = pathlib.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  extra = {}
  if probabilities is not None:
    probabilities = np.asarray(probabilities, np.float32)
    temperatures = np.asarray(temperatures, np.float32).reshape(-1)
    if probabilities.shape != (temperatures.size, *votes.shape):
      raise ValueError(f"probabilities must be [K={temperatures.size}, Q, C] = "
                       f"{(temperatures.size, *votes.shape)}, got {probabilities.shape}")
    extra = {"probabilities": probabilities, "temperatures": temperatures}
  tmp = path.with_name(path.name + ".tmp.npz")
  np.savez_compressed(
      tmp, **extra, votes=votes.astype(np.int32), labels=labels.astype(np.int32),
      index=index.astype(np.int64), num_pool=np.int64(q if num_pool is None else num_pool),
      num_teachers=np.int64(totals[0] if q else 0), dataset=np.str_(dataset))
  tmp.replace(path)
  return path


def load_votes(path: str | os.PathLike) -> dict[str, np.ndarray]:
  """Reads a ``votes.npz`` written by :func:`save_votes` into a dict of arrays."""
  path = pathlib.Path(path)
  if path.is_dir():
    path = path / "votes.npz"
  if not path.exists():
    raise FileNotFoundError(f"no votes file at {path}; run experiments/train_teachers.py "
                            "(or experiments/tabular.py) with this workdir first")
  with np.load(path, allow_pickle=False) as f:
    out = {k: f[k] for k in f.files}
  out["dataset"] = str(out["dataset"])
  for k in ("num_pool", "num_teachers"):
    out[k] = int(out[k])
  return out
