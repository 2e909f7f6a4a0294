"""Tests for pate_jax.tabular: CSV coding and scikit-learn-style teacher ensembles."""

from __future__ import annotations

import csv
import json
import pathlib
import re
import warnings

import jax
import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier

from pate_jax import budget as budget_lib
from pate_jax import checkpoint
from pate_jax import experiment, reporting, tabular
from pate_jax import votes as votes_lib
from pate_jax.data._partition import partition_indices

import _scripts  # tests/_scripts.py  # pylint: disable=g-bad-import-order


def _write_csv(path, header, rows):
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(header)
    w.writerows(rows)
  return path


def _blobs(n=240, num_classes=3, seed=0):
  """Separable synthetic data: class c centred at 3c in every feature (test-only RNG)."""
  rng = np.random.default_rng(seed)
  y = np.arange(n) % num_classes
  x = (3.0 * y[:, None] + rng.normal(size=(n, 4))).astype(np.float32)
  return x, y


class RecordingEstimator:
  """Remembers its training rows; predicts the majority label it was fitted on."""

  def __init__(self, random_state=None):
    self.random_state = random_state

  def fit(self, x, y):
    self.x_, self.y_ = np.asarray(x), np.asarray(y)
    self.label_ = int(np.bincount(self.y_).argmax())
    return self

  def predict(self, x):
    return np.full(len(x), self.label_)


class WarningEstimator(RecordingEstimator):
  """Warns with a fact of its shard at fit and at predict, as scikit-learn's
  cross-validation does of a shard's smallest class."""

  def fit(self, x, y):
    warnings.warn(f"shard of {len(y)} rows, smallest class {np.bincount(y).min()}",
                  UserWarning)
    return super().fit(x, y)

  def predict(self, x):
    warnings.warn("predicted by a teacher", UserWarning)
    return super().predict(x)


# ----------------------------------------------------------------------------- coding


def test_read_csv_strips_and_checks_rows(tmp_path):
  p = _write_csv(tmp_path / "a.csv", ["a", "b"], [["1", " x "], ["2", "y"]])
  cols = tabular.read_csv(p)
  assert list(cols) == ["a", "b"]
  np.testing.assert_array_equal(cols["b"], ["x", "y"])
  bad = tmp_path / "bad.csv"
  bad.write_text("a,b\n1,2\n3\n")
  with pytest.raises(ValueError, match="line 3 has 1 fields"):
    tabular.read_csv(bad)
  with pytest.raises(FileNotFoundError, match="nope.csv"):
    tabular.read_csv(tmp_path / "nope.csv")


def test_encoder_codes_sorted_vocabulary_and_numbers():
  train = {"c": np.array(["b", "a", "c", "a"]), "n": np.array(["1.5", "2", "3", "-1"])}
  enc = tabular.fit_encoder(train, ["c", "n"])
  assert enc.vocab == {"c": ("a", "b", "c")}
  assert enc.categorical == ("c",)
  x = tabular.encode(enc, train)
  np.testing.assert_array_equal(x, [[1, 1.5], [0, 2], [2, 3], [0, -1]])
  assert x.dtype == np.float32


def test_encoder_unknown_category_gets_reserved_code():
  enc = tabular.fit_encoder({"c": np.array(["a", "b"])}, ["c"])
  new = {"c": np.array(["b", "zzz", "a", "0"])}
  with pytest.warns(UserWarning, match=r"column 'c': 2 value\(s\) not in the training"):
    x = tabular.encode(enc, new)
  np.testing.assert_array_equal(x[:, 0], [1, tabular.UNKNOWN_CODE, 0, tabular.UNKNOWN_CODE])
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    tabular.encode(enc, new, on_unknown="ignore")
  with pytest.raises(ValueError, match="zzz"):
    tabular.encode(enc, new, on_unknown="raise")


def test_encoder_rejects_bad_input():
  enc = tabular.fit_encoder({"n": np.array(["1", "2"]), "c": np.array(["x", "y"])},
                            ["n", "c"], categorical=["n"])
  assert enc.vocab["n"] == ("1", "2")  # Forced categorical.
  enc = tabular.fit_encoder({"n": np.array(["1", "2"])}, ["n"])
  with pytest.raises(ValueError, match="numeric in the training split.*'abc'"):
    tabular.encode(enc, {"n": np.array(["3", "abc"])})
  with pytest.raises(ValueError, match=r"feature columns \['n'\] are missing"):
    tabular.encode(enc, {"m": np.array(["3"])})
  with pytest.raises(ValueError, match="feature_names"):
    tabular.fit_encoder({"n": np.array(["1"])}, ["n", "q"])
  with pytest.raises(ValueError, match="on_unknown"):
    tabular.encode(enc, {"n": np.array(["1"])}, on_unknown="drop")


