"""The original UCI Adult files, ``<data_dir>/adult/adult.data`` and ``adult.test``.

The 2017 and 2018 PATE papers use this split: the teachers partition the
32,561 rows of ``adult.data`` and the student's queries are the 16,281 rows of
``adult.test`` (first ``num_pool`` labelled, the rest held out). The files have
no header, 15 comma-and-space separated fields per row (the 14 attributes of
:data:`UCI_ADULT_COLUMNS`, then the income label ``<=50K`` / ``>50K``, with a
trailing ``.`` in ``adult.test``), ``?`` for a missing category, and
``adult.test`` starts with a ``|1x3 Cross validator`` line. Papernot et al.
(2017), Appendix C, use 13 of the 14 attributes and code each category as an
integer; which attribute they left out is not stated (``fnlwgt``, the census
sampling weight, is the one dropped by default here). ``?`` is kept as a
category of its own.

This is the unmodified dataset, unlike the coarsened re-split read by
:mod:`pate_jax.data.adult` (the offline data's copy).
"""

from __future__ import annotations

import os
import pathlib
from typing import Iterable

import numpy as np

from pate_jax.data._paths import data_file
from pate_jax.data._table import (TabularSplit, check_drop_columns, encode, fit_encoder,
                                  split_on_unknown)
from pate_jax.data.adult import ADULT_LABEL, parse_income

UCI_ADULT_COLUMNS = ("age", "workclass", "fnlwgt", "education", "education_num",
                     "marital_status", "occupation", "relationship", "race", "gender",
                     "capital_gain", "capital_loss", "hours_per_week", "native_country")
UCI_ADULT_CATEGORICAL = ("workclass", "education", "marital_status", "occupation",
                         "relationship", "race", "gender", "native_country")
UCI_ADULT_FILES = {"train": "adult.data", "test": "adult.test"}
UCI_ADULT_DEFAULT_DROP = ("fnlwgt",)  # 13 features, as in Appendix C.
# The offline data's copy of Adult merges these categories (its README); ``coarsen=True``
# applies the same merge to the original files, so that coding and split can be told apart.
COARSE_CATEGORIES = {
    "workclass": {"Federal-gov": "Government", "Local-gov": "Government",
                  "State-gov": "Government", "Self-emp-inc": "Self-Employed",
                  "Self-emp-not-inc": "Self-Employed", "?": "Other/Unknown",
                  "Without-pay": "Other/Unknown", "Never-worked": "Other/Unknown"},
    "education": {**{k: "School" for k in ("Preschool", "1st-4th", "5th-6th", "7th-8th", "9th",
                                           "10th", "11th", "12th")},
                  "Assoc-acdm": "Assoc", "Assoc-voc": "Assoc"},
    "marital_status": {"Married-civ-spouse": "Married", "Married-AF-spouse": "Married",
                       "Married-spouse-absent": "Married", "Never-married": "Single"},
    "occupation": {**{k: "Blue-Collar" for k in ("Craft-repair", "Farming-fishing",
                                                 "Handlers-cleaners", "Machine-op-inspct",
                                                 "Transport-moving")},
                   "Adm-clerical": "White-Collar", "Exec-managerial": "White-Collar",
                   "Prof-specialty": "Professional",
                   **{k: "Service" for k in ("Other-service", "Protective-serv",
                                             "Priv-house-serv", "Tech-support")},
                   "?": "Other/Unknown", "Armed-Forces": "Other/Unknown"},
}


