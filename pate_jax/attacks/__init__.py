"""Histogram-extraction attack on PATE (the histogram-leakage paper, in JAX).

Reference: the histogram-leakage attack paper (the text in
../shared/papers/pate-histogram-leakage-attack.txt: Theorem 1, Theorem 2,
Algorithm 2, Sections 2-5, Appendices B-F), called "the attack paper" below.

An attacker who may query PATE repeatedly with one input observes the noisy
argmax many times; the answer frequencies ``q̄`` estimate the output
distribution ``Q(H)`` of the aggregator, which depends on the private vote
histogram ``H``. Minimising ``‖Q(Ĥ) - q̄‖₂`` recovers ``H`` up to a shift, fixed by
the number of teachers.

Public API::

  output_distribution(histograms[..., C], sigma, method="trapezoid"|"accurate",
                      noise="gaussian"|"laplace") -> Q[..., C]             # Theorem 1
  sample_answers(key, histograms[..., C], sigma, num_queries) -> q̄[..., C] # GNMax
  sample_confident_answers(key, histograms, threshold, sigma_threshold, sigma,
                           num_queries) -> (q̄, num_answered)              # answered only
  answer_counts(...) -> (counts, num_answered)
  reconstruct(q̄[..., C], sigma, num_teachers, method="paper"|"optax"|"mle",
              project=False, stop_on_negative=False) -> Ĥ[..., C]          # Steps 2-3
  reconstruct(q̄[..., C+1], σ, N, method="mle", threshold=T, sigma_threshold=σ_T)
                                           # Confident-GNMax, ⊥ last (mle_frequencies)
  fisher_information(histograms, sigma, threshold=None, ...) -> I[..., C, C]  # per query
  cramer_rao(histograms, sigma, num_queries) -> CramerRao(error, std, near_boundary,
                                                          queries_for_error)
  cramer_rao_l1(histograms, sigma, num_queries) -> [...]  # Gaussian approximation
  reconstruct_details(...) -> Reconstruction(histogram, loss, num_steps, status)
  normalized_l1_error(H, Ĥ) -> Σ|H - Ĥ| / (2 Σ|H|)
  per_query_rdp, queries_epsilon, max_queries_within_budget                # privacy cost
  table1_histograms(dataset=None) -> (int32 [B, 10], names)                # Appendix C
  dirichlet_histograms(key, alphas, num_per_alpha) -> (int32 [B, 10], names)  # fresh
  consensus, classify_low_consensus, group_rates                           # Section 2

Evaluation (pate_jax.stages.attack, experiments/attack.py)::

  seed_keys(key, R) -> keys[R]; sample_frequencies(keys, H, σ, M) -> q̄[R, ..., C]
  sample_counts(keys, H, σ, M, threshold=...) -> (counts[R, ..., C], answered[R, ...])
  evaluate(q̄, H, σ, N, **options) -> Evaluation(histogram, error, status, num_steps)
  evaluate_runs, evaluate_variants          # the same for R runs q̄[R, ...] (and variants)
  answer_frequencies, status_counts, mean_by, baseline_errors, pearson
  repeated_query_epsilon, budget_queries                                   # Figures 4-7
  replay_until_refused, replay_consistency                                 # ledger replays
  fixed_queries, budget_limited, edge_sigmas, consistent_answers           # one per setting
  lowest_consensus, produced_histograms            # the main job: a run's own histograms
  one_pixel_copies, pixel_step_copies, gaussian_copies, near_duplicates, gnmax_counts,
  near_duplicate_attack    # the defense caches exact repeats only: near-duplicate queries
  fresh_histograms, query_sweep                    # beyond the paper: MLE and the bound
  searched_forest, balanced_rows, consensus_inference, end_to_end          # Adult, S2, App. D-E
  plot_* (PNG figures of those results)

Every batch argument broadcasts: ``histograms[None]`` with ``sigma[:, None]`` runs
all (σ, histogram) pairs in one compiled call.
"""

from __future__ import annotations

