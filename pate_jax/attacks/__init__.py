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
  reconstruct(q̄[..., C], sigma, num_teachers, method="paper"|"optax",
              project=False, stop_on_negative=False) -> Ĥ[..., C]          # Steps 2-3
  reconstruct_details(...) -> Reconstruction(histogram, loss, num_steps, status)
  normalized_l1_error(H, Ĥ) -> Σ|H - Ĥ| / (2 Σ|H|)
  per_query_rdp, queries_epsilon, max_queries_within_budget                # privacy cost
  table1_histograms(dataset=None) -> (int32 [B, 10], names)                # Appendix C
  consensus, classify_low_consensus                                        # Section 2

Every batch argument broadcasts: ``histograms[None]`` with ``sigma[:, None]`` runs
all (σ, histogram) pairs in one compiled call.
"""

from __future__ import annotations

from pate_jax.attacks._consensus import classify_low_consensus, consensus
from pate_jax.attacks._histograms import (
    NUM_TEACHERS as TABLE1_NUM_TEACHERS,
    table1_histogram,
    table1_histograms,
)
from pate_jax.attacks._monte_carlo import (
    answer_counts,
    sample_answers,
    sample_confident_answers,
)
from pate_jax.attacks._output_distribution import output_distribution
from pate_jax.attacks._privacy import (
    ATTACK_ORDERS,
    max_queries_within_budget,
    per_query_rdp,
    queries_epsilon,
)
from pate_jax.attacks._reconstruct import (
    Reconstruction,
    Stop,
    default_optimizer,
    normalized_l1_error,
    objective,
    project_to_simplex,
    reconstruct,
    reconstruct_details,
)

__all__ = [
    "ATTACK_ORDERS",
    "Reconstruction",
    "Stop",
    "TABLE1_NUM_TEACHERS",
    "answer_counts",
    "classify_low_consensus",
    "consensus",
    "default_optimizer",
    "max_queries_within_budget",
    "normalized_l1_error",
    "objective",
    "output_distribution",
    "per_query_rdp",
    "project_to_simplex",
    "queries_epsilon",
    "reconstruct",
    "reconstruct_details",
    "sample_answers",
    "sample_confident_answers",
    "table1_histogram",
    "table1_histograms",
]
