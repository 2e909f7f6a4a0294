"""Input validation for the public accounting functions (private).

Values are checked only where they are concrete: under ``jit``, ``vmap`` or
``grad`` the arguments are tracers, and then only static facts (shapes, ranks)
are checked; the jitted cores never validate. Every error is a ``ValueError``
that names the argument and shows the offending value.

Concrete scalars, orders and moments come back as float64 numpy values, traced ones as
float64 tracers; votes come back as a ``jax.Array`` of their own dtype (cast to float64
inside the jitted cores). Call the converters inside ``jax.enable_x64`` (the public
functions are wrapped in ``with_x64``).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax._checks import first_bad as _first_bad
from pate_jax._checks import is_traced


# Host votes up to this size are handed to the jitted calls as (copied) numpy arrays;
# larger ones are put on the device once (see _private_device_copy).
_DEVICE_PUT_BYTES = 1 << 20


def votes_array(votes: Any, *, name: str = "votes",
                equal_totals: bool = False) -> jax.Array | np.ndarray:
  """Checks a ``[Q, C]`` vote histogram; returns it in its own dtype (a ``jax.Array``, or a
  small numpy array as given).

  The value checks run on the device (:func:`_votes_flags`: one pass over the votes, one
  boolean back); only when it is raised are the votes inspected on the host, to name
  the first offending entry. A host array is copied once (never aliased, see
  :func:`_private_device_copy`) and not converted: the jitted cores cast the counts to
  float64 themselves, so integer votes travel at their own width.

  Args:
    votes: per-class teacher counts, ``Q >= 1`` queries, ``C >= 2`` classes.
    name: argument name used in error messages.
    equal_totals: also require every row to sum to the same teacher count.

  Raises:
    ValueError: wrong rank, 0 queries, fewer than 2 classes; (concrete input)
      non-numeric or boolean dtype, NaN/inf, negative or non-integer counts; unequal row
      totals when ``equal_totals``.
  """
  shape = np.shape(votes)
  if len(shape) != 2:
    raise ValueError(f"{name} must be a [Q, C] array of per-class vote counts; got shape {shape}")
  if shape[0] == 0:
    raise ValueError(f"{name} must contain at least one query; got shape {shape} (0 queries)")
  if shape[1] < 2:
    raise ValueError(f"{name} must have at least 2 classes; got shape {shape}")
  if is_traced(votes):
    return votes
  if not isinstance(votes, (jax.Array, np.ndarray)):
    votes = np.asarray(votes)
  dtype = np.dtype(votes.dtype)
  if dtype == np.bool_ or dtype.kind not in "iuf":
    raise ValueError(f"{name} must hold integer vote counts; got dtype {dtype}")
  arr = _private_device_copy(votes) if isinstance(votes, np.ndarray) else votes
  if bool(_votes_flags(arr, equal_totals=equal_totals)):
    # The host pass is the reference (and names the entry); it always raises here.
    _raise_first_bad_votes(np.asarray(arr), name, equal_totals)
  return arr


def _private_device_copy(votes: np.ndarray) -> jax.Array | np.ndarray:
  """Host votes as an array that the caller's buffer can no longer change.

  XLA:CPU may use a host buffer in place (``device_put`` and jit arguments alias
  it) and read it after the public function has returned; a caller reusing its
  array would then change the accounted votes. So the votes are copied first; a
  small copy is handed to the jitted calls as is (their dispatch moves it), a large
  one is put on the device once.
  """
  copy = np.array(votes, copy=True)
  return copy if votes.nbytes <= _DEVICE_PUT_BYTES else jax.device_put(copy)


@functools.partial(jax.jit, static_argnames=("equal_totals",))
def _votes_flags(votes: jax.Array, equal_totals: bool) -> jax.Array:
  """One boolean: some count is NaN/inf, negative or fractional, or (``equal_totals``)
  some row total differs from row 0's. One fused pass over the votes."""
  floating = jnp.issubdtype(votes.dtype, jnp.floating)
  signed = jnp.issubdtype(votes.dtype, jnp.signedinteger)
  if floating:
    # x - floor(x) == 0 fails for NaN and ±inf (inf - inf = NaN) and for fractions.
    bad = jnp.any(~((votes >= 0) & (votes - jnp.floor(votes) == 0)))
  else:
    bad = jnp.any(votes < 0) if signed else jnp.zeros((), bool)
  if equal_totals:  # integer rows are summed in 64-bit integers: exact
    totals = jnp.sum(votes, axis=1, dtype=(
        jnp.float64 if floating else jnp.int64 if signed else jnp.uint64))
    bad = bad | jnp.any(totals != totals[0])
  return bad


def _raise_first_bad_votes(votes: np.ndarray, name: str, equal_totals: bool) -> None:
  """Raises the ``ValueError`` for the first failed check, naming the first bad entry."""
  arr = votes.astype(np.float64)
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


def _as_float64(x: Any, value: float | None) -> jax.Array | np.ndarray:
  """A traced ``x`` cast to float64, or the checked concrete ``value`` as a 0-d numpy
  float64 (handed to the jitted cores as is: no eager device op per argument)."""
  return jnp.asarray(x, dtype=jnp.float64) if value is None else np.asarray(value, np.float64)


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
  or a value ``> 0`` (a bad ``log q``); on its device when it is a ``jax.Array`` (one
  boolean back)."""
  if isinstance(x, jax.Array):
    return bool(_any_bad_device(x, positive_is_bad))
  return bool((~(x <= 0.0)).any() if positive_is_bad else np.isnan(x).any())


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


def scalar(x: Any, name: str) -> jax.Array | np.ndarray:
  """A real scalar as float64; concrete values must be finite."""
  return _as_float64(x, _concrete_scalar(x, name))


def positive(x: Any, name: str) -> jax.Array | np.ndarray:
  """A finite scalar ``> 0`` as float64 (noise scales, γ, σ, σ_T)."""
  value = _concrete_scalar(x, name)
  if value is not None and not value > 0:
    raise ValueError(f"{name} must be > 0; got {value}")
  return _as_float64(x, value)


def delta(x: Any, name: str = "delta") -> jax.Array | np.ndarray:
  """A scalar in the open interval (0, 1)."""
  value = _concrete_scalar(x, name)
  if value is not None and not 0.0 < value < 1.0:
    raise ValueError(f"{name} must lie in (0, 1); got {value}")
  return _as_float64(x, value)


def probability(x: Any, name: str = "q") -> jax.Array | np.ndarray:
  """A scalar in the closed interval [0, 1]."""
  value = _concrete_scalar(x, name)
  if value is not None and not 0.0 <= value <= 1.0:
    raise ValueError(f"{name} must lie in [0, 1]; got {value}")
  return _as_float64(x, value)


def _positive_1d(x: Any, name: str, what: str, lower: float) -> jax.Array | np.ndarray:
  """A non-empty 1-D float64 array of finite values ``> lower`` (numpy when concrete)."""
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
  return arr


def orders_array(orders: Any, name: str = "orders") -> jax.Array | np.ndarray:
  """A non-empty 1-D array of finite Rényi orders ``> 1``, as float64."""
  return _positive_1d(orders, name, "Rényi orders", 1.0)


def moments_array(moments: Any, name: str = "moments") -> jax.Array | np.ndarray:
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
