"""PATE-G: the semi-supervised GAN student with feature matching (Salimans et al. 2016).

The discriminator D is the classifier. It outputs ``C`` logits ``l(x)``; the
fake class is implicit with logit 0, so with ``Z(x) = Σ_k exp(l_k(x))`` the
probability that ``x`` is real is ``D(x) = Z(x) / (Z(x) + 1)`` and
``p(y | x, real) = softmax(l(x))_y``. Losses (per minibatch mean):

  supervised    L_lab = lse(l(x_lab)) − l_y(x_lab)                 (cross-entropy)
  unsupervised  L_unl = −½ log D(x_unl) − ½ log(1 − D(G(z)))
                      = −½ lse(l(x_unl)) + ½ softplus(lse(l(x_unl)))
                        + ½ softplus(lse(l(G(z))))
  discriminator L_D   = L_lab + w · L_unl
  generator     L_G   = ‖ mean_batch f(x_unl2) − mean_batch f(G(z)) ‖² / F

where ``f`` is D's last hidden layer (feature matching). D and G are updated
alternately with Adam (lr 0.003, β₁ = 0.5), each step D first then G on the
updated D, and D is evaluated with an exponential moving average of its
parameters. Each loss applies D once, to its minibatches stacked (:func:`apply_parts`:
the same values as one application each, in fewer, larger kernels). Settings of the
authors' MNIST script; deviations (see ``configs/student_pate_g.py``): fewer steps on
CPU, and a debiased average with decay 0.999 rather than their 0.9999 running from zero
(which needs ~10⁵ steps to forget its start). Two options, off by default: random
translations of the real images (``translate``) and a linear learning-rate decay
(``decay_start``/``decay_end``).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from pate_jax import _checks
from pate_jax.augment import random_shift
from pate_jax.models import GanDiscriminator, GanGenerator
from pate_jax.students._loop import Student
from pate_jax.students._supervised import check_optimizer, class_loss, ema_update, hard_labels


def discriminator_losses(logits_lab: jax.Array, labels: jax.Array, logits_unl: jax.Array,
                         logits_fake: jax.Array) -> tuple[jax.Array, jax.Array]:
  """``(L_lab, L_unl)`` of the module docstring from D's logits."""
  loss_lab = class_loss(logits_lab, labels)
  lse_unl = jax.nn.logsumexp(logits_unl, axis=-1)
  lse_fake = jax.nn.logsumexp(logits_fake, axis=-1)
  loss_unl = (-0.5 * jnp.mean(lse_unl) + 0.5 * jnp.mean(jax.nn.softplus(lse_unl))
              + 0.5 * jnp.mean(jax.nn.softplus(lse_fake)))
  return loss_lab, loss_unl


def apply_parts(apply: Callable[[jax.Array], Any], parts: Sequence[jax.Array]) -> list:
  """``apply`` once on the rows of ``parts`` stacked, its outputs split back into one per part.

  For a network whose rows do not interact (the discriminator: no batch statistics; its
  Gaussian noise is drawn per element) this is one application per part, computed as
  one set of kernels instead of one per part: on an accelerator, where the student's
  small matrix products are launch-bound, fewer and larger launches.
  """
  bounds = np.cumsum([0, *(p.shape[0] for p in parts)])
  out = apply(jnp.concatenate(parts))
  return [jax.tree.map(lambda o, a=a, z=z: o[a:z], out)
          for a, z in zip(bounds[:-1], bounds[1:])]


def feature_matching_loss(features_real: jax.Array, features_fake: jax.Array) -> jax.Array:
  """Mean squared difference of the batch means of D's features."""
  return jnp.mean(jnp.square(features_real.mean(axis=0) - features_fake.mean(axis=0)))


def learning_rate_schedule(learning_rate: float, decay_start: int | None = None,
                           decay_end: int | None = None) -> float | optax.Schedule:
  """``learning_rate`` until step ``decay_start``, then falling linearly to 0 at ``decay_end``.

  The shape of the authors' schedule (their CIFAR-10 script: constant for the first two
  thirds, then linear to zero; their MNIST scripts keep the rate constant).
  ``decay_start=None``: the constant ``learning_rate`` itself (a float, so that the
  optimizer state, and checkpoints, are those of a constant rate).
  """
  _checks.positive(learning_rate, "learning_rate")
  if decay_start is None and decay_end is None:
    return learning_rate
  if decay_start is None or decay_end is None or not 0 <= decay_start < decay_end:
    raise ValueError(f"decay_start, decay_end: need 0 <= decay_start < decay_end (or both "
                     f"None), got {decay_start}, {decay_end}")
  return optax.linear_schedule(learning_rate, 0.0, decay_end - decay_start, decay_start)


