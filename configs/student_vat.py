"""The VAT student (virtual adversarial training with entropy minimisation; Miyato et al.
2018), the student of Papernot et al. 2018.

  python experiments/train_student.py --config configs/student_vat.py:cpu \\
      --workdir runs/vat_100 --config.votes_dir=runs/pate_mnist_cpu/teachers

Miyato et al.'s semi-supervised MNIST setting (their public scripts): a
784-1200-1200-10 MLP with batch normalisation after every layer, the logits'
included ("bn_mlp"), ε_VAT = 0.3 in the L2 norm of a 784-pixel image in [0, 1],
ξ = 1e-6, one power iteration, Adam lr 2e-3, plus their entropy-minimisation term
("VAT + EntMin", weight 1; ``--config.student.kwargs.entropy_weight=0`` for VAT
alone). Deviations: one batch size (100) for the labelled and the pool
minibatches, no learning-rate decay, and a debiased parameter average for
evaluation. With PATE-G's weight-normalised MLP and ε_VAT = 2 the student
collapsed to near-uniform predictions on the pool (22 % held-out accuracy after
600 steps); see the README. Labels, ε and variants as configs/student_pate_g.py.
"""

import pathlib

import ml_collections

from pate_jax.experiment import load_script


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = load_script(pathlib.Path(__file__).with_name("student_pate_g.py")).get_config(arg)
  c.student.name = "vat"
  c.student.kwargs = ml_collections.ConfigDict({
      "model": "bn_mlp", "model_kwargs": {"hidden": (1200, 1200)},
      "epsilon": 0.3, "xi": 1e-6, "alpha": 1.0, "entropy_weight": 1.0,
      "power_iterations": 1, "learning_rate": 2e-3, "b1": 0.9, "ema_decay": 0.999})
  # PATE-G's game check watches the generator's loss, which this student has not.
  c.game_check.max_restarts = 0
  c.num_steps = 27_000 if arg != "cpu" else 3_000
  return c
