"""What a student learns from: the public pool, its noisily labelled subset, the held-out set.

The student never sees the teachers' data. It sees the public pool (MNIST: the
9,000 pool rows of the test split's fixed student split), labels for a subset
of it (answered by the noisy aggregator and paid for in its ledger) and, for
evaluation only, the held-out rows (the last 1,000), which are never queried.
Row numbers are those of ``votes.npz``: ``[:num_pool]`` the pool, the rest held
out.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import data as data_lib


class StudentData(NamedTuple):
  """Arrays a student trains and is evaluated on (host numpy arrays).

  Attributes:
    pool: float32 ``[P, ...]`` public pool (the unlabelled data).
    labelled_index: int64 ``[L]`` rows of ``pool`` that have a label.
    labels: int32 ``[L]`` class labels, or float32 ``[L, C]`` probability vectors
      (distillation).
    eval_images: float32 ``[E, ...]`` held-out images (never queried).
    eval_labels: int32 ``[E]`` their true labels.
    num_classes: C.
  """
  pool: np.ndarray
  labelled_index: np.ndarray
  labels: np.ndarray
  eval_images: np.ndarray
  eval_labels: np.ndarray
  num_classes: int

  @property
  def num_labelled(self) -> int:
    return int(self.labelled_index.shape[0])


UNNOISED_LABELS = ("plurality", "probabilities")
"""The labels the teachers give without noise (``config.labels`` of the student stage): a
student on them has no privacy guarantee, and its results and printed lines are the data
owner's only (private)."""

def make_student_data(pool: Any, labelled_index: Any, labels: Any, eval_images: Any,
                      eval_labels: Any, num_classes: int) -> StudentData:
  """Checks and bundles a student's data; every error names the offending argument.

  Raises:
    ValueError: labels outside ``[0, num_classes)`` (or probability vectors that
      are not distributions), more labels than pool rows, duplicate rows, or
      indices outside the pool (e.g. rows of the held-out evaluation split).
  """
  pool = np.asarray(pool, np.float32)
  index = np.asarray(labelled_index)
  labels = np.asarray(labels)
  eval_images = np.asarray(eval_images, np.float32)
  eval_labels = np.asarray(eval_labels)
  if num_classes < 2:
    raise ValueError(f"num_classes must be >= 2, got {num_classes}")
  if index.ndim != 1 or not np.issubdtype(index.dtype, np.integer):
    raise ValueError(f"labelled_index must be a 1-D integer array, got {index.dtype} "
                     f"{index.shape}")
  if index.shape[0] > pool.shape[0]:
    raise ValueError(f"labelled_index: {index.shape[0]} labels for a pool of "
                     f"{pool.shape[0]} rows")
  if index.size and (index.min() < 0 or index.max() >= pool.shape[0]):
    bad = int(index[(index < 0) | (index >= pool.shape[0])][0])
    raise ValueError(f"labelled_index: row {bad} is outside the public pool [0, "
                     f"{pool.shape[0]}); rows from {pool.shape[0]} on are the held-out "
                     "evaluation split, which a student must never query")
  if np.unique(index).size != index.size:
    raise ValueError("labelled_index: a pool row is labelled twice")
  if labels.shape[:1] != index.shape:
    raise ValueError(f"labels: expected {index.shape[0]} labels (one per labelled_index), "
                     f"got shape {labels.shape}")
  if labels.ndim == 1:
    _check_classes(labels, num_classes, "labels")
    labels = labels.astype(np.int32)
  elif labels.ndim == 2 and labels.shape[1] == num_classes:
    if not (np.all(labels >= 0) and np.allclose(labels.sum(1), 1.0, atol=1e-4)):
      raise ValueError("labels: probability vectors must be non-negative and sum to 1")
    labels = labels.astype(np.float32)
  else:
    raise ValueError(f"labels must be [L] classes or [L, {num_classes}] probabilities, "
                     f"got shape {labels.shape}")
  if eval_images.shape[0] != eval_labels.shape[0] or eval_labels.ndim != 1:
    raise ValueError(f"eval_labels: expected [{eval_images.shape[0]}], got "
                     f"{eval_labels.shape}")
  _check_classes(eval_labels, num_classes, "eval_labels")
  if eval_images.shape[1:] != pool.shape[1:]:
    raise ValueError(f"eval_images: shape {eval_images.shape[1:]} differs from the pool's "
                     f"{pool.shape[1:]}")
  return StudentData(pool, index.astype(np.int64), labels, eval_images,
                     eval_labels.astype(np.int32), int(num_classes))