def pate_g(num_classes: int, image_shape: tuple[int, ...], *, learning_rate: float = 3e-3,
           decay_start: int | None = None, decay_end: int | None = None,
           b1: float = 0.5, unlabelled_weight: float = 1.0, ema_decay: float = 0.999,
           noise_dim: int = 100, generator_hidden: tuple[int, ...] = (500, 500),
           discriminator_hidden: tuple[int, ...] = (1000, 500, 250, 250, 250),
           input_noise: float = 0.3, hidden_noise: float = 0.5, translate: int = 0) -> Student:
  """The PATE-G student (module docstring). State: D's and G's variables, both
  optimizer states, and D's parameter average. ``decay_start``/``decay_end``: the
  learning rate's linear decay to 0 (:func:`learning_rate_schedule`; default none, as
  in the authors' MNIST run). ``translate``: shift every real image (labelled and pool)
  by a random offset of up to this many pixels per axis, a new one each step
  (:func:`pate_jax.augment.random_shift`; 0, the authors' setting: none)."""
  check_optimizer(learning_rate, b1, ema_decay)
  _checks.positive_int(translate, "translate (pixels)", minimum=0)
  disc = GanDiscriminator(num_classes, tuple(discriminator_hidden), input_noise, hidden_noise)
  gen = GanGenerator(tuple(image_shape), tuple(generator_hidden), noise_dim)
  # Adam with ε inside the square root, as in the authors' update.
  tx = optax.adam(learning_rate_schedule(learning_rate, decay_start, decay_end), b1=b1,
                  b2=0.999, eps=0.0, eps_root=1e-8)

  def init(key, sample):
    k_d, k_noise, k_init, k_g = jax.random.split(key, 4)
    d_vars = disc.init({"params": k_d, "noise": k_noise}, sample[:2], train=True)
    _, d_vars = disc.apply(d_vars, sample, train=True, data_init=True,
                           rngs={"noise": k_init}, mutable=["params", "weight_scale"])
    g_vars = gen.init(k_g, jnp.zeros((2, noise_dim)))
    return {"d_params": d_vars["params"], "weight_scale": d_vars["weight_scale"],
            "g_params": g_vars["params"], "batch_stats": g_vars["batch_stats"],
            "d_opt": tx.init(d_vars["params"]), "g_opt": tx.init(g_vars["params"]),
            "ema": jax.tree.map(jnp.copy, d_vars["params"])}

  def d_apply(state, params, x, key):
    return disc.apply({"params": params, "weight_scale": state["weight_scale"]}, x,
                      train=True, rngs={"noise": key})

  def generate(state, g_params, key, batch_size):
    z = jax.random.uniform(key, (batch_size, noise_dim))
    return gen.apply({"params": g_params, "batch_stats": state["batch_stats"]}, z,
                     train=True, mutable=["batch_stats"])

  def step(state, key, batch, step_index):
    if translate:  # the three real minibatches shifted as one (one offset per image)
      real = ("x_lab", "x_unl", "x_unl2")
      shifted = apply_parts(lambda x: random_shift(jax.random.fold_in(key, 7), x, translate),
                            [batch[name] for name in real])
      batch = {**batch, **dict(zip(real, shifted))}
    k_fake, k_d, k_fake2, k_g = jax.random.split(key, 4)
    b = batch["x_unl"].shape[0]
    fake, _ = generate(state, state["g_params"], k_fake, b)
    fake = jax.lax.stop_gradient(fake)

    def d_loss(params):
      (logits_lab, _), (logits_unl, _), (logits_fake, _) = apply_parts(
          lambda x: d_apply(state, params, x, k_d), (batch["x_lab"], batch["x_unl"], fake))
      loss_lab, loss_unl = discriminator_losses(logits_lab, batch["y_lab"], logits_unl,
                                                logits_fake)
      err = jnp.mean(jnp.argmax(logits_lab, -1) != hard_labels(batch["y_lab"]))
      return loss_lab + unlabelled_weight * loss_unl, (loss_lab, loss_unl, err)

    grads, (loss_lab, loss_unl, err) = jax.grad(d_loss, has_aux=True)(state["d_params"])
    updates, d_opt = tx.update(grads, state["d_opt"], state["d_params"])
    d_params = optax.apply_updates(state["d_params"], updates)

    def g_loss(g_params):
      fake2, mutated = generate(state, g_params, k_fake2, b)
      (_, f_fake), (_, f_real) = apply_parts(
          lambda x: d_apply(state, d_params, x, k_g), (fake2, batch["x_unl2"]))
      return feature_matching_loss(f_real, f_fake), mutated["batch_stats"]

    (fm_loss, batch_stats), g_grads = jax.value_and_grad(g_loss, has_aux=True)(
        state["g_params"])
    g_updates, g_opt = tx.update(g_grads, state["g_opt"], state["g_params"])
    new_state = {**state, "d_params": d_params, "d_opt": d_opt,
                 "g_params": optax.apply_updates(state["g_params"], g_updates),
                 "g_opt": g_opt, "batch_stats": batch_stats,
                 "ema": ema_update(state["ema"], d_params, ema_decay, step_index)}
    return new_state, {"loss_lab": loss_lab, "loss_unl": loss_unl, "loss_gen": fm_loss,
                       "train_err": err}

  def logits(state, images):
    out, _ = disc.apply({"params": state["ema"], "weight_scale": state["weight_scale"]},
                        images, train=False)
    return out

  return Student(init, step, logits)
