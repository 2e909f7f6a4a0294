"""Confident-GNMax in the tabular stage (Papernot et al. 2018, Section 4.1, Table 1's Adult row).

Synthetic votes and inputs only: which rows are answered (a hand computation with the same
keys, and a deterministic case), the ε against the library's accountant called directly,
the students on the answered rows, the configs and their validation, and one tiny run of
the stage on a synthetic Adult.
"""

from __future__ import annotations

import math
import pathlib

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
import scipy.stats

from pate_jax import accounting, experiment, rng, tabular
from pate_jax.stages import tabular as stage
from test_tabular import _adult_like  # tests/test_tabular.py's synthetic Adult CSV  # pylint: disable=g-bad-import-order

REPO = pathlib.Path(__file__).resolve().parent.parent
ORDERS = (1.5, 2.0, 3.0, 5.0, 8.0, 16.0, 32.0, 64.0)
PARAMS = tabular.ConfidentParams(threshold=7.0, sigma_threshold=2.0, sigma=1.5)


def _votes(q=48, c=3, teachers=10, seed=0):
  """Rows of ``teachers`` votes over ``c`` classes, from unanimous to split (test-only RNG)."""
  r = np.random.default_rng(seed)
  probs = r.dirichlet(np.full(c, 0.3), size=q)
  return np.stack([r.multinomial(teachers, p) for p in probs]).astype(np.int32)


def _accountant(conversion="improved"):
  return tabular.Accountant(delta=1e-5, orders=ORDERS, conversion=conversion)


def _config(name, arg=None):
  return experiment.load_script(REPO / "configs" / name).get_config(arg)


# ----------------------------------------------------------------------------- answers


def test_answered_rows_match_a_hand_computation_with_the_same_keys():
  votes = _votes()
  key = stage.confident_gnmax_key(rng.root_key(0))
  labels, answered = tabular.confident_labels(key, votes, PARAMS)
  for i, row in enumerate(votes):  # query i: split(fold_in(key, i)) -> (check, answer)
    with jax.enable_x64(True):  # the noise is float64 (pate_jax.mechanisms)
      k_check, k_answer = jax.random.split(jax.random.fold_in(key, i))
      above = bool(row.max() + PARAMS.sigma_threshold * jax.random.normal(
          k_check, (), jnp.float64) >= PARAMS.threshold)
      best = int(jnp.argmax(row.astype(np.float64) + PARAMS.sigma * jax.random.normal(
          k_answer, row.shape, jnp.float64)))
    assert bool(answered[i]) == above
    assert labels[i] == (best if answered[i] else -1)
  assert 0 < answered.sum() < len(votes)  # both outcomes occur


def test_tiny_threshold_noise_answers_exactly_the_rows_at_or_above_the_threshold():
  votes = _votes(q=60)
  params = tabular.ConfidentParams(threshold=6.5, sigma_threshold=1e-6, sigma=1e-6)
  labels, answered = tabular.confident_labels(jax.random.key(3), votes, params)
  np.testing.assert_array_equal(answered, votes.max(axis=1) >= 6.5)
  top = votes.max(axis=1)
  unique_top = (votes == top[:, None]).sum(axis=1) == 1
  np.testing.assert_array_equal(labels[answered & unique_top],
                                votes.argmax(axis=1)[answered & unique_top])
  assert (labels[~answered] == -1).all()
  # Per-query keys: the answer to row i does not depend on how many rows are asked.
  first, first_answered = tabular.confident_labels(jax.random.key(3), votes[:17], params)
  np.testing.assert_array_equal(first, labels[:17])
  np.testing.assert_array_equal(first_answered, answered[:17])


def test_the_confident_key_is_not_a_draw_of_lnmax_or_gnmax():
  root = rng.root_key(0)
  noise = rng.stream(root, "aggregation")
  mine = jax.random.key_data(stage.confident_gnmax_key(root))
  for r in range(64):  # the sweeps' draws fold r < num_seeds, student_repeats into it
    assert not np.array_equal(mine, jax.random.key_data(jax.random.fold_in(noise, r)))


# ----------------------------------------------------------------------------- ε


