"""pate_jax.reporting and the stage helpers moved out of the entry scripts (hand-computed)."""

import numpy as np
import pytest

from pate_jax import mechanisms, reporting


def test_vote_summary_by_hand():
  votes = np.array([[3, 1, 0], [0, 2, 2], [0, 0, 4], [1, 3, 0]])  # 4 teachers
  labels = np.array([0, 2, 2, 1])
  s = reporting.vote_summary(votes, labels, 2, np.array([0.5, 0.25, 1.0, 0.75]))
  assert s["teacher_test_accuracy"] == {"mean": 0.625, "min": 0.25, "max": 1.0}
  assert s["plurality_accuracy_test"] == 0.75  # row 1's tie goes to class 1
  assert s["plurality_accuracy_eval"] == 1.0 and (s["num_eval"], s["num_test"]) == (2, 4)
  np.testing.assert_allclose(s["mean_normalized_gap"], (0.5 + 0.0 + 1.0 + 0.5) / 4)


def test_headlines_and_config_record():
  r = {"num_teachers": 2, "examples_per_teacher": 10, "dataset": "digits",
       "teacher_test_accuracy": {"mean": 0.5, "min": 0.25, "max": 0.75},
       "plurality_accuracy_test": 0.5, "plurality_accuracy_eval": 1.0,
       "mean_normalized_gap": 0.125, "wall_seconds": 3.0, "reused_votes": True}
  assert reporting.teachers_headline(r) == (
      "2 teachers × 10 examples (digits): test accuracy mean 50.00% (25.00%–75.00%), "
      "plurality 50.00% (test) / 100.00% (eval); mean normalized gap 0.125; wall 3 s "
      "(an earlier run's; votes.npz reused)")
  agg = {"mechanism": "lnmax", "noise": {"gamma": 0.05}, "num_answered": 3, "num_queries": 4,
         "label_accuracy_answered": None,
         "noise_source": {"public": True, "note": "this run's noise is public"},
         "epsilon": {"strong_composition": {"epsilon": 2.0, "delta": 1e-5}},
         "epsilon_release": "lnmax: no smooth-sensitivity analysis",
         "ledger": {"epsilon": 2.5, "epsilon_max": 6.0, "num_charged": 4, "releases": 0,
                    "kept_in": "here"},
         "private": {"plurality_accuracy": 0.5, "epsilon": {
             "moments_data_dependent": {"epsilon": 1.5, "best_moment": 3, "delta": 1e-5}}}}
  assert reporting.aggregate_headline(agg) == [
      "NOTE: this run's noise is public",
      "lnmax {'gamma': 0.05}: 3 of 4 queries answered, label accuracy n/a",
      "  ε strong_composition = 2 at δ = 1e-05",
      "  released ε: lnmax: no smooth-sensitivity analysis",
      "  budget: ε 2.5 of ε_max 6 spent, the bound on everything this budget released "
      "(4 queries charged, 0 release(s); kept in here)",
      "private (data owner only): plurality accuracy 50.0%",
      "  private (data owner only): ε moments_data_dependent = 1.5 (best moment 3) at "
      "δ = 1e-05"]
  agg["ledger"].update(delta=1e-5, sampler_delta=2.0164e-10)  # as the aggregate stage's
  assert reporting.aggregate_headline(agg)[4] == (
      "  budget: ε 2.5 of ε_max 6 spent at δ = 1e-05 + 2.0e-10 (the float64 noise "
      "samplers' error, answers and releases), the bound on everything this budget "
      "released (4 queries charged, 0 release(s); kept in here)")
  record = reporting.config_record({"gamma": 0.1, "sigma": 40.0, "seed": 0}, mechanisms.LNMAX)
  assert record == {"gamma": 0.1, "seed": 0}


def test_a_students_plot_point_keeps_its_delta_and_samplers_term():
  """students.png's ε axis names the δ its points share (and the samplers' term where a
  ledger recorded one), not a fixed 1e-5."""
  from pate_jax.students import plots  # pylint: disable=g-import-not-at-top
  base = {"student": "pate_g", "num_queries": 100, "eval_accuracy": 0.98,
          "epsilon_release": {"epsilon_released": 1.05}}
  p = plots.point({**base, "delta": 1e-6, "ledger": {"sampler_delta": 2e-10}}, "a",
                  "publishable: ...")
  assert (p["epsilon"], p["delta"], p["sampler_delta"], p["private"]) == (
      1.05, 1e-6, 2e-10, False)
  assert plots.delta_label([p]) == "δ = 1e-06 + the samplers' term"
  older = plots.point(base, "b")  # a file written before δ and the term were recorded
  assert older["delta"] is None and older["sampler_delta"] is None
  assert plots.delta_label([older]) == "δ = 1e-05"
  other = plots.point({**base, "delta": 1e-5}, "c")
  assert plots.delta_label([p, other]) == "δ per point (students.json) + the samplers' term"
  no_epsilon = {**other, "epsilon": None, "delta": 1e-3}  # plurality labels: no ε to name
  assert plots.delta_label([other, no_epsilon]) == "δ = 1e-05"


