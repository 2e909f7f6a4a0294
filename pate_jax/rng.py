"""Named PRNG streams: one root key per run, one fixed table of stream ids.

Every stage of every experiment derives its randomness from the run's root key
as ``stream(root, name) = fold_in(root, STREAMS_BASE + STREAMS[name])``, and
below that as the code documents (teachers by ``split(k, T)``, steps by
``fold_in(k_t, step)``, queries by ``fold_in(k, query_id)``). With one table
there is one place where two stages could be handed the same key, and
``tests/test_rng.py`` checks that the keys of all streams, and their
per-teacher / per-query / per-step children, are disjoint.

Why the ids are offset by ``STREAMS_BASE = 2**31``: with JAX's partitionable
threefry (the default) ``split(k, n)[i] == fold_in(k, i)``, so a library call
handed a root key itself -- e.g. ``jax.random.permutation(key(0), n)`` in
:func:`pate_jax.data.student_split`, whose fixed seed 0 is also the default run
seed -- draws from ``fold_in(root, 0)``, ``fold_in(root, 1)``, ... Small stream
ids would hand those keys to stages too; ids at ``2**31`` and above do not.

The defect this replaces: teacher initialisation and aggregation noise both
folded stream 1 into the same root, so teacher ``t``'s initialisation key was
the noise key of query ``t`` (``split(fold_in(root, 1), T)[t] ==
fold_in(fold_in(root, 1), t)``).

Private noise. The seed covers what is not private: partitions, initialisation, batches,
the attacks' simulations. Noise that protects the private data -- the noisy answers of
GNMax / LNMax / Confident-GNMax, the smooth-sensitivity release of an ε, the KD-GAN's sound
soft-label release -- comes from :func:`noise_key`: by default a key of :data:`SECRET_IMPL`
made of 128 bits of the operating system's randomness (``os.urandom``; two threefry keys
whose bit streams are XORed, :func:`secret_key`), drawn afresh for every mechanism and never
written anywhere, so that no file a run writes lets anyone recompute the noise. A config may
name a
*research noise seed* instead (``config.noise_seed``) for exact reproduction: the noise is
then ``stream(root_key(noise_seed), name)`` (a threefry key, as every seeded key), public to
anyone who reads the seed, and every
output of the run says that its ε is a measurement, not a release
(:func:`noise_record`), and its files are private as a whole
(:func:`pate_jax.experiment.noise_disclosure`).

Example::

  root = rng.root_key(config.seed)
  init_keys = jax.random.split(rng.stream(root, "teacher_init"), num_teachers)
  noise_key = rng.stream(root, "aggregation")  # query i: fold_in(noise_key, id_i)
"""

from __future__ import annotations

import operator
import os
import types
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import random as jex_random

STREAMS_BASE = 2**31
"""Offset of every stream id (see the module docstring)."""

STREAMS: Mapping[str, int] = types.MappingProxyType({
    # The main job (teachers -> aggregation -> student), all from one root seed.
    "partition": 0,       # disjoint shards of the private training data
    "teacher_init": 1,    # split(k, T)[t]: teacher t's parameters
    "teacher_train": 2,   # split(k, T)[t], then fold_in(., step): minibatch, augmentation
    "aggregation": 3,     # fold_in(k, query_id): the noisy answer to each query
    "student_init": 4,    # student parameters (tabular: the student forests' seeds)
    "student_train": 5,   # student steps: fold_in(k, step)
    "student_data": 6,    # the student's own draws from the public pool
    # Tabular PATE and the attacks.
    "data_split": 7,      # train / query split of a tabular dataset
    "baseline": 8,        # the non-private model on all training data
    "teachers": 9,        # an ensemble fitted from one key (shards and per-teacher seeds)
    "attack_answers": 10,  # Monte Carlo answers of the simulated mechanism, per repetition
    "attack_ledger": 11,  # the real PrivateAggregator the attacker queries
    "attack_sample": 12,  # which individuals / rows the attacker draws
    "bench_data": 13,     # synthetic inputs of the benchmarks
    "epsilon_release": 14,  # noise of the smooth-sensitivity release of a data-dependent ε
    # KD-GAN (Gao et al., pate_jax.stages.kd_gan): its own streams, not the main job's.
    "kd_gan_train": 15,   # fold_in(k, seed): each vmapped student run (init, batches, Gumbel)
    "kd_gan_data": 16,    # which rows are the public inputs
    "kd_gan_teacher": 17,  # the published setting's teacher on all private training data
    "reference_pools": 18,  # tabular: the random pools the first pool is placed among
    "student_restart": 19,  # fold_in(k, attempt): a student restarted after a failed game
})
"""Stream name -> id (offset by :data:`STREAMS_BASE`). Append; never reuse an id."""


def stream_id(name: str) -> int:
  """The ``uint32`` folded into the root key for stream ``name``.

  Args:
    name: a key of :data:`STREAMS`.

  Returns:
    ``STREAMS_BASE + STREAMS[name]``.

  Raises:
    ValueError: ``name`` is not a stream.
  """
  if name not in STREAMS:
    raise ValueError(f"name: unknown PRNG stream {name!r}; known: {sorted(STREAMS)}")
  return STREAMS_BASE + STREAMS[name]


