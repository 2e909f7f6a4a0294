"""Virtual adversarial training (Miyato et al., TPAMI 2018): the student of Papernot et al. 2018.

Loss per step, with ``p(·|x)`` the classifier's softmax:

  L = CE(x_lab, y_lab) + α · KL(p(·|x) ‖ p(·|x + r_adv)) + β · H(p(·|x))

on the pool minibatch ``x``, where ``p(·|x)`` in the KL is held constant and
``r_adv`` approximates the direction of steepest KL increase by power iteration:
``d ~ N(0, I)``, repeated ``power_iterations`` times
``d ← ∇_d KL(p(·|x) ‖ p(·|x + ξ d/‖d‖))``, then ``r_adv = ε d/‖d‖`` (per-example
L2 norms). ``β`` > 0 adds entropy minimisation ("VAT + EntMin"). Every pass runs
in training mode, as in Miyato et al.'s code: batch norms normalise with the
batch's statistics (updated by the clean passes only), and a noisy network's
perturbed passes reuse the clean pass's noise draw, so that the KL measures the
perturbation only.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import optax

from pate_jax.students._loop import Student
from pate_jax.students._supervised import (Classifier, averaged_logits, check_optimizer,
                                           class_loss, ema_update, init_classifier_state)


def _normalize(d: jax.Array) -> jax.Array:
  flat = d.reshape(d.shape[0], -1)
  norm = jnp.sqrt(jnp.sum(flat * flat, axis=1, keepdims=True)) + 1e-12
  return (flat / norm).reshape(d.shape)


def kl_divergence(logits_p: jax.Array, logits_q: jax.Array) -> jax.Array:
  """Mean over the batch of KL(softmax(logits_p) ‖ softmax(logits_q))."""
  logp = jax.nn.log_softmax(logits_p)
  return jnp.mean(jnp.sum(jnp.exp(logp) * (logp - jax.nn.log_softmax(logits_q)), axis=-1))


def virtual_adversarial_perturbation(logits_fn, x: jax.Array, key: jax.Array, *,
                                     epsilon: float, xi: float = 1e-6,
                                     power_iterations: int = 1,
                                     clean_logits: jax.Array | None = None) -> jax.Array:
  """``r_adv`` of the module docstring for ``logits_fn: x -> logits`` at ``x``
  (``clean_logits``: ``logits_fn(x)`` if the caller has it already).

  The power iteration's products run at float32 precision on every backend: a GPU's
  default for float32 operands (TF32, 10-bit mantissa) rounds ``x + xi·d`` back to ``x``
  at ``xi = 1e-6``, and the direction would be rounding noise.
  """
  with jax.default_matmul_precision("float32"):
    clean = jax.lax.stop_gradient(logits_fn(x) if clean_logits is None else clean_logits)
    d = jax.random.normal(key, x.shape, x.dtype)

    def kl_at(r):
      return kl_divergence(clean, logits_fn(x + r))

    for _ in range(power_iterations):
      d = jax.grad(kl_at)(xi * _normalize(d))
  return jax.lax.stop_gradient(epsilon * _normalize(d))


def vat(net: Classifier, *, epsilon: float = 2.0, xi: float = 1e-6, alpha: float = 1.0,
        entropy_weight: float = 1.0, power_iterations: int = 1, learning_rate: float = 1e-3,
        b1: float = 0.9, ema_decay: float = 0.999) -> Student:
  """The VAT student on ``net`` (state like :func:`pate_jax.students.supervised`)."""
  check_optimizer(learning_rate, b1, ema_decay)
  tx = optax.adam(learning_rate, b1=b1)

  def step(state, key, batch, step_index):
    k_lab, k_unl, k_adv = jax.random.split(key, 3)

    def loss_fn(params):
      variables = {"params": params, **state["fixed"]}
      logits_lab, stats = net.apply(variables, batch["x_lab"], True, k_lab)
      loss_lab = class_loss(logits_lab, batch["y_lab"])
      variables = {**variables, **stats}
      x = batch["x_unl"]
      logits_unl, stats = net.apply(variables, x, True, k_unl)
      # The perturbed passes: the clean pass's noise draw, statistics not updated.
      def perturbed_fn(x):
        return net.apply(variables, x, True, k_unl)[0]

      r_adv = virtual_adversarial_perturbation(perturbed_fn, x, k_adv, epsilon=epsilon, xi=xi,
                                               power_iterations=power_iterations,
                                               clean_logits=logits_unl)
      loss_vat = kl_divergence(jax.lax.stop_gradient(logits_unl), perturbed_fn(x + r_adv))
      logp = jax.nn.log_softmax(logits_unl)
      entropy = -jnp.mean(jnp.sum(jnp.exp(logp) * logp, axis=-1))
      return (loss_lab + alpha * loss_vat + entropy_weight * entropy,
              (loss_lab, loss_vat, entropy, stats))

    grads, (loss_lab, loss_vat, entropy, stats) = jax.grad(loss_fn, has_aux=True)(
        state["params"])
    updates, opt = tx.update(grads, state["opt"], state["params"])
    params = optax.apply_updates(state["params"], updates)
    return ({**state, "params": params, "opt": opt, "fixed": {**state["fixed"], **stats},
             "ema": ema_update(state["ema"], params, ema_decay, step_index)},
            {"loss_lab": loss_lab, "loss_vat": loss_vat, "entropy": entropy})

  return Student(functools.partial(init_classifier_state, net, tx), step,
                 functools.partial(averaged_logits, net))
