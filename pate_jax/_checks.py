"""The one validation layer of pate_jax: checks at the public boundary (private module).

Every public function validates its concrete arguments here and raises a
``ValueError`` in one style, naming the argument and the bad value::

  "<name> must <requirement>; got <value>"            (a scalar, a shape, a dtype)
  "<name> must <requirement>; found <value> at <idx>" (the first bad array entry)

Values are checked only where they are concrete: under ``jit``/``vmap``/``grad`` the
arguments are tracers and only static facts (shapes) are checked, so the public
functions compose with JAX transformations; the jitted cores never validate.

Concrete scalars, orders and moments come back as float64 numpy values (handed to the
jitted cores as they are: no eager device op per argument), traced ones as float64
tracers: call the converters inside ``jax.enable_x64`` where float64 matters (the
accountants do). Votes come back in their own dtype (cast inside the cores).
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

# Host votes up to this size are handed to the jitted calls as (copied) numpy arrays;
# larger ones are put on the device once (see _private_device_copy).
_DEVICE_PUT_BYTES = 1 << 20

_UINT32_MAX = int(np.iinfo(np.uint32).max)

INT32_MAX_TOTAL = int(np.iinfo(np.int32).max)
"""Largest row total (number of teachers) of any vote histogram: the jitted cores count in
int32 (64-bit mode is off by default), so larger counts would wrap around."""

MAX_NOISY_TOTAL = 2**24
"""Largest row total of the votes given to a noisy mechanism: its noise is added in
float32, where integers above 2**24 are rounded, so a count could move by more than
the one vote the privacy analysis assumes (its sensitivity)."""


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


# ----------------------------------------------------------------------------- vote histograms


def votes(x: Any, name: str = "votes", *, equal_totals: bool = False,
          max_total: int = INT32_MAX_TOTAL) -> jax.Array | np.ndarray:
  """Checks a ``[Q, C]`` vote histogram; returns it in its own dtype.

  The value checks run where the votes are (:func:`_votes_flags`: one fused pass,
  one boolean back); only when it is raised are the votes inspected on the host, to
  name the first offending entry. A host array is copied once (never aliased, see
  :func:`_private_device_copy`) and not converted: the jitted cores cast the counts
  themselves, so integer votes travel at their own width. Tracers come back as they are.

  Args:
    x: per-class teacher counts, ``Q >= 1`` queries, ``C >= 2`` classes.
    name: argument name used in error messages.
    equal_totals: also require every row to sum to the same number of teachers.
    max_total: largest row total (:data:`INT32_MAX_TOTAL`, or :data:`MAX_NOISY_TOTAL`
      for the votes of a noisy mechanism).

  Raises:
    ValueError: wrong rank, 0 queries, fewer than 2 classes; (concrete input)
      non-numeric or boolean dtype, NaN/inf, negative or non-integer counts, a row
      total above ``max_total``; unequal row totals when ``equal_totals``.
  """
  shape = np.shape(x)
  if len(shape) != 2:
    raise ValueError(f"{name} must have shape [Q, C] (queries, classes); got shape {shape}")
  if shape[0] == 0:
    raise ValueError(f"{name} must hold at least one query; got shape {shape}")
  if shape[1] < 2:
    raise ValueError(f"{name} must have at least 2 classes; got shape {shape}")
  if is_traced(x):
    return x
  if not isinstance(x, (jax.Array, np.ndarray)):
    x = np.asarray(x)
  _real_dtype(x, name, "integer vote counts")
  arr = _private_device_copy(x) if isinstance(x, np.ndarray) else x
  with jax.enable_x64(True):  # Exact 64-bit row totals.
    flagged = bool(_votes_flags(arr, equal_totals=equal_totals, max_total=int(max_total)))
  if flagged:
    host = np.asarray(arr).astype(np.float64)  # The host pass names the entry; it raises.
    _raise_first(host, ~np.isfinite(host), name, "be finite vote counts")
    _raise_first(host, host < 0, name, "be non-negative vote counts")
    _raise_first(host, host != np.round(host), name, "hold integer vote counts")
    totals = host.sum(axis=1)  # float64: exact far beyond max_total, never wraps.
    if np.any(totals > max_total):
      i = int(np.argmax(totals > max_total))
      why = ("counts are exact in the float32 noise only up to 2**24"
             if max_total == MAX_NOISY_TOTAL else "counts are int32 in the compiled cores")
      raise ValueError(f"{name} must sum to at most {max_total} teachers per row ({why}); "
                       f"row {i} sums to {totals[i]}")
    if equal_totals:
      check_equal_totals(host, name)
  return arr


def check_equal_totals(x: Any, name: str = "votes") -> None:
  """Every row of a concrete ``[Q, C]`` histogram sums to the same number of teachers."""
  totals = np.asarray(x).sum(axis=1)
  if totals.size and not np.all(totals == totals[0]):
    i = int(np.argmax(totals != totals[0]))
    raise ValueError(f"{name}: every row must sum to the number of teachers; row 0 sums to "
                     f"{totals[0]:g} but row {i} sums to {totals[i]:g}")


def _private_device_copy(x: np.ndarray) -> jax.Array | np.ndarray:
  """Host votes as an array that the caller's buffer can no longer change.

  XLA:CPU may use a host buffer in place (``device_put`` and jit arguments alias it)
  and read it after the public function has returned; a caller reusing its array
  would then change the accounted votes. So the votes are copied first; a small copy
  is handed to the jitted calls as is, a large one is put on the device once.
  """
  copy = np.array(x, copy=True)
  return copy if x.nbytes <= _DEVICE_PUT_BYTES else jax.device_put(copy)


@functools.partial(jax.jit, static_argnames=("equal_totals", "max_total"))
def _votes_flags(x: jax.Array, equal_totals: bool, max_total: int) -> jax.Array:
  """One boolean: some count is NaN/inf, negative or fractional, some row total exceeds
  ``max_total``, or (``equal_totals``) differs from row 0's. One fused pass over the votes."""
  floating = jnp.issubdtype(x.dtype, jnp.floating)
  signed = jnp.issubdtype(x.dtype, jnp.signedinteger)
  if floating:
    # x - floor(x) == 0 fails for NaN and ±inf (inf - inf = NaN) and for fractions.
    bad = jnp.any(~((x >= 0) & (x - jnp.floor(x) == 0)))
  else:
    bad = jnp.any(x < 0) if signed else jnp.zeros((), bool)
  # Integer rows are summed in the widest integers available: exact.
  totals = jnp.sum(x, axis=1, dtype=(
      jnp.float64 if floating else jnp.int64 if signed else jnp.uint64))
  bad = bad | jnp.any(totals > max_total)
  if floating or jnp.iinfo(x.dtype).max > max_total:  # A count above it (a sum may wrap).
    bad = bad | jnp.any(x > max_total)
  if equal_totals:
    bad = bad | jnp.any(totals != totals[0])
  return bad


