"""Labels the student's queries from the teachers' privacy budget and reports what it cost.

  python experiments/aggregate.py --config configs/aggregate_mnist.py:cpu \\
      --config.votes_dir=runs/pate_mnist_cpu/teachers --workdir runs/agg_q100

``--config.votes_dir`` names a teachers workdir (without it, votes.npz is read from
``--workdir``); ``--config.noise_seed=N`` names a research noise seed (public noise). The
stage, what it writes and what may be published: :mod:`pate_jax.stages.aggregate`.
"""

from pate_jax import experiment
from pate_jax.stages import aggregate

run, plan, report = aggregate.run, aggregate.plan, aggregate.report

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan)
