"""The teacher axis across hosts: ``jax.distributed`` set-up and global arrays.

One program runs in each of ``P`` processes (one per host, or per GPU); after
:func:`initialize`, ``jax.devices()`` lists the devices of every process and a
``Mesh`` over them shards the teacher axis across hosts, so each process holds
``T / P`` teachers. Every process loads and partitions the (small, public-size)
training set itself — the keyed partition is the same everywhere — and
:func:`put_teacher_axis` transfers to each device only the teacher slices it
owns. Collective results (vote histograms, losses) come back to every process
with :func:`to_host`; only :func:`is_main_process` writes files.

A single process is the special case ``P = 1``: every function here then
reduces to its ordinary one-host behaviour, so callers need no branches.

Launch (see README): set ``PATE_JAX_COORDINATOR=host:port``,
``PATE_JAX_NUM_PROCESSES`` and ``PATE_JAX_PROCESS_ID`` in each process, or
``PATE_JAX_DISTRIBUTED=auto`` on a TPU slice, under SLURM or Open MPI, where
``jax.distributed.initialize()`` detects the cluster itself.
"""

from __future__ import annotations

import os
from typing import Any

import jax
from jax.experimental import multihost_utils
import numpy as np

PyTree = Any

ENV_AUTO = "PATE_JAX_DISTRIBUTED"          # "auto": let JAX detect TPU / SLURM / Open MPI.
ENV_COORDINATOR = "PATE_JAX_COORDINATOR"   # "host:port" of process 0's coordinator service.
ENV_NUM_PROCESSES = "PATE_JAX_NUM_PROCESSES"
ENV_PROCESS_ID = "PATE_JAX_PROCESS_ID"


def _env_int(name: str) -> int | None:
  raw = os.environ.get(name, "").strip()
  if not raw:
    return None
  try:
    return int(raw)
  except ValueError:
    raise ValueError(f"{name} must be an integer, got {raw!r}") from None


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, **kwargs) -> bool:
  """Joins a multi-process JAX run if one is requested; a no-op for one process.

  Each argument left as ``None`` is read from the environment:
  ``PATE_JAX_COORDINATOR`` (``host:port`` of process 0, reachable from every
  host), ``PATE_JAX_NUM_PROCESSES`` and ``PATE_JAX_PROCESS_ID`` (``0 ≤ id < P``).
  With ``PATE_JAX_DISTRIBUTED=auto`` and no explicit settings,
  ``jax.distributed.initialize()`` is called without arguments and detects the
  cluster (Cloud TPU slices, SLURM, Open MPI). Without any of these, or with
  ``P = 1``, nothing happens.

  Must run before the first JAX computation (before the backend starts). CPU
  collectives across processes are set to gloo, which the CPU backend needs
  for cross-process computations; GPU (NCCL) and TPU (ICI/DCN) backends are
  unaffected by that setting.

  Args:
    coordinator_address: ``"host:port"`` of process 0's coordinator service.
    num_processes: the number of processes ``P``.
    process_id: this process's index in ``[0, P)``.
    **kwargs: passed to ``jax.distributed.initialize`` (``local_device_ids``,
      ``initialization_timeout``, ...).

  Returns:
    Whether this process is part of a multi-process run.

  Raises:
    ValueError: if the settings are incomplete or inconsistent; the message
      names the argument or environment variable.
  """
  if jax.distributed.is_initialized():
    return jax.process_count() > 1
  names = {"coordinator_address": "coordinator_address", "num_processes": "num_processes",
           "process_id": "process_id"}
  if coordinator_address is None:
    coordinator_address = os.environ.get(ENV_COORDINATOR, "").strip() or None
    names["coordinator_address"] = ENV_COORDINATOR
  if num_processes is None:
    num_processes = _env_int(ENV_NUM_PROCESSES)
    names["num_processes"] = ENV_NUM_PROCESSES
  if process_id is None:
    process_id = _env_int(ENV_PROCESS_ID)
    names["process_id"] = ENV_PROCESS_ID
  mode = os.environ.get(ENV_AUTO, "").strip().lower()
  if mode not in ("", "0", "off", "auto"):
    raise ValueError(f"{ENV_AUTO} must be 'auto' or unset, got {mode!r}")
  explicit = (coordinator_address, num_processes, process_id) != (None, None, None)

  if mode == "auto" and not explicit:
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(**kwargs)
    return jax.process_count() > 1

  if num_processes is not None and num_processes < 1:
    raise ValueError(f"{names['num_processes']} must be at least 1, got {num_processes}")
  if process_id is not None and process_id < 0:
    raise ValueError(f"{names['process_id']} must be non-negative, got {process_id}")
  if num_processes is not None and process_id is not None and process_id >= num_processes:
    raise ValueError(f"{names['process_id']}={process_id} must be smaller than "
                     f"{names['num_processes']}={num_processes}")
  if num_processes is None:
    if explicit:
      raise ValueError(f"{names['num_processes']} is required when "
                       f"{names['coordinator_address']} or {names['process_id']} is set")
    return False
  if num_processes == 1:
    return False
  if process_id is None:
    raise ValueError(f"{names['process_id']} is required when "
                     f"{names['num_processes']}={num_processes}")
  if coordinator_address is None:
    raise ValueError(f"{names['coordinator_address']} (host:port of process 0) is required "
                     f"when {names['num_processes']}={num_processes}")
  host, _, port = coordinator_address.rpartition(":")
  if not host or not port.isdigit():
    raise ValueError(f"{names['coordinator_address']} must be 'host:port', "
                     f"got {coordinator_address!r}")
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  jax.distributed.initialize(coordinator_address, num_processes, process_id, **kwargs)
  return True