def _check_classes(labels: np.ndarray, num_classes: int, name: str) -> None:
  if not np.issubdtype(labels.dtype, np.integer):
    raise ValueError(f"{name} must be integer classes, got dtype {labels.dtype}")
  bad = (labels < 0) | (labels >= num_classes)
  if bad.any():
    raise ValueError(f"{name}: label {int(labels[bad][0])} at position "
                     f"{int(np.argmax(bad))} is outside [0, {num_classes})")


def with_labels(data: StudentData, labelled_index: Any, labels: Any) -> StudentData:
  """``data`` with another labelled subset (checked like :func:`make_student_data`)."""
  return make_student_data(data.pool, labelled_index, labels, data.eval_images,
                           data.eval_labels, data.num_classes)


def epoch_batches(key: jax.Array, start: jax.Array, num_steps: int, num: int,
                  batch_size: int) -> jax.Array:
  """Indices ``[num_steps, batch_size]`` into ``[0, num)`` of minibatches ``start, start + 1,
  ...`` of a sequence of random epochs.

  Epoch ``e`` is the permutation ``permutation(fold_in(key, e), num)``; batches
  are consecutive slices of the epochs laid end to end, so every row is seen once
  per epoch and the batch of a step depends on ``(key, step)`` only (a resumed
  run draws the same batches, whatever its segments). Works when ``batch_size > num``
  (the batch spans several epochs, like the labelled set repeated to fill a batch).
  Each epoch's permutation is drawn once for the ``num_steps`` batches, not once per
  batch.
  """
  first = (start * batch_size) // num
  spans = -(-(num_steps * batch_size) // num) + 1  # epochs the batches can touch
  perms = jax.vmap(lambda e: jax.random.permutation(jax.random.fold_in(key, e), num))(
      first + jnp.arange(spans))
  pos = start * batch_size + jnp.arange(num_steps * batch_size)
  return perms[pos // num - first, pos % num].reshape(num_steps, batch_size)


def epoch_batch(key: jax.Array, step: jax.Array, num: int, batch_size: int) -> jax.Array:
  """Indices ``[batch_size]`` of minibatch ``step`` (:func:`epoch_batches` for one step)."""
  return epoch_batches(key, step, 1, num, batch_size)[0]


def load_public_data(votes: dict, data_dir: str | None = None) -> tuple[np.ndarray, np.ndarray,
                                                                          np.ndarray, int]:
  """The student's images for a ``votes.npz`` (as read by ``pate_jax.votes.load_votes``).

  Returns:
    ``(pool, eval_images, eval_labels, num_classes)``: the images of rows
    ``[:num_pool]`` and ``[num_pool:]`` of the votes (float32 in [0, 1]) and the
    true labels of the held-out rows.
  """
  ds = data_lib.load_image_dataset(votes["dataset"], data_dir or None)
  images = data_lib.to_float(ds.test_images[np.asarray(votes["index"])])
  n = votes["num_pool"]
  true = np.asarray(votes["labels"])
  if not np.array_equal(true, ds.test_labels[np.asarray(votes["index"])]):
    raise ValueError(f"votes: the labels of votes.npz do not match dataset "
                     f"{votes['dataset']!r} at its recorded rows (another dataset copy?)")
  return images[:n], images[n:], true[n:], ds.num_classes


def answered_labels(labels_file: dict) -> tuple[np.ndarray, np.ndarray]:
  """``(pool rows, noisy labels)`` of the answered queries of a ``labels.npz`` dict."""
  answered = np.asarray(labels_file["answered"], bool)
  return (np.asarray(labels_file["query_index"])[answered],
          np.asarray(labels_file["labels"])[answered])
