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
