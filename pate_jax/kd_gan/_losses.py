"""The three players' losses (Gao et al., Sections 4.1-4.2) as pure ``jnp`` functions.

Shapes: ``B`` examples, ``C`` classes. Teachers are given as log-probabilities
``[B, C]`` (a frozen teacher's ``log_softmax`` of its logits, or the log of a
released soft label); ``softmax(log p / τ)`` is exactly the temperature-``τ``
softmax of the teacher's logits, so nothing else about the teacher is needed.

* :func:`kd_losses` — Eq. 3, per example: ``KL(p_T^τ || p_S^τ)``.
* :func:`clip_by_norm` — Eq. 4's "global norm bound": the batch's loss vector
  ``ℓ [B]`` becomes ``ℓ · min(1, C / ||ℓ||₂)`` (differentiable, like
  ``tf.clip_by_global_norm``); ``per_example=True`` clips every row instead.
* :func:`dp_losses` — Eq. 5: ``clip(ℓ) + N(0, σ²C²)`` on every entry.
  **The noise is a constant with respect to the student's parameters, so it does
  not reach the gradient** (``tests/test_kd_gan.py`` measures the difference).
* :func:`gumbel_softmax` — the Gumbel-max trick relaxed (Jang et al. 2017): the
  continuous samples ``y_T``, ``y_S`` of Eq. 6.
* :func:`discriminator_loss` / :func:`adversarial_loss` — Eq. 6 with logits
  ``d = D(x, y)``: the discriminator minimises ``-log D(y_T) - log(1 - D(y_S))``,
  the student the non-saturating ``-log D(y_S)`` (Goodfellow et al. 2014's
  practical form of ``min log(1 - D(y_S))``, same fixed point).
"""

from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp


def soften(log_probs: jax.Array, tau: float) -> jax.Array:
  """``log softmax(log p / τ)``: the temperature-``τ`` distribution of ``p`` ``[..., C]``."""
  return jax.nn.log_softmax(log_probs / tau, axis=-1)


def kd_losses(teacher_log_probs: jax.Array, student_logits: jax.Array, tau: float) -> jax.Array:
  """Eq. 3 per example: ``KL(p_T^τ || p_S^τ) = Σ_c p_T^τ (log p_T^τ - log p_S^τ)``, ``[B]``.

  Classes with ``p_T = 0`` (``log p = -inf``, e.g. a projected noisy soft label)
  contribute 0.
  """
  t = soften(teacher_log_probs, tau)
  s = soften(student_logits, tau)
  p = jnp.exp(t)
  t_safe = jnp.where(p > 0, t, 0.0)
  return jnp.sum(jnp.where(p > 0, p * (t_safe - s), 0.0), axis=-1)


def clip_by_norm(v: jax.Array, clip: float, *, per_example: bool = False) -> jax.Array:
  """``v · min(1, C / ||v||₂)``: the whole array (``per_example=False``) or every row.

  The result's norm is ``≤ C`` (every row's, with ``per_example``); ``v = 0`` stays 0.
  """
  axes = tuple(range(1, v.ndim)) if per_example else tuple(range(v.ndim))
  sq = jnp.sum(jnp.square(v), axis=axes, keepdims=True)
  safe = jnp.where(sq > 0, sq, 1.0)  # double-where: no NaN gradient at v = 0
  norm = jnp.where(sq > 0, jnp.sqrt(safe), 0.0)
  return v * jnp.minimum(1.0, clip / jnp.where(norm > 0, norm, 1.0))


def dp_losses(key: jax.Array, losses: jax.Array, clip: float, noise_multiplier: float,
              mask: jax.Array | None = None, *, per_example: bool = False) -> jax.Array:
  """Eq. 5: ``clip_by_norm(ℓ, C) + N(0, σ²C²)`` entrywise (masked rows: 0, no noise).

  Args:
    key: the noise's key.
    losses: ``[B]`` per-example losses of the sampled batch.
    clip: ``C > 0``.
    noise_multiplier: ``σ ≥ 0``.
    mask: ``[B]`` which rows are real (Poisson batches are padded); None: all.
    per_example: clip each entry to ``|ℓ_i| ≤ C`` instead of the vector.
  """
  if mask is not None:
    losses = jnp.where(mask, losses, 0.0)
  noise = noise_multiplier * clip * jax.random.normal(key, losses.shape, losses.dtype)
  if mask is not None:
    noise = jnp.where(mask, noise, 0.0)
  return clip_by_norm(losses, clip, per_example=per_example) + noise


def gumbel_softmax(key: jax.Array, log_probs: jax.Array, temperature: float) -> jax.Array:
  """A relaxed one-hot sample ``softmax((log p + g) / t)``, ``g ~ Gumbel(0, 1)``, ``[B, C]``."""
  g = jax.random.gumbel(key, log_probs.shape, log_probs.dtype)
  return jax.nn.softmax((log_probs + g) / temperature, axis=-1)


def discriminator_loss(d_teacher: jax.Array, d_student: jax.Array) -> jax.Array:
  """Per example ``-log σ(d_T) - log(1 - σ(d_S))`` (teacher samples are "real"), ``[B]``."""
  return jax.nn.softplus(-d_teacher) + jax.nn.softplus(d_student)


def adversarial_loss(d_student: jax.Array) -> jax.Array:
  """Per example ``-log σ(d_S)``, the student's non-saturating loss, ``[B]``."""
  return jax.nn.softplus(-d_student)


class Discriminator(nn.Module):
  """``D(x, y)`` -> logit ``[B]``: a leaky-ReLU MLP on a class sample ``y [B, C]``,
  concatenated with the flattened input ``x`` when ``conditional``.

  Conditioning on ``x`` (our default) lets ``D`` compare the teacher's and the
  student's distributions *per input*; unconditioned, it can only match the class
  marginals of a batch. The paper's MNIST discriminator is a LeNet, i.e. it sees
  the image, so we read it as conditional.
  """
  hidden: Sequence[int] = (256,)
  conditional: bool = True

  @nn.compact
  def __call__(self, y: jax.Array, x: jax.Array | None = None) -> jax.Array:
    h = y.astype(jnp.float32)
    if self.conditional:
      h = jnp.concatenate([x.reshape(x.shape[0], -1).astype(jnp.float32), h], axis=-1)
    for width in self.hidden:
      h = nn.leaky_relu(nn.Dense(width)(h), 0.2)
    return nn.Dense(1)(h)[:, 0]