def histograms(x: Any, name: str = "histograms", *, num_classes: int | None = None,
               allow_negative: bool = False) -> Any:
  """Real vote histograms ``[..., C]`` (``C >= 2``): a float64 numpy array (tracers as is)."""
  shape = np.shape(x)
  if len(shape) < 1 or shape[-1] < 2:
    raise ValueError(f"{name} must have shape [..., C] with C >= 2 classes; got shape {shape}")
  if num_classes is not None and shape[-1] != num_classes:
    raise ValueError(f"{name} must have {num_classes} classes; got shape {shape}")
  if is_traced(x):
    return x
  arr = np.asarray(x)
  _real_dtype(arr, name, "real vote counts")
  arr = arr.astype(np.float64)
  _raise_first(arr, ~np.isfinite(arr), name, "be finite")
  if not allow_negative:
    _raise_first(arr, arr < 0, name, "be non-negative vote counts")
  return arr


def frequencies(x: Any, name: str = "q_bar", *, num_classes: int | None = None,
                atol: float = 1e-4) -> Any:
  """Answer frequencies ``[..., C]``: finite, in [0, 1], rows summing to 1."""
  arr = histograms(x, name, num_classes=num_classes)
  if is_traced(arr):
    return arr
  _raise_first(arr, arr > 1.0, name, "hold frequencies in [0, 1]")
  totals = arr.sum(axis=-1)
  bad = np.abs(totals - 1.0) > atol
  if bad.any():
    value, idx = first_bad(totals, bad)
    raise ValueError(f"{name}: every row must sum to 1 (answer frequencies); row {idx} sums "
                     f"to {value}")
  return arr


