"""experiments/attack.py end to end: every setting's config, shrunk, writes results and figures."""

from __future__ import annotations

import csv
import json
import pathlib

import chex
import numpy as np
import pytest

from pate_jax import checkpoint
from pate_jax import experiment

import _scripts  # tests/_scripts.py  # pylint: disable=g-bad-import-order

REPO = pathlib.Path(__file__).resolve().parent.parent
ADULT_HEADER = ["age", "workclass", "education", "marital_status", "relationship", "occupation",
                "race", "gender", "capital_gain", "capital_loss", "hours_per_week", "income"]


def _load(*parts):
  return experiment.load_script(REPO.joinpath(*parts))


def _write_adult(root: pathlib.Path) -> None:
  rng = np.random.default_rng(0)
  (root / "adult").mkdir(parents=True)
  for split, n in (("train", 400), ("test", 200)):
    with open(root / "adult" / f"{split}.csv", "w", newline="") as f:
      w = csv.writer(f)
      w.writerow(ADULT_HEADER)
      for _ in range(n):
        edu = rng.choice(["Bachelors", "HS-grad", "Doctorate"], p=[0.45, 0.4, 0.15])
        age, hours = int(rng.integers(18, 80)), int(rng.integers(10, 80))
        income = int((age - 40) / 20 + (hours - 40) / 20 + (edu == "Doctorate")
                     + rng.normal(0, 0.8) > 0.5)
        w.writerow([age, rng.choice(["Private", "Gov"]), edu, "Married", "Husband", "Sales",
                    "White", rng.choice(["Male", "Female"]), 0, 0, hours, income])


def _config(setting, tmp_path):
  c = _load("configs", f"attack_{setting}.py").get_config("cpu")
  if setting in ("fixed", "defense", "edge"):
    c.num_queries, c.sigmas = 200, (40.0, 80.0)
  if setting == "fixed":
    c.num_seeds = 2
    c.query_counts = (100, 400)   # error_vs_queries.png: paper, MLE, bound
    # The MLE runs every row of a call until the slowest stops: on the sweep one row took
    # 94 Newton steps (the whole test 165 s). 20 steps exercise the same program (the
    # results record a row stopped at max_iter as such); its convergence:
    # tests/test_attacks_mle.py.
    c.mle_reconstruction.max_iter = 20
  if setting == "defense":
    del c.variants["mle"]         # the MLE against the defense: tests/test_attacks_mle.py
  if setting == "dirichlet":
    c.alphas, c.num_per_alpha, c.num_queries, c.query_counts = (0.3, 1.0), 2, 500, (200, 800)
  if setting == "budget":
    c.datasets.mnist.budget, c.datasets.svhn.budget = 0.3, 0.6
  if setting == "defense":
    c.ledger = True
  if setting == "adult":
    _write_adult(tmp_path / "data")
    c.data_dir, c.num_teachers, c.n_estimators, c.n_jobs = str(tmp_path / "data"), 8, 5, 1
    c.num_balanced_draws, c.num_end_to_end, c.max_queries = 3, 2, 500
  return c


@pytest.mark.slow
@pytest.mark.parametrize("setting, figures", [
    ("fixed", 4), ("budget", 1), ("edge", 1), ("defense", 1), ("adult", 1), ("dirichlet", 1)])
def test_attack_script_writes_results_and_figures(setting, figures, tmp_path, capsys):
  script = _load("experiments", "attack.py")
  config = _config(setting, tmp_path)
  results = experiment.run_and_report(script.run, None, config, str(tmp_path / "work"))
  tail = capsys.readouterr().out.strip().splitlines()  # the numbers, then the paths
  assert tail[-2] == f"results: {(tmp_path / 'work' / 'results.json').resolve()}"
  assert tail[-1].count(".png") == figures and any(c.isdigit() for c in tail[-3])
  record = json.loads((tmp_path / "work" / "results.json").read_text())
  assert record["results"]["setting"] == setting and record["seed"] == config.seed
  # Teachers trained here on private data: private as a whole, every number's line marked.
  # The published (Table 1) or synthetic histograms: no private data.
  private = setting == "adult"
  assert record["disclosure"] == (experiment.MEASUREMENT if private else
                                  experiment.NO_PRIVATE_DATA)
  if private:
    assert any(line.startswith(experiment.PRIVATE_MARK + "Section 2") for line in tail)
  else:
    assert not any("private" in line for line in tail[:-2])
  assert len(results["figures"]) == figures
  assert all(pathlib.Path(p).stat().st_size > 0 for p in results["figures"])
  if setting == "adult":
    # The attribute the attack infers, the query individuals' own: owner-only.
    assert (tmp_path / "work" / "minority.npy").stat().st_mode & 0o777 == 0o600
    assert np.load(tmp_path / "work" / "minority.npy").dtype == bool
    # The end-to-end reconstructions sum to the number of teachers of the run.
    for ind in results["end_to_end"]["individuals"]:
      assert np.sum(ind["reconstructed"]) == pytest.approx(8, rel=1e-5)
      chex.assert_shape(np.asarray(ind["reconstructed"]), (2,))  # income: two classes


