"""The GPU acceptance command: the default paper config, the teachers benchmark
(with and without deterministic GPU kernels) and the accounting benchmark, PATE-G for 300
epochs on the paper CNN teachers' labels and the non-private baseline, the KD-GAN's
accelerator config, and the test suite, in stages.

  python experiments/gpu_acceptance.py --config configs/gpu_acceptance.py --workdir W \\
      --config.stages=1 --config.publish_dir=results/runs
  python experiments/gpu_acceptance.py --config configs/gpu_acceptance.py:cpu_rehearsal --workdir W

Each stage (``--config.stages=N``, or run names) fits one 10-minute call; a run whose
``results.json`` is in ``W/<run>/`` is skipped, so each call resumes from the earlier ones'
files (``--config.archive=PATH`` packs them for a fresh machine). ``W/results.json``
records every run's status and the targets, met or not; ``--dry_run`` prints each run's
plan, its memory on an 80 GiB device and its expected wall. The stage:
:mod:`pate_jax.stages.gpu_acceptance`.
"""

from pate_jax import experiment
from pate_jax.stages import gpu_acceptance as stage

run, plan, report = stage.run, stage.plan, stage.report

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan, quiet_logs=True)