def test_a_students_plot_point_from_a_file_without_its_noise_source_is_private():
  """A student's results.json that records neither its disclosure nor its labels' noise
  source (the committed supervised_100, active_500, vat_100: every run's noise was seeded
  then) is a research measurement: its point is private, as the README says."""
  from pate_jax.students import plots  # pylint: disable=g-import-not-at-top
  old = {"student": "supervised", "labels": "noisy", "num_queries": 100,
         "eval_accuracy": 0.796,
         "epsilon": {"moments_data_independent": {"epsilon": 5.3, "delta": 1e-5}}}
  assert plots.point(old, "supervised_100")["private"]
  assert plots.point({**old, "active_rounds": [{}]}, "active_500")["private"]
  secret = {**old, "noise_source": {"public": False}}
  assert not plots.point(secret, "a", "publishable: ...")["private"]
  assert not plots.point(secret, "b")["private"]  # its noise source says secret
  assert not plots.point({**old, "labels": "true"}, "c")["private"]  # no teacher at all


def test_split_epsilon_keeps_the_data_dependent_entries_out_of_the_publishable_part():
  """Every data-dependent ε (a function of the votes) goes to the private part; the
  data-independent ones stay publishable."""
  report = {"moments_data_independent": {"epsilon": 5.0}, "strong_composition": {"epsilon": 6.0},
            "moments_data_dependent": {"epsilon": 1.5},
            "renyi_data_dependent_smooth": {"epsilon": 1.2}}
  public, private = reporting.split_epsilon(report)
  assert set(public) == {"moments_data_independent", "strong_composition"}
  assert set(private) == {"moments_data_dependent", "renyi_data_dependent_smooth"}
  assert reporting.split_epsilon({}) == ({}, {})


def test_the_vote_gap_figure_is_titled_private(tmp_path, monkeypatch):
  """The teachers' vote gap histogram is drawn from their votes: its title says it is
  private before anything else."""
  from pate_jax import experiment  # pylint: disable=g-import-not-at-top
  from pate_jax.reporting import _plots  # pylint: disable=g-import-not-at-top
  saved = []
  monkeypatch.setattr(_plots.io, "save_figure", lambda fig, path, **_: saved.append(fig))
  _plots.plot_gap(np.array([0.1, 0.5, 0.9]), 3, tmp_path / "gap.png")
  (ax,) = saved[0].axes
  assert ax.get_title().startswith(experiment.PRIVATE_TITLE), ax.get_title()


def test_the_main_jobs_report_keeps_the_private_values_below_its_private_heading():
  """report.md of the committed CPU main job: the teachers, the data-dependent ε and the
  attack's histograms sit below "## Private: for the data owner only", their table headings
  and the figures drawn from them say private, and the publishable part holds the student's
  figure alone."""
  import json  # pylint: disable=g-import-not-at-top
  import pathlib  # pylint: disable=g-import-not-at-top
  path = pathlib.Path(__file__).resolve().parent.parent / "results/runs/pate_mnist_cpu"
  s = json.loads((path / "results.json").read_text())["results"]
  md = reporting.main_job_markdown(s, {k: f"{k}.png" for k in ("student", "gap", "privacy",
                                                                "attack")})
  public, private = md.split("\n## Private: for the data owner only\n")
  for heading in ("### Teachers", "### Data-dependent ε", "### Histogram attack"):
    assert heading in private and heading not in public, heading
  assert "| data-dependent ε (private) |" in private and "| votes (private) |" in private
  assert "plurality vote" in private and "plurality" not in public
  figures = [ln for ln in md.splitlines() if ln.startswith("![")]
  assert figures == ["![student accuracy](student.png)", "![private: vote gap](gap.png)",
                     "![private: epsilon vs queries](privacy.png)",
                     "![private: attack](attack.png)"]
  assert figures[0] in public and all(f in private for f in figures[1:])


def test_privacy_curves_of_20_and_21_queries_share_their_compiled_costs():
  # Rows are padded as in epsilon_report: 21 queries compile no new cost.
  from pate_jax.accounting import _gnmax  # pylint: disable=g-import-not-at-top
  gen = np.random.default_rng(0)
  votes = np.stack([gen.multinomial(50, np.full(10, 0.1)) for _ in range(21)]).astype(np.int32)
  curve = lambda n: reporting.privacy_curve(
      mechanisms.GNMAX, {"sigma": 4.0}, votes[:n], np.ones(n, bool), np.ones(n, bool), None,
      delta=1e-5, max_moment=8, points=3)
  curve(20)
  size = _gnmax.gnmax_rdp_core._cache_size()  # pylint: disable=protected-access
  got = curve(21)
  assert _gnmax.gnmax_rdp_core._cache_size() == size  # pylint: disable=protected-access
  # The padding rows are not composed: ε after 21 queries is epsilon_report's.
  rep = mechanisms.epsilon_report(mechanisms.GNMAX, {"sigma": 4.0}, votes, np.ones(21, bool),
                                  np.ones(21, bool), delta=1e-5)
  assert got["queries_charged"][-1] == 21
  assert got["epsilon"]["data-dependent"][-1] == rep["rdp_data_dependent_improved"]["epsilon"]
