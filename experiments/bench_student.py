"""Milliseconds per training step of a student (default: the main job's PATE-G).

  python experiments/bench_student.py --config configs/bench_student.py --workdir runs/bench_student

One warm-up call, then timed calls of the compiled training segment the student's fit runs,
at each matmul precision of the config, on random data of MNIST's shapes; one call of each
profiled precision under jax.profiler (device events per step on a GPU). Prints a line per
precision and writes ``results.json``. The benchmark itself: :mod:`pate_jax.stages.bench.student`.
"""

from pate_jax import experiment
from pate_jax.stages.bench import student as stage

run, plan = stage.run, stage.plan  # run prints each precision as measured: no report

if __name__ == "__main__":
  experiment.run_main(run, plan=plan)
