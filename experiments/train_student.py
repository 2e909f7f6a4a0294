"""Trains a student on the public pool and noisy teacher labels (PATE's published model).

  python experiments/train_student.py --config configs/student_pate_g.py:cpu \\
      --workdir runs/pate_g_100 --config.votes_dir=runs/pate_mnist_cpu/teachers

Reads the teachers' ``votes.npz`` (``--config.votes_dir``), labels the first
``aggregate.num_queries`` pool rows from the teachers' budget (the aggregate stage,
pate_jax.stages.aggregate, into ``<workdir>/labels/``; rows answered before, by any run,
come back as recorded, never paid for twice), trains the student with orbax checkpoints
(a killed run resumes) and writes ``results.json``: publishable -- held-out accuracy on
the evaluation rows (never queried), queries, the data-independent and released ε, δ,
label accuracy, epochs and wall time; ``private`` (for the data owner only) -- the
data-dependent ε. The active learner (configs/student_active.py) asks the teachers'
budget itself, round by round.
"""

from pate_jax import experiment
from pate_jax.stages import student as stage

run, plan, report = stage.run, stage.plan, stage.report

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan, quiet_logs=True)
