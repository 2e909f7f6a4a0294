"""Boundary validation for the attack API (private).

Values are checked only where they are concrete; under ``jit``/``vmap``/``grad``
only shapes are checked. Every error is a ``ValueError`` naming the argument
and the offending value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pate_jax._checks import first_bad as _first_bad
from pate_jax._checks import is_traced


def histograms(x: Any, name: str = "histograms", *, num_classes: int | None = None,
               allow_negative: bool = False) -> Any:
  """Checks vote histograms ``[..., C]`` (real counts; ``C >= 2``).

  Returns the input as a float numpy array (concrete) or unchanged (traced).
  """
  shape = np.shape(x)
  if len(shape) < 1 or shape[-1] < 2:
    raise ValueError(f"{name} must have shape [..., C] with C >= 2 classes, got shape {shape}")
  if num_classes is not None and shape[-1] != num_classes:
    raise ValueError(f"{name} has {shape[-1]} classes but {num_classes} were expected "
                     f"(shape {shape})")
  if is_traced(x):
    return x
  arr = np.asarray(x)
  if arr.dtype == np.bool_ or arr.dtype.kind not in "iuf":
    raise ValueError(f"{name} must be a real array of vote counts, got dtype {arr.dtype}")
  arr = arr.astype(np.float64)
  bad = ~np.isfinite(arr)
  if bad.any():
    value, idx = _first_bad(arr, bad)
    raise ValueError(f"{name} must be finite, got {value} at {idx}")
  if not allow_negative:
    bad = arr < 0
    if bad.any():
      value, idx = _first_bad(arr, bad)
      raise ValueError(f"{name} must be non-negative vote counts, got {value} at {idx}")
  return arr


def frequencies(x: Any, name: str = "q_bar", *, num_classes: int | None = None,
                atol: float = 1e-4) -> Any:
  """Checks answer frequencies ``[..., C]``: finite, in [0, 1], rows summing to 1."""
  arr = histograms(x, name, num_classes=num_classes)
  if is_traced(arr):
    return arr
  bad = arr > 1.0
  if bad.any():
    value, idx = _first_bad(arr, bad)
    raise ValueError(f"{name} must hold frequencies in [0, 1], got {value} at {idx}")
  totals = arr.sum(axis=-1)
  bad = np.abs(totals - 1.0) > atol
  if bad.any():
    value, idx = _first_bad(totals, bad)
    raise ValueError(f"{name} rows must sum to 1 (they are answer frequencies); row {idx} "
                     f"sums to {value}")
  return arr


def positive_array(x: Any, name: str) -> Any:
  """Finite values ``> 0`` (scalar or array): noise scales, numbers of teachers."""
  if is_traced(x):
    return x
  arr = np.asarray(x)
  if arr.dtype == np.bool_ or arr.dtype.kind not in "iuf":
    raise ValueError(f"{name} must be real, got dtype {arr.dtype} ({x!r})")
  arr = arr.astype(np.float64)
  bad = ~np.isfinite(arr) | (arr <= 0)
  if bad.any():
    value = arr[bad].flat[0]
    raise ValueError(f"{name} must be finite and > 0, got {value}")
  return arr


def finite_array(x: Any, name: str) -> Any:
  if is_traced(x):
    return x
  arr = np.asarray(x)
  if arr.dtype == np.bool_ or arr.dtype.kind not in "iuf":
    raise ValueError(f"{name} must be real, got dtype {arr.dtype} ({x!r})")
  arr = arr.astype(np.float64)
  if not np.all(np.isfinite(arr)):
    raise ValueError(f"{name} must be finite, got {arr[~np.isfinite(arr)].flat[0]}")
  return arr


def num_queries(x: Any, name: str = "num_queries") -> np.ndarray:
  """Positive integer numbers of queries (scalar or array); always concrete."""
  if is_traced(x):
    raise ValueError(f"{name} must be concrete (it sets the sampling loop length), got a "
                     "tracer")
  arr = np.asarray(x)
  if arr.dtype == np.bool_ or arr.dtype.kind not in "iu":
    if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
      arr = arr.astype(np.int64)
    else:
      raise ValueError(f"{name} must be a positive integer, got {x!r}")
  bad = arr < 1
  if bad.any():
    raise ValueError(f"{name} must be >= 1, got {arr[bad].flat[0]}")
  if arr.max() >= 2**31:
    raise ValueError(f"{name} must be < 2**31, got {arr.max()}")
  return arr.astype(np.int64)


def positive_int(x: Any, name: str) -> int:
  if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or int(x) < 1:
    raise ValueError(f"{name} must be an integer >= 1, got {x!r}")
  return int(x)


def choice(x: Any, name: str, options: tuple[str, ...]) -> str:
  if x not in options:
    raise ValueError(f"{name} must be one of {options}, got {x!r}")
  return x


def batch_shape(name_shapes: dict[str, tuple[int, ...]]) -> tuple[int, ...]:
  """Broadcast shape of the batch parts, with an error naming the arguments."""
  try:
    return tuple(np.broadcast_shapes(*name_shapes.values()))
  except ValueError:
    desc = ", ".join(f"{k} {v}" for k, v in name_shapes.items())
    raise ValueError(f"batch shapes do not broadcast: {desc}") from None
