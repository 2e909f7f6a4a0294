"""Examples/s and achieved TFLOP/s of the ensemble strategies for T teachers (default 250).

  python experiments/bench_teachers.py --config configs/bench_teachers.py --workdir runs/bench_teachers

``vmap`` (one jitted program over all teachers), ``chunked`` (vmapped chunks one after
another) and ``loop`` (a Python loop over teachers) on random data, each strategy's line
printed as it is measured; writes ``results.json`` with examples/s, TFLOP/s, the fraction
of peak and each strategy relative to the loop. The benchmark itself:
:mod:`pate_jax.stages.bench.teachers`.
"""

from pate_jax import experiment
from pate_jax.stages.bench import teachers as stage

run, plan = stage.run, stage.plan  # run prints each strategy as measured: no report

if __name__ == "__main__":
  experiment.run_main(run, plan=plan)
