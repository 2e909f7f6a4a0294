"""What every check shares: whether a value is traced, and the first bad entry.

Owns :func:`is_traced`, :func:`default_platform`, :func:`first_bad` and the helpers that
raise the package's ``ValueError`` for the first offending entry of an array or for a dtype
that is not real (:mod:`pate_jax._checks` describes the messages).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np


def default_platform() -> str:
  """Platform of the device that ``jax.device_put(x)`` puts a host array on and a jitted
  call on host arrays runs on (the ``jax_default_device`` setting or context, else the
  default backend's first device)."""
  default = jax.config.jax_default_device
  if isinstance(default, str):
    return jax.local_devices(backend=default)[0].platform
  return (default or jax.local_devices()[0]).platform


def is_traced(x: Any) -> bool:
  """True if ``x`` is an abstract value (inside ``jit``/``vmap``/``grad``)."""
  return isinstance(x, jax.core.Tracer)


def first_bad(arr: np.ndarray, bad: np.ndarray) -> tuple[Any, tuple[int, ...]]:
  """The first offending value of ``arr`` where ``bad`` holds, and its index."""
  idx = tuple(int(i) for i in np.argwhere(bad)[0])
  return arr[idx].item(), idx


def _raise_first(arr: np.ndarray, bad: np.ndarray, name: str, requirement: str) -> None:
  if bad.any():
    value, idx = first_bad(arr, bad)
    raise ValueError(f"{name} must {requirement}; found {value} at {idx}")


def _real_dtype(arr: Any, name: str, what: str) -> np.dtype:
  dtype = np.dtype(arr.dtype)
  if dtype == np.bool_ or dtype.kind not in "iuf":
    raise ValueError(f"{name} must hold {what}; got dtype {dtype}")
  return dtype
