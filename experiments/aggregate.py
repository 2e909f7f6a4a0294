"""Label the student's queries from the teachers' privacy budget and report what it cost.

Reads ``votes.npz`` (from the teachers stage) and answers the first
``config.num_queries`` rows of the public pool with the configured mechanism from the
teachers' budget (:class:`pate_jax.budget.TeachersBudget`): one ledger kept beside
votes.npz, spent by every work directory and rerun, refusing queries beyond
``config.epsilon_max`` on the data-independent bound. Rows answered before are returned
as recorded, free. With GNMax / Confident-GNMax the private data-dependent ε is released
with smooth sensitivity (``config.release``: order, β and σ_ss fixed before the data is
seen), once per ledger state. Writes to ``--workdir``:

  labels.npz    the released labels of the rows asked (:mod:`pate_jax.labels`).
  results.json  publishable: counts, label accuracy, the data-independent ε of the labels,
                the budget's ε (labels and releases), the released ε, the noise source;
                ``private`` (for the data owner only): the data-dependent ε, the
                plurality accuracy, the un-noised release, ε vs queries.
  privacy.png   private: ε vs queries answered under each accounting.

Noise: secret (``os.urandom``) unless ``config.noise_seed`` names a research seed; then
the noise is public, the ledger lives in the work directory (a measurement, not a
release) and every output says so. The stage itself: :mod:`pate_jax.stages.aggregate`.

Usage:
  python experiments/aggregate.py --config configs/aggregate_mnist.py:cpu \\
      --config.votes_dir=runs/pate_mnist_cpu/teachers --workdir runs/agg_q100

``--config.votes_dir`` names a teachers workdir (the main job's ``<workdir>/teachers``, or
a ``train_teachers.py`` run); without it the votes are read from ``--workdir``.
"""

from pate_jax import experiment
from pate_jax.stages import aggregate

run, plan, report = aggregate.run, aggregate.plan, aggregate.report

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan)
