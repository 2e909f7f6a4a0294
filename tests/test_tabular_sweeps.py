"""Tests for the tabular experiment's library pieces: ε prefixes, label grids, students, I/O."""

from __future__ import annotations

import csv

import jax
import matplotlib
import numpy as np
import pytest
from sklearn.dummy import DummyClassifier

from pate_jax import accounting, aggregation, tabular
from pate_jax.data import adult
from pate_jax import votes as votes_lib
from pate_jax.tabular import _teachers as tabular_teachers

from _estimators import FirstRows  # tests/_estimators.py  # pylint: disable=g-bad-import-order

_ORDERS = (1.5, 2.0, 4.0, 8.0, 16.0, 32.0)


def _votes(num_queries=12, num_teachers=20, seed=0):
  """Binary vote histograms with a mix of strong and weak consensus."""
  top = np.random.default_rng(seed).integers(num_teachers // 2, num_teachers + 1, num_queries)
  return np.stack([top, num_teachers - top], axis=1).astype(np.int32)


def _accountant(**kw):
  return tabular.Accountant(delta=1e-5, max_moment=8, orders=_ORDERS, **kw)


# ----------------------------------------------------------------------------- privacy


def test_prefix_totals_is_cumulative_sum_at_counts():
  cost = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]])
  np.testing.assert_array_equal(tabular.prefix_totals(cost, [1, 3]), [[1.0, 10.0], [6.0, 60.0]])
  for bad in ([0], [4], [[1]]):
    with pytest.raises(ValueError, match="counts"):
      tabular.prefix_totals(cost, bad)
  with pytest.raises(ValueError, match="per_query_cost"):
    tabular.prefix_totals(cost[0], [1])


def test_epsilon_matches_the_accountants():
  votes, acct = _votes(), _accountant()
  eps, moment = tabular.epsilon(acct, "lnmax", votes, 0.2)
  ref, ref_moment = accounting.lnmax_moments_epsilon(votes, 0.2, 1e-5, max_moment=8)
  assert (eps, moment) == (float(ref), int(ref_moment)) and isinstance(moment, int)
  eps, order = tabular.epsilon(acct, "gnmax", votes, 5.0, data_dependent=False)
  # Data-independent GNMax: RDP λ/σ² per query (Papernot et al. 2018, Prop. 8).
  ref, ref_order = accounting.rdp_to_epsilon(len(votes) * np.asarray(_ORDERS) / 25.0,
                                             np.asarray(_ORDERS), 1e-5, "improved")
  assert eps == pytest.approx(float(ref), rel=1e-9) and order == float(ref_order)
  for m, scale in (("lnmax", 0.2), ("gnmax", 5.0)):
    assert (tabular.epsilon(acct, m, votes, scale)[0]
            <= tabular.epsilon(acct, m, votes, scale, data_dependent=False)[0] * (1 + 1e-12))
  with pytest.raises(ValueError, match="mechanism"):
    tabular.epsilon(acct, "laplace", votes, 0.2)


@pytest.mark.parametrize("mechanism,scale", [("lnmax", 0.2), ("gnmax", 5.0)])
def test_prefix_epsilon_is_epsilon_of_the_first_queries(mechanism, scale):
  votes, acct = _votes(), _accountant()
  counts = [1, 4, 12]
  eps = tabular.prefix_epsilon(acct, mechanism, votes, scale, counts)
  assert eps.shape == (3,) and eps.dtype == np.float64 and np.all(np.diff(eps) > 0)
  for n, e in zip(counts, eps):
    assert e == pytest.approx(tabular.epsilon(acct, mechanism, votes[:n], scale)[0], rel=1e-12)


# ----------------------------------------------------------------------------- labels