def test_encoder_codes_a_numeric_columns_missing_values_as_unknown():
  """A numeric column may hold the encoder's missing values ("?", ""), coded UNKNOWN_CODE
  in any split, without an error (one on a private row would tell of it); other text is
  still an error, and without missing values "?" is one too."""
  enc = tabular.fit_encoder({"n": np.array(["1", "?", "2"]), "c": np.array(["x", "?", ""])},
                            ["n", "c"], numeric=["n"], categorical=["c"], missing=("?", ""))
  assert enc.vocab == {"c": ("", "?", "x")} and enc.missing == ("?", "")
  x = tabular.encode(enc, {"n": np.array(["", "4", "?"]), "c": np.array(["x", "?", "y"])},
                     on_unknown="ignore")
  np.testing.assert_array_equal(x, [[tabular.UNKNOWN_CODE, 2], [4, 1],
                                    [tabular.UNKNOWN_CODE, tabular.UNKNOWN_CODE]])
  with pytest.raises(ValueError, match=r"'n' is numeric .*'abc' at row 1"):
    tabular.encode(enc, {"n": np.array(["?", "abc"]), "c": np.array(["x", "x"])})
  # A private split coded with a public vocabulary ("ignore"): never named in an error.
  x = tabular.encode(enc, {"n": np.array(["abc", "nan", "3", "inf"]),
                           "c": np.array(["x"] * 4)}, on_unknown="ignore")
  np.testing.assert_array_equal(x[:, 0], [tabular.UNKNOWN_CODE] * 2 + [3, tabular.UNKNOWN_CODE])
  with pytest.raises(ValueError, match="'n' must hold finite numbers; found '\\?' at row 1"):
    tabular.fit_encoder({"n": np.array(["1", "?"])}, ["n"], numeric=["n"])


# ----------------------------------------------------------------------------- teachers


def test_random_states_are_fold_in_bits():
  key = jax.random.key(3)
  seeds = tabular.random_states(key, 5)
  expected = [int(jax.random.bits(jax.random.fold_in(key, i), (), np.uint32)) for i in range(5)]
  np.testing.assert_array_equal(seeds, expected)
  assert len(set(seeds.tolist())) == 5
  assert seeds.min() >= 0 and seeds.max() < 2**32


def test_teachers_fit_their_own_disjoint_partition():
  x, y = _blobs(n=103)
  key = jax.random.key(0)
  ens = tabular.fit_teachers(key, x, y, 4, num_classes=3, estimator=RecordingEstimator,
                             n_jobs=1)
  part = partition_indices(jax.random.fold_in(key, 0), 103, 4)
  np.testing.assert_array_equal(ens.index, part.index)
  assert ens.dropped == 3 and ens.num_teachers == 4 and ens.num_classes == 3
  assert len(np.unique(ens.index)) == ens.index.size  # Disjoint.
  for t, teacher in enumerate(ens.teachers):
    np.testing.assert_array_equal(teacher.x_, x[ens.index[t]])
    np.testing.assert_array_equal(teacher.y_, y[ens.index[t]])
    assert teacher.random_state == ens.random_states[t]


def test_balanced_class_weights_are_each_teachers_own():
  """class_weight="balanced" weighs the classes on each teacher's own partition (part of
  its training, inside the ε): every teacher's tree sees its two classes with equal
  weight, though the partitions' class ratios differ (weights from the whole training
  set would not balance them)."""
  gen = np.random.default_rng(0)
  y = (np.arange(200) % 9 == 0).astype(int)  # 23 of 200 in class 1, as a rare readmission
  x = gen.normal(size=(200, 3)).astype(np.float32)
  forest = tabular.random_forest(1, bootstrap=False, max_features=None,
                                 class_weight="balanced")
  ens = tabular.fit_teachers(jax.random.key(1), x, y, 5, num_classes=2, estimator=forest,
                             n_jobs=1)
  shares = np.array([y[idx].mean() for idx in ens.index])
  assert len(set(shares.tolist())) > 1 and (shares > 0).all()
  whole = len(y) / (2 * np.bincount(y))  # the whole set's balanced weights
  for teacher, share in zip(ens.teachers, shares):
    np.testing.assert_allclose(teacher.estimators_[0].tree_.value[0, 0], [0.5, 0.5])
    on_whole = np.array([1 - share, share]) * whole
    assert not np.allclose(on_whole / on_whole.sum(), [0.5, 0.5])


def test_the_stages_forests_weight_classes_as_the_config_says():
  """The baseline and the teachers (fitted on the private rows) take config.class_weight;
  Adult's none (unchanged), Diabetes' "balanced"; the student none."""
  from pate_jax.stages import tabular as tabular_stage  # pylint: disable=g-import-not-at-top
  adult = tabular_stage.forests(_config("cpu"))
  assert {m.get_params()["class_weight"] for m in adult.values()} == {None}
  assert adult["teachers"].get_params() == tabular.random_forest(10).get_params()
  config = _load_by_path("configs", "diabetes_rf.py").get_config("cpu")
  weights = {k: m.get_params()["class_weight"] for k, m in
             tabular_stage.forests(config).items()}
  assert weights == {"baseline": "balanced", "teachers": "balanced", "student": None}
  config.class_weight = "inverse"
  with pytest.raises(ValueError, match="config.class_weight must be one of"):
    tabular_stage.forests(config)


def test_votes_are_histograms_of_predictions():
  x, y = _blobs()
  ens = tabular.fit_teachers(jax.random.key(1), x, y, 5, num_classes=3,
                             estimator=tabular.random_forest(5), n_jobs=1)
  votes, preds = tabular.teacher_votes(ens, x[:17], n_jobs=1)
  assert preds.shape == (5, 17) and votes.shape == (17, 3)
  assert votes.dtype == np.int32 and preds.dtype == np.int32
  np.testing.assert_array_equal(votes.sum(axis=1), 5)
  for q in range(17):
    np.testing.assert_array_equal(votes[q], np.bincount(preds[:, q], minlength=3))
  for t in range(5):
    np.testing.assert_array_equal(preds[t], ens.teachers[t].predict(x[:17]))
  # Separable classes: the plurality is right.
  np.testing.assert_array_equal(votes.argmax(axis=1), y[:17])


