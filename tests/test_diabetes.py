"""Tests for pate_jax.data.diabetes on a small synthetic diabetic_data.csv."""

from __future__ import annotations

import csv

import jax
import numpy as np
import pytest

from pate_jax.data import diabetes

# Columns that hold "?" somewhere in the real file (and in the synthetic one).
WITH_MISSING = ("race", "weight", "payer_code", "medical_specialty", "diag_1", "diag_2",
                "diag_3")


def _rows(n_pos=6, n_other=14):
  """Synthetic rows with the original columns; row i's encounter_id is i."""
  readmitted = ["<30"] * n_pos + [">30", "NO"] * (n_other // 2)
  rows = []
  for i, r in enumerate(readmitted):
    row = {c: "No" for c in diabetes.DIABETES_COLUMNS}
    row.update({
        "encounter_id": str(i), "patient_nbr": str(1000 + i), "race": "Caucasian",
        "gender": ["Female", "Male"][i % 2], "age": f"[{10 * (i % 9)}-{10 * (i % 9) + 10})",
        "weight": "?", "admission_type_id": str(1 + i % 3), "discharge_disposition_id": "1",
        "admission_source_id": "7", "time_in_hospital": str(1 + i % 10), "payer_code": "MC",
        "medical_specialty": "?" if i % 4 else "Cardiology", "num_lab_procedures": str(40 + i),
        "num_procedures": str(i % 4), "num_medications": str(10 + i), "number_outpatient": "0",
        "number_emergency": "0", "number_inpatient": str(i % 2), "diag_1": "250.83",
        "diag_2": "?" if i % 5 == 0 else "276", "diag_3": "255", "number_diagnoses": "9",
        "max_glu_serum": "None", "A1Cresult": [">7", "None", "Norm"][i % 3],
        "insulin": ["Up", "Steady", "Down", "No"][i % 4], "change": "Ch",
        "diabetesMed": "Yes", "readmitted": r})
    rows.append(row)
  rows[3]["race"] = "?"
  rows[4]["payer_code"] = "?"
  rows[5]["diag_1"] = "?"
  rows[6]["diag_3"] = "?"
  return rows


def _write(path, rows, columns=diabetes.DIABETES_COLUMNS):
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
  return path


@pytest.fixture
def data_dir(tmp_path):
  _write(tmp_path / "diabetes" / diabetes.DIABETES_FILE, _rows())
  return tmp_path


def test_features_exclude_ids_label_and_missing_value_columns(data_dir):
  d = diabetes.load_diabetes(jax.random.key(0), data_dir, test_fraction=0.25, on_unknown="ignore")
  names = d["train"].feature_names
  expected = [c for c in diabetes.DIABETES_COLUMNS
              if c not in WITH_MISSING + diabetes.DIABETES_ID_COLUMNS + ("readmitted",)]
  assert list(names) == expected and len(names) == 40
  assert d["test"].feature_names == names
  voc = d["train"].encoder.vocab
  assert "time_in_hospital" not in voc and "age" in voc and "insulin" in voc
  assert voc["max_glu_serum"] == ("None",)  # "None" is a category, not a missing value.


def test_balanced_subset_keeps_all_positives(data_dir):
  d = diabetes.load_diabetes(jax.random.key(0), data_dir, test_fraction=0.25, on_unknown="ignore")
  train, test = d["train"], d["test"]
  assert len(train) + len(test) == 12 and len(test) == 3
  labels = np.concatenate([train.labels, test.labels])
  assert labels.sum() == 6  # All six "<30" rows; six of the 14 others.
  ids = np.concatenate([train.columns["encounter_id"], test.columns["encounter_id"]]).astype(int)
  assert len(set(ids)) == 12
  assert set(ids[labels == 1]) == set(range(6))
  np.testing.assert_array_equal(labels, (ids < 6).astype(int))  # Label is "<30".
  again = diabetes.load_diabetes(jax.random.key(0), data_dir, test_fraction=0.25, on_unknown="ignore")
  np.testing.assert_array_equal(again["train"].features, train.features)
  other = diabetes.load_diabetes(jax.random.key(1), data_dir, test_fraction=0.25, on_unknown="ignore")
  other_ids = np.concatenate([other["train"].columns["encounter_id"],
                              other["test"].columns["encounter_id"]])
  assert list(other_ids) != list(ids.astype(str))


def test_balanced_index_counts():
  labels = np.array([0] * 30 + [1] * 7)
  rows = diabetes.balanced_index(jax.random.key(3), labels)
  assert len(rows) == 14 and labels[rows].sum() == 7 and len(set(rows)) == 14
  with pytest.raises(ValueError, match="cannot balance"):
    diabetes.balanced_index(jax.random.key(3), np.zeros(5, int))


def test_missing_file_names_path_and_how_to_get_it(tmp_path, monkeypatch):
  with pytest.raises(FileNotFoundError) as err:
    diabetes.load_diabetes(jax.random.key(0), tmp_path)
  msg = str(err.value)
  assert str(tmp_path / "diabetes" / "diabetic_data.csv") in msg
  assert "PATE_JAX_DATA_DIR" in msg and "UCI" in msg
  monkeypatch.delenv("PATE_JAX_DATA_DIR", raising=False)
  with pytest.raises(FileNotFoundError, match="no data directory is set"):
    diabetes.load_diabetes(jax.random.key(0))


def test_bad_files_are_clear_errors(tmp_path):
  rows = _rows()
  no_label = _write(tmp_path / "a.csv", rows, diabetes.DIABETES_COLUMNS[:-1])
  with pytest.raises(ValueError, match="no label column 'readmitted'"):
    diabetes.load_diabetes(jax.random.key(0), path=no_label)
  rows[0]["readmitted"] = "maybe"
  bad_label = _write(tmp_path / "b.csv", rows)
  with pytest.raises(ValueError, match=r"unknown readmitted values \['maybe'\]"):
    diabetes.load_diabetes(jax.random.key(0), path=bad_label)
  good = _write(tmp_path / "c.csv", _rows())
  with pytest.raises(ValueError, match="test_fraction"):
    diabetes.load_diabetes(jax.random.key(0), path=good, test_fraction=1.0)
  with pytest.raises(ValueError, match="drop_columns"):
    diabetes.load_diabetes(jax.random.key(0), path=good, drop_columns=["bmi"])
  d = diabetes.load_diabetes(jax.random.key(0), path=good, drop_columns="gender,age")
  assert "gender" not in d["train"].feature_names and "age" in d["train"].columns


def test_the_tabular_task_codes_with_the_query_splits_vocabulary(tmp_path, recwarn):
  """tabular.load_task codes Diabetes with the public query split's vocabulary: a value only
  private (training) records hold is coded -1, silently, so that no private record changes
  how the queries are coded. Here every row holds its own insulin value."""
  from pate_jax import tabular  # pylint: disable=g-import-not-at-top
  rows = _rows()
  for i, row in enumerate(rows):
    row["insulin"] = f"v{i}"
  _write(tmp_path / "diabetes" / diabetes.DIABETES_FILE, rows)
  train, queries, name = tabular.load_task(jax.random.key(0), "diabetes", tmp_path)
  assert name == "diabetes" and len(train) and len(queries)
  column = train.feature_names.index("insulin")
  assert set(train.encoder.vocab["insulin"]) == set(queries.columns["insulin"])
  assert np.all(train.features[:, column] == -1) and np.all(queries.features[:, column] >= 0)
  assert not [w for w in recwarn if "insulin" in str(w.message) or "v1" in str(w.message)]