def test_query_counts_sorted_distinct_within_pool():
  assert tabular.query_counts([50, 0, 700, 20, 50, -3], 500) == [20, 50, 500]
  assert tabular.query_counts([], 7) == [7]
  with pytest.raises(ValueError, match="num_pool"):
    tabular.query_counts([1], 0)


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["lnmax", "gnmax"])
def test_noisy_label_grid_equals_direct_calls_and_prefixes(mechanism):
  votes, key = _votes(30), jax.random.key(3)
  agg = aggregation.lnmax if mechanism == "lnmax" else aggregation.gnmax
  scales = [0.1, 1.0] if mechanism == "lnmax" else [2.0, 20.0]
  grid = tabular.noisy_label_grid(key, votes, mechanism, scales, 3)
  assert grid.shape == (2, 3, 30) and grid.dtype == np.int32
  for s, scale in enumerate(scales):
    for r in range(3):
      np.testing.assert_array_equal(grid[s, r], agg(jax.random.fold_in(key, r), votes, scale))
  # Per-query keys: the labels of the first n queries do not depend on the rest.
  np.testing.assert_array_equal(tabular.noisy_label_grid(key, votes[:7], mechanism, scales, 3),
                                grid[:, :, :7])
  with pytest.raises(ValueError, match="num_draws"):
    tabular.noisy_label_grid(key, votes, mechanism, scales, 0)
  with pytest.raises(ValueError, match="mechanism"):
    tabular.noisy_label_grid(key, votes, "plurality", scales, 1)


# ----------------------------------------------------------------------------- students


def test_accuracy_hand_computed_and_nan_when_empty():
  model = FirstRows().fit(np.zeros((1, 1)), [1])
  assert tabular.accuracy(model, np.zeros((4, 1)), [1, 0, 1, 1]) == 0.75
  assert np.isnan(tabular.accuracy(model, np.zeros((0, 1)), []))


def test_fit_and_score_clones_and_seeds_the_prototype():
  x = np.zeros((6, 2))
  proto = DummyClassifier(strategy="most_frequent")
  assert tabular.fit_and_score(proto, 4, x, [1, 1, 0, 1, 0, 1], x[:4], [1, 0, 1, 1]) == 0.75
  assert not hasattr(proto, "classes_")  # The prototype itself stays unfitted.


def test_student_accuracies_use_pool_prefixes_and_do_not_depend_on_n_jobs():
  x_pool = np.arange(10, dtype=np.float32)[:, None]
  task = tabular.StudentTask(x_pool, x_pool[:4], np.array([0, 0, 1, 1]), FirstRows, n_jobs=1)
  sets = [np.array([1, 0, 0]), np.array([0] * 10), np.array([1])]
  acc = tabular.student_accuracies(task, [7, 8, 9], sets)
  np.testing.assert_array_equal(acc, [0.5, 0.5, 0.5])
  assert acc.dtype == np.float64
  np.testing.assert_array_equal(tabular.student_accuracies(task._replace(n_jobs=2), [7, 8, 9],
                                                           sets), acc)
  with pytest.raises(ValueError, match="same length"):
    tabular.student_accuracies(task, [1], sets)
  with pytest.raises(ValueError, match="longer than the pool"):
    tabular.student_accuracies(task, [1], [np.zeros(11, int)])


@pytest.mark.slow
def test_sweep_mechanism_shapes_and_consistency():
  votes = _votes(24)
  labels, plurality = np.zeros(24, np.int32), np.asarray(aggregation.plurality(votes))
  rng = np.random.default_rng(0)
  task = tabular.StudentTask(rng.normal(size=(24, 3)), rng.normal(size=(9, 3)),
                             rng.integers(0, 2, 9), DummyClassifier(), n_jobs=1)
  acct = _accountant(max_moment_wide=16)
  key = jax.random.key(5)
  summary, by_count, by_noise = tabular.sweep_mechanism(
      key, "lnmax", votes, labels, plurality, scale=0.3, grid=[0.1, 1.0], counts=[6, 24],
      num_seeds=4, task=task, random_states=[11, 12], accountant=acct)
  assert summary["gamma"] == 0.3 and summary["student_repeats"] == 2
  assert summary["num_queries"] == 24 and summary["laplace_scale"] == pytest.approx(1 / 0.3)
  assert (summary["epsilon_data_dependent"], summary["best_moment_data_dependent"]) == \
      tabular.epsilon(acct, "lnmax", votes, 0.3)
  # Moments 1..16 include 1..8: the wider bound is no larger.
  assert summary["epsilon_data_dependent_max_moment_16"] <= summary["epsilon_data_dependent"]
  first = tabular.noisy_label_grid(key, votes, "lnmax", [0.3], 1)[0, 0]
  assert summary["label_accuracy"] == float(np.mean(first == labels))
  assert by_count["epsilon"][-1] == pytest.approx(summary["epsilon_data_dependent"])
  assert by_count["student_accuracy_mean"].shape == (2,)
  assert by_noise["noise_scale"] == [0.1, 1.0] and len(by_noise["epsilon"]) == 2
  assert by_noise["epsilon"][0] < by_noise["epsilon"][1]  # Larger γ: less noise, more ε.
  summary, _, _ = tabular.sweep_mechanism(
      key, "gnmax", votes, labels, plurality, scale=4.0, grid=[8.0], counts=[24], num_seeds=2,
      task=task, random_states=[1], accountant=acct)
  assert summary["sigma"] == 4.0 and "best_order_data_independent" in summary
  assert "laplace_scale" not in summary and "improved" in summary["accountant"]