@pytest.mark.slow
def test_teachers_deterministic_in_key_not_in_n_jobs():
  x, y = _blobs()
  fit = lambda k, n: tabular.teacher_votes(
      tabular.fit_teachers(jax.random.key(k), x, y, 6, num_classes=3,
                           estimator=RandomForestClassifier(n_estimators=3, max_depth=2),
                           n_jobs=n), x, n_jobs=n)[1]
  serial, parallel, other = fit(7, 1), fit(7, 2), fit(8, 1)
  np.testing.assert_array_equal(serial, parallel)
  assert not np.array_equal(serial, other)


def test_prototype_is_cloned_and_seeded():
  proto = DecisionTreeClassifier(max_depth=1)
  model = tabular.make_estimator(proto, 123)
  assert model is not proto and model.random_state == 123 and model.max_depth == 1
  assert proto.random_state is None
  plain = RecordingEstimator()
  copy = tabular.make_estimator(plain, 5)  # No get_params: deep-copied as is.
  assert copy is not plain and copy.random_state is None
  assert tabular.make_estimator(None, 9).random_state == 9  # Default: a forest.
  with pytest.raises(ValueError, match="lacks fit/predict"):
    tabular.make_estimator(lambda s: object(), 0)
  with pytest.raises(ValueError, match="estimator must have fit/predict"):
    tabular.make_estimator(42, 0)


def test_fit_teachers_rejects_bad_input():
  x, y = _blobs(n=10)
  with pytest.raises(ValueError, match="num_teachers=11 is larger than the training set"):
    tabular.fit_teachers(jax.random.key(0), x, y, 11, num_classes=3, n_jobs=1)
  with pytest.raises(ValueError, match="num_teachers must be a positive int"):
    tabular.fit_teachers(jax.random.key(0), x, y, 0, num_classes=3, n_jobs=1)
  with pytest.raises(ValueError, match="labels must have shape"):
    tabular.fit_teachers(jax.random.key(0), x, y[:5], 2, num_classes=3, n_jobs=1)
  with pytest.raises(ValueError, match=r"labels must lie in \[0, num_classes=2\)"):
    tabular.fit_teachers(jax.random.key(0), x, y, 2, num_classes=2, n_jobs=1)
  with pytest.raises(ValueError, match="integer class ids"):
    tabular.fit_teachers(jax.random.key(0), x, y.astype(float), 2, num_classes=3, n_jobs=1)
  with pytest.raises(ValueError, match=r"features must have shape \[N, F\]"):
    tabular.fit_teachers(jax.random.key(0), x[:, 0], y, 2, num_classes=3, n_jobs=1)
  for bad in (0, 2.0, True):
    with pytest.raises(ValueError, match="num_classes must be a positive int"):
      tabular.fit_teachers(jax.random.key(0), x, y, 2, num_classes=bad, n_jobs=1)
  with pytest.raises(TypeError, match="num_classes"):  # the width is named, never counted
    tabular.fit_teachers(jax.random.key(0), x, y, 2, n_jobs=1)  # pylint: disable=missing-kwoa


def test_teacher_single_class_shard_and_out_of_range_predictions():
  x, y = _blobs(n=6, num_classes=3)
  ens = tabular.fit_teachers(jax.random.key(0), x, y, 6, num_classes=3,
                             estimator=RecordingEstimator,
                             n_jobs=1)  # One example per teacher.
  votes, _ = tabular.teacher_votes(ens, x, n_jobs=1)
  np.testing.assert_array_equal(votes, np.full((6, 3), 2))  # Each class held by 2 teachers.
  bad = ens._replace(num_classes=2)
  with pytest.raises(ValueError, match=r"outside \[0, num_classes=2\)"):
    tabular.predict_teachers(bad, x, n_jobs=1)


def test_votes_round_trip_through_votes_npz(tmp_path):
  x, y = _blobs(n=60, num_classes=2)
  ens = tabular.fit_teachers(jax.random.key(2), x, y, 3, num_classes=2,
                             estimator=tabular.random_forest(3), n_jobs=1)
  votes, _ = tabular.teacher_votes(ens, x, n_jobs=1)
  votes_lib.save_votes(tmp_path / "votes.npz", votes, y, num_pool=40, dataset="blobs")
  loaded = votes_lib.load_votes(tmp_path)
  np.testing.assert_array_equal(loaded["votes"], votes)
  assert loaded["num_teachers"] == 3 and loaded["num_pool"] == 40


def test_unknown_category_at_prediction_time_does_not_crash():
  train = {"c": np.array(["a", "b"] * 20), "n": np.arange(40).astype(str)}
  y = np.array([0, 1] * 20)
  enc = tabular.fit_encoder(train, ["c", "n"])
  ens = tabular.fit_teachers(jax.random.key(0), tabular.encode(enc, train), y, 4,
                             num_classes=2,
                             estimator=tabular.random_forest(3), n_jobs=1)
  with pytest.warns(UserWarning, match="not in the training vocabulary"):
    queries = tabular.encode(enc, {"c": np.array(["never-seen", "a"]), "n": np.array(["3", "4"])})
  votes, _ = tabular.teacher_votes(ens, queries, n_jobs=1)
  np.testing.assert_array_equal(votes.sum(axis=1), [4, 4])


