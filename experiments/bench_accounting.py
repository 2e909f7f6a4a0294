"""Benchmark: data-dependent PATE accounting for 10^6 queries, JAX vs a per-query loop.

Usage:
  python experiments/bench_accounting.py --config configs/bench_accounting.py \\
      --workdir runs/bench_accounting

LNMax (2017 moments accountant) and Confident-GNMax (2018 data-dependent RDP) on synthetic
votes: the compiled JAX kernel, the validating public API end to end (device and host
votes) and the Python-loop baseline (timed on a subset, extrapolated). Writes
``results.json``. The benchmark itself: :mod:`pate_jax.stages.bench.accounting`.
"""

from pate_jax import experiment
from pate_jax.stages.bench import accounting as stage

run, plan, report = stage.run, stage.plan, stage.report

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan)