# ----------------------------------------------------------------------------- teachers, I/O


def _ensemble(num_teachers=3):
  x = np.arange(12, dtype=np.float32)[:, None]
  y = (np.arange(12) % 2).astype(np.int32)
  return tabular.fit_teachers(jax.random.key(0), x, y, num_teachers, num_classes=2,
                              estimator=FirstRows,
                              n_jobs=1), x


def test_save_teacher_predictions_round_trips(tmp_path):
  ens, x = _ensemble()
  votes, preds = tabular.teacher_votes(ens, x, n_jobs=1)
  tabular.save_teacher_predictions(tmp_path / "p.npz", ens, preds, num_pool=5)
  assert (tmp_path / "p.npz").stat().st_mode & 0o777 == 0o600  # the owner's only
  with np.load(tmp_path / "p.npz") as f:
    assert f["predictions"].dtype == np.int8 and int(f["num_pool"]) == 5
    np.testing.assert_array_equal(votes_lib.histogram(f["predictions"], 2), votes)
    np.testing.assert_array_equal(f["partition"], ens.index)
    np.testing.assert_array_equal(f["index"], np.arange(12))
  with pytest.raises(ValueError, match="predictions"):
    tabular.save_teacher_predictions(tmp_path / "q.npz", ens, preds[:2], num_pool=5)
  with pytest.raises(ValueError, match="num_pool"):
    tabular.save_teacher_predictions(tmp_path / "q.npz", ens, preds, num_pool=13)


def test_ensemble_summary_hand_computed():
  ens, _ = _ensemble(2)
  preds = np.array([[0, 1, 1, 0], [0, 0, 1, 1]])
  labels = np.array([0, 1, 1, 1])
  votes = np.array([[2, 0], [1, 1], [0, 2], [1, 1]])
  plurality = np.argmax(votes, axis=1)  # [0, 0, 1, 0]
  res = tabular.ensemble_summary(ens, preds, labels, plurality, votes[:2])
  assert res["num_teachers"] == 2 and res["examples_per_teacher"] == 6
  assert (res["teacher_accuracy_min"], res["teacher_accuracy_max"]) == (0.75, 0.75)
  assert res["plurality_accuracy_pool"] == 0.5 and res["plurality_accuracy_all_queries"] == 0.5
  assert res["pool_normalized_gap_median"] == 0.5  # Gaps 1 and 0.


# ----------------------------------------------------------------------------- data, plot


def test_task_name_and_load_task(tmp_path):
  assert tabular.task_name("adult", ["education"], "attack") == "adult-noeducation-attack"
  assert tabular.task_name("diabetes") == "diabetes"
  header = ["age", "workclass", "education", "marital_status", "relationship", "occupation",
            "race", "gender", "capital_gain", "capital_loss", "hours_per_week", "income"]
  for split, n in (("train", 8), ("test", 5)):
    path = tmp_path / "adult" / f"{split}.csv"
    path.parent.mkdir(exist_ok=True)
    with open(path, "w", newline="") as f:
      csv.writer(f).writerows([header] + [
          [20 + i, "Private", "HS", "Married", "Husband", "Sales", "White", "Male", 0, 0, 40,
           ">50K" if i % 2 else "<=50K"] for i in range(n)])
  train, queries, name = tabular.load_task(jax.random.key(0), "adult", tmp_path,
                                           drop_columns=["education"])
  assert (len(train), len(queries), name) == (8, 5, "adult-noeducation")
  assert "education" not in train.feature_names
  with pytest.raises(ValueError, match="dataset"):
    tabular.load_task(jax.random.key(0), "mnist", tmp_path)
  with pytest.raises(ValueError, match="only a 'test' split"):
    tabular.load_task(jax.random.key(0), "diabetes", tmp_path, query_split="attack")