# ----------------------------------------------------------------------------- experiment


def _adult_like(path, n, rng):
  """A synthetic CSV with Adult's columns; income depends on age and hours."""
  age = rng.integers(18, 80, n)
  hours = rng.integers(10, 70, n)
  income = ((age > 40) & (hours > 35)).astype(int)
  cats = {"workclass": ["Private", "Government"], "education": ["School", "Doctorate"],
          "marital_status": ["Married", "Single"], "relationship": ["Husband", "Wife"],
          "occupation": ["Sales", "Service"], "race": ["White", "Black"],
          "gender": ["Male", "Female"]}
  header = ["age", *cats, "capital_gain", "capital_loss", "hours_per_week", "income"]
  rows = [[a, *(v[rng.integers(2)] for v in cats.values()), 0, 0, h, y]
          for a, h, y in zip(age, hours, income)]
  path.parent.mkdir(parents=True, exist_ok=True)
  return _write_csv(path, header, rows)


def _load_by_path(*parts):
  """Imports a config or experiment script of this repository by path."""
  return experiment.load_script(pathlib.Path(__file__).resolve().parent.parent.joinpath(*parts))


def _config(arg):
  return _load_by_path("configs", "adult_rf.py").get_config(arg)


def _tiny_synthetic_task(data_dir: pathlib.Path, arg: str, seed: int = 0):
  """Synthetic Adult CSVs in ``data_dir`` (240 training rows, 90 queries) and ``arg``'s
  config scaled to them: 4 teachers of 3 trees, 3-tree students, a 40-row pool, one job."""
  rng = np.random.default_rng(seed)
  _adult_like(data_dir / "adult" / "train.csv", 240, rng)
  _adult_like(data_dir / "adult" / "test.csv", 90, rng)
  config = _config(arg)
  config.data_dir = str(data_dir)
  config.num_teachers, config.n_estimators, config.n_jobs = 4, 3, 1
  config.student_n_estimators = config.baseline_n_estimators = 3
  config.num_pool = 40
  return config


@pytest.mark.slow
def test_experiment_end_to_end_on_synthetic_adult(tmp_path, capsys):
  tabular_experiment = _load_by_path("experiments", "tabular.py")
  config = _tiny_synthetic_task(tmp_path / "data", "cpu,noeducation")
  config.query_counts = [20, 40]
  config.lnmax_gammas, config.gnmax_sigmas = [0.5, 1.0], [1.0, 2.0]
  config.num_seeds = 2
  work = tmp_path / "work"
  res = experiment.run_and_report(tabular_experiment.run, tabular_experiment.report, config,
                                  str(work))
  tail = capsys.readouterr().out.strip().splitlines()[-3:]  # the numbers, then the paths
  assert "LNMax labels" in tail[0] and "eps" in tail[0]
  assert tail[1] == f"results: {(work / 'results.json').resolve()}"
  assert tail[2] == f"figures: {(work / 'student_accuracy.png').resolve()}"
  for m in ("lnmax", "gnmax"):  # grid-edge flags
    assert isinstance(res[m]["epsilon_at_grid_edge"], list)
  assert res["dataset"] == "adult-noeducation" and "education" not in res["feature_names"]
  assert res["num_pool"] == 40 and res["num_eval"] == 50
  pools = res["reference_students"]["random_pools"]  # the cpu config's 3 random pools
  assert pools["num_pools"] == len(pools["accuracies"]) == 3
  assert pools["mean"] == pytest.approx(np.mean(pools["accuracies"]))
  assert 0 <= pools["below_first_pool"] <= 3 and pools["standard_error"] >= 0
  sweeps = res["sweeps"]
  assert sweeps["queries"]["num_queries"] == [20, 40]
  for m in ("lnmax", "gnmax"):
    # Equal where no query has enough consensus; compare up to float rounding.
    assert 0.0 < res[m]["epsilon_data_dependent"] <= (
        res[m]["epsilon_data_independent"] * (1 + 1e-12))
    assert 0.0 <= res[m]["student_accuracy"] <= 1.0
    # The prefix sweep (cumulative per-query costs) ends at the total of all queries.
    eps = sweeps["queries"][m]["epsilon"]
    assert eps[0] < eps[1] and eps[1] == pytest.approx(res[m]["epsilon_data_dependent"])
    assert len(sweeps["noise"][m]["student_accuracy_mean"]) == 2
  votes = votes_lib.load_votes(work)
  assert votes["votes"].shape == (90, 2) and votes["num_pool"] == 40
  assert votes["num_teachers"] == 4
  with np.load(work / "teacher_predictions.npz") as f:
    np.testing.assert_array_equal(votes_lib.histogram(f["predictions"], 2), votes["votes"])
  assert (work / "results.json").is_file() and (work / "student_accuracy.png").is_file()

  config.dataset = "diabetes"
  with pytest.raises(FileNotFoundError, match=r"diabetic_data.csv not found .*UCI"):
    tabular_experiment.run(config, tmp_path / "work_diabetes")


