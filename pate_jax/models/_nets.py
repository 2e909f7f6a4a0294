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

import functools
from typing import Any, Sequence

import flax.linen as nn
import jax.numpy as jnp

from pate_jax import _checks


def _same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
  """``padding="SAME"``'s (low, high) padding of one spatial dimension (XLA's rule)."""
  out = -(-size // stride)
  total = max((out - 1) * stride + kernel - size, 0)
  return total // 2, total - total // 2


def _same_windows(x: jnp.ndarray, window: tuple[int, int], stride: int,
                  fill: float = 0.0) -> list[jnp.ndarray]:
  """The ``window[0] · window[1]`` strided views of ``x`` ``[B, H, W, C]`` padded (with
  ``fill``) as ``padding="SAME"`` pads: view ``(dy, dx)`` holds, at each output position,
  the element at offset ``(dy, dx)`` of its window. In ``(dy, dx)`` order."""
  kh, kw = window
  x = jnp.pad(x, ((0, 0), _same_padding(x.shape[1], kh, stride),
                  _same_padding(x.shape[2], kw, stride), (0, 0)), constant_values=fill)
  out_h, out_w = (x.shape[1] - kh) // stride + 1, (x.shape[2] - kw) // stride + 1
  return [x[:, dy:dy + (out_h - 1) * stride + 1:stride, dx:dx + (out_w - 1) * stride + 1:stride]
          for dy in range(kh) for dx in range(kw)]


class PatchConv(nn.Module):
  """A 2-D ``padding="SAME"`` convolution as one matrix product over image patches.

  The same function and parameters as ``nn.Conv(features, kernel_size, strides,
  padding="SAME")`` (``kernel`` ``[kh, kw, C_in, features]``, ``bias``, the same
  initialisers), computed differently: the input is padded, the ``kh · kw`` shifted
  (strided) views are concatenated into ``[B, H', W', kh · kw · C_in]`` patches, and the
  patches are multiplied by the flattened kernel. No convolution op is emitted, so under
  ``jax.vmap`` over teachers the product is a batched matrix multiply instead of a grouped
  convolution of T groups. It costs ``kh · kw`` times the input in patch memory.
  """
  features: int
  kernel_size: tuple[int, int] = (5, 5)
  strides: int = 1
  dtype: Any = None

  @nn.compact
  def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
    kh, kw = self.kernel_size
    c_in = x.shape[-1]
    kernel = self.param("kernel", nn.initializers.lecun_normal(),
                        (kh, kw, c_in, self.features), jnp.float32)
    bias = self.param("bias", nn.initializers.zeros_init(), (self.features,), jnp.float32)
    dtype = self.dtype or jnp.float32
    x, kernel, bias = x.astype(dtype), kernel.astype(dtype), bias.astype(dtype)
    # (dy, dx, c): the flattened kernel's order.
    patches = jnp.concatenate(_same_windows(x, (kh, kw), self.strides), axis=-1)
    return patches @ kernel.reshape(kh * kw * c_in, self.features) + bias


def max_pool_views(x: jnp.ndarray, window: int = 3, stride: int = 2) -> jnp.ndarray:
  """``nn.max_pool(x, (window, window), (stride, stride), padding="SAME")`` as the
  elementwise maximum of the ``window²`` strided views of the ``-inf``-padded input.

  The same values as XLA's ``reduce_window``; its gradient is a chain of selects (ties
  share it) instead of ``select_and_scatter``, whose deterministic GPU kernel is slow under
  ``jax.vmap``. After a ReLU the ties that matter are between zeros, whose gradient the
  ReLU zeroes either way, so parameter gradients agree with ``nn.max_pool``'s.
  """
  return functools.reduce(jnp.maximum, _same_windows(x, (window, window), stride, -jnp.inf))


class MnistCNN(nn.Module):
  """The paper's MNIST teacher: two conv layers with max-pooling, one ReLU FC layer.

  conv 5×5 (``features[0]``) → ReLU → max-pool 3×3/2 → conv 5×5 (``features[1]``)
  → ReLU → max-pool 3×3/2 → dense ``hidden`` → ReLU → dense ``num_classes``.
  Widths follow the 2017 code's defaults (64, 128, 384).

  ``downsample="stride"`` replaces each conv + max-pool by a 5×5 conv of stride 2 (the
  same 28 → 14 → 7 map sizes). It is a CPU variant, not the paper's network: XLA's
  max-pool gradient on a CPU costs several times the convolutions around it.

  ``conv="patches"`` computes each convolution as :class:`PatchConv` (a matrix product
  over image patches: the same network, parameters and outputs, no convolution op), to
  compare on an accelerator with the vmapped convolutions XLA makes grouped ones.
  ``pool="views"`` computes each max-pool as :func:`max_pool_views` (the same values; a
  gradient of selects instead of ``select_and_scatter``).
  """
  num_classes: int = 10
  features: Sequence[int] = (64, 128)
  hidden: Sequence[int] = (384,)
  dtype: Any = None  # compute dtype; parameters stay float32
  downsample: str = "max_pool"  # "max_pool" (the paper's) | "stride"
  conv: str = "lax"  # "lax" (XLA's convolution) | "patches" (PatchConv: the same function)
  pool: str = "window"  # "window" (XLA's reduce_window) | "views" (max_pool_views)

  @nn.compact
  def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
    if self.downsample not in ("max_pool", "stride"):
      raise ValueError(f"MnistCNN: downsample must be 'max_pool' or 'stride', "
                       f"got {self.downsample!r}")
    if self.conv not in ("lax", "patches"):
      raise ValueError(f"MnistCNN: conv must be 'lax' or 'patches', got {self.conv!r}")
    if self.pool not in ("window", "views"):
      raise ValueError(f"MnistCNN: pool must be 'window' or 'views', got {self.pool!r}")
    stride = 2 if self.downsample == "stride" else 1
    x = x.astype(self.dtype or jnp.float32)
    for i, f in enumerate(self.features):
      if self.conv == "patches":  # named as nn.Conv would be: the same parameter tree
        conv = PatchConv(f, (5, 5), stride, dtype=self.dtype, name=f"Conv_{i}")
      else:
        conv = nn.Conv(f, (5, 5), strides=stride, padding="SAME", dtype=self.dtype)
      x = nn.relu(conv(x))
      if stride == 1 and self.pool == "views":
        x = max_pool_views(x)
      elif stride == 1:
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


# Keyword arguments checked by :func:`check_kwargs` beyond being fields of the model:
# layer widths (tuples of integers >= 1) and the CNNs' implementation choices.
_WIDTHS = ("hidden", "features")
_CHOICES = {"downsample": ("max_pool", "stride"), "conv": ("lax", "patches"),
            "pool": ("window", "views")}
# Set by get_model itself, never by its caller's keyword arguments.
_NOT_KWARGS = ("num_classes", "dtype", "parent", "name")


def check_kwargs(name: str, kwargs: Any, field: str = "kwargs") -> dict[str, Any]:
  """The keyword arguments ``kwargs`` (a mapping) of model ``name`` as :func:`get_model`
  passes them: each a field of the model (not ``num_classes`` or ``dtype``, which
  ``get_model`` sets), the layer widths (``hidden``, ``features``) tuples of integers
  >= 1, the CNNs' ``downsample``, ``conv`` and ``pool`` among their options (lists
  become tuples).

  Raises:
    ValueError: naming ``{field}.{key}`` (``field``: how the caller names the mapping,
      e.g. ``config.model.kwargs``), or ``name`` is no registered model.
  """
  if name not in _MODELS:
    raise ValueError(f"model: unknown model {name!r}; known: {model_names()}")
  known = [k for k in _MODELS[name].__dataclass_fields__ if k not in _NOT_KWARGS]
  out = {}
  for key, value in dict(kwargs).items():
    if key not in known:
      raise ValueError(f"{field}.{key}: model {name!r} has no such argument; known: {known}")
    if key in _WIDTHS:
      value = _checks.int_tuple(value, f"{field}.{key}", allow_empty=True)
    elif key in _CHOICES:
      _checks.choice(value, f"{field}.{key}", _CHOICES[key])
    out[key] = tuple(value) if isinstance(value, list) else value
  return out


def get_model(name: str, num_classes: int, compute_dtype: str = "float32",
              **kwargs) -> nn.Module:
  """The model registered as ``name`` (see :func:`model_names`) with ``kwargs``.

  ``compute_dtype`` ("float32", "bfloat16", "float16") sets the activations'
  and matmuls' dtype of the models that have one; parameters are float32
  whatever it is.
  """
  kwargs = check_kwargs(name, kwargs)
  if compute_dtype not in COMPUTE_DTYPES:
    raise ValueError(f"compute_dtype: unknown dtype {compute_dtype!r}; known: "
                     f"{sorted(COMPUTE_DTYPES)}")
  module = _MODELS[name]
  if "dtype" in module.__dataclass_fields__:
    kwargs["dtype"] = COMPUTE_DTYPES[compute_dtype]
  elif compute_dtype != "float32":
    raise ValueError(f"compute_dtype: model {name!r} computes in float32 only")
  return module(num_classes=num_classes, **kwargs)
