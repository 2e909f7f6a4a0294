"""Tests for pate_jax.data.adult: coding, drop_columns, bad files, and the real split."""

from __future__ import annotations

import csv

import jax
import numpy as np
import pytest

from pate_jax import tabular
from pate_jax.data import adult

HEADER = ["age", "workclass", "education", "marital_status", "relationship", "occupation",
          "race", "gender", "capital_gain", "capital_loss", "hours_per_week", "income"]
ROW = ["39", "Private", "Bachelors", "Married", "Husband", "Sales", "White", "Male", "0", "0",
       "40", "0"]


def _row(**changes):
  row = dict(zip(HEADER, ROW))
  row.update({k: str(v) for k, v in changes.items()})
  return [row[h] for h in HEADER]


def _write(path, rows, header=HEADER):
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(header)
    w.writerows(rows)


@pytest.fixture
def data_dir(tmp_path):
  train = [_row(), _row(age=50, workclass="Government", education="Doctorate", income=1),
           _row(gender="Female", relationship="Wife", capital_gain=5000, income=1),
           _row(education="School", occupation="Blue-Collar")]
  test = [_row(workclass="Never-seen", income=1), _row(education="Doctorate")]
  _write(tmp_path / "adult" / "train.csv", train)
  _write(tmp_path / "adult" / "test.csv", test)
  return tmp_path


def test_codes_from_training_vocabulary(data_dir):
  d = adult.load_adult(data_dir, splits=("train",))
  train = d["train"]
  assert train.feature_names == tuple(HEADER[:-1])
  assert train.features.shape == (4, 11) and train.features.dtype == np.float32
  np.testing.assert_array_equal(train.labels, [0, 1, 1, 0])
  voc = train.encoder.vocab
  assert voc["education"] == ("Bachelors", "Doctorate", "School")
  assert voc["workclass"] == ("Government", "Private")
  assert set(voc) == set(adult.ADULT_CATEGORICAL)
  j = train.feature_names.index
  np.testing.assert_array_equal(train.features[:, j("education")], [0, 1, 0, 2])
  np.testing.assert_array_equal(train.features[:, j("age")], [39, 50, 39, 39])
  np.testing.assert_array_equal(train.features[:, j("capital_gain")], [0, 0, 5000, 0])


def test_unknown_category_in_test_split_is_coded_not_fatal(data_dir):
  with pytest.warns(UserWarning, match=r"column 'workclass'.*'Never-seen'"):
    d = adult.load_adult(data_dir, splits=("train", "test"))
  test = d["test"]
  j = test.feature_names.index("workclass")
  np.testing.assert_array_equal(test.features[:, j], [tabular.UNKNOWN_CODE, 1])
  with pytest.raises(ValueError, match="Never-seen"):
    adult.load_adult(data_dir, splits=("test",), on_unknown="raise")


def test_drop_columns_keeps_raw_column(data_dir):
  d = adult.load_adult(data_dir, splits=("train",), drop_columns=("education",))
  train = d["train"]
  assert "education" not in train.feature_names and len(train.feature_names) == 10
  assert train.features.shape == (4, 10)
  np.testing.assert_array_equal(train.columns["education"] == adult.ADULT_DOCTORATE,
                                [False, True, False, False])
  same = adult.load_adult(data_dir, splits=("train",), drop_columns="education")["train"]
  np.testing.assert_array_equal(same.features, train.features)
  with pytest.raises(ValueError, match=r"drop_columns: \['degree'\] not among the columns"):
    adult.load_adult(data_dir, drop_columns=["degree"])
  with pytest.raises(ValueError, match="cannot drop the label column 'income'"):
    adult.load_adult(data_dir, drop_columns=["income"])


def test_csv_without_label_column_is_a_clear_error(tmp_path):
  _write(tmp_path / "adult" / "train.csv", [r[:-1] for r in [_row()]], header=HEADER[:-1])
  with pytest.raises(ValueError, match=r"train.csv: no label column 'income'"):
    adult.load_adult(tmp_path)


def test_encode_rows_without_labels_at_prediction_time(data_dir):
  enc = adult.load_adult(data_dir, splits=("train",))["train"].encoder
  cols = {h: np.array([v]) for h, v in zip(HEADER[:-1], _row(race="Martian")[:-1])}
  with pytest.warns(UserWarning, match="Martian"):
    split = adult.encode_adult(enc, cols)
  np.testing.assert_array_equal(split.labels, [-1])
  assert split.features[0, enc.feature_names.index("race")] == tabular.UNKNOWN_CODE


def test_income_spellings():
  np.testing.assert_array_equal(adult.parse_income(np.array(["<=50K", ">50K.", "1", "0"])),
                                [0, 1, 1, 0])
  with pytest.raises(ValueError, match="unknown income label '50K'"):
    adult.parse_income(np.array(["50K"]))


def test_missing_files_are_clear_errors(tmp_path, monkeypatch):
  monkeypatch.delenv("PATE_JAX_DATA_DIR", raising=False)
  with pytest.raises(FileNotFoundError, match="PATE_JAX_DATA_DIR"):
    adult.load_adult()
  with pytest.raises(FileNotFoundError, match=r"no file at .*adult/train.csv"):
    adult.load_adult(tmp_path)
  with pytest.raises(ValueError, match="unknown split 'dev'"):
    adult.load_adult(tmp_path, splits=("dev",))


# ----------------------------------------------------------------------------- real data

# The conftest's ``real_adult_dir`` looks where ``data_dir`` does ($PATE_JAX_DATA_DIR, else
# ../shared/data) and skips (fails under PATE_JAX_REQUIRE_DATA=1) without the files.


@pytest.mark.usefixtures("real_adult_dir")
def test_real_adult_matches_readme_counts():
  d = adult.load_adult(splits=adult.ADULT_SPLITS, drop_columns=("education",),
                       on_unknown="raise")  # The training vocabulary covers every split.
  # Rows, Doctorate holders and income=1 per split (shared/data/README.md).
  expected = {"train": (32_724, 393, 7_830), "test": (8_059, 112, 1_929),
              "attack": (8_059, 89, 1_928)}
  for s, (rows, phd, rich) in expected.items():
    split = d[s]
    assert split.features.shape == (rows, 10)
    assert int((split.columns["education"] == adult.ADULT_DOCTORATE).sum()) == phd
    assert int(split.labels.sum()) == rich
    assert np.isfinite(split.features).all()


@pytest.mark.usefixtures("real_adult_dir")
def test_real_adult_small_forest_ensemble_beats_majority_class():
  d = adult.load_adult(splits=("train", "test"))
  train, test = d["train"], d["test"]
  ens = tabular.fit_teachers(jax.random.key(0), train.features, train.labels, 10,
                             num_classes=tabular.NUM_CLASSES,
                             estimator=tabular.random_forest(5), n_jobs=1)
  votes, _ = tabular.teacher_votes(ens, test.features[:2000], n_jobs=1)
  accuracy = np.mean(votes.argmax(axis=1) == test.labels[:2000])
  majority = 1.0 - test.labels[:2000].mean()  # About 0.76.
  assert accuracy > majority + 0.05
