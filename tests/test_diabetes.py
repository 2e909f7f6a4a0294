"""Tests for pate_jax.data.diabetes on a small synthetic diabetic_data.csv."""

from __future__ import annotations

import csv
import pathlib

import jax
import numpy as np
import pytest

from pate_jax.data import diabetes

# Columns that hold "?" somewhere in the real file (and in the synthetic one).
WITH_MISSING = ("race", "weight", "payer_code", "medical_specialty", "diag_1", "diag_2",
                "diag_3")


def _rows(n_pos=30, n_other=90):
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


def _ids(split):
  return split.columns["encounter_id"].astype(int)


def test_features_are_a_fixed_list_whatever_the_rows_hold(data_dir, tmp_path):
  """The label-free default keeps the fixed DIABETES_FEATURES (the file's columns less the
  identifiers, the label and the seven columns known to hold "?"), their kinds fixed too:
  a missing value in a kept column is coded, never an error nor a reason to drop it."""
  d = diabetes.load_diabetes(jax.random.key(0), data_dir, test_fraction=0.25, on_unknown="ignore")
  names = d["train"].feature_names
  expected = [c for c in diabetes.DIABETES_COLUMNS
              if c not in WITH_MISSING + diabetes.DIABETES_ID_COLUMNS + ("readmitted",)]
  assert list(names) == expected == list(diabetes.DIABETES_FEATURES) and len(names) == 40
  assert d["test"].feature_names == names
  assert set(diabetes.DIABETES_WITH_MISSING) == set(WITH_MISSING)
  voc = d["train"].encoder.vocab
  assert "time_in_hospital" not in voc and "age" in voc and "insulin" in voc
  assert voc["max_glu_serum"] == ("None",)  # "None" is a category, not a missing value.
  # "?" and "" in kept columns, numeric and categorical, of private and public rows alike.
  rows = _rows()
  for i in range(len(rows)):
    rows[i]["num_lab_procedures"] = ["?", ""][i % 2] if i % 7 == 0 else rows[i][
        "num_lab_procedures"]
    rows[i]["age"] = "?" if i % 11 == 0 else rows[i]["age"]
  holes = diabetes.load_diabetes(jax.random.key(0), path=_write(tmp_path / "h.csv", rows),
                                 on_unknown="raise", vocabulary="test")
  assert holes["train"].feature_names == names
  assert holes["train"].encoder.categorical == d["train"].encoder.categorical
  for split in ("train", "test"):
    ids, x = _ids(holes[split]), holes[split].features
    lab = x[:, names.index("num_lab_procedures")]
    np.testing.assert_array_equal(lab, np.where(ids % 7 == 0, tabular_unknown(), 40 + ids))
    assert (ids % 7 == 0).any()  # each split holds a missing number
  assert "?" in holes["test"].encoder.vocab["age"]  # a category of the public split


def tabular_unknown():
  from pate_jax.data import UNKNOWN_CODE  # pylint: disable=g-import-not-at-top
  return UNKNOWN_CODE


def test_the_paper_preparation_chooses_columns_and_a_balanced_subset_on_the_whole_file(
    tmp_path):
  """preparation="paper": the columns without a missing value anywhere in the file, and
  a balanced subset of the whole file (every "<30" row) cut into train / test."""
  path = _write(tmp_path / "p.csv", _rows(6, 14))
  d = diabetes.load_diabetes(jax.random.key(0), path=path, on_unknown="ignore",
                             preparation="paper")
  assert list(d["train"].feature_names) == list(diabetes.DIABETES_FEATURES)
  train, test = d["train"], d["test"]
  assert len(train) + len(test) == 12 and len(test) == 3
  labels = np.concatenate([train.labels, test.labels])
  assert labels.sum() == 6  # All six "<30" rows; six of the 14 others.
  ids = np.concatenate([_ids(train), _ids(test)])
  assert len(set(ids)) == 12
  assert set(ids[labels == 1]) == set(range(6))
  np.testing.assert_array_equal(labels, (ids < 6).astype(int))  # Label is "<30".
  again = diabetes.load_diabetes(jax.random.key(0), path=path, on_unknown="ignore",
                                 preparation="paper")
  np.testing.assert_array_equal(again["train"].features, train.features)
  other = diabetes.load_diabetes(jax.random.key(1), path=path, on_unknown="ignore",
                                 preparation="paper")
  assert list(np.concatenate([_ids(other["train"]), _ids(other["test"])])) != list(ids)
  rows = _rows(6, 14)
  rows[9]["age"] = "?"  # one record's missing value drops the column for every record
  holes = diabetes.load_diabetes(jax.random.key(0), path=_write(tmp_path / "q.csv", rows),
                                 on_unknown="ignore", preparation="paper")
  assert "age" not in holes["train"].feature_names
  with pytest.raises(ValueError, match="preparation must be one of"):
    diabetes.load_diabetes(jax.random.key(0), path=path, preparation="balanced")


