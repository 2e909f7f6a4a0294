"""The main job: teachers → noisy labels and their privacy cost → the PATE-G student →
the histogram attack on the run's own votes → report.md.

  python experiments/run_pate.py --config configs/pate_mnist.py:cpu --workdir runs/pate_mnist_cpu

Runs each stage's ``run(config, workdir)`` in its own sub-directory of
``--workdir``: ``teachers/`` (votes.npz, gap.png), ``aggregate/`` (labels.npz, privacy.png),
``student/`` (accuracy.png) and ``attack/`` (the attack paper's attacker on the run's
lowest-consensus labelled queries, with fresh noise and with consistent answers;
defense_consistent_answers.png), and writes a summary ``results.json`` with the headline
numbers of every stage and ``report.md`` (Markdown with those figures), each in two parts:
*publishable* (the labels' accuracy, ε data-independent and released with smooth
sensitivity, the student's accuracy) and *private: for the data owner only* (the teachers'
accuracy and vote gap, the data-dependent ε, the attack on the run's own vote
histograms). It ends by printing the headlines (private lines say so) and the files' paths.
Noise is secret unless ``--config.noise_seed`` names a research seed (then every output
says that its ε is a measurement, not a release).
A rerun resumes: a killed teachers stage from its checkpoint (deleted once votes.npz is
written, unless ``--config.teachers.keep_checkpoints=True``; a finished one reuses
votes.npz), the teachers' privacy budget kept beside their votes
(``teachers/ledger.npz``: labels already paid for come back as recorded, never bought
again), and the student from its last checkpoint (the one kept: the trained model, ~30 MB). About 32 MB remain on disk after the CPU run.

Overrides name the stage: ``--config.teachers.num_teachers=100``,
``--config.aggregate.num_queries=1000``, ``--config.student.num_steps=450``. The stages'
``seed`` and ``student.aggregate`` / ``student.votes_dir`` are set from ``--config.seed``,
``--config.aggregate`` and the workdir.
"""

from pate_jax import experiment
from pate_jax.stages import main_job as stage

run, plan, report = stage.run, stage.plan, stage.report

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan, quiet_logs=True)
