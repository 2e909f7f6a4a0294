"""UCI Diabetes 130-US hospitals (1999–2008) from the original ``diabetic_data.csv``.

Papernot et al. (2017), Appendix C, predict readmission within 30 days: class 1
is ``readmitted == "<30"``, class 0 is ``">30"`` or ``"NO"``; they keep only the
features without missing values and balance the two classes. This loader does
the same, data-driven:

* features: every column except the identifiers (``encounter_id``,
  ``patient_nbr``), the label and ``drop_columns``, that has no missing value
  (``"?"`` or an empty cell) anywhere in the file; categorical values are coded
  as integers learned on the training split (unseen ones coded
  :data:`pate_jax.data.UNKNOWN_CODE`);
* balanced subset: all rows of the minority class and an equally large, keyed
  random sample of the majority class, shuffled with the same key and cut into
  train / test.

The paper's exact feature subset and split sizes are not recoverable from the
text copy in ``shared/papers``, so they may differ from the published ones.

The privacy unit is a row (an encounter): rows, not patients, are split and later
partitioned among the teachers, so a patient with several encounters (``patient_nbr``) may
sit in several teachers' partitions and in the public split, and an ε of teachers trained
on this task is per encounter, not per patient. The balanced subset (its size is the
minority class's count) and the feature columns (those without a missing value) are chosen
on the whole file, private rows included: a preparation outside the ε.

The file is not available offline: download ``dataset_diabetes.zip`` from the
UCI repository (dataset 296) and place ``diabetic_data.csv`` under
``<data_dir>/diabetes/``.
"""

from __future__ import annotations

import os
import pathlib
from typing import Iterable

import jax
import numpy as np

from pate_jax.data._paths import ENV_VAR, resolve_data_dir
from pate_jax.data._table import (
    TabularSplit,
    check_drop_columns,
    encode,
    fit_encoder,
    read_csv,
    split_on_unknown,
)

DIABETES_FILE = "diabetic_data.csv"
DIABETES_LABEL = "readmitted"
DIABETES_ID_COLUMNS = ("encounter_id", "patient_nbr")
DIABETES_READMITTED = ("<30", ">30", "NO")
MISSING_VALUES = ("?", "")
# The header of the original file (50 columns).
DIABETES_COLUMNS = (
    "encounter_id", "patient_nbr", "race", "gender", "age", "weight", "admission_type_id",
    "discharge_disposition_id", "admission_source_id", "time_in_hospital", "payer_code",
    "medical_specialty", "num_lab_procedures", "num_procedures", "num_medications",
    "number_outpatient", "number_emergency", "number_inpatient", "diag_1", "diag_2", "diag_3",
    "number_diagnoses", "max_glu_serum", "A1Cresult", "metformin", "repaglinide",
    "nateglinide", "chlorpropamide", "glimepiride", "acetohexamide", "glipizide", "glyburide",
    "tolbutamide", "pioglitazone", "rosiglitazone", "acarbose", "miglitol", "troglitazone",
    "tolazamide", "examide", "citoglipton", "insulin", "glyburide-metformin",
    "glipizide-metformin", "glimepiride-pioglitazone", "metformin-rosiglitazone",
    "metformin-pioglitazone", "change", "diabetesMed", "readmitted",
)
# Sub-directories of the data directory searched, in order.
_SUBDIRS = ("diabetes", "dataset_diabetes", ".")


def diabetes_path(data_dir: str | os.PathLike | None = None) -> pathlib.Path:
  """Locates ``diabetic_data.csv`` under the data directory.

  Raises:
    FileNotFoundError: naming every path tried and how to provide the file.
  """
  root = resolve_data_dir(data_dir)
  how = (f"download dataset_diabetes.zip from the UCI repository (Diabetes 130-US hospitals, "
         f"dataset 296), and put {DIABETES_FILE} in <data_dir>/diabetes/, where <data_dir> is "
         f"${ENV_VAR} or the config field `data_dir`")
  if root is None:
    raise FileNotFoundError(f"UCI Diabetes: no data directory is set; {how}")
  tried = [root / sub / DIABETES_FILE for sub in _SUBDIRS if sub != "."] + [root / DIABETES_FILE]
  for path in tried:
    if path.is_file():
      return path
  raise FileNotFoundError(f"UCI Diabetes: {DIABETES_FILE} not found (tried "
                          f"{', '.join(str(p) for p in tried)}); it is not available offline: "
                          f"{how}")


def readmitted_labels(values: np.ndarray, *, source: str = DIABETES_LABEL) -> np.ndarray:
  """``int32 [N]``: 1 for ``"<30"`` (readmitted within 30 days), else 0."""
  values = np.asarray(values).astype(np.str_)
  unknown = sorted(set(np.unique(values).tolist()) - set(DIABETES_READMITTED))
  if unknown:
    raise ValueError(f"{source}: unknown readmitted values {unknown}; expected "
                     f"{list(DIABETES_READMITTED)}")
  return (values == "<30").astype(np.int32)


