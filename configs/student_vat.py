"""The VAT student (virtual adversarial training + entropy minimisation; Miyato et al. 2018),
the student of Papernot et al. 2018.

  python experiments/train_student.py --config configs/student_vat.py:cpu \\
      --workdir runs/vat_100 --config.votes_dir=runs/pate_mnist_cpu/teachers

Network: PATE-G's discriminator MLP without its Gaussian noise (the VAT term is
the regulariser). ε_VAT = 2.0 in the L2 norm of a 784-pixel image in [0, 1],
ξ = 1e-6, one power iteration, Adam lr 1e-3 (Miyato et al.'s MNIST settings
where they give them). Labels, ε and variants as configs/student_pate_g.py.
"""

import pathlib

import ml_collections

from pate_jax.experiment import load_script


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = load_script(pathlib.Path(__file__).with_name("student_pate_g.py")).get_config(arg)
  c.student.name = "vat"
  c.student.kwargs = ml_collections.ConfigDict({
      "model": "gan_discriminator",
      "model_kwargs": {"input_noise": 0.0, "hidden_noise": 0.0},
      "epsilon": 2.0, "xi": 1e-6, "alpha": 1.0, "entropy_weight": 1.0,
      "power_iterations": 1, "learning_rate": 1e-3, "b1": 0.9, "ema_decay": 0.999})
  c.num_steps = 27_000 if arg != "cpu" else 3_000
  return c
