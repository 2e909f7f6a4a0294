"""Keyed, disjoint partitions of a private training set and the student split."""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np

from pate_jax import rng

# The 2017 paper shuffles the MNIST test set once so that the student's small
# labelled subset is class-balanced; a fixed key makes that shuffle part of the
# benchmark definition rather than of a run's randomness.
STUDENT_SPLIT_SEED = 0

# (public pool size, evaluation size or None for "the rest") per dataset.
STUDENT_SPLITS = {
    "mnist": (9_000, 1_000),
    "fashion_mnist": (9_000, 1_000),
    "svhn": (10_000, None),      # 10,000 / remaining 16,032
    "cifar10": (9_000, 1_000),
    "digits": (None, None),      # sklearn 8x8 fallback: 90 % / 10 % of its test part
}


class Partition(NamedTuple):
  index: np.ndarray  # int64 [T, n]: rows of the training set held by each teacher.
  dropped: int       # examples left out so that every shard has the same size.


def partition_indices(key: jax.Array, num_examples: int, num_teachers: int) -> Partition:
  """Disjoint, equal-size shards of ``range(num_examples)`` for ``num_teachers`` teachers.

  A keyed permutation is cut into ``T`` shards of ``n = num_examples // T`` rows;
  the ``num_examples mod T`` left-over rows are dropped and reported.

  Raises:
    ValueError: if ``num_teachers`` is not a positive integer or exceeds
      ``num_examples``.
  """
  if not isinstance(num_teachers, (int, np.integer)) or isinstance(num_teachers, bool):
    raise ValueError(f"num_teachers must be an int, got {num_teachers!r}")
  if num_teachers <= 0:
    raise ValueError(f"num_teachers must be positive, got {num_teachers}")
  if num_teachers > num_examples:
    raise ValueError(f"num_teachers={num_teachers} is larger than the training set "
                     f"({num_examples} examples): every teacher needs at least one example")
  per_teacher = num_examples // num_teachers
  perm = rng.host_permutation(key, num_examples)
  used = per_teacher * num_teachers
  return Partition(perm[:used].reshape(num_teachers, per_teacher).astype(np.int64),
                   num_examples - used)


def partition(key: jax.Array, images: np.ndarray, labels: np.ndarray,
              num_teachers: int) -> tuple[np.ndarray, np.ndarray, int]:
  """Stacks a disjoint partition as ``images[T, n, ...]``, ``labels[T, n]``.

  Returns:
    ``(images, labels, dropped)``.
  """
  if len(images) != len(labels):
    raise ValueError(f"images and labels differ in length: {len(images)} vs {len(labels)}")
  part = partition_indices(key, len(labels), num_teachers)
  return images[part.index], labels[part.index], part.dropped


class StudentSplit(NamedTuple):
  pool_index: np.ndarray  # rows of the test split forming the student's public pool
  eval_index: np.ndarray  # rows of the test split held out for evaluation


def student_split(dataset: str, num_test: int) -> StudentSplit:
  """The paper's student split of a test set of ``num_test`` rows.

  MNIST: the test set is shuffled with a fixed key; the first 9,000 rows are the
  student's public (unlabelled) pool and the last 1,000 the evaluation set.
  SVHN: no shuffle; the first 10,000 / the remaining rows (16,032 for the full
  test set).
  """
  if dataset not in STUDENT_SPLITS:
    raise ValueError(f"dataset: no student split defined for {dataset!r}; "
                     f"known: {sorted(STUDENT_SPLITS)}")
  pool, held = STUDENT_SPLITS[dataset]
  if dataset == "svhn":
    order = np.arange(num_test)
  else:
    order = rng.host_permutation(STUDENT_SPLIT_SEED, num_test)
  if held is None and pool is not None and pool < num_test:
    held = num_test - pool
  if pool is None or held is None or pool + held > num_test:
    # Smaller test sets (the 8x8 fallback, synthetic data): keep a 90/10 split.
    pool = int(round(0.9 * num_test))
    held = num_test - pool
  return StudentSplit(order[:pool], order[num_test - held:])