def read_uci_adult(path: str | os.PathLike) -> dict[str, np.ndarray]:
  """The raw string columns of ``adult.data`` / ``adult.test``: :data:`UCI_ADULT_COLUMNS`
  and ``income``.

  Blank lines and lines starting with ``|`` are skipped; fields are stripped.

  Raises:
    ValueError: for a row without 15 fields (naming the file and the line).
  """
  path = pathlib.Path(path)
  names = UCI_ADULT_COLUMNS + (ADULT_LABEL,)
  rows = []
  with open(path, newline="") as f:
    for lineno, line in enumerate(f, 1):
      line = line.strip()
      if not line or line.startswith("|"):
        continue
      fields = [x.strip() for x in line.split(",")]
      if len(fields) != len(names):
        raise ValueError(f"{path}:{lineno}: expected {len(names)} comma-separated fields "
                         f"(the UCI adult.data / adult.test format), got {len(fields)}")
      rows.append(fields)
  if not rows:
    raise ValueError(f"{path}: no data rows")
  table = np.asarray(rows, dtype=np.str_)
  return {name: table[:, j] for j, name in enumerate(names)}


def uci_adult_path(split: str, data_dir: str | os.PathLike | None = None) -> pathlib.Path:
  """``<data_dir>/adult/adult.data`` (``"train"``) or ``adult.test`` (``"test"``)."""
  if split not in UCI_ADULT_FILES:
    raise ValueError(f"split must be one of {tuple(UCI_ADULT_FILES)}, got {split!r}")
  return data_file(data_dir, f"adult/{UCI_ADULT_FILES[split]}", "UCI Adult (original files)",
                   "adult/adult.data and adult/adult.test")


def load_uci_adult(data_dir: str | os.PathLike | None = None, *,
                   drop_columns: Iterable[str] | str = UCI_ADULT_DEFAULT_DROP,
                   coarsen: bool = False, on_unknown: str = "warn",
                   vocabulary: str = "train") -> dict[str, TabularSplit]:
  """``{"train": adult.data, "test": adult.test}`` coded as integers.

  Categorical columns (:data:`UCI_ADULT_CATEGORICAL`) get the sorted vocabulary of
  the split ``vocabulary`` ("train": ``adult.data``; a category only in the other split is
  coded :data:`pate_jax.data.UNKNOWN_CODE`, and ``on_unknown`` says what else to do;
  "test": PATE's public split, so that no coding depends on the private rows, whose
  unseen values are then coded silently); the other columns are numbers. Features are
  :data:`UCI_ADULT_COLUMNS` minus ``drop_columns``, in file order; labels are 1
  for ``>50K`` (``>50K.``). ``coarsen``: merge categories as the offline data's
  copy does (:data:`COARSE_CATEGORIES`).

  Raises:
    FileNotFoundError: if the directory or a file is missing.
    ValueError: for a malformed row, an unknown income label, a non-numeric value
      in a numeric column, or a ``drop_columns`` entry that is not a column.
  """
  merge = _coarsened if coarsen else (lambda cols: cols)
  paths = {split: uci_adult_path(split, data_dir) for split in UCI_ADULT_FILES}
  cols = {split: merge(read_uci_adult(path)) for split, path in paths.items()}
  drop = check_drop_columns(drop_columns, list(cols["train"]), ADULT_LABEL, paths["train"])
  names = [c for c in UCI_ADULT_COLUMNS if c not in drop]
  unknown = {s: split_on_unknown(s, vocabulary, cols, on_unknown) for s in cols}
  encoder = fit_encoder(cols[vocabulary], names,
                        categorical=[c for c in UCI_ADULT_CATEGORICAL if c in names],
                        numeric=[c for c in names if c not in UCI_ADULT_CATEGORICAL],
                        source=str(paths[vocabulary]))
  return {split: TabularSplit(encode(encoder, c, source=str(paths[split]),
                                     on_unknown=unknown[split]),
                              parse_income(c[ADULT_LABEL], source=str(paths[split])),
                              encoder.feature_names, c, encoder)
          for split, c in cols.items()}


def _coarsened(cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
  """``cols`` with the categories of :data:`COARSE_CATEGORIES` merged."""
  return {name: (np.asarray([COARSE_CATEGORIES[name].get(v, v) for v in col.tolist()])
                 if name in COARSE_CATEGORIES else col) for name, col in cols.items()}
