"""UCI Diabetes 130-US hospitals (1999–2008) from the original ``diabetic_data.csv``.

Papernot et al. (2017), Appendix C, predict readmission within 30 days: class 1
is ``readmitted == "<30"``, class 0 is ``">30"`` or ``"NO"``; they keep only the
features without missing values and balance the two classes. Two preparations
(``preparation``):

* ``"label_free"`` (the default): nothing about the rows decides which rows are private or
  which columns are features. The features are a fixed list, :data:`DIABETES_FEATURES`:
  every column of the published file except the identifiers (``encounter_id``,
  ``patient_nbr``), the label and the columns known to hold missing values in the
  published file (:data:`DIABETES_WITH_MISSING`, the paper's "features without missing
  values"), less ``drop_columns``; their kinds are fixed too
  (:data:`DIABETES_NUMERIC`, the rest categorical). A missing value (``"?"`` or empty)
  a kept column still holds is coded as any other value: a category of a categorical
  column, :data:`pate_jax.data.UNKNOWN_CODE` in a numeric one (never an error: one that
  fired on a private row would tell of it). The rows are cut by a keyed permutation of all
  of them, blind to their labels: the first ``1 - test_fraction`` of them are ``"train"``
  (PATE's private data, partitioned among the teachers), the rest are the public split,
  which is then class-balanced by its own labels (all its rows of the minority class and
  an equal keyed sample of the other, shuffled): public rows whose labels serve the
  evaluation, as in the paper. The training split keeps the file's imbalance (about 11 %
  of the encounters are readmitted within 30 days); a teacher can weight its classes on
  its own partition (a forest's ``class_weight="balanced"``), which is part of its
  training and so inside the ε. One record's label or missing value then changes that
  record and nothing else: not the columns, not which rows are private, not which
  teacher holds which row, and, coded with the public split's vocabulary
  (``vocabulary="test"``, as the tabular stage asks), not the other rows' codes (with the
  default ``"train"``, a private record's new category moves every row's code).
* ``"paper"``: the paper's preparation, chosen from the data. The features are the
  columns without a missing value anywhere in the file, their kinds whether their values
  parse as numbers; a class-balanced subset of the whole file (all rows of the minority
  class and an equally large keyed sample of the majority, shuffled) is cut into train /
  test. Both look at private rows: one record's label changes the subset's size and
  members, and so every teacher's partition and the public split; one record's missing
  value changes the columns. An ε of teachers trained on it holds for the data as
  prepared, not for the file: a research measurement only (the tabular stage marks its
  votes so that no secret-noise release is drawn from them).

Categorical values are coded as integers learned on the split ``vocabulary`` (unseen
ones coded :data:`pate_jax.data.UNKNOWN_CODE`). The paper's exact feature subset and
split sizes are not recoverable from the text copy in ``shared/papers``, so they may
differ from the published ones.

The privacy unit is a row (an encounter): rows, not patients, are split and later
partitioned among the teachers, so a patient with several encounters (``patient_nbr``) may
sit in several teachers' partitions and in the public split, and an ε of teachers trained
on this task is per encounter, not per patient.

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
# The columns of the published file known to hold a missing value ("?"); the paper keeps
# the features without missing values.
DIABETES_WITH_MISSING = ("race", "weight", "payer_code", "medical_specialty", "diag_1",
                         "diag_2", "diag_3")
# The label-free preparation's features, fixed: never chosen by looking at the rows.
DIABETES_FEATURES = tuple(c for c in DIABETES_COLUMNS
                          if c not in DIABETES_ID_COLUMNS + (DIABETES_LABEL,)
                          + DIABETES_WITH_MISSING)
# Those of them that are numbers (counts, and the admission and discharge ids, which the
# paper's integer coding keeps as numbers); the rest are categorical.
DIABETES_NUMERIC = (
    "admission_type_id", "discharge_disposition_id", "admission_source_id",
    "time_in_hospital", "num_lab_procedures", "num_procedures", "num_medications",
    "number_outpatient", "number_emergency", "number_inpatient", "number_diagnoses",
)
# load_diabetes's preparations; LABEL_CHOSEN: those that look at the private rows.
PREPARATIONS = ("label_free", "paper")
LABEL_CHOSEN = ("paper",)
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
  unknown = ~np.isin(values, np.asarray(DIABETES_READMITTED, np.str_))
  if unknown.any():  # The values are private rows' labels: counted, never named.
    raise ValueError(f"{source}: {int(unknown.sum())} row(s) hold a readmitted value "
                     f"other than {list(DIABETES_READMITTED)}")
  return (values == "<30").astype(np.int32)


def balanced_index(key: jax.Array, labels: np.ndarray, *, name: str = "labels"
                   ) -> np.ndarray:
  """Rows of a class-balanced subset of binary ``labels``, in a keyed random order.

  Keeps every row of the minority class and a uniformly random (keyed) sample of
  equal size from the majority class; the result is shuffled. ``name``: the labels'
  name in the error.
  """
  labels = np.asarray(labels)
  pos, neg = np.flatnonzero(labels == 1), np.flatnonzero(labels == 0)
  n = min(len(pos), len(neg))
  if n == 0:
    raise ValueError(f"{name}: cannot balance, class counts are {len(neg)} (0) and "
                     f"{len(pos)} (1)")
  k_pos, k_neg, k_shuffle = jax.random.split(key, 3)
  pick = lambda k, rows: rows[np.sort(np.asarray(jax.random.permutation(k, len(rows)))[:n])] \
      if len(rows) > n else rows
  rows = np.concatenate([pick(k_pos, pos), pick(k_neg, neg)])
  return rows[np.asarray(jax.random.permutation(k_shuffle, len(rows)))]


def missing_value_columns(columns: dict[str, np.ndarray]) -> tuple[str, ...]:
  """Columns holding a missing value (``"?"`` or empty) in any row."""
  return tuple(n for n, v in columns.items() if np.isin(v, MISSING_VALUES).any())


def label_free_rows(key: jax.Array, num_rows: int, test_fraction: float
                    ) -> tuple[np.ndarray, np.ndarray]:
  """``(train, test)`` rows of a keyed permutation of ``num_rows`` rows, blind to them:
  ``train`` its first ``num_rows - round(test_fraction * num_rows)``, ``test`` the rest.

  Raises:
    ValueError: a split would be empty.
  """
  num_test = int(round(test_fraction * num_rows))
  if num_test == 0 or num_test == num_rows:
    raise ValueError(f"test_fraction={test_fraction} leaves an empty split of the "
                     f"{num_rows} rows")
  rows = np.asarray(jax.random.permutation(key, num_rows))
  return rows[:num_rows - num_test], rows[num_rows - num_test:]


def load_diabetes(key: jax.Array, data_dir: str | os.PathLike | None = None, *,
                  test_fraction: float = 0.25, drop_columns: Iterable[str] | str = (),
                  on_unknown: str = "warn",
                  path: str | os.PathLike | None = None,
                  vocabulary: str = "train",
                  preparation: str = "label_free") -> dict[str, TabularSplit]:
  """Loads the readmission task from the original ``diabetic_data.csv``.

  Args:
    key: PRNG key of the split (``"label_free"``: the permutation of all rows and the
      public split's balanced sample; ``"paper"``: the balanced subset and its split).
    data_dir: directory holding ``diabetes/diabetic_data.csv``; default
      ``$PATE_JAX_DATA_DIR``.
    test_fraction: fraction held out as ``"test"``: of all rows (``"label_free"``, before
      the test split is balanced), or of the balanced subset (``"paper"``).
    drop_columns: further columns to leave out of the features.
    on_unknown: handling of categories unseen in the vocabulary's split ("warn",
      "ignore", "raise"); they are coded ``UNKNOWN_CODE``.
    path: the CSV itself, overriding ``data_dir``.
    vocabulary: the split whose values make the categorical vocabulary ("train" or
      "test": PATE's public split, so that no coding depends on the private rows, whose
      unseen values are then coded silently).
    preparation: ``"label_free"`` (the module docstring: fixed columns, a split blind to
      the rows, the public split balanced by its own labels) or ``"paper"`` (columns
      without missing values and a balanced subset, both chosen on the whole file,
      private rows included: outside any ε).

  Returns:
    ``{"train": TabularSplit, "test": TabularSplit}``; labels are 1 for
    readmission within 30 days. ``columns`` holds every raw column of the rows.

  Raises:
    FileNotFoundError: if the file is absent (the message says how to get it).
    ValueError: for a CSV without the ``readmitted`` column, with unknown label values
      or (``"label_free"``) without a column of :data:`DIABETES_FEATURES`, a public split
      without both classes, a bad ``test_fraction``, ``drop_columns`` or ``preparation``.
  """
  if preparation not in PREPARATIONS:
    raise ValueError(f"preparation must be one of {PREPARATIONS}, got {preparation!r}")
  if not 0.0 < test_fraction < 1.0:
    raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}")
  path = pathlib.Path(path) if path is not None else diabetes_path(data_dir)
  columns = read_csv(path)
  if DIABETES_LABEL not in columns:
    raise ValueError(f"{path}: no label column {DIABETES_LABEL!r} in the header "
                     f"{list(columns)}; expected the original diabetic_data.csv columns")
  header = list(columns)
  drop = check_drop_columns(drop_columns, header, DIABETES_LABEL, path)
  absent = [c for c in DIABETES_FEATURES if c not in columns]
  if preparation == "label_free" and absent:
    raise ValueError(f"{path}: feature columns {absent} not in the header {header}; "
                     "expected the original diabetic_data.csv columns")
  labels = readmitted_labels(columns[DIABETES_LABEL], source=str(path))
  if preparation == "label_free":
    names = [c for c in DIABETES_FEATURES if c not in drop]
    train, test = label_free_rows(jax.random.fold_in(key, 1), len(labels), test_fraction)
    # The public split, balanced by its own (public) labels.
    test = test[balanced_index(jax.random.fold_in(key, 2), labels[test],
                               name="the public test split's labels")]
    split_rows = {"train": train, "test": test}
    kinds = {"numeric": [c for c in names if c in DIABETES_NUMERIC],
             "categorical": [c for c in names if c not in DIABETES_NUMERIC],
             "missing": MISSING_VALUES}
  else:
    with_missing = set(missing_value_columns(columns))
    names = [c for c in header if c != DIABETES_LABEL and c not in DIABETES_ID_COLUMNS
             and c not in drop and c not in with_missing]
    rows = balanced_index(jax.random.fold_in(key, 0), labels)
    num_test = int(round(test_fraction * len(rows)))
    if num_test == 0 or num_test == len(rows):
      raise ValueError(f"test_fraction={test_fraction} leaves an empty split of the "
                       f"{len(rows)} balanced rows")
    split_rows = {"train": rows[:len(rows) - num_test], "test": rows[len(rows) - num_test:]}
    kinds = {}
  if not names:
    raise ValueError(f"{path}: no feature column remains (drop_columns "
                     f"{list(drop)}, preparation {preparation!r})")
  unknown = {s: split_on_unknown(s, vocabulary, split_rows, on_unknown) for s in split_rows}
  split_cols = {s: {n: v[r] for n, v in columns.items()} for s, r in split_rows.items()}
  encoder = fit_encoder(split_cols[vocabulary], names, **kinds)
  out = {}
  for s, r in split_rows.items():
    out[s] = TabularSplit(encode(encoder, split_cols[s], on_unknown=unknown[s]),
                          labels[r], encoder.feature_names, split_cols[s], encoder)
  return out
