"""Tests for the original UCI Adult files (adult.data / adult.test) as a tabular task.

The files are written here in the UCI format (no header, ", " separators, a
"|1x3 Cross validator" first line and "." after the labels in adult.test, "?" for
missing categories); no real data is used.
"""

from __future__ import annotations

import pathlib
import warnings

import jax
import numpy as np
import pytest

from pate_jax import data, experiment, tabular
from pate_jax.data import UNKNOWN_CODE

REPO = pathlib.Path(__file__).resolve().parent.parent

TRAIN = [
    "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, "
    "Male, 2174, 0, 40, United-States, <=50K",
    "50, Self-emp-not-inc, 83311, Bachelors, 13, Married-civ-spouse, Exec-managerial, Husband, "
    "White, Male, 0, 0, 13, United-States, >50K",
    "38, ?, 215646, HS-grad, 9, Divorced, ?, Not-in-family, Black, Female, 0, 0, 40, ?, <=50K",
]
TEST = [
    "25, Private, 226802, 11th, 7, Never-married, Machine-op-inspct, Own-child, Black, Male, "
    "0, 0, 40, United-States, <=50K.",
    "44, State-gov, 160323, Doctorate, 16, Married-civ-spouse, Prof-specialty, Husband, White, "
    "Male, 7688, 0, 40, Peru, >50K.",
]


def _write(root, train=TRAIN, test=TEST):
  d = root / "adult"
  d.mkdir(parents=True, exist_ok=True)
  (d / "adult.data").write_text("\n".join(train) + "\n\n")
  (d / "adult.test").write_text("|1x3 Cross validator\n" + "\n".join(test) + "\n")
  return root


def test_reads_uci_format_and_codes_13_features(tmp_path):
  with pytest.warns(UserWarning, match="not in the training vocabulary"):
    s = data.load_uci_adult(_write(tmp_path))
  train, test = s["train"], s["test"]
  names = [c for c in data.UCI_ADULT_COLUMNS if c != "fnlwgt"]
  assert train.feature_names == tuple(names) and len(names) == 13
  assert train.features.shape == (3, 13) and test.features.shape == (2, 13)
  np.testing.assert_array_equal(train.labels, [0, 1, 0])
  np.testing.assert_array_equal(test.labels, [0, 1])  # "<=50K." / ">50K."
  col = {n: j for j, n in enumerate(names)}
  # Sorted training vocabulary; "?" is a category ("?" < "Self-emp-not-inc" < "State-gov").
  np.testing.assert_array_equal(train.features[:, col["workclass"]], [2, 1, 0])
  np.testing.assert_array_equal(train.features[:, col["native_country"]], [1, 1, 0])
  # "Private", "11th", "Doctorate", "Peru" ... are not in adult.data: unknown code.
  np.testing.assert_array_equal(test.features[:, col["workclass"]], [UNKNOWN_CODE, 2])
  np.testing.assert_array_equal(test.features[:, col["native_country"]], [1, UNKNOWN_CODE])
  np.testing.assert_array_equal(test.features[:, col["age"]], [25, 44])
  np.testing.assert_array_equal(test.features[:, col["education_num"]], [7, 16])
  np.testing.assert_array_equal(test.features[:, col["capital_gain"]], [0, 7688])
  assert test.columns["fnlwgt"].tolist() == ["226802", "160323"]  # raw column kept


def test_drop_education_num_keeps_fnlwgt(tmp_path):
  with pytest.warns(UserWarning):
    s = data.load_uci_adult(_write(tmp_path), drop_columns=("education_num",))
  names = s["train"].feature_names
  assert "fnlwgt" in names and "education_num" not in names and len(names) == 13
  np.testing.assert_array_equal(s["train"].features[:, names.index("fnlwgt")],
                                [77516, 83311, 215646])


def test_bad_files_are_clear_errors(tmp_path):
  with pytest.raises(FileNotFoundError, match="adult.data"):
    data.load_uci_adult(tmp_path)
  _write(tmp_path, train=TRAIN + ["41, Private, 1, HS-grad, 9"])
  with pytest.raises(ValueError, match=r"adult.data:4: expected 15"):
    data.load_uci_adult(tmp_path)
  _write(tmp_path, train=[TRAIN[0].replace("<=50K", "maybe")])
  with pytest.raises(ValueError, match="unknown income label"):
    data.load_uci_adult(tmp_path)
  _write(tmp_path)
  with pytest.raises(ValueError, match="drop_columns"):
    data.load_uci_adult(tmp_path, drop_columns=("nonsense",))