def test_a_tasks_coding_does_not_depend_on_a_private_record(tmp_path, recwarn):
  """One private record holding a category some queries hold too: with the training
  split's vocabulary, removing it would recode those queries (-1) for every teacher and for
  the student. The task takes its vocabulary from the public query split; a private value
  the queries lack is coded -1, silently (never named)."""
  header = ["age", "workclass", "education", "marital_status", "relationship", "occupation",
            "race", "gender", "capital_gain", "capital_loss", "hours_per_week", "income"]

  def write(where, occupations):
    for split, occ in (("train", occupations), ("test", ["Sales", "Rare", "Tech"] * 2)):
      path = where / "adult" / f"{split}.csv"
      path.parent.mkdir(parents=True, exist_ok=True)
      with open(path, "w", newline="") as f:
        csv.writer(f).writerows([header] + [
            [20 + i, "Private", "HS", "Married", "Husband", o, "White", "Male", 0, 0, 40,
             ">50K" if i % 2 else "<=50K"] for i, o in enumerate(occ)])
    return tabular.load_task(jax.random.key(0), "adult", where)

  common = ["Sales", "Tech"] * 4
  train, queries, _ = write(tmp_path / "with", common + ["Rare", "Secret"])
  train2, queries2, _ = write(tmp_path / "without", common)
  np.testing.assert_array_equal(queries.features, queries2.features)
  np.testing.assert_array_equal(train.features[:8], train2.features)
  column = train.feature_names.index("occupation")
  assert train.features[-1, column] == -1  # "Secret": not in the public split
  assert not [w for w in recwarn if "Secret" in str(w.message)]
  # The loader's default stays the training split's vocabulary (and names unseen values).
  with pytest.warns(UserWarning, match="Rare"):
    d = adult.load_adult(tmp_path / "without", splits=("train", "test"))
  assert d["test"].features[1, column] == -1
  with pytest.raises(ValueError, match="vocabulary"):
    adult.load_adult(tmp_path / "without", splits=("train",), vocabulary="test")


def test_plot_sweeps_writes_png_without_touching_pyplot(tmp_path):
  noise = {"noise_scale": [0.1, 1.0], "student_accuracy_mean": [0.7, 0.8],
           "student_accuracy_std": [0.0, 0.1], "label_accuracy_mean": [0.6, 0.9],
           "epsilon": [1.0, 5.0]}
  per_count = {"student_accuracy_mean": [0.7, 0.8], "student_accuracy_std": [0.0, 0.0],
               "epsilon": [0.5, 1.0]}
  sweeps = {"queries": {"num_queries": [5, 10], "lnmax": per_count, "gnmax": per_count,
                        "plurality_student_accuracy": [0.7, 0.9]},
            "noise": {"lnmax": noise, "gnmax": noise}}
  backend = matplotlib.get_backend()
  tabular.plot_sweeps(tmp_path / "s.png", sweeps, 0.85, lnmax_gamma=0.2, gnmax_sigma=5.0,
                      delta=1e-5, num_seeds=3, num_pool=10)
  assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  assert matplotlib.get_backend() == backend


def test_ensemble_summary_scores_the_pool_rows():
  ens = tabular_teachers.TeacherEnsemble((None, None), np.zeros((2, 1), np.int64), 0, np.zeros(2), 2)
  preds = np.array([[0, 1, 1, 0], [0, 1, 0, 0]])
  labels = np.array([0, 1, 0, 1])
  plurality = np.array([0, 1, 1, 0])   # right on rows 0, 1; wrong on 2, 3
  votes = np.array([[2, 0], [0, 2], [1, 1]])   # the pool: rows 0..2
  s = tabular_teachers.ensemble_summary(ens, preds, labels, plurality, votes)
  assert s["plurality_accuracy_pool"] == pytest.approx(2 / 3)
  assert s["plurality_accuracy_all_queries"] == pytest.approx(0.5)