def _seed_value(seed: Any) -> int | None:
  """``seed`` as an int if it is an integer in ``[0, 2**32)`` (not a bool), else None."""
  try:
    value = operator.index(seed)
  except TypeError:
    return None
  return None if isinstance(seed, bool) or not 0 <= value < 2**32 else value


def root_key(seed: int) -> jax.Array:
  """The run's root key ``jax.random.key(seed)``; ``seed`` an integer in ``[0, 2**32)``.

  Raises:
    ValueError: ``seed`` is not such an integer (a bool, a float, negative, too large).
  """
  return jax.random.key(check_seed(seed))


def check_seed(seed: Any, name: str = "seed") -> int:
  """``seed`` as an ``int``, an integer in ``[0, 2**32)`` (a root seed, a data seed).

  Raises:
    ValueError: naming ``name``: a bool, a float, a string, a negative or too large value.
  """
  value = _seed_value(seed)
  if value is None:
    raise ValueError(f"{name} must be an integer in [0, 2**32), got {seed!r}")
  return value


def stream(root: jax.Array, name: str) -> jax.Array:
  """The key of stream ``name``: ``fold_in(root, stream_id(name))``.

  Args:
    root: the run's root key (:func:`root_key`).
    name: a key of :data:`STREAMS`.

  Returns:
    A key of the same shape and implementation as ``root``.
  """
  return jax.random.fold_in(root, stream_id(name))


# ---------------------------------------------------------------------------
# Noise of private releases.

PUBLIC_NOISE_NOTE = (
    "this run's noise came from a research seed written in its config: anyone holding the "
    "seed can recompute the noise, so its epsilon is a measurement, not a release")
"""What every output of a research-seed run says (:func:`noise_record`)."""


def host_permutation(key: jax.Array | int, n: int) -> np.ndarray:
  """``jax.random.permutation(key, n)`` as a host array, computed on the host's CPU device
  (``key``: a key, or an int seed for ``jax.random.key``).

  The same permutation as on any backend (threefry's bits and a stable sort), without
  compiling and running its small programs on an accelerator at a run's start, where
  each would be compiled for the device while the run waits. Where JAX runs without its
  CPU backend (``JAX_PLATFORMS`` naming only an accelerator), on the default device.
  """
  try:
    host = jax.local_devices(backend="cpu")[0]
  except RuntimeError:  # no CPU backend in this process
    host = None
  with jax.default_device(host):
    if isinstance(key, (int, np.integer)):
      key = jax.random.key(key)
    elif jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
      # The key's words through host memory, rewrapped where the context places it.
      key = jax.random.wrap_key_data(np.asarray(jax.random.key_data(key)),
                                     impl=jax.random.key_impl(key))
    else:  # a raw uint32 key
      key = np.asarray(key)
    return np.asarray(jax.random.permutation(key, n))


# The secret keys' PRNG: two threefry keys, 128 bits.

_THREEFRY = jex_random.threefry_prng_impl


def _pair_seed(seed: jax.Array) -> jax.Array:
  """``[4]``: the two halves ``fold_in(threefry_seed(seed), 0)`` and ``(…, 1)`` (for
  completeness: a secret key is never made from a seed)."""
  key = _THREEFRY.seed(seed)
  return jnp.concatenate([_THREEFRY.fold_in(key, np.uint32(0)),
                          _THREEFRY.fold_in(key, np.uint32(1))])


