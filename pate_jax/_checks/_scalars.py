"""Checks of scalar arguments: noise scales, δ, probabilities, budgets, sizes, choices, flags.

Concrete numbers come back as 0-d float64 numpy values (sizes as Python ``int``, flags as
``bool``), traced ones as float64 tracers; :func:`real_number` tells a real number from a
string, a bool or a tracer.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax._checks._common import is_traced


def _concrete_scalar(x: Any, name: str) -> float | None:
  """``float(x)`` after the shape/type/finiteness checks; ``None`` if ``x`` is traced."""
  if np.ndim(x) != 0:
    raise ValueError(f"{name} must be a scalar; got shape {np.shape(x)}")
  if is_traced(x):
    return None
  arr = np.asarray(x)
  if arr.dtype == np.bool_ or arr.dtype.kind not in "iuf":
    raise ValueError(f"{name} must be a real number; got {x!r}")
  value = float(arr)
  if not np.isfinite(value):
    raise ValueError(f"{name} must be finite; got {value}")
  return value


def _as_float64(x: Any, value: float | None) -> jax.Array | np.ndarray:
  """A traced ``x`` cast to float64, or the checked concrete ``value`` as 0-d float64."""
  return jnp.asarray(x, dtype=jnp.float64) if value is None else np.asarray(value, np.float64)


def scalar(x: Any, name: str) -> jax.Array | np.ndarray:
  """A finite real scalar, as float64 (e.g. Confident-GNMax's threshold)."""
  return _as_float64(x, _concrete_scalar(x, name))


def positive(x: Any, name: str) -> jax.Array | np.ndarray:
  """A finite scalar ``> 0``, as float64 (noise scales γ, σ, σ_T; budgets)."""
  value = _concrete_scalar(x, name)
  if value is not None and not value > 0:
    raise ValueError(f"{name} must be > 0; got {value}")
  return _as_float64(x, value)


def delta(x: Any, name: str = "delta") -> jax.Array | np.ndarray:
  """A scalar in the open interval (0, 1), as float64."""
  value = _concrete_scalar(x, name)
  if value is not None and not 0.0 < value < 1.0:
    raise ValueError(f"{name} must lie in (0, 1); got {value}")
  return _as_float64(x, value)


def probability(x: Any, name: str = "q") -> jax.Array | np.ndarray:
  """A scalar in the closed interval [0, 1], as float64."""
  value = _concrete_scalar(x, name)
  if value is not None and not 0.0 <= value <= 1.0:
    raise ValueError(f"{name} must lie in [0, 1]; got {value}")
  return _as_float64(x, value)


def budget(x: Any, name: str = "epsilon_max") -> np.float64:
  """A concrete privacy budget ``> 0`` (``inf`` allowed: no budget), given as a real number
  (:func:`real_number`): ``"2"`` or ``True`` is refused, not read as 2.0 or 1.0."""
  value = real_number(x)
  if value is None or np.isnan(value) or value <= 0:
    raise ValueError(f"{name} must be a real number > 0 (inf allowed); got {x!r}")
  return np.float64(value)


def real_number(x: Any) -> float | None:
  """``float(x)`` for a concrete real number: an ``int``, a ``float``, a numpy integer or
  floating scalar, or a 0-d integer or floating array (numpy or JAX). ``None`` for anything
  else: a string, a bool (numpy's too), ``None``, a complex, a tracer, a larger array."""
  if isinstance(x, (bool, np.bool_)) or is_traced(x):
    return None
  if isinstance(x, (int, float, np.integer, np.floating)):
    return float(x)
  if isinstance(x, (np.ndarray, jax.Array)) and x.ndim == 0 and x.dtype.kind in "iuf":
    return float(x)
  return None


def positive_int(x: Any, name: str, minimum: int = 1) -> int:
  """A Python ``int >= minimum`` (static arguments: sizes, counts)."""
  if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or int(x) < minimum:
    raise ValueError(f"{name} must be an integer >= {minimum}; got {x!r}")
  return int(x)


def int_tuple(x: Any, name: str, minimum: int = 1, allow_empty: bool = False
              ) -> tuple[int, ...]:
  """A tuple of Python ``int >= minimum`` from a list or tuple of integers (a shape, layer
  widths): not a string, a bare number, a float or bool entry; empty only if
  ``allow_empty``."""
  if not isinstance(x, (list, tuple)) or not (x or allow_empty):
    what = "a tuple" if allow_empty else "a non-empty tuple"
    raise ValueError(f"{name} must be {what} of integers >= {minimum}; got {x!r}")
  for i, v in enumerate(x):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < minimum:
      raise ValueError(f"{name} must hold integers >= {minimum}; found {v!r} at ({i},)")
  return tuple(int(v) for v in x)


def choice(x: Any, name: str, options: Any) -> Any:
  """One of ``options`` (strings, or the keys of a registry)."""
  options = tuple(options)
  if not isinstance(x, str) or x not in options:
    raise ValueError(f"{name} must be one of {options}; got {x!r}")
  return x


def is_sha256(x: Any) -> bool:
  """Whether ``x`` is a SHA-256 hex digest: 64 lowercase hex digits (a data digest's form)."""
  return isinstance(x, str) and len(x) == 64 and set(x) <= _HEX_DIGITS


_HEX_DIGITS = frozenset("0123456789abcdef")


def boolean(x: Any, name: str) -> bool:
  """A real boolean (``True``/``False``, numpy bools), not a string or a number."""
  if not isinstance(x, (bool, np.bool_)):
    raise ValueError(f"{name} must be a boolean; got {x!r}")
  return bool(x)