def _disclosure(workdir):
  return json.loads((workdir / "results.json").read_text())["disclosure"]


@pytest.mark.slow
def test_a_released_student_learns_from_the_aggregate_stages_labels_alone(tmp_path, capsys):
  """Teachers (this stage) -> the aggregate stage on their votes.npz (secret noise, the
  teachers' budget) -> student forests on the released labels (config.labels_dir):
  publishable, its labels those of labels.npz; labels of another task, or of a research
  seed, are refused or make it a measurement."""
  from pate_jax.stages import aggregate, tabular as tabular_stage  # pylint: disable=g-import-not-at-top
  config = _tiny_synthetic_task(tmp_path / "data", "cpu")
  config.query_counts = [40]
  config.lnmax_gammas, config.gnmax_sigmas, config.num_seeds = [1.0], [1.0], 1
  config.reference_pools, config.student_repeats = 0, 2
  teachers = tmp_path / "teachers"
  tabular_stage.run(config, teachers)

  def labels_run(name, **overrides):
    agg = _load_by_path("configs", "aggregate_mnist.py").get_config("cpu")
    agg.votes_dir, agg.num_queries, agg.query_selection = str(teachers), 30, "first"
    agg.mechanism, agg.privacy_plot, agg.epsilon_max = "gnmax", False, 50.0
    for k, v in overrides.items():
      setattr(agg, k, v)
    aggregate.run(agg, tmp_path / name)
    return tmp_path / name

  config.labels_dir = str(labels_run("labels"))
  res = experiment.run_and_report(tabular_stage.run, tabular_stage.report, config,
                                  str(tmp_path / "student"))
  released = np.load(tmp_path / "labels" / "labels.npz")
  assert res["released_student"] and res["num_asked"] == 30 and res["mechanism"] == "gnmax"
  assert res["num_answered"] == int(released["answered"].sum())
  assert res["epsilon"] == float(released["epsilon"]) and not res["noise_source"]["public"]
  assert res["label_accuracy_answered"] == pytest.approx(np.mean(
      released["labels"][released["answered"]] == released["true_labels"][released["answered"]]))
  assert len(res["student_accuracies"]) == 2 and 0 <= res["student_accuracy_mean"] <= 1
  assert _disclosure(tmp_path / "student") == experiment.PUBLISHABLE
  assert res["budgets_on_private_data"] == 1
  assert "private" not in capsys.readouterr().out  # nothing it prints is marked private
  # Teachers trained again on the same rows (another seed, another workdir) are refused a
  # second budget unless it is asked for (the budget registry, keyed by the rows' digest).
  again_teachers = config.copy_and_resolve_references()
  again_teachers.seed, again_teachers.labels_dir = 1, ""
  # In the spent workdir itself they are refused before anything is fitted: the ledger
  # there spent on its votes.npz, which stays as it was.
  before = (teachers / "votes.npz").read_bytes()
  with pytest.raises(checkpoint.ResumeMismatchError, match="refusing to replace"):
    tabular_stage.run(again_teachers, teachers)
  assert (teachers / "votes.npz").read_bytes() == before
  tabular_stage.run(again_teachers, tmp_path / "teachers_again")
  assert (votes_lib.load_votes(tmp_path / "teachers_again")["private_data"]
          == votes_lib.load_votes(teachers)["private_data"])
  teachers, first = tmp_path / "teachers_again", teachers
  with pytest.raises(budget_lib.BudgetError, match="teachers in " + re.escape(str(first.resolve()))):
    labels_run("labels_again")
  assert labels_run("labels_again", another_budget=True).is_dir()
  teachers = first
  # The same labels train the same students (their seeds are the config's).
  capsys.readouterr()
  again = experiment.run_and_report(tabular_stage.run, tabular_stage.report, config,
                                    str(tmp_path / "student_again"))
  assert again["student_accuracies"] == res["student_accuracies"]
  # The data now has two budgets (the second teachers'): the released student says so.
  assert again["budgets_on_private_data"] == 2
  assert "NOTE: 2 budgets are spent on the private data" in capsys.readouterr().out
  # Under a registry that does not hold the labels' budget the count is unknown, and said.
  elsewhere = config.copy_and_resolve_references()
  elsewhere.budget_registry = str(tmp_path / "another_registry")
  unknown = tabular_stage.run(elsewhere, tmp_path / "student_elsewhere")
  assert unknown["budgets_on_private_data"].startswith("unknown")
  assert reporting.budgets_note(unknown["budgets_on_private_data"]).startswith(
      "NOTE: budgets on the private data: unknown")
  # Labels of a research noise seed: a measurement, private as a whole.
  config.labels_dir = str(labels_run("research", noise_seed=3))
  assert tabular_stage.run(config, tmp_path / "student_research")[
      "budgets_on_private_data"] is None
  assert _disclosure(tmp_path / "student_research") == experiment.MEASUREMENT
  # Labels of another task (other query inputs), or of rows outside the pool: refused,
  # naming the field.
  config.labels_dir = str(tmp_path / "labels")
  config.data_dir = _tiny_synthetic_task(tmp_path / "other", "cpu", seed=1).data_dir
  with pytest.raises(ValueError, match=r"config.labels_dir .*other query inputs"):
    tabular_stage.run(config, tmp_path / "student_other")
  config.data_dir, config.num_pool = str(tmp_path / "data"), 20
  with pytest.raises(ValueError, match=r"config.labels_dir .*outside this task's pool"):
    tabular_stage.run(config, tmp_path / "student_pool")