def balanced_index(key: jax.Array, labels: np.ndarray) -> np.ndarray:
  """Rows of a class-balanced subset of binary ``labels``, in a keyed random order.

  Keeps every row of the minority class and a uniformly random (keyed) sample of
  equal size from the majority class; the result is shuffled.
  """
  labels = np.asarray(labels)
  pos, neg = np.flatnonzero(labels == 1), np.flatnonzero(labels == 0)
  n = min(len(pos), len(neg))
  if n == 0:
    raise ValueError(f"labels: cannot balance, class counts are {len(neg)} (0) and "
                     f"{len(pos)} (1)")
  k_pos, k_neg, k_shuffle = jax.random.split(key, 3)
  pick = lambda k, rows: rows[np.sort(np.asarray(jax.random.permutation(k, len(rows)))[:n])] \
      if len(rows) > n else rows
  rows = np.concatenate([pick(k_pos, pos), pick(k_neg, neg)])
  return rows[np.asarray(jax.random.permutation(k_shuffle, len(rows)))]


def missing_value_columns(columns: dict[str, np.ndarray]) -> tuple[str, ...]:
  """Columns holding a missing value (``"?"`` or empty) in any row."""
  return tuple(n for n, v in columns.items() if np.isin(v, MISSING_VALUES).any())


def load_diabetes(key: jax.Array, data_dir: str | os.PathLike | None = None, *,
                  test_fraction: float = 0.25, drop_columns: Iterable[str] | str = (),
                  on_unknown: str = "warn",
                  path: str | os.PathLike | None = None,
                  vocabulary: str = "train") -> dict[str, TabularSplit]:
  """Loads a balanced readmission task from the original ``diabetic_data.csv``.

  Args:
    key: PRNG key for the balanced subset and the train/test split.
    data_dir: directory holding ``diabetes/diabetic_data.csv``; default
      ``$PATE_JAX_DATA_DIR``.
    test_fraction: fraction of the balanced subset held out as ``"test"``.
    drop_columns: further columns to leave out of the features.
    on_unknown: handling of categories unseen in the vocabulary's split ("warn",
      "ignore", "raise"); they are coded ``UNKNOWN_CODE``.
    path: the CSV itself, overriding ``data_dir``.
    vocabulary: the split whose values make the categorical vocabulary ("train" or
      "test": PATE's public split, so that no coding depends on the private rows, whose
      unseen values are then coded silently). The balanced subset, the split and the
      feature columns (those without missing values) are drawn from the whole file.

  Returns:
    ``{"train": TabularSplit, "test": TabularSplit}``; labels are 1 for
    readmission within 30 days. ``columns`` holds every raw column of the rows.

  Raises:
    FileNotFoundError: if the file is absent (the message says how to get it).
    ValueError: for a CSV without the ``readmitted`` column or with unknown
      label values, a bad ``test_fraction`` or ``drop_columns``.
  """
  if not 0.0 < test_fraction < 1.0:
    raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}")
  path = pathlib.Path(path) if path is not None else diabetes_path(data_dir)
  columns = read_csv(path)
  if DIABETES_LABEL not in columns:
    raise ValueError(f"{path}: no label column {DIABETES_LABEL!r} in the header "
                     f"{list(columns)}; expected the original diabetic_data.csv columns")
  header = list(columns)
  drop = check_drop_columns(drop_columns, header, DIABETES_LABEL, path)
  labels = readmitted_labels(columns[DIABETES_LABEL], source=str(path))
  with_missing = set(missing_value_columns(columns))
  names = [c for c in header if c != DIABETES_LABEL and c not in DIABETES_ID_COLUMNS
           and c not in drop and c not in with_missing]
  if not names:
    raise ValueError(f"{path}: no feature column without missing values remains")

  rows = balanced_index(jax.random.fold_in(key, 0), labels)
  num_test = int(round(test_fraction * len(rows)))
  if num_test == 0 or num_test == len(rows):
    raise ValueError(f"test_fraction={test_fraction} leaves an empty split of the "
                     f"{len(rows)} balanced rows")
  split_rows = {"train": rows[:len(rows) - num_test], "test": rows[len(rows) - num_test:]}
  unknown = {s: split_on_unknown(s, vocabulary, split_rows, on_unknown) for s in split_rows}
  split_cols = {s: {n: v[r] for n, v in columns.items()} for s, r in split_rows.items()}
  encoder = fit_encoder(split_cols[vocabulary], names)
  out = {}
  for s, r in split_rows.items():
    out[s] = TabularSplit(encode(encoder, split_cols[s], on_unknown=unknown[s]),
                          labels[r], encoder.feature_names, split_cols[s], encoder)
  return out