from pate_jax.attacks._adult import (
    RF_SEARCH_SPACE,
    balanced_precisions,
    balanced_rows,
    consensus_inference,
    end_to_end,
    low_high_rows,
    searched_forest,
)
from pate_jax.attacks._bound_experiments import fresh_histograms, query_sweep
from pate_jax.attacks._consensus import classify_low_consensus, consensus, group_rates
from pate_jax.attacks._evaluation import (
    Evaluation,
    answer_frequencies,
    baseline_errors,
    evaluate,
    evaluate_runs,
    evaluate_variants,
    mean_by,
    pearson,
    sample_counts,
    sample_frequencies,
    seed_keys,
    status_counts,
)
from pate_jax.attacks._experiments import (
    budget_limited,
    consistent_answers,
    edge_sigmas,
    fixed_queries,
    lowest_consensus,
    produced_histograms,
)
from pate_jax.attacks._histograms import (
    NUM_TEACHERS as TABLE1_NUM_TEACHERS,
    dirichlet_histograms,
    table1_histogram,
    table1_histograms,
    table1_labels,
)
from pate_jax.attacks._likelihood import (
    CramerRao,
    cramer_rao,
    cramer_rao_l1,
    fisher_information,
    mle_frequencies,
)
from pate_jax.attacks._monte_carlo import (
    answer_counts,
    sample_answers,
    sample_confident_answers,
)
from pate_jax.attacks._near_duplicates import (
    PERTURBATIONS,
    gaussian_copies,
    gnmax_counts,
    near_duplicate_attack,
    near_duplicates,
    one_pixel_copies,
    pixel_step_copies,
    plot_near_duplicates,
)
from pate_jax.attacks._output_distribution import output_distribution
from pate_jax.attacks._plots import (
    plot_budget,
    plot_consensus_groups,
    plot_defense,
    plot_edge,
    plot_error_vs_queries,
    plot_fixed_queries,
)
from pate_jax.attacks._privacy import (
    ATTACK_ORDERS,
    BudgetQueries,
    budget_queries,
    max_queries_within_budget,
    per_query_rdp,
    queries_epsilon,
    repeated_query_epsilon,
)
from pate_jax.attacks._reconstruct import (
    Reconstruction,
    default_optimizer,
    normalized_l1_error,
    objective,
    project_to_simplex,
    reconstruct,
    reconstruct_details,
)
from pate_jax.attacks._stop import Stop
from pate_jax.attacks._replay import BudgetReplay, replay_consistency, replay_until_refused

__all__ = [
    "ATTACK_ORDERS",
    "BudgetQueries",
    "BudgetReplay",
    "PERTURBATIONS",
    "CramerRao",
    "Evaluation",
    "RF_SEARCH_SPACE",
    "Reconstruction",
    "Stop",
    "TABLE1_NUM_TEACHERS",
    "answer_counts",
    "answer_frequencies",
    "balanced_precisions",
    "balanced_rows",
    "baseline_errors",
    "budget_limited",
    "budget_queries",
    "classify_low_consensus",
    "consensus",
    "consensus_inference",
    "consistent_answers",
    "lowest_consensus",
    "produced_histograms",
    "cramer_rao",
    "cramer_rao_l1",
    "default_optimizer",
    "dirichlet_histograms",
    "edge_sigmas",
    "end_to_end",
    "evaluate",
    "evaluate_runs",
    "evaluate_variants",
    "fisher_information",
    "fixed_queries",
    "fresh_histograms",
    "gaussian_copies",
    "gnmax_counts",
    "group_rates",
    "low_high_rows",
    "max_queries_within_budget",
    "mean_by",
    "mle_frequencies",
    "near_duplicate_attack",
    "near_duplicates",
    "normalized_l1_error",
    "objective",
    "one_pixel_copies",
    "output_distribution",
    "pearson",
    "per_query_rdp",
    "pixel_step_copies",
    "plot_budget",
    "plot_consensus_groups",
    "plot_defense",
    "plot_edge",
    "plot_error_vs_queries",
    "plot_fixed_queries",
    "plot_near_duplicates",
    "project_to_simplex",
    "queries_epsilon",
    "query_sweep",
    "reconstruct",
    "reconstruct_details",
    "repeated_query_epsilon",
    "replay_consistency",
    "replay_until_refused",
    "sample_answers",
    "sample_confident_answers",
    "sample_counts",
    "sample_frequencies",
    "searched_forest",
    "seed_keys",
    "status_counts",
    "table1_histogram",
    "table1_histograms",
    "table1_labels",
]
