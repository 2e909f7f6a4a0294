"""Teacher networks of Papernot et al. (ICLR 2017), Section 4, and an MLP.

All modules map float images ``[B, H, W, C]`` in [0, 1] to float32 logits ``[B,
num_classes]``. They hold no state besides parameters (no batch norm), so an
ensemble is a pytree of parameters stacked on a leading teacher axis and the
same ``apply`` serves one teacher or ``jax.vmap`` over many.

``dtype`` is the *compute* dtype (activations, convolutions and matmuls):
``jnp.bfloat16`` runs them on the accelerator's bf16 units while parameters,
gradients and optimizer state stay float32 (Flax's ``param_dtype``). ``None``
keeps float32 throughout.
"""

from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax.numpy as jnp


class MnistCNN(nn.Module):
  """The paper's MNIST teacher: two conv layers with max-pooling, one ReLU FC layer.

  conv 5×5 (``features[0]``) → ReLU → max-pool 3×3/2 → conv 5×5 (``features[1]``)
  → ReLU → max-pool 3×3/2 → dense ``hidden`` → ReLU → dense ``num_classes``.
  Widths follow the 2017 code's defaults (64, 128, 384).

  ``downsample="stride"`` replaces each conv + max-pool by a 5×5 conv of stride 2 (the
  same 28 → 14 → 7 map sizes). It is a CPU variant, not the paper's network: XLA's
  max-pool gradient on a CPU costs several times the convolutions around it.
  """
  num_classes: int = 10
  features: Sequence[int] = (64, 128)
  hidden: Sequence[int] = (384,)
  dtype: Any = None  # compute dtype; parameters stay float32
  downsample: str = "max_pool"  # "max_pool" (the paper's) | "stride"

  @nn.compact
  def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
    if self.downsample not in ("max_pool", "stride"):
      raise ValueError(f"MnistCNN: downsample must be 'max_pool' or 'stride', "
                       f"got {self.downsample!r}")
    stride = 2 if self.downsample == "stride" else 1
    x = x.astype(self.dtype or jnp.float32)
    for f in self.features:
      x = nn.relu(nn.Conv(f, (5, 5), strides=stride, padding="SAME", dtype=self.dtype)(x))
      if stride == 1:
        x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
    x = x.reshape(x.shape[0], -1)
    for h in self.hidden:
      x = nn.relu(nn.Dense(h, dtype=self.dtype)(x))
    return nn.Dense(self.num_classes, dtype=self.dtype)(x).astype(jnp.float32)


class SvhnCNN(MnistCNN):
  """The SVHN teacher: the MNIST network with two more hidden (FC) layers."""
  hidden: Sequence[int] = (384, 384, 192)


class MLP(nn.Module):
  """A ReLU multi-layer perceptron on flattened images (the CPU teacher)."""
  num_classes: int = 10
  hidden: Sequence[int] = (256, 256)
  dtype: Any = None  # compute dtype; parameters stay float32

  @nn.compact
  def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
    x = x.reshape(x.shape[0], -1).astype(self.dtype or jnp.float32)
    for h in self.hidden:
      x = nn.relu(nn.Dense(h, dtype=self.dtype)(x))
    return nn.Dense(self.num_classes, dtype=self.dtype)(x).astype(jnp.float32)


class BatchNormMLP(nn.Module):
  """A ReLU MLP with batch normalisation after every dense layer: VAT's MNIST network
  (Miyato et al. 2018: 784-1200-1200-10, with a batch norm on the logits, "top BN").

  ``train=True`` normalises with the batch's statistics and (run with
  ``mutable=["batch_stats"]``) updates their running averages, which ``train=False``
  uses.
  """
  num_classes: int = 10
  hidden: Sequence[int] = (1200, 1200)
  top_bn: bool = True
  momentum: float = 0.99

  @nn.compact
  def __call__(self, x: jnp.ndarray, train: bool = False) -> jnp.ndarray:
    x = x.reshape(x.shape[0], -1).astype(jnp.float32)
    def norm(h):
      return nn.BatchNorm(use_running_average=not train, momentum=self.momentum)(h)

    for h in self.hidden:
      x = nn.relu(norm(nn.Dense(h, use_bias=False)(x)))  # the norm's bias replaces it
    x = nn.Dense(self.num_classes, use_bias=not self.top_bn)(x)
    return norm(x) if self.top_bn else x


_MODELS: dict[str, type[nn.Module]] = {"mnist_cnn": MnistCNN, "svhn_cnn": SvhnCNN, "mlp": MLP,
                                       "bn_mlp": BatchNormMLP}


COMPUTE_DTYPES = {"float32": None, "bfloat16": jnp.bfloat16, "float16": jnp.float16}


def register_model(name: str, module: type[nn.Module]) -> None:
  """Makes ``get_model(name, ...)`` build ``module`` (students add their networks)."""
  if name in _MODELS and _MODELS[name] is not module:
    raise ValueError(f"name: model {name!r} is already registered as {_MODELS[name]}")
  _MODELS[name] = module


def model_names() -> list[str]:
  return sorted(_MODELS)


def get_model(name: str, num_classes: int, compute_dtype: str = "float32",
              **kwargs) -> nn.Module:
  """The model registered as ``name`` (see :func:`model_names`) with ``kwargs``.

  ``compute_dtype`` ("float32", "bfloat16", "float16") sets the activations'
  and matmuls' dtype of the models that have one; parameters are float32
  whatever it is.
  """
  if name not in _MODELS:
    raise ValueError(f"model: unknown model {name!r}; known: {model_names()}")
  if compute_dtype not in COMPUTE_DTYPES:
    raise ValueError(f"compute_dtype: unknown dtype {compute_dtype!r}; known: "
                     f"{sorted(COMPUTE_DTYPES)}")
  module = _MODELS[name]
  kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}
  if "dtype" in module.__dataclass_fields__:
    kwargs["dtype"] = COMPUTE_DTYPES[compute_dtype]
  elif compute_dtype != "float32":
    raise ValueError(f"compute_dtype: model {name!r} computes in float32 only")
  return module(num_classes=num_classes, **kwargs)
