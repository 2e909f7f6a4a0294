"""pate_jax: PATE (private aggregation of teacher ensembles) in JAX/Flax.

Sub-modules are imported on first use (``pate_jax.accounting``,
``pate_jax.aggregation``, ...), so ``import pate_jax`` stays cheap and a
researcher who only needs the accountants does not load scikit-learn.

Three layers, imports pointing down only: the entry scripts (``experiments/``) call the
stages (``pate_jax.stages``, with the harness ``pate_jax.experiment``,
``pate_jax.reporting`` and ``pate_jax.reproduction``), which call the core (every other
module: arrays in, arrays out, explicit arguments; files through named readers and
writers: ``pate_jax.io``, the votes', labels', budget's and checkpoints' own).
The core never imports a stage, the harness or ``ml_collections``
(``tests/test_import_graph.py``).
"""

import importlib

__version__ = "0.1.0"

_SUBMODULES = (
    "ablation", "accounting", "aggregation", "attacks", "augment", "budget", "checkpoint",
    "data", "discrete_gaussian", "distributed", "experiment", "flops", "io", "kd_gan",
    "labels", "ledger", "mechanisms", "memory", "models", "reporting", "reproduction", "rng",
    "stages", "students", "tabular", "teachers", "votes",
)


def __getattr__(name):
  if name in _SUBMODULES:
    return importlib.import_module(f"pate_jax.{name}")
  raise AttributeError(f"module 'pate_jax' has no attribute {name!r}")


def __dir__():
  return sorted(list(globals()) + list(_SUBMODULES))
