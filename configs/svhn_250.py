"""PATE teachers on SVHN: 250 teachers on train + extra (Papernot et al. 2017, §4).

  python experiments/train_teachers.py --config configs/svhn_250.py --workdir runs/svhn_n250

SVHN is not available offline here: it is read through tensorflow-datasets
(``svhn_cropped``) or from ``$PATE_JAX_DATA_DIR/svhn/{train,test,extra}_32x32.mat``.
The default is the paper's deeper CNN for accelerators; ``:cpu`` swaps in the
MLP used for MNIST on CPU (not tuned for SVHN: SVHN has not been run here).
"""

import pathlib

import ml_collections

from pate_jax.experiment import load_script


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = load_script(pathlib.Path(__file__).with_name("mnist_250.py")).get_config(arg)
  c.dataset = "svhn"
  c.use_extra = True
  if arg in (None, ""):
    c.model = ml_collections.ConfigDict({"name": "svhn_cnn", "kwargs": {}})
    c.num_steps = 2_000
  return c