def _is_key(x: Any) -> bool:
  return isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _put(x: Any, sharding: jax.sharding.Sharding) -> jax.Array:
  if isinstance(x, jax.Array) and (not x.is_fully_addressable or sharding.is_fully_addressable):
    return jax.device_put(x, sharding)  # global -> global is a (collective) reshard.
  if _is_key(x):  # typed PRNG keys have no numpy form: move their raw bits.
    return jax.random.wrap_key_data(_put(jax.random.key_data(x), sharding),
                                    impl=jax.random.key_impl(x))
  host = np.asarray(x)
  if sharding.is_fully_addressable:
    return jax.device_put(host, sharding)
  return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def put_teacher_axis(host_tree: PyTree, sharding: jax.sharding.Sharding) -> PyTree:
  """Global arrays, sharded as ``sharding``, from values every process holds in full.

  Each leaf (numpy array, process-local ``jax.Array`` or typed PRNG key array)
  must have the same value in every process — e.g. the partitioned training
  shards ``images[T, n, ...]`` that each process builds from the same key.
  Each process copies to its devices only the slices they own
  (``jax.make_array_from_callback``), so with
  ``NamedSharding(mesh, P("teachers"))`` over ``jax.devices()`` a process
  holds ``T / P`` teachers. Leaves that are already global arrays are
  resharded. In a single process this is ``jax.device_put``.

  Every process must call it with the same tree (it may reshard collectively).

  Raises:
    ValueError: if a leaf's shape does not divide over the sharding (pad the
      teacher axis to a multiple of the mesh size first); names the leaf.
  """
  def put(path, x):
    try:
      return _put(x, sharding)
    except ValueError as e:
      raise ValueError(f"put_teacher_axis: leaf {jax.tree_util.keystr(path)} of shape "
                       f"{np.shape(x)} cannot be placed with {sharding}: {e}") from e
  return jax.tree_util.tree_map_with_path(put, host_tree)


def to_host(tree: PyTree) -> PyTree:
  """The full numpy value of each (global) array, on every process.

  Arrays sharded over other processes' devices are gathered with
  ``multihost_utils.process_allgather``; a collective, so every process must
  call it. Replicated or process-local arrays are read with ``np.asarray``.
  """
  def get(x):
    if isinstance(x, jax.Array) and not (x.is_fully_addressable or x.is_fully_replicated):
      return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)
  return jax.tree.map(get, tree)


def process_min(value: int) -> int:
  """The smallest of each process's ``value``: one agreed number, e.g. a chunk size.

  Every process must compile the same program, so a plan derived from local
  facts (a device's free memory, a host's RAM) is agreed on before use. A
  collective: every process must call it. In a single process it returns
  ``value``.
  """
  if jax.process_count() == 1:
    return int(value)
  return int(np.min(multihost_utils.process_allgather(np.asarray(value, np.int32))))


def is_main_process() -> bool:
  """Whether this is process 0, the one that writes results and plots."""
  return jax.process_index() == 0
