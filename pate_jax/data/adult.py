"""UCI Adult (census income) from ``<data_dir>/adult/{train,test,attack}.csv``.

The files (see ``shared/data/README.md``) hold the coarsened Adult split
published with the histogram-leakage attack's code: columns ``age, workclass,
education, marital_status, relationship, occupation, race, gender,
capital_gain, capital_loss, hours_per_week, income`` with ``income`` = 1 if
> $50K. As in Papernot et al. (2017), Appendix C, the only preprocessing is to
code each categorical value as an integer; the vocabulary is learned from the
training split and frozen, and a category unseen in training is coded
:data:`pate_jax.data.UNKNOWN_CODE` (with a warning) instead of failing.

``drop_columns`` removes columns from the features but keeps them in
``TabularSplit.columns``: the consensus inference of the histogram-leakage
paper (Section 2) trains the teachers without ``education`` and still needs it
to form the PhD ("Doctorate") group.
"""

from __future__ import annotations

import os
import pathlib
from typing import Iterable, Mapping, Sequence

import numpy as np

from pate_jax.data._paths import data_file
from pate_jax.data._table import (
    Encoder,
    TabularSplit,
    check_drop_columns,
    encode,
    fit_encoder,
    read_csv,
    split_on_unknown,
)

ADULT_LABEL = "income"
ADULT_SPLITS = ("train", "test", "attack")
ADULT_CATEGORICAL = ("workclass", "education", "marital_status", "relationship", "occupation",
                     "race", "gender")
ADULT_NUMERIC = ("age", "capital_gain", "capital_loss", "hours_per_week")
# The feature columns of the coarsened files, in file order.
ADULT_COLUMNS = ("age", "workclass", "education", "marital_status", "relationship",
                 "occupation", "race", "gender", "capital_gain", "capital_loss",
                 "hours_per_week")
ADULT_DOCTORATE = "Doctorate"  # The education value of PhD holders.

# Income spellings: the coarsened files use 0/1, the original UCI files
# "<=50K"/">50K" (with a trailing "." in adult.test).
_INCOME = {"0": 0, "1": 1, "<=50K": 0, ">50K": 1, "<=50K.": 0, ">50K.": 1}


def adult_path(split: str, data_dir: str | os.PathLike | None = None) -> pathlib.Path:
  """``<data_dir>/adult/<split>.csv``, with a clear error when it is absent."""
  if split not in ADULT_SPLITS:
    raise ValueError(f"split must be one of {ADULT_SPLITS}, got {split!r}")
  return data_file(data_dir, f"adult/{split}.csv", "UCI Adult",
                   "adult/{train,test,attack}.csv")


def parse_income(values: np.ndarray, *, source: str = "income") -> np.ndarray:
  """``int32 [N]`` income labels (1 if > $50K) from their CSV spellings."""
  values = np.asarray(values).astype(np.str_)
  out = np.empty(values.shape, np.int32)
  for spelling in np.unique(values).tolist():
    if spelling not in _INCOME:
      raise ValueError(f"{source}: unknown income label {spelling!r}; expected one of "
                       f"{sorted(_INCOME)}")
    out[values == spelling] = _INCOME[spelling]
  return out


def read_adult_csv(path: str | os.PathLike, *, require_label: bool = True
                   ) -> dict[str, np.ndarray]:
  """The raw string columns of an Adult CSV.

  Raises:
    ValueError: if ``require_label`` and the header has no ``income`` column, or if
      the header lacks a column of :data:`ADULT_COLUMNS` or has another one (schema
      drift would silently change the features).
  """
  columns = read_csv(path)
  if require_label and ADULT_LABEL not in columns:
    raise ValueError(f"{path}: no label column {ADULT_LABEL!r} in the header "
                     f"{list(columns)}; an Adult CSV must have an income column "
                     "(1 / >50K or 0 / <=50K)")
  missing = [c for c in ADULT_COLUMNS if c not in columns]
  unexpected = [c for c in columns if c not in ADULT_COLUMNS and c != ADULT_LABEL]
  if missing or unexpected:
    raise ValueError(
        f"{path}: " + "; ".join(
            ([f"missing column(s) {', '.join(map(repr, missing))}"] if missing else [])
            + ([f"unexpected column(s) {', '.join(map(repr, unexpected))}"]
               if unexpected else []))
        + f"; an Adult CSV has the columns {list(ADULT_COLUMNS) + [ADULT_LABEL]}")
  return columns