def test_load_task_and_config(tmp_path):
  _write(tmp_path)
  with warnings.catch_warnings():  # the public test split's vocabulary: nothing is named
    warnings.simplefilter("error")
    train, queries, name = tabular.load_task(jax.random.key(0), "adult_uci", tmp_path,
                                             drop_columns=["fnlwgt"])
  assert name == "adult_uci-nofnlwgt" and len(train) == 3 and len(queries) == 2
  col = train.feature_names.index("workclass")  # test: Private < State-gov; "?" and
  np.testing.assert_array_equal(queries.features[:, col], [0, 1])  # Self-emp-not-inc of
  np.testing.assert_array_equal(train.features[:, col], [1, UNKNOWN_CODE, UNKNOWN_CODE])
  with pytest.raises(ValueError, match="only a 'test' split"):
    tabular.load_task(jax.random.key(0), "adult_uci", tmp_path, query_split="attack")
  load = experiment.load_script(REPO / "configs" / "adult_uci_rf.py").get_config
  c = load(None)
  assert (c.dataset, c.drop_columns, c.num_teachers, c.num_pool) == ("adult_uci", "fnlwgt",
                                                                     250, 500)
  assert load("cpu,noeducationnum").drop_columns == "education_num"
  assert load("cpu").num_teachers == 25
  with pytest.raises(ValueError, match="unknown or conflicting argument"):
    load("noeducation")
  with pytest.raises(ValueError, match="unknown or conflicting argument"):
    load("noeducationnum,coarse")
  coarse = load("coarse")
  assert coarse.coarsen and coarse.drop_columns == "fnlwgt,education_num,native_country"
  assert not c.coarsen
  c.data_dir, c.num_teachers, c.num_pool = str(tmp_path), 2, 1
  plan = experiment.load_script(REPO / "experiments" / "tabular.py").plan(c)
  assert (plan["task"], plan["train_rows"], plan["query_rows"], plan["features"]) == (
      "adult_uci-nofnlwgt", 3, 2, 13)


def test_coarsen_merges_categories_as_the_offline_copy(tmp_path):
  _write(tmp_path)
  drop = ("fnlwgt", "education_num", "native_country")
  with pytest.warns(UserWarning):
    s = data.load_uci_adult(tmp_path, drop_columns=drop, coarsen=True)
  train, test = s["train"], s["test"]
  assert train.feature_names == ("age", "workclass", "education", "marital_status",
                                 "occupation", "relationship", "race", "gender",
                                 "capital_gain", "capital_loss", "hours_per_week")
  assert train.columns["workclass"].tolist() == ["Government", "Self-Employed",
                                                 "Other/Unknown"]
  assert train.columns["marital_status"].tolist() == ["Single", "Married", "Divorced"]
  assert train.columns["occupation"].tolist() == ["White-Collar", "White-Collar",
                                                  "Other/Unknown"]
  col = train.feature_names.index("workclass")
  # Sorted merged vocabulary: Government < Other/Unknown < Self-Employed; the test split's
  # "State-gov" is now known (Government), "Private" still is not.
  np.testing.assert_array_equal(train.features[:, col], [0, 2, 1])
  np.testing.assert_array_equal(test.features[:, col], [UNKNOWN_CODE, 0])
  assert test.columns["education"].tolist() == ["School", "Doctorate"]  # "11th" -> School
  _, _, name = tabular.load_task(jax.random.key(0), "adult_uci", tmp_path,
                                 drop_columns=list(drop), coarsen=True)
  assert name == "adult_uci-coarse-nofnlwgt-noeducation_num-nonative_country"
  with pytest.raises(ValueError, match="coarsen: only for dataset 'adult_uci'"):
    tabular.load_task(jax.random.key(0), "adult", tmp_path, coarsen=True)


def test_random_pools_score_each_pool_on_the_other_rows():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(60, 3))
  y = (x[:, 0] + 0.3 * rng.normal(size=60) > 0).astype(int)
  tree = tabular.random_forest(5)
  key = jax.random.key(3)
  acc = tabular.random_pool_accuracies(key, tree, x, y, num_pool=20, num_pools=4,
                                       random_state=1, n_jobs=1)
  assert acc.shape == (4,) and len(set(acc.tolist())) > 1  # the pools differ
  for k in (0, 3):
    order = np.asarray(jax.random.permutation(jax.random.fold_in(key, k), 60))
    pool, rest = order[:20], order[20:]
    assert acc[k] == tabular.fit_and_score(tree, 1, x[pool], y[pool], x[rest], y[rest])
  with pytest.raises(ValueError, match="num_pool must lie in"):
    tabular.random_pool_accuracies(key, tree, x, y, num_pool=60, num_pools=1, random_state=0)
  with pytest.raises(ValueError, match="num_pools must be >= 1"):
    tabular.random_pool_accuracies(key, tree, x, y, num_pool=5, num_pools=0, random_state=0)