def test_a_released_students_publishable_seconds_leave_out_the_private_read(tmp_path,
                                                                           monkeypatch):
  """The released student reads the whole task, its private training rows included (read
  and checked in a time that follows them): that read's seconds are in its private part,
  out of the publishable ``timings.total_s``."""
  import time  # pylint: disable=g-import-not-at-top
  from pate_jax import labels as labels_lib  # pylint: disable=g-import-not-at-top
  from pate_jax.data import adult  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import tabular as tabular_stage  # pylint: disable=g-import-not-at-top
  config = _tiny_synthetic_task(tmp_path / "data", "cpu")
  config.student_repeats, config.budget_registry = 1, str(tmp_path / "registry")
  _, queries, _ = tabular_stage._load_task(config)  # pylint: disable=protected-access
  rows = np.arange(20)
  labels_lib.save_labels(tmp_path / "labels", labels=queries.labels[rows],
                         status=np.zeros(20, np.int32), true_labels=queries.labels[rows],
                         dataset_index=rows, query_index=rows, votes_digest="d",
                         mechanism="gnmax", epsilon=1.0, epsilon_max=2.0, delta=1e-5,
                         noise="secret")
  config.labels_dir = str(tmp_path / "labels")
  read, pause, private_reads = adult.read_adult_csv, 0.3, []

  def slow_private_read(path, **kwargs):
    if pathlib.Path(path).name == "train.csv":  # the teachers' private rows
      time.sleep(pause)
      private_reads.append(path)
    return read(path, **kwargs)
  monkeypatch.setattr(adult, "read_adult_csv", slow_private_read)
  start = time.perf_counter()
  res = tabular_stage.run(config, tmp_path / "student")
  outside = time.perf_counter() - start
  assert res["released_student"] and len(private_reads) == 1
  assert res["timings"]["total_s"] <= outside - pause
  assert res["private"]["load_task_seconds"] >= pause
  record = json.loads((tmp_path / "student" / "results.json").read_text())
  assert record["disclosure"] == experiment.PUBLISHABLE
  assert record["results"]["private"]["load_task_seconds"] >= pause


def test_votes_of_a_label_chosen_preparation_get_no_secret_noise_release(tmp_path):
  """Diabetes' "paper" preparation chooses its rows and columns on the private rows, so
  the tabular stage marks its votes not_releasable: the aggregate stage refuses them a
  secret-noise budget, naming the option, before anything is spent; a research noise seed
  (private as a whole) may still measure them, and label-free votes are released."""
  from pate_jax import io  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import aggregate  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import tabular as tabular_stage  # pylint: disable=g-import-not-at-top
  config = _load_by_path("configs", "diabetes_rf.py").get_config("cpu")
  assert tabular_stage.not_releasable(config) is None
  assert tabular_stage.not_releasable(_config("cpu")) is None
  config.diabetes_preparation = "paper"
  why = tabular_stage.not_releasable(config)
  assert why.startswith("config.diabetes_preparation='paper'")
  adult = _config("cpu")
  adult.diabetes_preparation = "paper"
  with pytest.raises(ValueError, match="config.diabetes_preparation: .*Diabetes preparation"):
    tabular_stage.not_releasable(adult)
  gen = np.random.default_rng(0)
  labels = gen.integers(0, 2, 60)
  votes = np.stack([25 - labels * 20, labels * 20], axis=1)
  for name, reason in (("paper", why), ("label_free", None)):
    votes_lib.save_votes(tmp_path / name / "votes.npz", votes, labels, num_pool=40,
                         dataset="diabetes", private_data=io.data_digest(labels, name),
                         not_releasable=reason)
  assert votes_lib.load_votes(tmp_path / "paper")["not_releasable"] == why
  assert "not_releasable" not in votes_lib.load_votes(tmp_path / "label_free")
  agg = _load_by_path("configs", "aggregate_mnist.py").get_config("cpu")
  agg.num_queries, agg.query_selection, agg.mechanism = 10, "first", "gnmax"
  agg.privacy_plot, agg.epsilon_max = False, 50.0
  agg.budget_registry = str(tmp_path / "registry")
  agg.votes_dir = str(tmp_path / "paper")
  agg.data_dependent = False  # no release order to compute for the budgets made below
  with pytest.raises(ValueError, match=r"no release may be drawn with secret noise from these "
                     r"votes: config.diabetes_preparation='paper'"):
    aggregate.run(agg, tmp_path / "labels")
  assert sorted(p.name for p in (tmp_path / "paper").iterdir()) == ["votes.npz"]
  assert not (tmp_path / "registry").exists()
  data = votes_lib.load_votes(tmp_path / "paper")
  research = agg.copy_and_resolve_references()
  research.noise_seed = 3
  assert aggregate.make_budget(research, data, agg.votes_dir,
                               tmp_path / "research").research_seed == 3
  agg.votes_dir = str(tmp_path / "label_free")
  released = aggregate.make_budget(agg, votes_lib.load_votes(agg.votes_dir), agg.votes_dir,
                                   tmp_path / "released")
  assert released.research_seed is None
  bad = dict(votes=votes, labels=labels, index=np.arange(60), num_pool=np.int64(40),
             num_teachers=np.int64(25), dataset="diabetes", not_releasable=" ")
  with pytest.raises(ValueError, match="not_releasable must be a non-empty string"):
    votes_lib.check_votes(bad, "v.npz")


