"""Tabular PATE (Papernot et al. 2017, Appendix C): random-forest teachers and student.

  python experiments/tabular.py --config configs/adult_rf.py --workdir runs/adult_rf
  python experiments/tabular.py --config configs/adult_uci_rf.py:cgn --config.data_dir=uci \
      --workdir runs/adult_uci_rf_cgn     (the original UCI files; with Confident-GNMax)

Loads the dataset (Adult, or Diabetes when configured), fits a non-private forest and T
forest teachers on disjoint partitions, labels the public pool with plurality, LNMax and
GNMax (with ε under each accountant), trains student forests on the noisy labels and
sweeps the number of queries and the noise scale; with ``config.confident_gnmax.enabled``
also Confident-GNMax, whose students train on the answered rows. Writes ``votes.npz``,
``teacher_predictions.npz``, ``student_accuracy.png`` and ``results.json`` into
``--workdir`` (a research measurement, private as a whole). With
``--config.labels_dir=L``, the workdir of ``experiments/aggregate.py`` run on those votes
(secret noise, the teachers' budget), it trains only the student forests, on L's released
labels: publishable. The stage: :mod:`pate_jax.stages.tabular`.
"""

from pate_jax import experiment
from pate_jax.stages import tabular as stage

run, plan, report = stage.run, stage.plan, stage.report
grid_edges = stage.grid_edges  # the grid-edge flags of a mechanism's ε (tests read it here)

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan)