def _pair_split(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
  """``[*shape, 4]``: threefry's ``split`` of each half, side by side."""
  return jnp.concatenate([_THREEFRY.split(key[:2], shape), _THREEFRY.split(key[2:], shape)],
                         axis=-1)


def _pair_fold_in(key: jax.Array, data: jax.Array) -> jax.Array:
  """``[4]``: threefry's ``fold_in`` of ``data`` into each half."""
  return jnp.concatenate([_THREEFRY.fold_in(key[:2], data), _THREEFRY.fold_in(key[2:], data)])


def _pair_random_bits(key: jax.Array, bit_width: int, shape: tuple[int, ...]) -> jax.Array:
  """The XOR of the two halves' threefry bits of the same ``bit_width`` and ``shape``."""
  return (_THREEFRY.random_bits(key[:2], bit_width, shape)
          ^ _THREEFRY.random_bits(key[2:], bit_width, shape))


SECRET_IMPL = jex_random.define_prng_impl(
    key_shape=(4,), seed=_pair_seed, split=_pair_split, random_bits=_pair_random_bits,
    fold_in=_pair_fold_in, name="threefry2x32_pair", tag="fry2")
"""The PRNG of secret noise keys (dtype ``key<fry2>``): a key is four ``uint32`` words, two
independent threefry2x32 keys ``h1 = words[:2]``, ``h2 = words[2:]`` (128 bits).

* ``random_bits(k, w, shape) = threefry_bits(h1, w, shape) XOR threefry_bits(h2, w, shape)``;
* ``split`` and ``fold_in`` apply threefry's to each half, so every key derived from a
  secret key (``fold_in(k, query_id)``, Confident-GNMax's ``split``) has 128 bits too.

What is drawn is distributed as with threefry: the XOR of two independent streams is
uniform as soon as one of them is (and unpredictable without both halves), and JAX's
samplers read a key only through its implementation's ``random_bits`` / ``split`` /
``fold_in`` (``jax/_src/random/core.py``: ``bits``, ``uniform``, ``normal``, ``laplace``,
``gumbel``, ``randint``, ``bernoulli``, ``choice``, ``permutation`` all call
``_random_bits`` -> ``prng.random_bits`` -> ``impl.random_bits``), so the maps from bits to
values, and the sampler error they carry (:data:`pate_jax.mechanisms.SAMPLER_CDF_ERROR`),
are threefry's. Two exceptions in JAX, drawn by no private release: ``poisson`` refuses keys
other than threefry's, and ``gamma`` (``beta``, ``dirichlet``) loops with ``lax.map`` instead
of ``vmap`` over a batch of them.

What it costs and gives: a draw runs threefry twice. Trying every key against the released
labels takes 2^128 tries, and one half alone tells nothing of the noise (the other half's
stream masks it), so a search over one half's 2^64 keys finds nothing. A meet-in-the-middle
search that could read the raw bits of a draw (a table of one half's outputs, matched
against the other's) would take about 2^64 evaluations of each half and memory for 2^64 of
them: more than a search of one 64-bit key, less than 2^128."""


def secret_key() -> jax.Array:
  """A fresh :data:`SECRET_IMPL` key from 128 bits of ``os.urandom`` (16 bytes: its four
  words, two threefry keys): never derived from a seed, never stored; two calls give
  independent keys."""
  words = np.frombuffer(os.urandom(16), dtype=np.uint32).copy()
  return jax.random.wrap_key_data(words, impl=SECRET_IMPL)


SECRET_KEY_DTYPE = jax.random.key_dtype(SECRET_IMPL)
"""The dtype of :data:`SECRET_IMPL` keys (``key<fry2>``), e.g. for a ``jax.ShapeDtypeStruct``
of a secret key in a program compiled ahead of time (:func:`noise_key_spec`)."""


def check_noise_seed(noise_seed: Any, name: str = "noise_seed") -> int | None:
  """``None`` (secret noise) or a research seed, an integer in ``[0, 2**32)``.

  Raises:
    ValueError: naming ``name``: a bool, a float, a string, a negative or too large value.
  """
  if noise_seed is None:
    return None
  value = _seed_value(noise_seed)
  if value is None:
    raise ValueError(f"{name} must be None (secret noise) or an integer research seed in "
                     f"[0, 2**32); got {noise_seed!r}")
  return value


def noise_key(name: str, noise_seed: int | None = None) -> jax.Array:
  """The key of the noise of private release stream ``name`` (e.g. ``"aggregation"``).

  Args:
    name: a key of :data:`STREAMS`.
    noise_seed: ``None`` (the default): a fresh secret key from :func:`secret_key` (128
      bits, :data:`SECRET_IMPL`) at every call (two mechanisms never share noise, not even
      on other teachers: shared noise would let one release reveal the other's noise); an
      integer: the research noise seed, and the key is ``stream(root_key(noise_seed),
      name)`` (threefry), public (:data:`PUBLIC_NOISE_NOTE`).

  Returns:
    A PRNG key; query ``i`` of a mechanism draws from ``fold_in(key, i)``.
  """
  stream_id(name)  # Validates the name.
  seed = check_noise_seed(noise_seed)
  if seed is not None:
    return stream(root_key(seed), name)
  return secret_key()


def noise_key_spec(noise_seed: int | None = None) -> jax.ShapeDtypeStruct:
  """The shape and dtype of :func:`noise_key`'s key for ``noise_seed``, for a program
  lowered ahead of time (a plan's memory): a :data:`SECRET_IMPL` key for secret noise, a
  threefry key for a research seed. Nothing is drawn and ``os.urandom`` is not read."""
  seed = check_noise_seed(noise_seed)
  dtype = SECRET_KEY_DTYPE if seed is None else jax.random.key_dtype("threefry2x32")
  return jax.ShapeDtypeStruct((), dtype)


def noise_record(noise_seed: int | None) -> dict[str, Any]:
  """What a results file says of its noise: ``{"source": "secret", "public": False}`` or
  ``{"source": "research seed", "noise_seed": s, "public": True, "note":
  PUBLIC_NOISE_NOTE}``."""
  seed = check_noise_seed(noise_seed)
  if seed is None:
    return {"source": "secret (os.urandom, never written)", "public": False}
  return {"source": "research seed", "noise_seed": seed, "public": True,
          "note": PUBLIC_NOISE_NOTE}
