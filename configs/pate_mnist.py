"""The main job: a complete small PATE run on MNIST (experiments/run_pate.py).

  python experiments/run_pate.py --config configs/pate_mnist.py:cpu --workdir runs/pate_mnist_cpu

Stages, each with the config of its own experiment (overridable as
``--config.teachers.num_steps=...``, ``--config.aggregate.num_queries=...``):
  teachers   configs/mnist_250.py  → <workdir>/teachers/{votes.npz,results.json}
  aggregate  configs/aggregate_mnist.py → <workdir>/aggregate/{labels.npz,results.json}
  student    configs/student_pate_g.py → <workdir>/student/{checkpoints,results.json}
             (``--config.student.num_steps=...``)
One root seed (``--config.seed``) drives every stage through pate_jax.rng's named
streams. The main job may fall back to scikit-learn's 8×8 digits when MNIST is
nowhere to be found, and says so loudly.
"""

import pathlib

import ml_collections

from pate_jax.experiment import load_script


def _sibling(name: str):
  return load_script(pathlib.Path(__file__).with_name(name + ".py"))


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.teachers = _sibling("mnist_250").get_config(arg)
  c.teachers.allow_fallback = True
  c.aggregate = _sibling("aggregate_mnist").get_config(arg)
  c.student = _sibling("student_pate_g").get_config(arg)  # :cpu 6,750 steps (75 epochs)
  c.seed = 0
  return c