def test_adult_setting_codes_a_private_category_silently(tmp_path, recwarn):
  """The Adult setting codes its columns with the public (test) split's vocabulary. With the
  private training split's, a public category no training row has was a warning, whose
  presence told whether some private row has it; a training row's category the public
  split lacks is coded silently. Its run and its dry run's plan read the same coding."""
  config = _config("adult", tmp_path)  # writes the data
  for split, value in (("train", "Yyy-Private-Only"), ("test", "Zzz-Public-Only")):
    path = tmp_path / "data" / "adult" / f"{split}.csv"
    rows = path.read_text().splitlines()
    rows[5] = rows[5].replace(",Gov,", f",{value},").replace(",Private,", f",{value},")
    path.write_text("\n".join(rows) + "\n")
  from pate_jax.stages import attack as stage  # pylint: disable=g-import-not-at-top
  plan = stage.plan(config)
  assert plan["train_rows"] == 400 and plan["test_rows"] == 200
  assert not [w for w in recwarn if "Only" in str(w.message)], [str(w.message) for w in recwarn]


def test_adult_setting_refuses_to_replace_votes_a_ledger_spent_on(tmp_path):
  """The Adult setting writes the teachers' votes.npz: where an aggregate run has spent a
  budget on the votes there (its ledger beside them), the run is refused before any forest
  is fitted, as the tabular stage's, and the votes are left as they were."""
  work = tmp_path / "work"
  work.mkdir()
  (work / "votes.npz").write_bytes(b"spent on")
  (work / "ledger.npz").write_bytes(b"")
  script = _load("experiments", "attack.py")
  with pytest.raises(checkpoint.ResumeMismatchError, match="ledger.npz.*another --workdir"):
    script.run(_config("adult", tmp_path), str(work))
  assert (work / "votes.npz").read_bytes() == b"spent on"


def test_attack_script_is_a_function_of_its_root_seed(tmp_path):
  """Every draw comes from key(config.seed)'s named streams: same seed, same numbers."""
  script = _load("experiments", "attack.py")
  errors = {}
  for name, seed in (("a", 0), ("b", 0), ("c", 1)):
    config = _config("edge", tmp_path)
    config.seed = seed
    errors[name] = script.run(config, str(tmp_path / name))["error_mean"]
  chex.assert_trees_all_equal(errors["a"], errors["b"])
  with pytest.raises(AssertionError):
    chex.assert_trees_all_close(errors["a"], errors["c"], rtol=1e-6)


def test_unknown_setting_and_headline_raise(tmp_path):
  script = _load("experiments", "attack.py")
  config = _config("edge", tmp_path)
  config.setting = "nope"
  with pytest.raises(ValueError, match="setting"):
    script.run(config, str(tmp_path / "w"))
  config = _config("edge", tmp_path)
  config.headline = "missing"
  with pytest.raises(ValueError, match="headline"):
    script.run(config, str(tmp_path / "w"))


@pytest.mark.parametrize("setting, field, value, match", [
    ("fixed", "sigmas", (40.0, 0.0), r"^config.sigmas must be finite and > 0; found 0.0 at"),
    ("fixed", "sigmas", (), r"^config.sigmas must be a non-empty 1-D array"),
    ("edge", "sigmas", (float("nan"),), r"^config.sigmas must be finite and > 0; found nan"),
    ("fixed", "sweep_sigma", -1.0, r"^config.sweep_sigma must be > 0; got -1.0$"),
    ("fixed", "query_counts", (100, 0), r"^config.query_counts must be an integer >= 1; got 0$"),
    ("dirichlet", "sweep_variants", ("paper", "nope"),
     r"^config.sweep_variants must be one of \(.*'paper'.*\); got 'nope'$"),
])
def test_a_bad_sweep_is_refused_before_any_attack_runs(tmp_path, setting, field, value, match):
  """σ grids were refused as ``sigma`` (an empty one by numpy's stack), a query count of 0
  as ``num_queries`` and an unknown sweep variant as a KeyError, the last two once the σ
  grid had been attacked. Refused before anything runs or is written, by --dry_run too."""
  script = _load("experiments", "attack.py")
  config = _config(setting, tmp_path)
  config[field] = value
  _scripts.assert_refused_before_work(script.run, script.plan, config, tmp_path / "w", match)
