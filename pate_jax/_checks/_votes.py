"""Checks of vote histograms and of what comes with them: labels and query ids.

Owns :func:`votes` (integer ``[Q, C]`` counts, checked in one fused pass where they are,
and held where the caller's buffer cannot change them afterwards),
:func:`check_equal_totals`, the bounds on a row total (:data:`INT32_MAX_TOTAL`,
:data:`MAX_NOISY_TOTAL`), real :func:`histograms` and answer :func:`frequencies`, true
:func:`labels` and :func:`query_ids`.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax._checks._common import (_raise_first, _real_dtype, default_platform, first_bad,
                                      is_traced)


# Host votes up to this size are handed to the jitted calls as (copied) numpy arrays;
# larger ones are put on the device once (see _private_device_copy).
_DEVICE_PUT_BYTES = 1 << 20

# Platforms whose default memory is the accelerator's own: device_put copies host votes into
# it, never aliases them (XLA:CPU does; so may a plugin sharing the host's memory).
_SEPARATE_MEMORY_PLATFORMS = frozenset({"gpu", "cuda", "rocm", "tpu"})

_UINT32_MAX = int(np.iinfo(np.uint32).max)

INT32_MAX_TOTAL = int(np.iinfo(np.int32).max)
"""Largest row total (number of teachers) of any vote histogram: the jitted cores count in
int32 (64-bit mode is off by default), so larger counts would wrap around."""

MAX_NOISY_TOTAL = 2**24
"""Largest row total of the votes given to a noisy mechanism: a count must be exact where
its noise is added, or it could move by more than the one vote the privacy analysis
assumes (its sensitivity). The noise is added in float64 (:mod:`pate_jax.mechanisms`),
exact far beyond; the limit is float32's, which also bounds every count's float32 copy."""


def votes(x: Any, name: str = "votes", *, equal_totals: bool = False,
          max_total: int = INT32_MAX_TOTAL) -> jax.Array | np.ndarray:
  """Checks a ``[Q, C]`` vote histogram; returns it in its own dtype.

  The value checks run where the votes are (:func:`_votes_flags`: one fused pass,
  one boolean back, waited for before returning); only when it is raised are the votes
  inspected on the host, to name the first offending entry (and always when the call is
  inside a caller's trace, where the flag itself is traced). A host array is never
  aliased (see :func:`_private_device_copy`: copied once on the host, or, when large and
  the default device is an accelerator, only into device memory) and not converted: the
  jitted cores cast the counts themselves, so integer votes travel at their own width.
  Tracers come back as they are.

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
    flags = _votes_flags(arr, np.int64(max_total), equal_totals=equal_totals)
  # Inside a caller's trace (jit) the flag is traced too: the host pass checks instead.
  if is_traced(flags) or bool(flags):
    # The host pass names the entry; it raises. Host votes are read from ``x``: inside a
    # caller's trace ``arr`` may be a traced device_put of them (large votes).
    host = np.asarray(x if isinstance(x, np.ndarray) else arr).astype(np.float64)
    _raise_first(host, ~np.isfinite(host), name, "be finite vote counts")
    _raise_first(host, host < 0, name, "be non-negative vote counts")
    _raise_first(host, host != np.round(host), name, "hold integer vote counts")
    totals = host.sum(axis=1)  # float64: exact far beyond max_total, never wraps.
    if np.any(totals > max_total):
      i = int(np.argmax(totals > max_total))
      why = ("a noisy mechanism's counts are kept within float32's exact integers, 2**24"
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
  would then change the accounted votes. So on the host the votes are copied first;
  a small copy is handed to the jitted calls as is, a large one is put on the device
  once.

  When the default device is an accelerator with its own memory (GPU, TPU), a large
  array is put there without the host copy: ``device_put`` copies it into device
  memory, and the only read of the caller's buffer is that transfer. The transfer may
  still be under way when ``device_put`` returns, but :func:`votes` then waits for
  :func:`_votes_flags`, a computation on the device array, which cannot start before
  the transfer has completed: when :func:`votes` returns, the caller's buffer is no
  longer read. (Small votes keep the host copy on every platform: they are handed on
  as numpy arrays, and each later jitted call would read the caller's buffer anew.)
  """
  if _put_without_host_copy(x.nbytes):
    return jax.device_put(x)
  copy = np.array(x, copy=True)
  return copy if x.nbytes <= _DEVICE_PUT_BYTES else jax.device_put(copy)


def _put_without_host_copy(nbytes: int) -> bool:
  """Large votes bound for an accelerator's own memory: no host copy first."""
  return nbytes > _DEVICE_PUT_BYTES and default_platform() in _SEPARATE_MEMORY_PLATFORMS


def host_votes_traffic(nbytes: int) -> tuple[int, int]:
  """``(host copies, host-to-device transfers)`` of ``nbytes`` of host votes in one call
  of :func:`votes` followed by one jitted call on what it returns (a public accounting
  function): the accounting benchmark reports where its host-votes time goes with it.

  Small votes are copied and then read by both jitted calls (the check and the core);
  large ones are put on the device once, copied on the host first unless the default
  device has its own memory (see :func:`_private_device_copy`).
  """
  if nbytes <= _DEVICE_PUT_BYTES:
    return 1, 2
  return int(not _put_without_host_copy(nbytes)), 1


@functools.partial(jax.jit, static_argnames=("equal_totals",))
def _votes_flags(x: jax.Array, max_total: jax.Array, equal_totals: bool) -> jax.Array:
  """One boolean: some count is NaN/inf, negative or fractional, some row total exceeds
  ``max_total``, or (``equal_totals``) differs from row 0's. One fused pass over the votes.

  ``max_total`` (an int64 scalar) is traced: the checks of a noisy mechanism's votes
  (:data:`MAX_NOISY_TOTAL`) and of the other cores' (:data:`INT32_MAX_TOTAL`) run one
  program per shape."""
  floating = jnp.issubdtype(x.dtype, jnp.floating)
  signed = jnp.issubdtype(x.dtype, jnp.signedinteger)
  if floating:
    # x - floor(x) == 0 fails for NaN and ±inf (inf - inf = NaN) and for fractions.
    bad = jnp.any(~((x >= 0) & (x - jnp.floor(x) == 0)))
  else:
    bad = jnp.any(x < 0) if signed else jnp.zeros((), bool)
  # Integer rows are summed in the widest integers available: exact.
  wide = jnp.float64 if floating else jnp.int64 if signed else jnp.uint64
  totals = jnp.sum(x, axis=1, dtype=wide)
  limit = max_total.astype(wide)  # At most 2**31 - 1: exact in each.
  bad = bad | jnp.any(totals > limit)
  bad = bad | jnp.any(x.astype(wide) > limit)  # A count above it (a sum may wrap).
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
