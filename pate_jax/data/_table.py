"""Tabular data: CSV columns, a fixed categorical vocabulary, and integer coding.

The 2017 paper's only preprocessing of UCI Adult and Diabetes (Appendix C) is to
"map all categorical features to numerical values by assigning an integer value
to each possible category". This module does exactly that, with the vocabulary
learned once from the training split and frozen, so that every split (and every
query at prediction time) is coded the same way. A category never seen in the
training split is coded :data:`UNKNOWN_CODE` instead of raising.

No pandas: the CSV module and NumPy string arrays suffice for these sizes.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import pathlib
import warnings
from typing import Iterable, Mapping, Sequence

import numpy as np

# Code of a categorical value absent from the training vocabulary. Known
# categories are coded 0 .. K-1, so -1 never collides with one; a tree sends it
# to the same side as the smallest code.
UNKNOWN_CODE = -1

Columns = dict[str, np.ndarray]  # column name -> str array [N]


def read_csv(path: str | os.PathLike) -> Columns:
  """Reads a CSV with a header row into ``{column name: str array [N]}``.

  Cells are stripped of surrounding whitespace (the UCI files pad with spaces).

  Raises:
    FileNotFoundError: if ``path`` does not exist.
    ValueError: if the file is empty, has duplicate column names, or a row
      whose length differs from the header's.
  """
  path = pathlib.Path(path)
  if not path.is_file():
    raise FileNotFoundError(f"no CSV file at {path}")
  with open(path, newline="") as f:
    reader = csv.reader(f, skipinitialspace=True)
    try:
      header = [h.strip() for h in next(reader)]
    except StopIteration:
      raise ValueError(f"{path}: empty CSV file (no header row)") from None
    rows = []
    for line, row in enumerate(reader, start=2):
      if not row:
        continue  # Trailing blank lines.
      if len(row) != len(header):
        raise ValueError(f"{path}: line {line} has {len(row)} fields, the header has "
                         f"{len(header)}")
      rows.append([c.strip() for c in row])
  if len(set(header)) != len(header):
    dup = sorted({h for h in header if header.count(h) > 1})
    raise ValueError(f"{path}: duplicate column names {dup}")
  table = np.array(rows, dtype=np.str_).reshape(len(rows), len(header))
  return {name: table[:, i] for i, name in enumerate(header)}


def _is_numeric(values: np.ndarray) -> bool:
  try:
    values.astype(np.float64)
  except ValueError:
    return False
  return True


def _numbers(values: np.ndarray, name: str, source: str | None,
             what: str = "must hold finite numbers", missing: Sequence[str] = (),
             quiet: bool = False) -> np.ndarray:
  """A numeric column as finite float64, its ``missing`` values as :data:`UNKNOWN_CODE`;
  anything else is an error naming the column, or with ``quiet`` (a private split's
  values, never named) coded :data:`UNKNOWN_CODE` too."""
  where = f"{source}: " if source else ""
  values = np.asarray(values).astype(np.str_)
  absent = np.isin(values, np.asarray(missing, np.str_))
  values = np.where(absent, str(UNKNOWN_CODE), values)
  try:
    numbers = values.astype(np.float64)
  except ValueError:
    bad = np.array([not _is_numeric(np.asarray([v])) for v in values], bool)
  else:
    bad = ~np.isfinite(numbers)
  if bad.any() and quiet:
    numbers = np.where(bad, "0", values).astype(np.float64)
    return np.where(bad | ~np.isfinite(numbers), np.float64(UNKNOWN_CODE), numbers)
  if bad.any():
    i = int(np.flatnonzero(bad)[0])
    raise ValueError(f"{where}column {name!r} {what}; found "
                     f"{str(values[i])!r} at row {i} ({int(bad.sum())} bad value(s))")
  return numbers


@dataclasses.dataclass(frozen=True)
class Encoder:
  """A frozen feature coding: column order, and a vocabulary per categorical column.

  Attributes:
    feature_names: the feature columns, in the order of the feature matrix.
    vocab: for each categorical column, its sorted categories; category
      ``vocab[c][k]`` is coded ``k``, anything else :data:`UNKNOWN_CODE`.
      Columns absent from ``vocab`` are numeric and parsed as floats.
    missing: values that mark a missing number (e.g. ``"?"``): in a numeric column they
      are coded :data:`UNKNOWN_CODE` instead of parsed (in a categorical one they are
      categories as any other). Empty: a numeric column holds numbers only.
  """
  feature_names: tuple[str, ...]
  vocab: Mapping[str, tuple[str, ...]]
  missing: tuple[str, ...] = ()

  @property
  def categorical(self) -> tuple[str, ...]:
    return tuple(n for n in self.feature_names if n in self.vocab)


def fit_encoder(columns: Mapping[str, np.ndarray], feature_names: Sequence[str], *,
                categorical: Iterable[str] = (), numeric: Iterable[str] = (),
                missing: Iterable[str] = (), source: str | None = None) -> Encoder:
  """Learns the coding of ``feature_names`` from (training) ``columns``.

  A column is categorical if it is listed in ``categorical`` or, unless it is listed
  in ``numeric``, if any of its values does not parse as a number; its vocabulary is
  its sorted set of values. A numeric column must hold finite numbers only (a "?"
  in a column declared ``numeric`` is an error, not a switch to categorical), or one of
  the ``missing`` values, which :func:`encode` codes :data:`UNKNOWN_CODE` (a column that
  every feature name declares ``categorical`` or ``numeric`` is then coded without
  looking at which values its rows hold).

  Raises:
    ValueError: if a feature name is not a column, a column is declared both
      categorical and numeric, or a numeric column holds a non-finite value or text
      (naming ``source``, the column, the value and its row).
  """
  where = f"{source}: " if source else ""
  absent = [n for n in feature_names if n not in columns]
  if absent:
    raise ValueError(f"{where}feature_names: columns {absent} not in the table "
                     f"(columns: {list(columns)})")
  forced, numbers = set(categorical), set(numeric)
  if forced & numbers:
    raise ValueError(f"columns {sorted(forced & numbers)} are declared both categorical "
                     "and numeric")
  missing = tuple(str(v) for v in missing)
  vocab = {}
  for name in feature_names:
    values = np.asarray(columns[name])
    if name in forced or (name not in numbers and not _is_numeric(values)):
      vocab[name] = tuple(str(v) for v in np.unique(values))
    else:  # "?" is not a number (unless a missing value), and "nan" / "inf" are no data
      _numbers(values, name, source, missing=missing)
  return Encoder(tuple(feature_names), vocab, missing)


def encode(encoder: Encoder, columns: Mapping[str, np.ndarray], *,
           on_unknown: str = "warn", source: str | None = None) -> np.ndarray:
  """Codes ``columns`` into a feature matrix ``float32 [N, F]``.

  Categorical values are replaced by their index in ``encoder.vocab``; a value
  outside the vocabulary (e.g. a category first seen at prediction time) becomes
  :data:`UNKNOWN_CODE`. Numeric columns are parsed as floats (a value of
  ``encoder.missing`` coded :data:`UNKNOWN_CODE`). Codes and the
  integer-valued Adult/Diabetes features are exact in float32 (< 2**24).

  Args:
    encoder: from :func:`fit_encoder`.
    columns: ``{name: str array [N]}``; must contain every feature column.
    on_unknown: ``"warn"`` (a ``UserWarning`` naming the column and the unseen
      values), ``"ignore"``, or ``"raise"`` (``ValueError``). With ``"ignore"`` (what
      :func:`split_on_unknown` gives a private split coded with a public vocabulary) a
      numeric column's value that is not a finite number is coded :data:`UNKNOWN_CODE`
      too, not named in an error.
    source: where the columns come from (a file), named in errors.

  Raises:
    ValueError: for a missing feature column, ragged columns, a non-numeric or
      non-finite value in a numeric column (unless ``on_unknown="ignore"``), or
      (``on_unknown="raise"``) an unseen category.
  """
  where = f"{source}: " if source else ""
  if on_unknown not in ("warn", "ignore", "raise"):
    raise ValueError(f"on_unknown must be 'warn', 'ignore' or 'raise', got {on_unknown!r}")
  missing = [n for n in encoder.feature_names if n not in columns]
  if missing:
    raise ValueError(f"{where}columns: feature columns {missing} are missing (have "
                     f"{list(columns)})")
  lengths = {len(columns[n]) for n in encoder.feature_names}
  if len(lengths) > 1:
    raise ValueError(f"{where}columns: feature columns differ in length: {sorted(lengths)}")
  n_rows = lengths.pop() if lengths else 0
  out = np.empty((n_rows, len(encoder.feature_names)), np.float32)
  for j, name in enumerate(encoder.feature_names):
    values = np.asarray(columns[name]).astype(np.str_)
    if name in encoder.vocab:
      vocab = np.asarray(encoder.vocab[name], dtype=np.str_)
      pos = np.searchsorted(vocab, values)
      pos_c = np.minimum(pos, max(len(vocab) - 1, 0))
      known = (pos < len(vocab)) & (vocab[pos_c] == values) if len(vocab) else \
          np.zeros(n_rows, bool)
      if not known.all():
        unseen = sorted(set(values[~known].tolist()))
        msg = (f"{where}column {name!r}: {int((~known).sum())} value(s) not in the training "
               f"vocabulary, coded {UNKNOWN_CODE}: {unseen[:10]}"
               + (" ..." if len(unseen) > 10 else ""))
        if on_unknown == "raise":
          raise ValueError(msg)
        if on_unknown == "warn":
          warnings.warn(msg, UserWarning, stacklevel=2)
      out[:, j] = np.where(known, pos_c, UNKNOWN_CODE)
    else:  # numeric in the training split; its missing values coded UNKNOWN_CODE
      out[:, j] = _numbers(values, name, source,
                           "is numeric in the training split and must hold finite numbers",
                           missing=encoder.missing, quiet=on_unknown == "ignore")
  return out


@dataclasses.dataclass(frozen=True)
class TabularSplit:
  """One split of a tabular dataset, coded for scikit-learn-style models.

  Attributes:
    features: ``float32 [N, F]`` coded features (see :func:`encode`).
    labels: ``int32 [N]`` class labels in ``0 .. C-1``.
    feature_names: the ``F`` feature column names.
    columns: the raw CSV columns ``{name: str array [N]}``, including columns
      dropped from the features (e.g. Adult's ``education``) and the label.
    encoder: the coding shared by all splits of the dataset (learned on train).
  """
  features: np.ndarray
  labels: np.ndarray
  feature_names: tuple[str, ...]
  columns: Mapping[str, np.ndarray]
  encoder: Encoder

  def __len__(self) -> int:
    return int(self.labels.shape[0])


def split_on_unknown(split: str, vocabulary: str, splits: Iterable[str],
                     on_unknown: str) -> str:
  """What :func:`encode` does with a value of ``split`` outside the vocabulary of the split
  ``vocabulary`` (one of ``splits``): ``on_unknown``, but for the private "train" split
  coded with a public split's vocabulary, whose unseen values are coded silently
  ("ignore": a private value is never named in a warning or an error).

  Raises:
    ValueError: ``vocabulary`` is not one of ``splits``.
  """
  if vocabulary not in splits:
    raise ValueError(f"vocabulary: {vocabulary!r} is not one of the splits {tuple(splits)}")
  return "ignore" if split == "train" and vocabulary != "train" else on_unknown


def check_drop_columns(drop_columns: Iterable[str], header: Sequence[str], label: str,
                       path: os.PathLike | str) -> tuple[str, ...]:
  """Validates ``drop_columns`` against a header; returns them as a tuple."""
  if isinstance(drop_columns, str):
    drop_columns = [c for c in drop_columns.split(",") if c.strip()]
  drop = tuple(c.strip() for c in drop_columns)
  unknown = [c for c in drop if c not in header]
  if unknown:
    raise ValueError(f"drop_columns: {unknown} not among the columns of {path}: {list(header)}")
  if label in drop:
    raise ValueError(f"drop_columns: cannot drop the label column {label!r}")
  return drop