@pytest.mark.slow  # 4.6-6.6 s on the 2-core CPU.
def test_epsilon_matches_the_library_accountant_called_directly():
  votes = _votes()
  _, answered = tabular.confident_labels(jax.random.key(1), votes, PARAMS)
  eps = tabular.confident_epsilon(_accountant(), votes, answered, PARAMS)
  orders = np.asarray(ORDERS)
  with jax.enable_x64(True):
    check = accounting.confident_threshold_rdp(votes, PARAMS.threshold,
                                               PARAMS.sigma_threshold, orders)
    gnmax = accounting.gnmax_rdp(votes, PARAMS.sigma, orders, data_dependent=True)
    cost = check + jnp.where(jnp.asarray(answered)[:, None], gnmax, 0.0)
    for conversion, suffix in (("improved", ""), ("classic", "_classic")):
      ref, best = accounting.rdp_accountant(orders, conversion).compose(cost).epsilon(1e-5)
      assert eps["data_dependent" + suffix]["epsilon"] == pytest.approx(float(ref), rel=1e-9)
      assert eps["data_dependent" + suffix]["best_order"] == float(best)
      # Data-independent: λ/(2σ_T²) for every query, λ/σ² for the answered ones.
      rdp = (len(votes) * orders / (2 * PARAMS.sigma_threshold**2)
             + answered.sum() * orders / PARAMS.sigma**2)
      ref, best = accounting.rdp_to_epsilon(rdp, orders, 1e-5, conversion)
      assert eps["data_independent" + suffix]["epsilon"] == pytest.approx(float(ref),
                                                                          rel=1e-9)
    expected = tabular.confident_expected(_accountant(), votes, PARAMS)
    pr = np.exp(np.asarray(accounting.confident_log_pr_answered(
        votes, PARAMS.threshold, PARAMS.sigma_threshold)))
    assert expected["answered"] == pytest.approx(float(pr.sum()), rel=1e-12)
    rdp = accounting.confident_gnmax_rdp(votes, PARAMS.threshold, PARAMS.sigma_threshold,
                                         PARAMS.sigma, orders)
    ref, _ = accounting.rdp_accountant(orders, "improved").compose(rdp).epsilon(1e-5)
    assert expected["epsilon"] == pytest.approx(float(ref), rel=1e-9)
  assert eps["data_dependent"]["epsilon"] <= eps["data_independent"]["epsilon"] * (1 + 1e-12)
  with pytest.raises(ValueError, match="answered must have shape"):
    tabular.confident_epsilon(_accountant(), votes, answered[:-1], PARAMS)


# ----------------------------------------------------------------------------- students


def _task(n=120, seed=0):
  """Votes that mostly agree with the labels, and inputs that predict them."""
  r = np.random.default_rng(seed)
  labels = r.integers(0, 2, n)
  strong = r.integers(7, 11, n)
  votes = np.stack([10 - strong, strong], axis=1)
  votes[labels == 0] = votes[labels == 0, ::-1]
  features = (labels[:, None] + 0.8 * r.normal(size=(n, 3))).astype(np.float32)
  return votes.astype(np.int32), labels, features


