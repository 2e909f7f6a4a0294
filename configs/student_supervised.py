"""The supervised student: the noisily labelled queries only (the paper's baseline).

  python experiments/train_student.py --config configs/student_supervised.py:cpu \\
      --workdir runs/supervised_100 --config.votes_dir=runs/pate_mnist_cpu/teachers

PATE-G's discriminator network and optimiser without the GAN (see
configs/student_pate_g.py for the labels, ε and the variants), so that the two
students differ only in what they learn from.
"""

import pathlib

import ml_collections

from pate_jax.experiment import load_script


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = load_script(pathlib.Path(__file__).with_name("student_pate_g.py")).get_config(arg)
  c.student.name = "supervised"
  c.student.kwargs = ml_collections.ConfigDict({
      "model": "gan_discriminator", "learning_rate": 3e-3, "b1": 0.5, "ema_decay": 0.999})
  # PATE-G's game check watches the generator's loss, which this student has not.
  c.game_check.max_restarts = 0
  c.num_steps = 9_000 if arg != "cpu" else 3_000
  return c
