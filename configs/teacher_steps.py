"""The first teachers of configs/mnist_250.py against training steps (experiments/teacher_steps.py).

  python experiments/teacher_steps.py --config configs/teacher_steps.py:cpu --workdir runs/teacher_steps

The default checks the paper config's own teachers (its CNN, bf16, batch 64) at up to
1,000 steps. ``:cpu`` checks the same CNN teachers in float32, 6 of them on 2,000 test
images (≈ 2 minutes a teacher for 1,000 steps on 2 cores).
"""

import pathlib

import ml_collections

from pate_jax.experiment import load_script


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.teachers = load_script(pathlib.Path(__file__).with_name("mnist_250.py")).get_config()
  c.eval_steps = (125, 250, 500, 750, 1_000)
  c.num_checked = 25             # the first teachers of the partition
  c.num_test = 10_000            # the first test images
  if arg == "cpu":
    c.teachers.compute_dtype = "float32"
    c.num_checked = 6
    c.num_test = 2_000
  elif arg not in (None, ""):
    raise ValueError(f"configs/teacher_steps.py: unknown variant {arg!r}; use '' or 'cpu'")
  return c