def test_the_budget_key_is_the_training_file_whatever_its_coding(tmp_path):
  """tabular.private_data: the SHA-256 of the file of the private training rows (not of
  their coding, columns or the query split), the key of the task's privacy budget."""
  import hashlib  # pylint: disable=g-import-not-at-top
  _tiny_synthetic_task(tmp_path, "cpu")
  train = (tmp_path / "adult" / "train.csv").read_bytes()
  assert tabular.private_data("adult", tmp_path) == hashlib.sha256(train).hexdigest()
  with pytest.raises(ValueError, match="dataset must be one of"):
    tabular.private_data("mnist", tmp_path)
  with pytest.raises(FileNotFoundError, match="adult.data"):
    tabular.private_data("adult_uci", tmp_path)


@pytest.mark.parametrize("ledger", ["ledger.npz", "ledger.npz.journal", "research_ledger.npz"])
def test_votes_a_ledger_spent_on_are_not_replaced(tmp_path, ledger):
  refuse = budget_lib.refuse_spent_votes
  refuse(tmp_path)  # nothing there
  (tmp_path / "votes.npz").write_bytes(b"")
  refuse(tmp_path)  # votes no ledger spent on
  (tmp_path / ledger).write_bytes(b"")
  with pytest.raises(checkpoint.ResumeMismatchError, match=f"{ledger}.*another --workdir"):
    refuse(tmp_path)
  (tmp_path / "votes.npz").unlink()  # the votes it spent on deleted: still refused
  with pytest.raises(checkpoint.ResumeMismatchError, match=f"gone.*{ledger}.*another --workdir"):
    refuse(tmp_path)


def test_a_new_run_removes_the_earlier_report_before_it_writes_new_votes(tmp_path,
                                                                         monkeypatch):
  """Killed after its new votes.npz, a run left the earlier run's results.json beside them
  (another number of teachers, say); it now removes the report just before the votes (a
  run refused earlier, a bad config, keeps it)."""
  from pate_jax.stages import tabular as tabular_stage  # pylint: disable=g-import-not-at-top
  work = tmp_path / "w"
  work.mkdir()
  for name in ("results.json", "student_accuracy.png"):
    (work / name).write_text("an earlier run's")
  config = _tiny_synthetic_task(tmp_path / "data", "cpu")
  bad = _tiny_synthetic_task(tmp_path / "data", "cpu")
  bad.num_pool = 10**6
  with pytest.raises(ValueError, match="num_pool"):  # refused before any fit: report kept
    tabular_stage.run(bad, work)
  assert (work / "results.json").exists()

  def killed(*args, **kwargs):
    raise KeyboardInterrupt

  monkeypatch.setattr(votes_lib, "save_votes", killed)
  with pytest.raises(KeyboardInterrupt):
    tabular_stage.run(config, work)
  assert not (work / "results.json").exists()
  assert not (work / "student_accuracy.png").exists()


@pytest.mark.parametrize("field, value, match", [
    ("gnmax_sigma", -1.0, r"^config.gnmax_sigma must be > 0; got -1.0$"),
    ("gnmax_sigma", float("nan"), r"^config.gnmax_sigma must be finite; got nan$"),
    ("lnmax_gamma", 0.0, r"^config.lnmax_gamma must be > 0; got 0.0$"),
    ("gnmax_sigmas", [5.0, -1.0], r"^config.gnmax_sigmas must be finite and > 0; found -1.0"),
    ("lnmax_gammas", [float("nan")], r"^config.lnmax_gammas must be finite and > 0; found nan"),
    ("delta", 0.0, r"^config.delta must lie in \(0, 1\); got 0.0$"),
    ("rdp_orders", [0.5, 2.0], r"^config.rdp_orders must be finite and > 1; found 0.5"),
    ("rdp_conversion", "tight", r"^config.rdp_conversion must be one of"),
    ("lnmax_max_moment", 0, r"^config.lnmax_max_moment must be an integer >= 1; got 0$"),
    ("student_repeats", 0, r"^config.student_repeats must be an integer >= 1; got 0$"),
])
def test_a_bad_noise_setting_is_refused_before_any_forest_is_fitted(tmp_path, monkeypatch,
                                                                     field, value, match):
  """A bad noise scale was refused as ``scales (sigma)`` once the baseline and every
  teacher had been fitted (minutes at 250 teachers); now by its field, before any fit (and
  by --dry_run)."""
  from pate_jax.stages import tabular as tabular_stage  # pylint: disable=g-import-not-at-top

  def fitted(*args, **kwargs):
    raise AssertionError("a forest was fitted before the config was checked")

  monkeypatch.setattr(tabular, "fit_model", fitted)
  monkeypatch.setattr(tabular, "fit_teachers", fitted)
  config = _tiny_synthetic_task(tmp_path / "data", "cpu")
  config[field] = value
  with pytest.raises(ValueError, match=match):
    tabular_stage.run(config, tmp_path / "w")
  with pytest.raises(ValueError, match=match):
    tabular_stage.plan(config)


