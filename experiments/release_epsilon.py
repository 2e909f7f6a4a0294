"""Release a Confident-GNMax labelling's data-dependent ε privately (smooth sensitivity).

Reads ``votes.npz`` (the teachers stage), answers its first ``config.num_queries`` rows once
with Confident-GNMax (Papernot et al. 2018, Sec. 4) and releases the data-dependent ε of
the realised answers with smooth sensitivity (Apps. B-C) at an order, β and σ_ss fixed in
the config before the data is seen. Nothing here is publishable, secret noise or not: the
script spends from no privacy budget, so every run answers and releases again, and the mean
of many runs' released ε and answered counts tends to their un-noised values. Its
results.json is a research measurement, private as a whole, and every line it prints is
marked private (the released ε, the fixed parameters, the number answered and the
data-independent ε; beside them the un-noised ε, the noise's spread, and the paper's own
analysis, tf-privacy's order and β chosen on the votes). A publishable release of the same
labels and their ε is the aggregate stage's (``experiments/aggregate.py``), charged to the
teachers' budget. The stage itself: :mod:`pate_jax.stages.release`.

Usage:
  python experiments/release_epsilon.py --config configs/release_epsilon.py \\
      --workdir runs/release_mnist --config.votes_dir=runs/pate_mnist_cpu/teachers
"""

from pate_jax import experiment
from pate_jax.stages import release

run, plan, report = release.run, release.plan, release.report

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan)
