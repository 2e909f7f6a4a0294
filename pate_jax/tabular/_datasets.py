"""The tabular tasks of Papernot et al. 2017, Appendix C: UCI Adult and Diabetes.

Each task is a training split (the teachers' private data) and a query split
(the student pool followed by held-out evaluation inputs), coded as integers by
:mod:`pate_jax.data.adult` (``"adult"``: the coarsened 11-feature re-split),
:mod:`pate_jax.data.uci_adult` (``"adult_uci"``: the original UCI files and
split that the papers use) or :mod:`pate_jax.data.diabetes`, with the categorical
vocabulary of the public query split: were it the private split's, one private record
holding a category the queries hold too would change the coding of every teacher's
queries (an unseen category is coded -1), and so every teacher's vote at once and the
student's inputs, which no noise covers. Diabetes' rows and columns are by default chosen
without looking at the rows (:mod:`pate_jax.data.diabetes`, ``preparation="label_free"``);
its ``"paper"`` preparation chooses them on every row, private ones included, so that an ε
of teachers trained on it holds for the data as prepared only (:func:`label_chosen`).
"""

from __future__ import annotations

import os
from typing import Iterable

import jax

from pate_jax import io
from pate_jax.data import TabularSplit, adult, diabetes, uci_adult

DATASETS = ("adult", "adult_uci", "diabetes")

NUM_CLASSES = 2
"""The classes of every task, by its coding: Adult's income above $50K or not
(:func:`pate_jax.data.adult.parse_income`), Diabetes' readmission within 30 days or not
(:func:`pate_jax.data.diabetes.readmitted_labels`). The width of the teachers' votes, and so
the classes a released label ranges over: fixed by the coding, never counted on the rows
(``max(label) + 1`` over the private rows made one training record's label widen the
votes where the queries hold one class)."""


def task_name(dataset: str, drop_columns: Iterable[str] = (), query_split: str = "test",
              coarsen: bool = False, preparation: str = "label_free") -> str:
  """``dataset`` (+ ``-coarse``, + ``-<preparation>`` unless "label_free") + ``-no<column>``
  per dropped column + ``-<query_split>`` unless "test"."""
  name = (dataset + ("-coarse" if coarsen else "")
          + ("" if preparation == "label_free" else f"-{preparation}")
          + "".join(f"-no{c}" for c in drop_columns))
  return name if query_split == "test" else f"{name}-{query_split}"


def label_chosen(dataset: str, preparation: str = "label_free") -> bool:
  """Whether the task's preparation looks at its private rows (Diabetes' ``"paper"``: the
  balanced subset and the feature columns chosen on the whole file), so that an ε of
  teachers trained on it does not hold for the file: no release may be drawn from their
  votes with secret noise.

  Raises:
    ValueError: a ``preparation`` other than "label_free" for another dataset than
      Diabetes, or not one of :data:`pate_jax.data.diabetes.PREPARATIONS`.
  """
  if preparation not in diabetes.PREPARATIONS:
    raise ValueError(f"preparation must be one of {diabetes.PREPARATIONS}, got "
                     f"{preparation!r}")
  if preparation != "label_free" and dataset != "diabetes":
    raise ValueError(f"preparation: {preparation!r} is a Diabetes preparation; dataset "
                     f"{dataset!r} has only 'label_free' (its splits are fixed files)")
  return preparation in diabetes.LABEL_CHOSEN


def private_data(dataset: str, data_dir: str | os.PathLike | None = None) -> str:
  """The key of a tabular task's privacy budget (votes.npz's ``private_data``,
  :class:`pate_jax.budget.BudgetRegistry`): the SHA-256 of the file that holds its private
  training rows, whatever their coding, columns or split -- Adult's ``train.csv``, the
  original ``adult.data``, Diabetes' whole ``diabetic_data.csv`` (its training rows are
  drawn from every row)."""
  if dataset == "adult":
    source = adult.adult_path("train", data_dir)
  elif dataset == "adult_uci":
    source = uci_adult.uci_adult_path("train", data_dir)
  elif dataset == "diabetes":
    source = diabetes.diabetes_path(data_dir)
  else:
    raise ValueError(f"dataset must be one of {DATASETS}, got {dataset!r}")
  return io.file_digest(source)


def load_task(key: jax.Array, dataset: str, data_dir: str | os.PathLike | None = None, *,
              query_split: str = "test", test_fraction: float = 0.25,
              drop_columns: Iterable[str] = (), coarsen: bool = False,
              preparation: str = "label_free") -> tuple[TabularSplit, TabularSplit, str]:
  """``(train, queries, name)`` of a tabular task.

  Args:
    key: PRNG key of Diabetes' split (unused for Adult, whose splits are fixed files).
    dataset: ``"adult"``, ``"adult_uci"`` or ``"diabetes"``.
    data_dir: the data directory (default ``$PATE_JAX_DATA_DIR``).
    query_split: Adult: ``"test"`` or ``"attack"``; original Adult and Diabetes:
      ``"test"`` only.
    test_fraction: Diabetes: held-out (public) fraction of all rows ("label_free"), of
      the balanced subset ("paper").
    drop_columns: columns left out of the features.
    coarsen: original Adult only: merge its categories as the offline copy does.
    preparation: Diabetes: ``"label_free"`` or ``"paper"``
      (:func:`pate_jax.data.diabetes.load_diabetes`; :func:`label_chosen`); the other
      datasets: "label_free" only.

  Returns:
    The training split, the query split and :func:`task_name`.
  """
  drop = list(drop_columns)
  label_chosen(dataset, preparation)  # validates it
  if coarsen and dataset != "adult_uci":
    raise ValueError(f"coarsen: only for dataset 'adult_uci' (the original files), got "
                     f"{dataset!r}")
  if dataset == "adult":
    splits = adult.load_adult(data_dir, splits=("train", query_split), drop_columns=drop,
                              vocabulary=query_split)
    train, queries = splits["train"], splits[query_split]
  elif dataset == "adult_uci":
    if query_split != "test":
      raise ValueError(f"query_split: the original Adult files have only a 'test' split "
                       f"(adult.test), got {query_split!r}")
    splits = uci_adult.load_uci_adult(data_dir, drop_columns=drop, coarsen=coarsen,
                                      vocabulary="test")
    train, queries = splits["train"], splits["test"]
  elif dataset == "diabetes":
    if query_split != "test":
      raise ValueError(f"query_split: Diabetes has only a 'test' split, got {query_split!r}")
    splits = diabetes.load_diabetes(key, data_dir, test_fraction=test_fraction,
                                    drop_columns=drop, vocabulary="test",
                                    preparation=preparation)
    train, queries = splits["train"], splits["test"]
  else:
    raise ValueError(f"dataset must be one of {DATASETS}, got {dataset!r}")
  return train, queries, task_name(dataset, drop, query_split, coarsen, preparation)
