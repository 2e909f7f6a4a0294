"""Tests for the attack's evaluation pieces: Monte Carlo runs, scoring, costs, replays, Adult."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from scipy import stats

from pate_jax import accounting as acc
from pate_jax import attacks as A

KEY = jax.random.key(0)
TABLE, NAMES = A.table1_histograms()
M3 = A.table1_histogram("svhn/M3")   # [0, 0, 0, 6, 0, 243, 0, 0, 0, 1]
PAPER = {"method": "paper", "tol": 0.01, "max_iter": 200}


# --- Monte Carlo runs ----------------------------------------------------------------------


def test_seed_keys_are_the_folded_keys():
  keys = A.seed_keys(KEY, 3)
  assert keys.shape == (3,)
  for r in range(3):
    np.testing.assert_array_equal(jax.random.key_data(keys[r]),
                                  jax.random.key_data(jax.random.fold_in(KEY, r)))
  with pytest.raises(ValueError, match="num_seeds"):
    A.seed_keys(KEY, 0)


def test_sampling_over_keys_equals_a_loop():
  keys = A.seed_keys(KEY, 2)
  sig = np.array([30.0, 80.0])
  q = np.asarray(A.sample_frequencies(keys, TABLE[None, :3], sig[:, None], 300))
  assert q.shape == (2, 2, 3, 10)
  for r in range(2):
    np.testing.assert_array_equal(q[r], A.sample_answers(keys[r], TABLE[None, :3], sig[:, None],
                                                         300))
  m = np.array([50, 400])
  counts, answered = A.sample_counts(keys, TABLE[[0, 12]], 40.0, m, threshold=200.0,
                                     sigma_threshold=150.0)
  for r in range(2):
    c, a = A.answer_counts(keys[r], TABLE[[0, 12]], 40.0, m, threshold=200.0,
                           sigma_threshold=150.0)
    np.testing.assert_array_equal(counts[r], c)
    np.testing.assert_array_equal(answered[r], a)
  np.testing.assert_array_equal(np.asarray(counts).sum(-1), answered)


def test_answer_frequencies_and_the_uniform_row():
  q = A.answer_frequencies([[3, 1, 0, 0], [0, 0, 0, 0]], [4, 0])
  assert q.dtype == np.float32
  np.testing.assert_array_equal(q, [[0.75, 0.25, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]])
  # One rounding of the float64 quotient: 1/3 is float32(1/3).
  assert A.answer_frequencies([[1, 2]], [3])[0, 0] == np.float32(1 / 3)


# --- Scoring -------------------------------------------------------------------------------


def test_evaluate_scores_the_reconstruction():
  q = np.asarray(A.output_distribution(TABLE[[5, 6]], 60.0, "accurate"), np.float32)
  # From the exact Q with step halving and no loss threshold, H comes back.
  e = A.evaluate(q, TABLE[[5, 6]], 60.0, 250, tol=0.0, min_step=1e-2, max_iter=500)
  assert e.histogram.shape == (2, 10) and e.error.shape == e.status.shape == (2,)
  np.testing.assert_allclose(e.error, A.normalized_l1_error(TABLE[[5, 6]], e.histogram))
  assert np.all(e.error < 0.01)
  np.testing.assert_allclose(e.histogram.sum(-1), 250, rtol=1e-5)


def test_runs_and_variants_equal_one_call_per_run():
  keys = A.seed_keys(KEY, 2)
  q = A.sample_frequencies(keys, TABLE[[1, 7]], 50.0, 500)                   # [R, B, C]
  variants = {"paper": PAPER, "projected": {**PAPER, "project": True}}
  out = A.evaluate_variants(q, TABLE[[1, 7]], 50.0, 250, variants)
  assert list(out) == ["paper", "projected"]
  for name, opts in variants.items():
    assert out[name].error.shape == (2, 2)
    for r in range(2):
      one = A.evaluate(q[r], TABLE[[1, 7]], 50.0, 250, **opts)
      np.testing.assert_array_equal(out[name].histogram[r], one.histogram)
      np.testing.assert_array_equal(out[name].num_steps[r], one.num_steps)
  assert np.all(out["projected"].histogram >= -1e-4)


def test_status_counts_mean_by_and_pearson():
  counts = A.status_counts([[0, 1], [1, 3]])
  assert counts[A.Stop(0).name] == 1 and counts[A.Stop(1).name] == 2
  assert sum(counts.values()) == 4 and len(counts) == len(A.Stop)
  values = np.array([[1.0, 2.0, 3.0, 5.0], [3.0, 4.0, 5.0, 7.0]])
  means = A.mean_by(values, np.array(["b", "a", "b", "a"]))
  assert list(means) == ["b", "a"]                        # Order of first appearance.
  assert means == {"b": 3.0, "a": 4.5}
  with pytest.raises(ValueError, match="labels"):
    A.mean_by(values, np.array(["a", "b"]))
  x = np.arange(6.0)
  assert A.pearson(x, 2 * x + 1) == pytest.approx({"r": 1.0, "p_value": 0.0, "n": 6})
  y = np.array([1.0, 0.0, 3.0, 2.0, 5.0, 4.0])
  assert A.pearson(x, y)["r"] == pytest.approx(stats.pearsonr(x, y)[0])


def test_baseline_errors_by_hand():
  uniform, unanimous = A.baseline_errors(np.array([[3, 1], [0, 4]]), 4)
  # Uniform [2, 2]: (1 + 1) / 8 and (2 + 2) / 8; unanimous [4, 0], [0, 4]: 2 / 8 and 0.
  np.testing.assert_allclose(uniform, [0.25, 0.5])
  np.testing.assert_allclose(unanimous, [0.25, 0.0])
  # svhn/M3: all 250 votes on class 5 miscounts 6 + 1 + 7 votes of 500.
  np.testing.assert_allclose(A.baseline_errors(M3, 250)[1], 14 / 500, rtol=1e-6)


def test_table1_labels():
  datasets, groups, short = A.table1_labels(["mnist/L1", "svhn/M3", "svhn/H5"])
  assert datasets.tolist() == ["mnist", "svhn", "svhn"]
  assert groups.tolist() == ["low", "medium", "high"] and short == ["L1", "M3", "H5"]
  with pytest.raises(ValueError, match="names"):
    A.table1_labels(["cifar/L1"])


# --- Privacy cost ----------------------------------------------------------------------------


def test_repeated_query_epsilon_per_sigma():
  h = TABLE[[0, 14]]
  eps, order = A.repeated_query_epsilon(h, [40.0, 80.0], 1000, delta=1e-5, threshold=200.0,
                                        sigma_threshold=150.0)
  assert eps.shape == order.shape == (2, 2)
  for i, s in enumerate((40.0, 80.0)):
    rdp = A.per_query_rdp(h, sigma=s, threshold=200.0, sigma_threshold=150.0)
    np.testing.assert_array_equal(eps[i], A.queries_epsilon(rdp, 1000, delta=1e-5)[0])
  more, _ = A.repeated_query_epsilon(h, [40.0, 80.0], 2000, delta=1e-5, threshold=200.0,
                                     sigma_threshold=150.0)
  assert np.all(more > eps)                                # More queries cost more.
  plain, _ = A.repeated_query_epsilon(h, [40.0], 1000, delta=1e-5)
  np.testing.assert_array_equal(plain[0], A.queries_epsilon(A.per_query_rdp(h, sigma=40.0),
                                                            1000, delta=1e-5)[0])


def test_budget_queries():
  h = TABLE[[0, 14]]
  bq = A.budget_queries(h, budget=1.97, sigma=40.0, threshold=200.0, sigma_threshold=150.0,
                        delta=1e-5)
  rdp = A.per_query_rdp(h, sigma=40.0, threshold=200.0, sigma_threshold=150.0)
  np.testing.assert_array_equal(bq.allowed, A.max_queries_within_budget(rdp, 1.97, delta=1e-5))
  assert np.all(bq.epsilon <= 1.97) and np.all(bq.allowed_classic < bq.allowed)
  with jax.enable_x64(True):
    log_pr = acc.confident_log_pr_answered(h, 200.0, 150.0)
  np.testing.assert_allclose(bq.pr_answered, np.exp(np.asarray(log_pr)), rtol=1e-12)


# --- Ledger replays --------------------------------------------------------------------------


def test_replay_until_refused_spends_the_budget():
  rep = A.replay_until_refused(KEY, TABLE[14], epsilon_max=0.3, delta=1e-5, threshold=200.0,
                               sigma_threshold=150.0, sigma=40.0, batch_size=512)
  assert 0 < rep.num_answered <= rep.num_charged
  assert rep.counts.sum() == rep.num_answered and rep.counts.shape == (10,)
  assert rep.epsilon <= 0.3
  assert np.argmax(rep.counts) == np.argmax(TABLE[14])


def test_replay_consistency_charges_repeats_once():
  fresh = A.replay_consistency(KEY, M3, sigma=100.0, num_queries=64, delta=1e-5,
                               consistent=False)
  same = A.replay_consistency(KEY, M3, sigma=100.0, num_queries=64, delta=1e-5,
                              consistent=True)
  assert fresh["num_charged"] == 64 and fresh["distinct_labels"] > 1
  assert same["num_charged"] == 1 and same["distinct_labels"] == 1 and same["repeated"] == 63
  assert same["epsilon"] < fresh["epsilon"]


# --- Adult (Section 2, Appendices D-E) -------------------------------------------------------


def test_group_rates_by_hand():
  low = np.array([True, True, False, True, False, False])
  minority = np.array([True, False, True, True, False, False])
  r = A.group_rates(low, minority)
  assert r["precision"] == 2 / 3 and r["recall"] == 2 / 3 and r["accuracy"] == 4 / 6
  assert r["num_predicted_minority"] == 3 and r["num_minority"] == r["num_majority"] == 3
  assert r["minority_low"] == 2 / 3 and r["minority_high"] == 1 / 3
  assert r["majority_low"] == 1 / 3 and r["majority_high"] == 2 / 3
  assert A.group_rates([False, False], [False, False])["minority_low"] is None
  with pytest.raises(ValueError, match="shape"):
    A.group_rates([True], [True, False])


def test_balanced_rows_and_precision_draws():
  minority = np.zeros(40, bool)
  minority[[3, 17, 29]] = True
  rows = A.balanced_rows(KEY, minority)
  np.testing.assert_array_equal(rows[:3], [3, 17, 29])
  assert rows.size == 6 and len(set(rows.tolist())) == 6 and not minority[rows[3:]].any()
  np.testing.assert_array_equal(rows, A.balanced_rows(KEY, minority))
  with pytest.raises(ValueError, match="minority"):
    A.balanced_rows(KEY, np.ones(4, bool))
  low = np.arange(40) % 2 == 1
  keys = A.seed_keys(KEY, 4)
  prec = A.balanced_precisions(keys, low, minority)
  for k, p in zip(keys, prec):
    s = A.balanced_rows(k, minority)
    assert p == A.group_rates(low[s], minority[s])["precision"]


def test_low_high_rows():
  low = np.array([True, False, False, True, False, False, False])
  rows = A.low_high_rows(KEY, low, 5)                      # Only 2 low rows: k = 2.
  assert rows.size == 4 and low[rows[:2]].all() and not low[rows[2:]].any()
  assert sorted(rows[:2].tolist()) == [0, 3]
  assert A.low_high_rows(KEY, low, 1).size == 2


def test_searched_forest_searches_the_appendix_d_space():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(60, 3))
  y = (x[:, 0] > 0).astype(int)
  model = A.searched_forest(7, n_iter=2, folds=2)
  assert model.n_iter == 2 and model.cv == 2 and model.param_distributions is A.RF_SEARCH_SPACE
  assert set(A.RF_SEARCH_SPACE["n_estimators"]) <= set(range(10, 301))
  model.fit(x, y)
  assert set(model.best_params_) == set(A.RF_SEARCH_SPACE)
  assert model.score(x, y) > 0.8


def _adult_votes(n=60, teachers=20):
  rng = np.random.default_rng(1)
  top = rng.integers(10, teachers + 1, n)
  votes = np.stack([top, teachers - top], 1)
  minority = np.zeros(n, bool)
  minority[rng.choice(n, 15, replace=False)] = True
  return votes, minority


def test_consensus_inference():
  votes, minority = _adult_votes()
  rows = A.balanced_rows(KEY, minority)
  out = A.consensus_inference(votes, minority, rows, A.seed_keys(KEY, 3), threshold=0.75)
  low = np.asarray(A.classify_low_consensus(votes, 0.75))
  assert out["balanced"] == A.group_rates(low[rows], minority[rows])
  assert out["full_test_set"] == A.group_rates(low, minority)
  cons = np.asarray(A.consensus(votes[rows]))
  assert out["consensus_mean"]["minority"] == pytest.approx(cons[minority[rows]].mean())
  assert out["balanced_precision_over_draws"]["num_draws"] == 3


def test_end_to_end_reconstructs_with_the_given_number_of_teachers():
  votes, minority = _adult_votes()
  out = A.end_to_end(KEY, jax.random.key(1), votes, minority, threshold=0.75,
                     num_individuals=3, sigma=4.0, delta=1e-5, budget=2.0, num_teachers=20,
                     max_queries=2000, **PAPER)
  assert out["num_individuals"] == 6 and len(out["individuals"]) == 6
  for ind in out["individuals"]:
    assert np.sum(ind["reconstructed"]) == pytest.approx(20, rel=1e-5)
    assert 1 <= ind["queries_allowed"] <= 2000 and ind["epsilon"] <= 2.0
  assert [i["low_consensus_true"] for i in out["individuals"]] == [True] * 3 + [False] * 3


# --- Settings and figures --------------------------------------------------------------------

_FOUR = [0, 10, 15, 27]                                     # mnist L1, H1; svhn L1, M3.


@pytest.mark.slow
def test_fixed_queries_and_figures(tmp_path):
  keys = A.seed_keys(KEY, 2)
  names = [NAMES[b] for b in _FOUR]
  privacy = {"mnist": {"threshold": 200.0, "sigma_threshold": 150.0, "delta": 1e-5},
             "svhn": {"threshold": 300.0, "sigma_threshold": 200.0, "delta": 1e-6}}
  res = A.fixed_queries(keys, TABLE[_FOUR], names, sigmas=[40.0, 80.0], num_queries=400,
                        variants={"paper": PAPER}, privacy=privacy)
  q = A.sample_frequencies(keys, TABLE[_FOUR][None], np.array([[40.0], [80.0]]), 400)
  err = A.evaluate_variants(q, TABLE[_FOUR][None], np.array([[40.0], [80.0]]), 250,
                            {"paper": PAPER})["paper"].error.astype(np.float64)
  np.testing.assert_array_equal(res["histograms"][2]["error_mean"]["paper"],
                                err[:, :, 2].mean(0))
  assert res["summary"]["paper"]["mean_error"] == err.mean()
  assert list(res["summary"]["paper"]["mean_error_by_dataset"]) == ["mnist", "svhn"]
  assert res["correlation"]["gnmax"]["per_histogram_and_sigma"]["n"] == 8
  paths = A.plot_fixed_queries(tmp_path, res, num_seeds=2)
  assert [p.split("/")[-1][:4] for p in paths] == ["fig6", "fig7", "fig5"]
  assert all((tmp_path / p.split("/")[-1]).stat().st_size > 0 for p in paths)


@pytest.mark.slow
def test_budget_limited_with_ledger_and_figure(tmp_path):
  sel = [10, 11]
  params = {"threshold": 200.0, "sigma_threshold": 150.0, "sigma": 40.0, "delta": 1e-5,
            "budget": 0.3}
  out = A.budget_limited(A.seed_keys(KEY, 2), A.seed_keys(jax.random.key(3), 2), TABLE[sel],
                         [NAMES[b] for b in sel], params=params, variants={"paper": PAPER},
                         ledger_batch=512)
  rows = out["histograms"]
  assert [r["name"] for r in rows] == ["mnist/H1", "mnist/H2"]
  assert set(rows[0]["error_mean"]) == {"confident/paper", "gnmax_all/paper"}
  for r, m in zip(rows, out["summary"]["queries_allowed"]):
    assert r["queries_allowed"] == m and 0 < r["mean_answered"] <= m
    assert r["ledger"]["epsilon"] <= 0.3 and "counts" not in r["ledger"]
  results = {"histograms": rows, "datasets": {"mnist": out["summary"], "svhn": out["summary"]},
             "variants": ["paper"], "samplers": ["confident", "gnmax_all"]}
  path = A.plot_budget(tmp_path / "fig4.png", results, {"mnist": 0.3, "svhn": 0.3})
  assert (tmp_path / "fig4.png").stat().st_size > 0 and path.endswith("fig4.png")


@pytest.mark.slow
def test_edge_and_defense_settings_and_figures(tmp_path):
  keys = A.seed_keys(KEY, 2)
  edge = A.edge_sigmas(keys, M3, sigmas=[0.01, 60.0], num_queries=300,
                       variants={"paper": PAPER})
  assert edge["error_mean"]["paper"].shape == (2,)
  # σ → 0: only the top class is seen; the solver cannot beat the uniform start by much.
  assert edge["q_top_probability"][0] == pytest.approx(1.0)
  assert edge["error_mean"]["paper"][1] < edge["error_mean"]["paper"][0]
  A.plot_edge(tmp_path / "edge.png", edge, "M3")
  names = [NAMES[b] for b in _FOUR]
  res = A.consistent_answers(keys, TABLE[_FOUR], names, sigmas=[60.0], num_queries=300,
                             variants={"paper": PAPER})
  s = res["summary"]
  # The one cached answer is one noisy draw: at σ 60 mostly the top class, but mnist/L1's
  # and svhn/L1's can be another (a gap of 131 votes is 1.5 standard deviations of two
  # draws' difference).
  assert 0.5 <= s["consistent_answer_is_true_top_fraction"] <= 1.0
  # Consistent answers reveal no more than one answer: at best the top class's one-hot q̄.
  assert s["consistent/paper"]["mean_error"] >= s["top_class_only/paper"]["mean_error"] - 1e-9
  assert s["fresh_noise/paper"]["mean_error"] < s["consistent/paper"]["mean_error"]
  A.plot_defense(tmp_path / "defense.png", res)
  assert (tmp_path / "edge.png").exists() and (tmp_path / "defense.png").exists()


def test_consensus_figure(tmp_path):
  votes, minority = _adult_votes()
  rates = A.group_rates(np.asarray(A.classify_low_consensus(votes)), minority)
  A.plot_consensus_groups(tmp_path / "f.png", rates, rates,
                          np.asarray(A.consensus(votes)), minority, 0.75, ("a", "b"))
  assert (tmp_path / "f.png").stat().st_size > 0


def test_consensus_figure_draws_an_empty_group_as_no_bar(tmp_path):
  """A run with few individuals can have no minority member: its shares are None, drawn as
  no bar, not a TypeError after the votes were written."""
  votes = np.array([[5, 0], [3, 2], [4, 1]])
  minority = np.zeros(3, bool)
  rates = A.group_rates(np.asarray(A.classify_low_consensus(votes)), minority)
  assert rates["minority_low"] is None and rates["minority_high"] is None
  A.plot_consensus_groups(tmp_path / "f.png", rates, rates,
                          np.asarray(A.consensus(votes)), minority, 0.75, ("a", "b"))
  assert (tmp_path / "f.png").stat().st_size > 0


def test_lowest_consensus_picks_the_fewest_top_votes_and_names_bad_counts():
  votes = np.array([[5, 0], [3, 2], [4, 1], [3, 2]])
  np.testing.assert_array_equal(A.lowest_consensus(votes, 2), [1, 3])
  with pytest.raises(ValueError, match="num_histograms"):
    A.lowest_consensus(votes, 5)
