"""Histogram-extraction attack on PATE: the attack paper's evaluation (Section 4, App. E/F).

  python experiments/attack.py --config configs/attack_fixed.py --workdir runs/attack_fixed
  (likewise attack_budget, attack_edge, attack_defense, attack_adult, attack_near_duplicates;
  ``:cpu`` variants)

``config.setting`` selects the experiment (see each config's docstring): ``fixed``
(Figures 5-7), ``budget`` (Figure 4), ``edge`` (Figure 9), ``defense`` (Section 5),
``adult`` (Section 2, Figure 1, Appendix E, Figure 8) and, beyond the paper,
``dirichlet`` (fresh histograms: the maximum-likelihood reconstruction and the
Cramér–Rao bound) and ``near_duplicates`` (the consistent-answer defense caches
exact repeats only: near-duplicate queries to real teachers). Every run writes
``results.json`` (per-histogram queries, ε and error) and PNG figures into ``--workdir``. The stage, its randomness and the
settings: :mod:`pate_jax.stages.attack`; the experiments: :mod:`pate_jax.attacks`.
"""

from pate_jax import experiment
from pate_jax.stages import attack as stage

run, plan = stage.run, stage.plan  # the headline numbers are printed as each setting runs

if __name__ == "__main__":
  experiment.run_main(run, plan=plan)