def adult_encoder(train_columns: Mapping[str, np.ndarray],
                  drop_columns: Iterable[str] = (), *,
                  source: str = "the training split") -> Encoder:
  """The integer coding learned from Adult's training columns.

  Features are the header's columns in file order minus the label and
  ``drop_columns``. Categorical vocabularies are the sorted training values;
  :data:`ADULT_NUMERIC` columns must hold finite numbers.
  """
  header = list(train_columns)
  drop = check_drop_columns(drop_columns, header, ADULT_LABEL, source)
  names = [c for c in header if c != ADULT_LABEL and c not in drop]
  return fit_encoder(train_columns, names, categorical=ADULT_CATEGORICAL,
                     numeric=[c for c in ADULT_NUMERIC if c in names], source=source)


def encode_adult(encoder: Encoder, columns: Mapping[str, np.ndarray], *,
                 on_unknown: str = "warn", source: str = "columns") -> TabularSplit:
  """Codes raw Adult columns (e.g. new rows at prediction time) with ``encoder``.

  Unseen categories are coded ``UNKNOWN_CODE`` (see :func:`pate_jax.data.encode`).
  Rows without an ``income`` column get labels ``-1``.
  """
  features = encode(encoder, columns, on_unknown=on_unknown, source=source)
  if ADULT_LABEL in columns:
    labels = parse_income(columns[ADULT_LABEL], source=source)
  else:
    labels = np.full(features.shape[0], -1, np.int32)
  return TabularSplit(features, labels, encoder.feature_names, dict(columns), encoder)


def load_adult(data_dir: str | os.PathLike | None = None, *,
               splits: Sequence[str] = ("train", "test"),
               drop_columns: Iterable[str] | str = (),
               on_unknown: str = "warn", vocabulary: str = "train") -> dict[str, TabularSplit]:
  """Loads Adult splits, coded with the vocabulary of the split ``vocabulary``.

  Args:
    data_dir: directory holding ``adult/``; default ``$PATE_JAX_DATA_DIR``.
    splits: which of ``("train", "test", "attack")`` to return (``train`` is
      always read, to learn the coding).
    drop_columns: columns left out of the features (names, or a comma-separated
      string), e.g. ``("education",)``; they stay in ``split.columns``.
    on_unknown: what to do with categories unseen in the vocabulary's split ("warn",
      "ignore", "raise"); they are coded ``UNKNOWN_CODE``.
    vocabulary: the split whose sorted values make the categorical vocabulary (one of
      ``splits``, or "train"). PATE's teachers train on the private "train" split: a
      vocabulary from a public split (the queries) keeps every coding, the queries'
      included, independent of the private rows. The training rows are then coded
      silently (``on_unknown`` "ignore": a private value unseen in the public split is
      never named).

  Returns:
    ``{split: TabularSplit}`` with ``features float32 [N, F]``, ``labels int32
    [N]`` (income), the feature names and the raw columns.

  Raises:
    FileNotFoundError: if the data directory or a file is missing.
    ValueError: for an unknown split, a CSV without the ``income`` column or with
      other columns than :data:`ADULT_COLUMNS`, a non-finite or non-numeric value in
      an :data:`ADULT_NUMERIC` column, or a ``drop_columns`` entry that is not a
      column (each naming the file and the column).
  """
  for s in splits:
    if s not in ADULT_SPLITS:
      raise ValueError(f"splits: unknown split {s!r}; expected a subset of {ADULT_SPLITS}")
  unknown = {s: split_on_unknown(s, vocabulary, ("train", *splits), on_unknown)
             for s in splits}
  columns = {s: read_adult_csv(adult_path(s, data_dir))
             for s in dict.fromkeys(("train", vocabulary, *splits))}
  encoder = adult_encoder(columns[vocabulary], drop_columns,  # (every split: one header)
                          source=str(adult_path(vocabulary, data_dir)))
  return {s: encode_adult(encoder, columns[s], source=str(adult_path(s, data_dir)),
                          on_unknown=unknown[s])
          for s in splits}