def test_the_label_free_split_is_blind_to_labels_and_its_public_split_balanced(tmp_path):
  """The default: the private split is the first 1 - test_fraction of a keyed permutation
  of all rows, whatever their labels; the public split is the rest, balanced by its own
  labels (every public row of the minority class kept)."""
  rows = _rows()
  d = diabetes.load_diabetes(jax.random.key(0), path=_write(tmp_path / "a.csv", rows),
                             vocabulary="test")
  train, test = d["train"], d["test"]
  assert len(train) == 120 - 30  # 30 = round(0.25 * 120) public rows, before balancing
  assert test.labels.sum() * 2 == len(test) > 0  # balanced by the public labels
  assert not set(_ids(train)) & set(_ids(test))
  public = sorted(set(range(120)) - set(_ids(train)))
  minority = [i for i in public if i < 30]  # "<30" rows are 0..29: the public minority
  assert len(minority) * 2 == len(test) and set(minority) <= set(_ids(test))
  assert train.labels.sum() == 30 - len(minority)  # the private split keeps its imbalance
  # Other labels, the same private rows: the split does not look at them.
  for row in rows:
    row["readmitted"] = "NO" if row["readmitted"] == "<30" else "<30"
  flipped = diabetes.load_diabetes(jax.random.key(0), path=_write(tmp_path / "b.csv", rows),
                                   vocabulary="test")
  np.testing.assert_array_equal(_ids(flipped["train"]), _ids(train))
  with pytest.raises(ValueError, match="public test split's labels: cannot balance"):
    only = [dict(r, readmitted="NO") for r in rows]
    diabetes.load_diabetes(jax.random.key(0), path=_write(tmp_path / "c.csv", only))


