"""Speed and quadrature accuracy of the histogram-extraction attack.

  python experiments/bench_attack.py --config configs/attack_bench.py --workdir runs/attack_bench

Times one histogram end to end and the 30 Table-1 histograms × σ in one call per
reconstruction method, evaluates Q(H), and checks the trapezoid quadrature and its
autodiff gradients against the accurate one; writes ``results.json`` into ``--workdir``.
What each entry measures: :mod:`pate_jax.stages.bench.attack`.
"""

from pate_jax import experiment
from pate_jax.stages.bench import attack as stage

run, plan = stage.run, stage.plan  # the measurements are printed as they are taken

if __name__ == "__main__":
  experiment.run_main(run, plan=plan)