@pytest.mark.slow
def test_students_train_on_the_answered_rows_and_score_the_rest():
  votes, labels, features = _task()
  key, forest, seeds = jax.random.key(5), tabular.random_forest(3), [11, 12]
  public, private = tabular.confident_gnmax_run(
      key, votes, labels, features, num_queries=70, params=PARAMS, estimator=forest,
      random_states=seeds, accountant=_accountant(), n_jobs=1)
  noisy, answered = tabular.confident_labels(key, votes[:70], PARAMS)
  rows = np.flatnonzero(answered)
  assert (public["num_queries"], public["num_answered"], public["num_eval"]) == (
      70, rows.size, 50)
  assert public["label_accuracy"] == np.mean(noisy[rows] == labels[rows])
  expected = [tabular.fit_and_score(forest, s, features[rows], noisy[rows], features[70:],
                                    labels[70:]) for s in seeds]
  assert public["student_accuracies"] == expected
  assert public["student_accuracy_mean"] == pytest.approx(np.mean(expected))
  eps = tabular.confident_epsilon(_accountant(), votes[:70], answered, PARAMS)
  assert public["epsilon_data_independent"] == eps["data_independent"]["epsilon"]
  assert private["epsilon_data_dependent"] == eps["data_dependent"]["epsilon"]
  assert not any("data_dependent" in k for k in public)  # the private part holds them
  assert {"expected_answered", "expected_epsilon_data_dependent"} <= set(private)

  never = tabular.ConfidentParams(threshold=1e4, sigma_threshold=1.0, sigma=1.0)
  public, _ = tabular.confident_gnmax_run(
      key, votes, labels, features, num_queries=70, params=never, estimator=forest,
      random_states=seeds, accountant=_accountant(), n_jobs=1)
  assert public["num_answered"] == 0 and math.isnan(public["student_accuracy_mean"])
  with pytest.raises(ValueError, match="num_queries"):
    tabular.confident_gnmax_run(key, votes, labels, features, num_queries=120, params=PARAMS,
                                estimator=forest, random_states=seeds,
                                accountant=_accountant())


# ----------------------------------------------------------------------------- configs


def test_the_cgn_variant_has_the_papers_values_and_the_default_is_off():
  c = _config("adult_uci_rf.py", "cgn")
  params, asked = stage.confident_gnmax_settings(c, 16281)
  assert params == tabular.ConfidentParams(300.0, 200.0, 40.0) and asked == 1500
  assert (c.num_teachers, c.delta, c.rdp_conversion) == (250, 1e-5, "improved")
  assert stage.confident_gnmax_settings(_config("adult_uci_rf.py")) is None
  assert stage.confident_gnmax_settings(_config("adult_rf.py")) is None
  assert stage.confident_gnmax_settings(_config("adult_rf.py", "cpu")) is None
  small = _config("adult_uci_rf.py", "cpu,cgn")
  assert stage.confident_gnmax_settings(small)[0] == tabular.ConfidentParams(30.0, 20.0, 4.0)
  default = _config("adult_rf.py")
  default.confident_gnmax.enabled = True  # num_queries None: the pool
  assert stage.confident_gnmax_settings(default)[1] == default.num_pool == 500
  with pytest.raises(ValueError, match="unknown or conflicting"):
    _config("adult_uci_rf.py", "cgm")


@pytest.mark.parametrize("field,value", [
    ("enabled", "yes"), ("threshold", float("nan")), ("threshold", "300"),
    ("sigma_threshold", 0.0), ("sigma", -40.0), ("sigma", float("inf")),
    ("num_queries", 0), ("num_queries", 2.5)])
def test_bad_config_values_name_the_field(field, value):
  c = _config("adult_uci_rf.py", "cgn")
  fields = {**c.confident_gnmax.to_dict(), field: value}
  c.confident_gnmax = ml_collections.ConfigDict(fields)
  with pytest.raises(ValueError, match=rf"confident_gnmax\.{field}"):
    stage.confident_gnmax_settings(c, 16281)


def test_too_many_queries_for_the_query_rows_names_the_field():
  c = _config("adult_uci_rf.py", "cgn")
  with pytest.raises(ValueError, match=r"confident_gnmax\.num_queries must be below the 1500"):
    stage.confident_gnmax_settings(c, 1500)


# ----------------------------------------------------------------------------- the stage


