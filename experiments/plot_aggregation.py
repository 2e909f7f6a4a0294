"""Figure 2 of Papernot et al. 2017: noisy-aggregation accuracy vs per-query ε.

For each work directory (one teacher ensemble each, e.g. n ∈ {10, 100, 250}
MNIST teachers) the LNMax labels of the votes.npz rows are compared with the
true labels over a log grid of per-query ε ∈ [eps_min, eps_max]; the whole grid
and all seeds come from one vmapped call
(:func:`pate_jax.aggregation.label_accuracy_grid`). Writes ``figure2.png`` and
``figure2.json`` (the plotted numbers, with provenance) to ``--workdir``.

Per-query ε. An LNMax answer with Laplace scale 1/γ is (2γ, 0)-DP, so by default
γ = ε/2 (``--config.epsilon_convention=dp``). The 2017 paper labels its x-axis with
the inverse Laplace scale itself ("Laplacian noise of inversed scale ε"; scale 20 is
called ε = 0.05), i.e. γ = ε: ``--config.epsilon_convention=paper`` (or the config's
``:paper`` variant) plots that axis.

Usage:
  python experiments/plot_aggregation.py --config configs/plot_aggregation.py \\
      --workdir runs/figure2 --config.runs=runs/m10,runs/m100,runs/m250

The stage: :mod:`pate_jax.stages.figures`.
"""

from pate_jax import experiment
from pate_jax.stages import figures as stage

run, plan, report = stage.run_aggregation, stage.plan_aggregation, stage.report_aggregation

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan)