@pytest.mark.parametrize("n_jobs", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_a_teachers_warning_in_a_worker_process_is_shown_by_the_caller(n_jobs):
  """A joblib worker process writes its warnings to its own stderr, past the run's marking
  of every warning line as private: the teachers' fits and predictions hand theirs back,
  and they are shown in the calling process, whatever n_jobs."""
  x, y = _blobs(n=60)
  with pytest.warns(UserWarning, match=r"shard of 20 rows, smallest class \d+"):
    ens = tabular.fit_teachers(jax.random.key(0), x, y, 3, num_classes=3,
                               estimator=WarningEstimator,
                               n_jobs=n_jobs)
  with pytest.warns(UserWarning, match="predicted by a teacher") as predictions:
    tabular.predict_teachers(ens, x[:5], n_jobs=n_jobs)
  # One place, one message: shown once for the call, not once per teacher.
  assert sum("predicted by a teacher" in str(w.message) for w in predictions) == 1


def test_a_workers_warnings_travel_back_pickled_and_are_shown_once_per_call():
  """What a worker returns (the result and its warnings) survives pickling, and the caller
  shows each distinct warning once however many tasks raised it."""
  import pickle  # pylint: disable=g-import-not-at-top
  from pate_jax.tabular import _teachers  # pylint: disable=g-import-not-at-top

  def task(rows):
    warnings.warn(f"smallest class {rows}", UserWarning)
    warnings.warn("a teacher's shard", RuntimeWarning)
    return rows

  caught, show = _teachers._caught, _teachers._shown  # pylint: disable=protected-access
  results = [pickle.loads(pickle.dumps(caught(task, r))) for r in (1, 2, 1)]
  seen = set()
  with pytest.warns(Warning) as shown:
    assert [show(r, seen) for r in results] == [1, 2, 1]
  assert sorted(str(w.message) for w in shown) == ["a teacher's shard", "smallest class 1",
                                                   "smallest class 2"]
  assert {w.category for w in shown} == {UserWarning, RuntimeWarning}


@pytest.mark.parametrize("field, value, match", [
    ("num_teachers", 0, r"config\.num_teachers must be an integer >= 1; got 0"),
    ("n_estimators", 0, r"config\.n_estimators must be an integer >= 1"),
    ("student_n_estimators", -1, r"config\.student_n_estimators must be an integer >= 1"),
    ("baseline_n_estimators", 1.5, r"config\.baseline_n_estimators must be an integer >= 1"),
    ("num_pool", 0, r"config\.num_pool must be an integer >= 1"),
    ("reference_pools", -1, r"config\.reference_pools must be an integer >= 0"),
    ("max_depth", 0, r"config\.max_depth must be an integer >= 1"),
    ("n_jobs", 0, r"config\.n_jobs must be an integer >= 1, or <= -1"),
    ("query_counts", (50, 0), r"config\.query_counts must be an integer >= 1; got 0"),
    ("test_fraction", 2.0, r"config\.test_fraction must lie in \(0, 1\)"),
    ("seed", -1, r"config\.seed must be an integer in \[0, 2\*\*32\)"),
])
def test_bad_counts_and_forests_are_refused_before_work_and_by_the_dry_run(
    tmp_path, field, value, match):
  """num_teachers=0 failed as a ZeroDivisionError; a forest of 0 trees, a depth, a pool or
  joblib workers of 0 passed the dry run and failed in scikit-learn after the data loaded."""
  config = _config("cpu")
  with config.ignore_type():
    config[field] = value
  script = _load_by_path("experiments", "tabular.py")
  _scripts.assert_refused_before_work(script.run, script.plan, config, tmp_path / "w", match)


class _VotesWritten(Exception):
  """Raised in place of writing votes.npz: the test has what it came for."""


def test_the_votes_classes_are_the_tasks_coding_not_counted_on_the_private_rows(
    tmp_path, monkeypatch):
  """The width of the teachers' votes (the classes a released label ranges over, the noise
  values drawn per answer, the release order's conditions C5 and C6) is the task's binary
  coding: the same on neighbouring training files. It was ``max(label) + 1`` over the
  training rows and the queries, so with queries of one class one training record's label
  made the votes one class wider (and the labels released from them a class richer)."""
  from pate_jax.stages import tabular as tabular_stage  # pylint: disable=g-import-not-at-top
  widths = []

  def written(path, votes, *args, **kwargs):
    del path, args, kwargs
    widths.append(np.shape(votes)[1])
    raise _VotesWritten

  monkeypatch.setattr(votes_lib, "save_votes", written)
  for positive in (1, 0):  # one training row above $50K, and its neighbour without it
    data = tmp_path / f"data{positive}"
    config = _tiny_synthetic_task(data, "cpu")
    train = data / "adult" / "train.csv"
    rows = list(csv.reader(train.open()))
    for row in rows[1:]:
      row[-1] = "0"
    rows[1][-1] = str(positive)
    _write_csv(train, rows[0], rows[1:])
    queries = data / "adult" / "test.csv"
    rows = list(csv.reader(queries.open()))
    _write_csv(queries, rows[0], [r[:-1] + ["0"] for r in rows[1:]])  # public: all below
    with pytest.raises(_VotesWritten):
      tabular_stage.run(config, tmp_path / f"work{positive}")
  assert widths == [tabular.NUM_CLASSES] * 2 == [2, 2]
