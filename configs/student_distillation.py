"""Distillation (Papernot et al. 2017, Appendix B.1): the supervised student trained on the
ensemble's averaged probability vectors at temperature T, without noise.

  python experiments/train_student.py --config configs/student_distillation.py:cpu \\
      --workdir runs/distill_t5 --config.votes_dir=runs/pate_mnist_cpu/teachers \\
      --config.student.kwargs.temperature=5

NOT private: it reveals the ensemble's whole probability vector for each query
(no noise, no ε); a comparison point against the plurality-label student at
the same number of samples (configs/student_supervised.py with
``--config.labels=plurality``, equally non-private). The teachers must have
saved their probabilities (``distill_temperatures`` of the teachers' config;
T ∈ {1, 5}).
"""

import pathlib

import ml_collections

from pate_jax.experiment import load_script


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = load_script(pathlib.Path(__file__).with_name("student_supervised.py")).get_config(arg)
  c.labels = "probabilities"
  c.student.kwargs.temperature = 1.0
  return c