def test_noisy_label_grid_draws_differ_and_share_their_noise_across_scales():
  """Binary GNMax votes: a label leaves the plurality where σ (Z_1 - Z_0) overcomes the
  margin, so with one noise draw per draw index at every scale (common random numbers) the
  queries flipped at a smaller σ are among those flipped at a larger one; draws differ."""
  votes = _votes(40)
  grid = tabular.noisy_label_grid(jax.random.key(7), votes, "gnmax", [3.0, 6.0, 12.0], 2)
  assert grid.shape == (3, 2, 40)
  flipped = grid != np.argmax(votes, 1)
  assert np.all(flipped[:-1] <= flipped[1:])
  assert flipped[0].any() and flipped[-1].sum() > flipped[0].sum()
  assert not np.array_equal(grid[:, 0], grid[:, 1])
  with pytest.raises(ValueError, match="num_draws"):
    tabular.noisy_label_grid(jax.random.key(7), votes, "gnmax", [3.0], 0)


def test_sweep_mechanism_summarises_each_grid_over_its_draws(monkeypatch):
  """Labels, label accuracies, ε and students replaced by known numbers: the summary reads
  the configured scale (index 0) and its first draw, the noise sweep the further scales, the
  query sweep the configured scale's label prefixes; means and stds are over the draws."""
  from pate_jax.tabular import _sweeps  # pylint: disable=g-import-not-at-top
  states, counts = [10, 20], [2, 6]
  noisy = np.random.default_rng(0).integers(0, 2, (3, 2, 6)).astype(np.int32)
  noisy[0, 0] = [0, 0, 0, 0, 1, 1]
  label_acc = np.arange(12.0).reshape(3, 4) / 12
  student = lambda rs, y: rs + np.dot(y, 1 + np.arange(len(y))) / 100 + len(y) / 1e3  # noqa
  monkeypatch.setattr(_sweeps, "noisy_label_grid", lambda *a: noisy)
  monkeypatch.setattr(aggregation, "label_accuracy_grid", lambda *a: label_acc)
  monkeypatch.setattr(_sweeps, "epsilon", lambda acct, m, votes, sc, data_dependent=True: (
      sc if data_dependent else 10 * sc, 7))
  monkeypatch.setattr(_sweeps, "prefix_epsilon",
                      lambda acct, m, votes, sc, n: sc * np.asarray(n, np.float64))
  monkeypatch.setattr(_sweeps, "student_accuracies", lambda task, rs, sets: np.array(
      [student(r, y) for r, y in zip(rs, sets)]))
  summary, by_count, by_noise = tabular.sweep_mechanism(
      jax.random.key(0), "gnmax", _votes(6), np.zeros(6, np.int32), np.ones(6, np.int32),
      scale=4.0, grid=[2.0, 8.0], counts=counts, num_seeds=4, task=None,
      random_states=states, accountant=_accountant())
  acc = np.array([[student(rs, noisy[s, r]) for r, rs in enumerate(states)] for s in range(3)])
  by_n = np.array([[student(rs, noisy[0, r, :n]) for r, rs in enumerate(states)]
                   for n in counts])
  assert summary["label_accuracy"] == pytest.approx(4 / 6)
  assert summary["label_agreement_with_plurality"] == pytest.approx(2 / 6)
  assert summary["label_accuracy_mean_over_seeds"] == pytest.approx(label_acc[0].mean())
  assert summary["student_accuracy"] == pytest.approx(acc[0, 0])
  assert summary["student_accuracy_mean"] == pytest.approx(acc[0].mean())
  assert summary["student_accuracy_std"] == pytest.approx(acc[0].std())
  assert (summary["epsilon_data_dependent"], summary["epsilon_data_independent"]) == (4.0, 40.0)
  np.testing.assert_allclose(by_count["student_accuracy_mean"], by_n.mean(1))
  np.testing.assert_allclose(by_count["student_accuracy_std"], by_n.std(1))
  np.testing.assert_allclose(by_count["epsilon"], [8.0, 24.0])
  assert by_noise["noise_scale"] == [2.0, 8.0]
  np.testing.assert_allclose(by_noise["student_accuracy_mean"], acc[1:].mean(1))
  np.testing.assert_allclose(by_noise["student_accuracy_std"], acc[1:].std(1))
  np.testing.assert_allclose(by_noise["label_accuracy_mean"], label_acc[1:].mean(1))
  assert by_noise["epsilon"] == [2.0, 8.0] and by_noise["epsilon_data_independent"] == [20, 80]