@pytest.mark.parametrize("change", ["label", "missing value"])
def test_one_private_record_changes_nothing_but_itself(tmp_path, change):
  """Replacing one private record (its label, or a missing value in a kept column) leaves
  the feature columns, the private and public rows and every teacher's partition as they
  were, but for that record: the preparation is outside no ε. (The paper's preparation
  would rebalance the file, or drop the column.)"""
  from pate_jax import rng, tabular  # pylint: disable=g-import-not-at-top
  from sklearn.tree import DecisionTreeClassifier  # pylint: disable=g-import-not-at-top
  rows = _rows()
  key = rng.stream(rng.root_key(0), "data_split")  # the tabular stage's streams
  teachers_key = rng.stream(rng.root_key(0), "teachers")

  def prepared(path):
    train, queries, _ = tabular.load_task(key, "diabetes", path)
    ensemble = tabular.fit_teachers(teachers_key, train.features, train.labels, 6,
                                    num_classes=tabular.NUM_CLASSES,
                                    estimator=DecisionTreeClassifier(), n_jobs=1)
    return train, queries, _ids(train)[ensemble.index]

  _write(tmp_path / "a" / "diabetes" / diabetes.DIABETES_FILE, rows)
  train, queries, parts = prepared(tmp_path / "a")
  record = int(next(i for i in _ids(train) if i >= 30))  # a private "NO" / ">30" row
  if change == "label":
    rows[record]["readmitted"] = "<30"
  else:
    rows[record]["num_lab_procedures"] = "?"
  _write(tmp_path / "b" / "diabetes" / diabetes.DIABETES_FILE, rows)
  train_b, queries_b, parts_b = prepared(tmp_path / "b")
  assert train_b.feature_names == train.feature_names
  np.testing.assert_array_equal(_ids(train_b), _ids(train))
  np.testing.assert_array_equal(_ids(queries_b), _ids(queries))
  np.testing.assert_array_equal(parts_b, parts)  # each teacher's rows, in their order
  np.testing.assert_array_equal(queries_b.features, queries.features)
  other = _ids(train) != record
  np.testing.assert_array_equal(train_b.features[other], train.features[other])
  np.testing.assert_array_equal(train_b.labels[other], train.labels[other])
  changed = (train_b.labels != train.labels) | (train_b.features != train.features).any(1)
  assert changed[~other].all()


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
  with pytest.raises(ValueError, match=r"1 row\(s\) hold a readmitted value other than") as e:
    diabetes.load_diabetes(jax.random.key(0), path=bad_label)
  assert "maybe" not in str(e.value)  # a private row's label is counted, never named
  good = _write(tmp_path / "c.csv", _rows())
  with pytest.raises(ValueError, match="test_fraction"):
    diabetes.load_diabetes(jax.random.key(0), path=good, test_fraction=1.0)
  with pytest.raises(ValueError, match="leaves an empty split of the 120 rows"):
    diabetes.load_diabetes(jax.random.key(0), path=good, test_fraction=0.001)
  no_age = _write(tmp_path / "d.csv", _rows(), [c for c in diabetes.DIABETES_COLUMNS if c != "age"])
  with pytest.raises(ValueError, match=r"feature columns \['age'\] not in the header"):
    diabetes.load_diabetes(jax.random.key(0), path=no_age)
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


@pytest.mark.slow
def test_the_stage_marks_the_votes_of_the_paper_preparation_not_releasable(data_dir, tmp_path):
  """The tabular stage on Diabetes: the label-free default's votes are releasable (their
  teachers' forests weight their classes on their own partitions); the paper
  preparation's votes.npz carries not_releasable, and the aggregate stage refuses them
  a secret-noise release, naming config.diabetes_preparation."""
  from pate_jax import experiment  # pylint: disable=g-import-not-at-top
  from pate_jax import votes as votes_lib  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import aggregate  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import tabular as tabular_stage  # pylint: disable=g-import-not-at-top
  configs = pathlib.Path(__file__).resolve().parent.parent / "configs"
  config = experiment.load_script(configs / "diabetes_rf.py").get_config("cpu")
  config.data_dir, config.n_jobs, config.num_pool = str(data_dir), 1, 6
  config.num_teachers, config.n_estimators = 3, 2
  config.student_n_estimators = config.baseline_n_estimators = 2
  config.query_counts, config.lnmax_gammas, config.gnmax_sigmas = [6], [1.0], [1.0]
  config.num_seeds, config.reference_pools, config.student_repeats = 1, 0, 1
  free = tabular_stage.run(config, tmp_path / "label_free")
  assert free["dataset"] == "diabetes" and free["num_train"] == 90
  assert "not_releasable" not in votes_lib.load_votes(tmp_path / "label_free")
  config.diabetes_preparation = "paper"
  paper = tabular_stage.run(config, tmp_path / "paper")
  assert paper["dataset"] == "diabetes-paper" and paper["num_train"] == 45
  assert votes_lib.load_votes(tmp_path / "paper")["not_releasable"] == (
      tabular_stage.not_releasable(config))
  agg = experiment.load_script(configs / "aggregate_mnist.py").get_config("cpu")
  agg.votes_dir, agg.num_queries, agg.query_selection = str(tmp_path / "paper"), 6, "first"
  agg.mechanism, agg.privacy_plot, agg.epsilon_max = "gnmax", False, 50.0
  agg.budget_registry = str(tmp_path / "registry")
  with pytest.raises(ValueError, match=r"secret noise .*config.diabetes_preparation='paper'"):
    aggregate.run(agg, tmp_path / "labels")
