"""Input validation for the public accounting functions (private).

Values are checked only where they are concrete: under ``jit``, ``vmap`` or
``grad`` the arguments are tracers, and then only static facts (shapes, ranks)
are checked; the jitted cores never validate. Every error is a ``ValueError``
that names the argument and shows the offending value.

All converters return float64 ``jax.Array`` s and must be called inside
``jax.enable_x64`` (the public functions are wrapped in ``with_x64``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax._checks import first_bad as _first_bad
from pate_jax._checks import is_traced


def votes_array(votes: Any, *, name: str = "votes", equal_totals: bool = False) -> jax.Array:
  """Checks a ``[Q, C]`` vote histogram and returns it as float64.

  Args:
    votes: per-class teacher counts, ``Q >= 1`` queries, ``C >= 2`` classes.
    name: argument name used in error messages.
    equal_totals: also require every row to sum to the same teacher count.

  Raises:
    ValueError: wrong rank, 0 queries, fewer than 2 classes; (concrete input)
      NaN/inf, negative or non-integer counts; unequal row totals when
      ``equal_totals``.
  """
  shape = np.shape(votes)
  if len(shape) != 2:
    raise ValueError(f"{name} must be a [Q, C] array of per-class vote counts; got shape {shape}")
  if shape[0] == 0:
    raise ValueError(f"{name} must contain at least one query; got shape {shape} (0 queries)")
  if shape[1] < 2:
    raise ValueError(f"{name} must have at least 2 classes; got shape {shape}")
  if is_traced(votes):
    return jnp.asarray(votes, dtype=jnp.float64)
  arr = np.asarray(votes)
  if arr.dtype == np.bool_ or arr.dtype.kind not in "iuf":
    raise ValueError(f"{name} must hold integer vote counts; got dtype {arr.dtype}")
  arr = arr.astype(np.float64)
  bad = ~np.isfinite(arr)
  if bad.any():
    value, idx = _first_bad(arr, bad)
    raise ValueError(f"{name} must be finite vote counts; found {value} at {idx}")
  bad = arr < 0
  if bad.any():
    value, idx = _first_bad(arr, bad)
    raise ValueError(f"{name} must be non-negative vote counts; found {value} at {idx}")
  bad = arr != np.round(arr)
  if bad.any():
    value, idx = _first_bad(arr, bad)
    raise ValueError(f"{name} must be integer vote counts; found {value} at {idx}")
  if equal_totals:
    totals = arr.sum(axis=1)
    if not np.all(totals == totals[0]):
      i = int(np.argmax(totals != totals[0]))
      raise ValueError(
          f"{name}: every row must sum to the same number of teachers; row 0 sums to "
          f"{totals[0]:g} but row {i} sums to {totals[i]:g}")
  return jnp.asarray(arr)


def _concrete_scalar(x: Any, name: str) -> float | None:
  """``float(x)`` after the shape/finiteness checks; ``None`` if ``x`` is traced."""
  if np.ndim(x) != 0:
    raise ValueError(f"{name} must be a scalar; got shape {np.shape(x)}")
  if is_traced(x):
    return None
  value = float(np.asarray(x))
  if not np.isfinite(value):
    raise ValueError(f"{name} must be finite; got {value}")
  return value


def scalar(x: Any, name: str) -> jax.Array:
  """A real scalar as float64; concrete values must be finite."""
  _concrete_scalar(x, name)
  return jnp.asarray(x, dtype=jnp.float64)


def positive(x: Any, name: str) -> jax.Array:
  """A finite scalar ``> 0`` as float64 (noise scales, γ, σ, σ_T)."""
  value = _concrete_scalar(x, name)
  if value is not None and not value > 0:
    raise ValueError(f"{name} must be > 0; got {value}")
  return jnp.asarray(x, dtype=jnp.float64)


def delta(x: Any, name: str = "delta") -> jax.Array:
  """A scalar in the open interval (0, 1)."""
  value = _concrete_scalar(x, name)
  if value is not None and not 0.0 < value < 1.0:
    raise ValueError(f"{name} must lie in (0, 1); got {value}")
  return jnp.asarray(x, dtype=jnp.float64)


def probability(x: Any, name: str = "q") -> jax.Array:
  """A scalar in the closed interval [0, 1]."""
  value = _concrete_scalar(x, name)
  if value is not None and not 0.0 <= value <= 1.0:
    raise ValueError(f"{name} must lie in [0, 1]; got {value}")
  return jnp.asarray(x, dtype=jnp.float64)


def _positive_1d(x: Any, name: str, what: str, lower: float) -> jax.Array:
  """A non-empty 1-D float64 array of finite values ``> lower``."""
  if np.ndim(x) == 0:
    x = [x] if not is_traced(x) else jnp.reshape(x, (1,))
  if np.ndim(x) != 1 or np.shape(x)[0] == 0:
    raise ValueError(f"{name} must be a non-empty 1-D array of {what}; got shape {np.shape(x)}")
  if is_traced(x):
    return jnp.asarray(x, dtype=jnp.float64)
  arr = np.asarray(x, dtype=np.float64)
  bad = ~(np.isfinite(arr) & (arr > lower))
  if bad.any():
    raise ValueError(f"{name} must be finite and > {lower:g}; got {arr[bad][0]} in "
                     f"{arr.tolist()}")
  return jnp.asarray(arr)


def orders_array(orders: Any, name: str = "orders") -> jax.Array:
  """A non-empty 1-D array of finite Rényi orders ``> 1``, as float64."""
  return _positive_1d(orders, name, "Rényi orders", 1.0)


def moments_array(moments: Any, name: str = "moments") -> jax.Array:
  """A non-empty 1-D array of finite moment orders ``l > 0``, as float64."""
  return _positive_1d(moments, name, "moment orders", 0.0)


def positive_int(x: Any, name: str) -> int:
  """A Python ``int >= 1`` (static arguments such as ``max_moment``)."""
  if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or int(x) < 1:
    raise ValueError(f"{name} must be an integer >= 1; got {x!r}")
  return int(x)


def conversion(x: Any) -> str:
  if x not in ("improved", "classic"):
    raise ValueError(f"conversion must be 'improved' or 'classic'; got {x!r}")
  return x