def labels(x: Any, num_queries: int, num_classes: int, name: str = "labels") -> Any:
  """True labels ``[Q]``, integers in ``[0, C)``, as int32 (tracers as is)."""
  if is_traced(x):
    return x
  arr = np.asarray(x)
  if arr.shape != (num_queries,):
    raise ValueError(f"{name} must have shape [{num_queries}]; got shape {arr.shape}")
  if not np.issubdtype(arr.dtype, np.integer):
    raise ValueError(f"{name} must hold integers; got dtype {arr.dtype}")
  _raise_first(arr, (arr < 0) | (arr >= num_classes), name, f"lie in [0, {num_classes})")
  return arr.astype(np.int32)


def query_ids(x: Any, num_queries: int, name: str = "query_ids",
              max_words: int | None = None) -> Any:
  """Query ids ``[Q]`` or ``[Q, W]`` of integers in ``[0, 2**32)``, as uint32.

  ``None`` gives ``arange(num_queries)``; tracers are cast in jnp.
  """
  if x is None:
    return np.arange(num_queries, dtype=np.uint32)
  shape = np.shape(x)
  if (len(shape) not in (1, 2) or shape[0] != num_queries
      or (len(shape) == 2 and not 1 <= shape[1] <= (max_words or shape[1]))):
    words = "W" if max_words is None else f"W <= {max_words}"
    raise ValueError(f"{name} must have shape [{num_queries}] or [{num_queries}, {words}]; "
                     f"got shape {shape}")
  if is_traced(x):
    return x.astype(jnp.uint32)
  arr = np.asarray(x)
  if not np.issubdtype(arr.dtype, np.integer):
    raise ValueError(f"{name} must hold integers; got dtype {arr.dtype}")
  _raise_first(arr, (arr < 0) | (arr > _UINT32_MAX), name, "lie in [0, 2**32)")
  return arr.astype(np.uint32)


# ----------------------------------------------------------------------------- scalars


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


def choice(x: Any, name: str, options: Any) -> Any:
  """One of ``options`` (strings, or the keys of a registry)."""
  options = tuple(options)
  if not isinstance(x, str) or x not in options:
    raise ValueError(f"{name} must be one of {options}; got {x!r}")
  return x


def boolean(x: Any, name: str) -> bool:
  """A real boolean (``True``/``False``, numpy bools), not a string or a number."""
  if not isinstance(x, (bool, np.bool_)):
    raise ValueError(f"{name} must be a boolean; got {x!r}")
  return bool(x)


# ----------------------------------------------------------------------------- arrays


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


def npz_arrays(path: str | os.PathLike, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
  """All arrays of an ``.npz`` hand-over file, read eagerly.

  Raises:
    ValueError: the file is corrupted (not a zip, a truncated or garbled member, a
      pickled object) or lacks one of ``keys``; the message names the file and the keys.
  """
  try:
    with np.load(path, allow_pickle=False) as f:
      out = {k: f[k] for k in f.files}
  except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, KeyError) as e:
    raise ValueError(f"{path} is corrupt or not an .npz file ({type(e).__name__}: {e}); "
                     "rerun the stage that wrote it") from e
  missing = [k for k in keys if k not in out]
  if missing:
    raise ValueError(f"{path} must hold the keys {keys}; missing {missing}")
  return out
