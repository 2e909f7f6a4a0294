"""Trains a PATE teacher ensemble and writes its vote histograms.

  python experiments/train_teachers.py --config configs/mnist_250.py:cpu --workdir runs/mnist_n250

Writes into ``--workdir``: ``checkpoints/`` (orbax, the newest ``max_to_keep`` steps while
it trains; a restarted run resumes; deleted when the run finishes unless
``--config.keep_checkpoints=True``), ``votes.npz`` (see pate_jax.votes), ``results.json``
and ``gap.png``. Rerunning a finished run reuses its ``votes.npz``.

A rerun resumes only the same run: the checkpoints carry a fingerprint of
``teachers.FINGERPRINT_FIELDS`` and of the training data, and a rerun with other values is
refused (``--config.restart=True`` discards the checkpoints and starts over). Once
``votes.npz`` exists it is never replaced by other votes (labels answered from it would
lose the votes they were paid from): its run's fingerprint and ``num_steps`` are kept
beside it (``votes_fingerprint.json``), and a rerun with other values, or with
``restart``, is refused; a new run needs another workdir. A checkpoint that does not
restore is set aside for the newest one that does. The workdir is locked while a run
uses it.
"""

from pate_jax import experiment
from pate_jax.stages import teachers as stage

run, plan, report = stage.run, stage.plan, stage.report

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan, quiet_logs=True)