@pytest.mark.slow
def test_the_stage_reports_confident_gnmax_with_a_private_part(tmp_path, capsys):
  r = np.random.default_rng(0)
  _adult_like(tmp_path / "data" / "adult" / "train.csv", 160, r)
  _adult_like(tmp_path / "data" / "adult" / "test.csv", 80, r)
  config = _config("adult_rf.py", "cpu")
  config.data_dir = str(tmp_path / "data")
  config.num_teachers, config.n_estimators, config.n_jobs = 4, 2, 1
  config.student_n_estimators = config.baseline_n_estimators = 2
  config.num_pool, config.query_counts, config.num_seeds = 20, [20], 2
  config.lnmax_gammas, config.gnmax_sigmas, config.reference_pools = [0.5], [2.0], 0
  config.student_repeats = 2
  config.confident_gnmax.update({"enabled": True, "threshold": 3.0, "sigma_threshold": 1.0,
                                 "sigma": 1.0, "num_queries": 40})
  res = experiment.run_and_report(stage.run, stage.report, config, str(tmp_path / "work"))
  cgn = res["confident_gnmax"]
  assert cgn["num_queries"] == 40 and cgn["num_eval"] == 40 and cgn["student_repeats"] == 2
  assert 0 <= cgn["num_answered"] <= 40 and cgn["threshold"] == 3.0
  assert "epsilon_data_dependent" not in cgn and "note" in cgn["private"]
  assert cgn["private"]["epsilon_data_dependent"] <= cgn["epsilon_data_independent"] * (
      1 + 1e-12)
  assert "Confident-GNMax (T=3" in capsys.readouterr().out
  # The LNMax / GNMax results do not depend on whether Confident-GNMax runs.
  config.confident_gnmax.enabled = False
  off = stage.run(config, tmp_path / "work_off")
  assert "confident_gnmax" not in off
  for m in ("lnmax", "gnmax"):
    assert off[m]["student_accuracy"] == res[m]["student_accuracy"]
    assert off[m]["epsilon_data_dependent"] == res[m]["epsilon_data_dependent"]


def _rdp_to_epsilon(rdp, orders, delta, conversion):
  """(ε, best order) from an RDP curve: Mironov's classic bound or Balle et al.'s (NumPy)."""
  if conversion == "classic":
    eps = rdp + math.log(1 / delta) / (orders - 1)
  else:
    eps = rdp + np.log1p(-1 / orders) - (math.log(delta) + np.log(orders)) / (orders - 1)
  return max(float(eps.min()), 0.0), float(orders[np.argmin(eps)])


def test_the_data_independent_epsilon_charges_every_row_the_check_and_answered_ones_gnmax():
  """Closed form: RDP(λ) = Q λ/(2σ_T²) + A λ/σ² (A answered rows), under each conversion;
  the data-dependent ε lies below it; a wrong-length ``answered`` is refused."""
  votes = _task(20)[0][:12]
  answered = np.arange(12) % 3 == 0
  eps = tabular.confident_epsilon(_accountant(), votes, answered, PARAMS)
  orders = np.asarray(ORDERS)
  rdp = (12 * orders / (2 * PARAMS.sigma_threshold**2)
         + answered.sum() * orders / PARAMS.sigma**2)
  for conversion, suffix in (("improved", ""), ("classic", "_classic")):
    want, best = _rdp_to_epsilon(rdp, orders, 1e-5, conversion)
    got = eps["data_independent" + suffix]
    assert got["epsilon"] == pytest.approx(want, rel=1e-9) and got["best_order"] == best
    assert eps["data_dependent" + suffix]["epsilon"] < want
  with pytest.raises(ValueError, match="answered must have shape"):
    tabular.confident_epsilon(_accountant(), votes, answered[:-1], PARAMS)


def test_the_expected_accounting_where_no_bound_is_data_dependent():
  """σ_T = 50 and σ = 40 with 10 teachers: every q is near 1/2, where Theorem 6 does not
  apply, so E[RDP](λ) = Σ_i λ/(2σ_T²) + Pr[answered_i] λ/σ², Pr[answered_i] =
  Φ((max_j n_ij - T)/σ_T), and E[answered] their sum."""
  votes = _task(20)[0][:12]
  params = tabular.ConfidentParams(threshold=7.0, sigma_threshold=50.0, sigma=40.0)
  out = tabular.confident_expected(_accountant(), votes, params)
  pr = scipy.stats.norm.cdf((votes.max(axis=1) - 7.0) / 50.0)
  assert out["answered"] == pytest.approx(pr.sum(), rel=1e-12)
  orders = np.asarray(ORDERS)
  rdp = 12 * orders / (2 * 50.0**2) + pr.sum() * orders / 40.0**2
  for conversion, suffix in (("improved", ""), ("classic", "_classic")):
    want, best = _rdp_to_epsilon(rdp, orders, 1e-5, conversion)
    assert out["epsilon" + suffix] == pytest.approx(want, rel=1e-9)
    assert out["best_order" + suffix] == best


