"""Tabular PATE: scikit-learn-style teachers (random forests) and tabular coding.

Reference: Papernot et al., "Semi-supervised Knowledge Transfer for Deep
Learning from Private Training Data", ICLR 2017, Appendix C (random-forest
teachers and student on UCI Adult and Diabetes).

Public API::

  fit_teachers(key, features, labels, T, num_classes=C, estimator=...) -> TeacherEnsemble
  teacher_votes(ensemble, queries) -> (votes int32 [Q, C], preds int32 [T, Q])
  predict_teachers(ensemble, queries) -> preds int32 [T, Q]
  fit_model(key, features, labels, estimator=...) -> fitted estimator
  random_forest(n_estimators=100, **sklearn_kwargs) -> unfitted forest prototype
  random_states(key, n) -> int64 [n] seeds fold_in(key, i)
  save_teacher_predictions(path, ensemble, preds, num_pool=P) / ensemble_summary(...) -> dict

Experiment pieces (Appendix C: students on noisy labels, sweeps, ε)::

  load_task(key, dataset, data_dir, ...) -> (train, queries, name)
  NUM_CLASSES: every task's classes, by its binary coding (not counted on the rows)
  label_chosen(dataset, preparation) -> whether the preparation looks at the private rows
  Accountant(delta, max_moment, orders, conversion, max_moment_wide)
  epsilon(accountant, mechanism, votes, scale) -> (ε, best order)
  prefix_epsilon(accountant, mechanism, votes, scale, counts) -> float64 [N]
  prefix_totals(per_query_cost [Q, K], counts [N]) -> float64 [N, K]
  StudentTask(x_pool, x_eval, y_eval, estimator, n_jobs) / accuracy / fit_and_score
  student_accuracies(task, random_states [N], label_sets) -> float64 [N]
  random_pool_accuracies(key, estimator, features, labels, num_pool, num_pools, seed) -> [K]
  query_counts(counts, num_pool) -> sorted prefix lengths
  noisy_label_grid(key, votes, mechanism, scales [S], R) -> int32 [S, R, Q]
  sweep_mechanism(key, mechanism, votes, labels, plurality, ...) -> (summary, sweeps)
  plot_sweeps(path, sweeps, non_private, ...) -> PNG

Confident-GNMax (Papernot et al. 2018, Section 4.1, Table 1's Adult row)::

  ConfidentParams(threshold, sigma_threshold, sigma) / check_confident_params(params, prefix)
  confident_labels(key, votes, params) -> (labels int32 [Q] (-1: not answered), answered [Q])
  confident_epsilon(accountant, votes, answered, params) -> realised ε, data-(in)dependent
  confident_expected(accountant, votes, params) -> E[answered], ε of E[RDP] (the paper's)
  confident_gnmax_run(key, votes, labels, features, num_queries=..., ...) -> (public, private)

  read_csv / fit_encoder / encode / Encoder / TabularSplit / UNKNOWN_CODE
"""

from __future__ import annotations

from pate_jax.tabular._confident import (ConfidentParams, check_confident_params,
                                         confident_epsilon, confident_expected,
                                         confident_gnmax_run, confident_labels)
from pate_jax.tabular._datasets import (DATASETS, NUM_CLASSES, label_chosen, load_task,
                                        private_data, task_name)
from pate_jax.tabular._plots import plot_sweeps
from pate_jax.tabular._privacy import Accountant, epsilon, prefix_epsilon, prefix_totals
from pate_jax.tabular._students import (StudentTask, accuracy, fit_and_score,
                                       random_pool_accuracies, student_accuracies)
from pate_jax.tabular._sweeps import noisy_label_grid, query_counts, sweep_mechanism
from pate_jax.data import (  # tabular coding lives with the datasets that use it
    UNKNOWN_CODE,
    Encoder,
    TabularSplit,
    encode,
    fit_encoder,
    read_csv,
)
from pate_jax.tabular._teachers import (
    Estimator,
    TeacherEnsemble,
    ensemble_summary,
    fit_model,
    fit_teachers,
    make_estimator,
    predict_teachers,
    random_forest,
    random_states,
    save_teacher_predictions,
    teacher_votes,
)

__all__ = [
    "UNKNOWN_CODE", "Encoder", "TabularSplit", "encode", "fit_encoder", "read_csv",
    "Estimator", "TeacherEnsemble", "fit_model", "fit_teachers", "make_estimator",
    "predict_teachers", "random_forest", "random_states", "teacher_votes",
    "ensemble_summary", "save_teacher_predictions",
    "DATASETS", "NUM_CLASSES", "label_chosen", "load_task", "private_data", "task_name",
    "plot_sweeps",
    "Accountant", "epsilon", "prefix_epsilon", "prefix_totals",
    "StudentTask", "accuracy", "fit_and_score", "random_pool_accuracies",
    "student_accuracies",
    "noisy_label_grid", "query_counts", "sweep_mechanism",
    "ConfidentParams", "check_confident_params", "confident_labels", "confident_epsilon",
    "confident_expected", "confident_gnmax_run",
]
