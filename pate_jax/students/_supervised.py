"""Supervised students: the paper's baseline (noisy labels only) and distillation.

The classifier is any registered model (``pate_jax.models.get_model``); the
default is PATE-G's discriminator network without the GAN, so that the
supervised and semi-supervised students differ only in what they learn from.
Networks with weight-normalised layers get their data-dependent initialisation
on a pool sample; networks called with ``train=`` get their training noise, and
their batch norms train on the batch's statistics (whose running averages,
evaluation's statistics, live with the fixed collections).

Distillation (Papernot et al. 2017, Appendix B.1; Hinton et al. 2015) is the
same student trained on probability vectors: the ensemble's averaged teacher
probabilities at temperature ``T``, matched by the student's softmax at the same
temperature, the loss scaled by ``T²`` so gradients keep their size across ``T``.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from pate_jax import _checks
from pate_jax import models
from pate_jax.students._loop import Student


def class_loss(logits: jax.Array, labels: jax.Array, temperature: float = 1.0) -> jax.Array:
  """Mean cross-entropy of ``logits`` against classes ``[B]`` or probabilities ``[B, C]``.

  With probability targets and ``temperature`` T the student's logits are divided
  by T and the loss multiplied by T² (distillation).
  """
  if labels.ndim == 1:
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))
  return temperature ** 2 * jnp.mean(optax.softmax_cross_entropy(logits / temperature,
                                                                   labels))


def hard_labels(labels: jax.Array) -> jax.Array:
  """Classes ``[B]`` of class or probability targets."""
  return labels if labels.ndim == 1 else jnp.argmax(labels, axis=-1)


def check_optimizer(learning_rate: Any, b1: Any, ema_decay: Any) -> None:
  """Adam's rate (finite, > 0) and ``b1`` (in [0, 1)), and the parameter average's decay
  (in [0, 1]: :func:`ema_update`), refused when the student is built, before it trains:
  a NaN rate or a ``b1`` of 1.5 would train without an error and evaluate garbage."""
  if not callable(learning_rate):  # an optax schedule is checked where it is made
    _checks.positive(learning_rate, "learning_rate")
  if not 0.0 <= _checks.scalar(b1, "b1") < 1.0:
    raise ValueError(f"b1 must lie in [0, 1); got {b1}")
  _checks.probability(ema_decay, "ema_decay")


def ema_update(average: Any, params: Any, decay: float, step: jax.Array) -> Any:
  """Exponential moving average with the warm-up ``min(decay, (1 + t) / (10 + t))``."""
  d = jnp.minimum(decay, (1.0 + step) / (10.0 + step))
  return jax.tree.map(lambda a, p: d * a + (1.0 - d) * p, average, params)


class Classifier:
  """A registered network with a uniform call: ``logits(variables, x, train, key)``."""

  def __init__(self, model: nn.Module):
    self.model = model
    self._takes_train = "train" in inspect.signature(type(model).__call__).parameters

  def init(self, key: jax.Array, sample: jax.Array) -> dict:
    """Variables; weight-normalised layers initialised on ``sample`` (data-dependent)."""
    k_params, k_noise, k_data = jax.random.split(key, 3)
    kwargs = {"train": True} if self._takes_train else {}
    variables = self.model.init({"params": k_params, "noise": k_noise}, sample[:2], **kwargs)
    if "weight_scale" in variables:
      _, variables = self.model.apply(variables, sample, data_init=True, rngs={"noise": k_data},
                                      mutable=["params", "weight_scale"], **kwargs)
    return dict(variables)

  def apply(self, variables: dict, x: jax.Array, train: bool,
            key: jax.Array | None = None) -> tuple[jax.Array, dict]:
    """``(logits, updated collections)``. In training mode a network's training noise
    is drawn from ``key`` and its batch norms use, and update, the batch's statistics
    (the updated ``batch_stats`` are returned; ``{}`` otherwise)."""
    kwargs = {"train": train} if self._takes_train else {}
    mutable = ["batch_stats"] if train and "batch_stats" in variables else False
    out = self.model.apply(variables, x, rngs={"noise": key} if train else {},
                           mutable=mutable, **kwargs)
    out, updates = out if mutable else (out, {})
    return (out[0] if isinstance(out, tuple) else out), dict(updates)

  def logits(self, variables: dict, x: jax.Array, train: bool,
             key: jax.Array | None = None) -> jax.Array:
    return self.apply(variables, x, train, key)[0]


def classifier(model: str, num_classes: int, **kwargs) -> Classifier:
  return Classifier(models.get_model(model, num_classes, **kwargs))


def init_classifier_state(net: Classifier, tx: optax.GradientTransformation, key: jax.Array,
                          sample: jax.Array) -> dict:
  """State of a classifier student: ``params``, the other collections (``fixed``), the
  optimizer's state and the parameter average (``ema``)."""
  variables = net.init(key, sample)
  params = variables.pop("params")
  return {"params": params, "fixed": variables, "opt": tx.init(params),
          "ema": jax.tree.map(jnp.copy, params)}


def averaged_logits(net: Classifier, state: dict, images: jax.Array) -> jax.Array:
  """Evaluation logits: the averaged parameters, no training noise."""
  return net.logits({"params": state["ema"], **state["fixed"]}, images, False)


def supervised(net: Classifier, *, learning_rate: float = 3e-3, b1: float = 0.5,
               ema_decay: float = 0.999, temperature: float = 1.0) -> Student:
  """Trained on the labelled minibatches only (classes, or probabilities for distillation).

  State: ``params``, the other collections (``fixed``), Adam's state, and the
  parameter average used for evaluation.
  """
  check_optimizer(learning_rate, b1, ema_decay)
  tx = optax.adam(learning_rate, b1=b1, b2=0.999, eps=0.0, eps_root=1e-8)

  def step(state, key, batch, step_index):
    def loss_fn(params):
      logits, stats = net.apply({"params": params, **state["fixed"]}, batch["x_lab"], True, key)
      err = jnp.mean(jnp.argmax(logits, -1) != hard_labels(batch["y_lab"]))
      return class_loss(logits, batch["y_lab"], temperature), (err, stats)

    (loss, (err, stats)), grads = jax.value_and_grad(loss_fn, has_aux=True)(state["params"])
    updates, opt = tx.update(grads, state["opt"], state["params"])
    params = optax.apply_updates(state["params"], updates)
    return ({**state, "params": params, "opt": opt, "fixed": {**state["fixed"], **stats},
             "ema": ema_update(state["ema"], params, ema_decay, step_index)},
            {"loss_lab": loss, "train_err": err})

  return Student(functools.partial(init_classifier_state, net, tx), step,
                 functools.partial(averaged_logits, net))
