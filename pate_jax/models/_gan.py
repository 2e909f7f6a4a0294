"""The semi-supervised GAN of Salimans et al. (2016) for MNIST: PATE-G's student.

The discriminator is the classifier: ``num_classes`` logits, the fake class
implicit (see :mod:`pate_jax.students.pate_g`). Architecture of the paper's
MNIST feature-matching model:

  discriminator  784 → 1000 → 500 → 250 → 250 → 250 → 10, ReLU, weight-normalised
                 dense layers, Gaussian noise (std 0.3) on the input and (std 0.5)
                 on every hidden layer while training. Only the last layer's
                 weight scale is trained; the others are set once, by data-dependent
                 initialisation, and kept in the ``weight_scale`` collection (out
                 of the optimizer). Also returns the last hidden layer (before its
                 noise): the features the generator matches.
  generator      uniform noise 100 → 500 → 500 → 784, batch norm (no scale) and
                 softplus on the hidden layers, a weight-normalised sigmoid output
                 layer with a trained scale. Batch statistics live in the
                 ``batch_stats`` collection.
"""

from __future__ import annotations

from typing import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

Initializer = Callable[..., jax.Array]


class WNDense(nn.Module):
  """Dense layer with weight normalisation: ``W = V · g / ‖V‖`` per output column.

  With ``data_init=True`` (run with ``mutable=["params", "weight_scale"]``) the
  layer sets its bias and scale so that its pre-activations on this batch have
  zero mean and unit variance per unit (Salimans & Kingma 2016, Section 3), and
  returns the normalised pre-activations.
  """
  features: int
  train_scale: bool = False
  kernel_init: Initializer = nn.initializers.normal(0.1)

  @nn.compact
  def __call__(self, x: jax.Array, data_init: bool = False) -> jax.Array:
    v = self.param("kernel", self.kernel_init, (x.shape[-1], self.features))
    b = self.param("bias", nn.initializers.zeros, (self.features,))
    if self.train_scale:
      scale = self.param("scale", nn.initializers.ones, (self.features,))
    else:
      scale = self.variable("weight_scale", "scale", jnp.ones, (self.features,)).value
    y = x @ (v * (scale / jnp.sqrt(jnp.sum(v * v, axis=0))))
    if not data_init:
      return y + b
    mean = y.mean(axis=0)
    std = jnp.sqrt(jnp.mean(jnp.square(y - mean), axis=0)) + 1e-8
    new_scale = scale / std
    if self.train_scale:
      self.put_variable("params", "scale", new_scale)
    else:
      self.put_variable("weight_scale", "scale", new_scale)
    self.put_variable("params", "bias", -mean / std)
    return (y - mean) / std


class GanDiscriminator(nn.Module):
  """Classifier/discriminator: ``x [B, ...]`` → ``(logits [B, C], features [B, F])``.

  ``train=True`` adds the Gaussian noise (rng stream ``"noise"``).
  """
  num_classes: int = 10
  hidden: Sequence[int] = (1000, 500, 250, 250, 250)
  input_noise: float = 0.3
  hidden_noise: float = 0.5

  @nn.compact
  def __call__(self, x: jax.Array, train: bool = False,
               data_init: bool = False) -> tuple[jax.Array, jax.Array]:
    x = x.reshape(x.shape[0], -1).astype(jnp.float32)

    def noisy(h, std):
      if not train or std == 0:
        return h
      return h + std * jax.random.normal(self.make_rng("noise"), h.shape, h.dtype)

    x = noisy(x, self.input_noise)
    features = x
    for width in self.hidden:
      features = nn.relu(WNDense(width)(x, data_init))
      x = noisy(features, self.hidden_noise)
    logits = WNDense(self.num_classes, train_scale=True)(x, data_init)
    return logits, features


class GanGenerator(nn.Module):
  """Generator: ``z [B, noise_dim]`` → images ``[B, *image_shape]`` in (0, 1)."""
  image_shape: Sequence[int] = (28, 28, 1)
  hidden: Sequence[int] = (500, 500)
  noise_dim: int = 100

  @nn.compact
  def __call__(self, z: jax.Array, train: bool = True) -> jax.Array:
    x = z
    for width in self.hidden:
      x = nn.Dense(width, use_bias=False,  # the batch norm's bias replaces it
                   kernel_init=nn.initializers.glorot_uniform())(x)
      x = nn.BatchNorm(use_running_average=not train, use_scale=False, momentum=0.9,
                       epsilon=1e-6)(x)
      x = nn.softplus(x)
    size = 1
    for d in self.image_shape:
      size *= d
    x = WNDense(size, train_scale=True, kernel_init=nn.initializers.glorot_uniform())(x)
    return nn.sigmoid(x).reshape((z.shape[0], *self.image_shape))