class _Recorder:
  """A student that records what it was fitted on and predicts class 0 everywhere."""
  fits = []

  def __init__(self, random_state):
    self.random_state = random_state

  def fit(self, x, y):
    _Recorder.fits.append((self.random_state, np.asarray(x), np.asarray(y)))
    return self

  def predict(self, x):
    return np.zeros(len(x), np.int64)


def test_the_run_trains_on_the_answered_rows_noisy_labels_and_reports_them(monkeypatch):
  votes, labels, features = _task(20)
  monkeypatch.setattr(_Recorder, "fits", [])
  key = jax.random.key(5)
  public, private = tabular.confident_gnmax_run(
      key, votes, labels, features, num_queries=12, params=PARAMS, estimator=_Recorder,
      random_states=[3, 4], accountant=_accountant(), n_jobs=1)
  noisy, answered = tabular.confident_labels(key, votes[:12], PARAMS)
  rows = np.flatnonzero(answered)
  assert 0 < rows.size < 12 and np.any(noisy[rows] != labels[rows])
  assert [f[0] for f in _Recorder.fits] == [3, 4]
  for _, x, y in _Recorder.fits:
    np.testing.assert_array_equal(x, features[rows])
    np.testing.assert_array_equal(y, noisy[rows])
  assert public["num_answered"] == rows.size and public["num_eval"] == 8
  assert public["answered_fraction"] == rows.size / 12
  assert public["label_accuracy"] == np.mean(noisy[rows] == labels[rows])
  assert public["student_accuracies"] == [np.mean(labels[12:] == 0)] * 2
  pr = scipy.stats.norm.cdf((votes[:12].max(axis=1) - PARAMS.threshold)
                            / PARAMS.sigma_threshold)
  assert private["expected_answered"] == pytest.approx(pr.sum(), rel=1e-12)
  with pytest.raises(ValueError, match="num_queries"):
    tabular.confident_gnmax_run(key, votes, labels, features, num_queries=20, params=PARAMS,
                                estimator=_Recorder, random_states=[3],
                                accountant=_accountant(), n_jobs=1)


def test_the_runs_public_epsilon_is_the_data_independent_closed_form(monkeypatch):
  """The public ε of a run (both conversions, and its best order) is the data-independent
  Q λ/(2σ_T²) + A λ/σ² of the rows answered, a function of the answers' count only, above
  the data-dependent ε that only the private part reports; the private part's expected ε is
  the paper's accounting under the accountant's conversion and the classic one."""
  votes, labels, features = _task(20)
  monkeypatch.setattr(_Recorder, "fits", [])
  key = jax.random.key(5)
  public, private = tabular.confident_gnmax_run(
      key, votes, labels, features, num_queries=12, params=PARAMS, estimator=_Recorder,
      random_states=[3], accountant=_accountant(), n_jobs=1)
  _, answered = tabular.confident_labels(key, votes[:12], PARAMS)
  orders = np.asarray(ORDERS)
  rdp = (12 * orders / (2 * PARAMS.sigma_threshold**2)
         + answered.sum() * orders / PARAMS.sigma**2)
  eps, best = _rdp_to_epsilon(rdp, orders, 1e-5, "improved")
  assert public["epsilon_data_independent"] == pytest.approx(eps, rel=1e-9)
  assert public["best_order_data_independent"] == best
  classic, _ = _rdp_to_epsilon(rdp, orders, 1e-5, "classic")
  assert public["epsilon_data_independent_classic"] == pytest.approx(classic, rel=1e-9)
  assert private["epsilon_data_dependent"] < eps
  assert private["epsilon_data_dependent_classic"] < classic
  expected = tabular.confident_expected(_accountant(), votes[:12], PARAMS)
  assert private["expected_epsilon_data_dependent"] == expected["epsilon"]
  assert private["expected_epsilon_data_dependent_classic"] == expected["epsilon_classic"]
  assert expected["epsilon"] < expected["epsilon_classic"]
