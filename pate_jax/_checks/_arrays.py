"""Checks of real arrays, and the arrays of an ``.npz`` hand-over file.

Owns Rényi :func:`orders` and :func:`moments` (:func:`positive_vector`), positive and
finite arrays, numbers of queries, batch shapes, the NaN test of an accountant's output
(:func:`any_nan`), :func:`float64_array`, and :func:`npz_arrays`, which reads a stage's
hand-over file and names a corrupt file or a missing key.
"""

from __future__ import annotations

import functools
import os
import zipfile
import zlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax._checks._common import _raise_first, _real_dtype, is_traced


def positive_vector(x: Any, name: str, what: str = "values", lower: float = 0.0) -> jax.Array | np.ndarray:
  """A non-empty 1-D float64 array of finite values ``> lower`` (numpy when concrete)."""
  if np.ndim(x) == 0:
    x = [x] if not is_traced(x) else jnp.reshape(x, (1,))
  if np.ndim(x) != 1 or np.shape(x)[0] == 0:
    raise ValueError(f"{name} must be a non-empty 1-D array of {what}; got shape {np.shape(x)}")
  if is_traced(x):
    return jnp.asarray(x, dtype=jnp.float64)
  raw = np.asarray(x)
  if raw.dtype == np.bool_ or raw.dtype.kind not in "iuf":  # "2", True: not numbers.
    raise ValueError(f"{name} must be a 1-D array of real {what}; got {x!r}")
  arr = raw.astype(np.float64)
  _raise_first(arr, ~(np.isfinite(arr) & (arr > lower)), name, f"be finite and > {lower:g}")
  return arr


def orders(x: Any, name: str = "orders") -> jax.Array | np.ndarray:
  """A non-empty 1-D array of finite Rényi orders ``> 1``, as float64."""
  return positive_vector(x, name, "Rényi orders", 1.0)


def moments(x: Any, name: str = "moments") -> jax.Array | np.ndarray:
  """A non-empty 1-D array of finite moment orders ``l > 0``, as float64."""
  return positive_vector(x, name, "moment orders", 0.0)


def float64_array(x: Any) -> jax.Array | np.ndarray:
  """``x`` as float64 with no eager device op where avoidable: a host value becomes a numpy
  array, a ``jax.Array`` stays on its device (cast only if it is not float64)."""
  if is_traced(x):
    return jnp.asarray(x, dtype=jnp.float64)
  if isinstance(x, jax.Array):
    return x if x.dtype == jnp.float64 else x.astype(jnp.float64)
  return np.asarray(x, dtype=np.float64)


@functools.partial(jax.jit, static_argnames=("positive_is_bad",))
def _any_bad_device(x: jax.Array, positive_is_bad: bool) -> jax.Array:
  return jnp.any(~(x <= 0.0)) if positive_is_bad else jnp.any(jnp.isnan(x))


def any_nan(x: jax.Array | np.ndarray, *, positive_is_bad: bool = False) -> bool:
  """Whether a concrete float array holds a NaN — or, with ``positive_is_bad``, a NaN
  or a value ``> 0`` (a bad ``log q``); on its device when it is a ``jax.Array``."""
  if isinstance(x, jax.Array):
    return bool(_any_bad_device(x, positive_is_bad))
  return bool((~(x <= 0.0)).any() if positive_is_bad else np.isnan(x).any())


def _real_array(x: Any, name: str, ok: Any, requirement: str) -> Any:
  """A real array (or scalar) as float64 numpy whose entries pass ``ok``; tracers as is."""
  if is_traced(x):
    return x
  arr = np.asarray(x)
  _real_dtype(arr, name, "real numbers")
  arr = arr.astype(np.float64)
  _raise_first(arr.reshape(-1), ~ok(arr).reshape(-1), name, requirement)
  return arr


def positive_array(x: Any, name: str) -> Any:
  """Finite values ``> 0`` (scalar or array), as float64 numpy (tracers as is)."""
  return _real_array(x, name, lambda a: np.isfinite(a) & (a > 0), "be finite and > 0")


def finite_array(x: Any, name: str) -> Any:
  """Finite real values (scalar or array), as float64 numpy (tracers as is)."""
  return _real_array(x, name, np.isfinite, "be finite")


def num_queries(x: Any, name: str = "num_queries") -> np.ndarray:
  """Positive integer numbers of queries below 2**31 (scalar or array); always concrete."""
  if is_traced(x):
    raise ValueError(f"{name} must be concrete (it sets a loop length); got a tracer")
  arr = np.asarray(x)
  if arr.dtype == np.bool_ or arr.dtype.kind not in "iu":
    if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
      arr = arr.astype(np.int64)
    else:
      raise ValueError(f"{name} must be a positive integer; got {x!r}")
  _raise_first(arr.reshape(-1), (arr < 1).reshape(-1), name, "be >= 1")
  _raise_first(arr.reshape(-1), (arr >= 2**31).reshape(-1), name, "be < 2**31")
  return arr.astype(np.int64)


def batch_shape(name_shapes: dict[str, tuple[int, ...]]) -> tuple[int, ...]:
  """Broadcast shape of the batch parts, with an error naming the arguments."""
  try:
    return tuple(np.broadcast_shapes(*name_shapes.values()))
  except ValueError:
    desc = ", ".join(f"{k} {v}" for k, v in name_shapes.items())
    raise ValueError(f"batch shapes must broadcast; got {desc}") from None


# ----------------------------------------------------------------------------- files


class CorruptFileError(ValueError):
  """A hand-over file that cannot be read at all (:func:`npz_arrays`): torn, truncated or
  not an ``.npz``, as opposed to one that reads but holds the wrong values."""


def npz_arrays(path: str | os.PathLike, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
  """All arrays of an ``.npz`` hand-over file, read eagerly.

  Raises:
    CorruptFileError: (a ``ValueError``) the file is corrupted (not a zip, a truncated or
      garbled member, a pickled object); the message names the file.
    ValueError: the file lacks one of ``keys``; the message names the file and the keys.
  """
  try:
    with np.load(path, allow_pickle=False) as f:
      out = {k: f[k] for k in f.files}
  except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, KeyError) as e:
    raise CorruptFileError(
        f"{path} is corrupt or not an .npz file ({type(e).__name__}: {e}); "
        "rerun the stage that wrote it") from e
  missing = [k for k in keys if k not in out]
  if missing:
    raise ValueError(f"{path} must hold the keys {keys}; missing {missing}")
  return out
