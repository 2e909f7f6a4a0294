"""Benchmark: smooth-sensitivity release of Confident-GNMax's ε, JAX vs a per-query loop.

Usage:
  python experiments/bench_smooth_sensitivity.py \\
      --config configs/bench_smooth_sensitivity.py --workdir runs/bench_smooth_sensitivity

The release of the data-dependent ε of synthetic vote histograms through the public API
and the two local-sensitivity arrays alone, against the per-query, per-distance Python-loop
baseline (timed on a subset, extrapolated). Writes ``results.json``. The benchmark itself:
:mod:`pate_jax.stages.bench.smooth_sensitivity`.
"""

from pate_jax import experiment
from pate_jax.stages.bench import smooth_sensitivity as stage

run, plan, report = stage.run, stage.plan, stage.report

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan)
