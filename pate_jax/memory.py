"""Memory planning: chunk sizes from a device-memory budget, not fixed constants.

The ensemble's activation memory grows with (teachers in a vmapped chunk) ×
(examples per teacher): 250 CNN teachers × 2,000 query images need ~93 GiB for
the first convolution alone. Instead of a fixed chunk, the ensemble reads XLA's
own account of a program's temporary buffers
(``jit(f).lower(...).compile().memory_analysis()``) of one program: the training
itself with every teacher in one chunk (which it then runs if that fits, with
no other compilation), or a small *probe* of the computation. It scales that
account linearly to the chunk size and takes the largest chunk whose estimate
fits a budget: a fraction of the device's memory (on a CPU, its share of the
machine's RAM or of its container's limit) less what stays resident (the stacked
train state, the data).

On a CPU, XLA's account leaves out what its library fusions (YNNPACK's convolutions and
products) allocate inside them: :func:`analysis_factor` scales the account up there.

The plan depends only on the device, the shapes and the budget — never on what
happens to be allocated at the moment — so a resumed run plans the same chunks
and stays bit-identical.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Sequence

import jax
import numpy as np

PyTree = Any


_CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max",                   # cgroup v2
                  "/sys/fs/cgroup/memory/memory.limit_in_bytes")  # cgroup v1


def host_memory_bytes() -> int:
  """This process's RAM: the machine's physical memory, or its control group's limit where
  that is lower (a container's)."""
  total = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
  for path in _CGROUP_LIMITS:
    try:
      with open(path, encoding="ascii") as f:
        limit = f.read().strip()
    except OSError:
      continue
    if limit.isdigit():  # "max": no limit
      total = min(total, int(limit))
  return total


def _memory_stats(device: jax.Device) -> dict | None:
  """The device allocator's statistics; None where the backend keeps or gives none."""
  try:
    return device.memory_stats()
  except Exception:  # pylint: disable=broad-except  # some backends do not implement it
    return None


def device_memory_bytes(device: jax.Device | None = None) -> int:
  """Memory the device may use: the allocator's limit on GPU/TPU; on a CPU, the host's RAM
  (:func:`host_memory_bytes`) shared by the process's CPU devices (several with
  ``--xla_force_host_platform_device_count``), so each counts on its share."""
  device = device or jax.local_devices()[0]
  stats = _memory_stats(device)
  if stats and stats.get("bytes_limit"):
    return int(stats["bytes_limit"])
  if device.platform == "cpu":
    return host_memory_bytes() // len(jax.local_devices(backend="cpu"))
  return host_memory_bytes()


def memory_budget(fraction: float, device: jax.Device | None = None) -> int:
  """``fraction`` of :func:`device_memory_bytes` (a clear error outside (0, 1])."""
  if not 0.0 < fraction <= 1.0:
    raise ValueError(f"memory_fraction must be in (0, 1], got {fraction}")
  return int(fraction * device_memory_bytes(device))


# How many times XLA's memory analysis (``temp_size_in_bytes``) a program's peak may reach,
# per platform. On a CPU the convolutions and matrix products run in YNNPACK fusions whose
# scratch the analysis does not count. Measured as the growth of the process's peak while a
# vmapped MNIST CNN ran, over the analysis' bytes: predicting, 6.8-7.3x (2 to 24 teachers,
# 128 to 2,048 queries); training, 2.5-3.3x (2 to 125 teachers). The stride-2 CPU CNN's
# 250 teachers x 1,024 queries, which the analysis put at 6.1 GiB, were killed for memory
# on a 24 GiB machine. All measured on 2 cores (YNNPACK's scratch may grow with the threads
# of a larger host: not measured); tests/test_teachers.py checks the bound on 2 cores.
# Elsewhere the analysis is taken as it is: on a GPU, cuDNN's and cuBLAS's workspaces are
# buffers XLA assigns (the default paper config ran within its plan on an H100 and an H200).
ANALYSIS_FACTORS = {"cpu": 8.0}


def analysis_factor(device: jax.Device | None = None) -> float:
  """The factor the planner scales XLA's memory analysis by on ``device``'s platform (1 where
  the analysis counts every buffer; :data:`ANALYSIS_FACTORS`)."""
  device = device or jax.local_devices()[0]
  return ANALYSIS_FACTORS.get(device.platform, 1.0)


def peak_bytes(budget: int | None = None,
               devices: Sequence[jax.Device] | None = None, *,
               before: dict[str, Any] | None = None) -> dict[str, Any] | None:
  """What the allocators of ``devices`` (default: the local ones) report: the largest
  ``peak_bytes_in_use`` among them and their ``bytes_limit``, and, given the planner's
  per-device ``budget``, whether the peak stayed within it. None where a backend keeps no
  such statistics (a CPU's).

  The allocators' peak counts from the process's start and cannot be reset. ``before``,
  this function's result when the judged work began, tells whose peak it is: where it has
  not grown since, it was reached by earlier work in the process (``peak_is_earlier``),
  and ``peak_within_budget`` is None (unknown) rather than a verdict on that work."""
  peaks, limits = [], []
  for device in devices or jax.local_devices():
    stats = _memory_stats(device)
    if not stats or "peak_bytes_in_use" not in stats:
      return None
    peaks.append(int(stats["peak_bytes_in_use"]))
    limits.append(int(stats.get("bytes_limit", 0)))
  out: dict[str, Any] = {"peak_bytes_in_use": max(peaks), "bytes_limit": min(limits)}
  earlier = before is not None and max(peaks) <= before["peak_bytes_in_use"]
  if before is not None:
    out["peak_is_earlier"] = earlier
  if budget is not None:
    out.update(budget_bytes=int(budget),
               peak_within_budget=None if earlier else max(peaks) <= budget)
  return out


def tree_bytes(tree: PyTree) -> int:
  """Bytes held by the arrays (or ShapeDtypeStructs) of ``tree``."""
  return int(sum(np.prod(x.shape, dtype=np.int64) * np.dtype(x.dtype).itemsize
                 for x in jax.tree.leaves(tree)))


def temp_bytes(fn: Callable, *args) -> int | None:
  """XLA's temporary-buffer bytes for ``jit(fn)(*args)`` (args may be abstract).

  ``None`` where the backend gives no memory analysis.
  """
  return executable_temp_bytes(jax.jit(fn).lower(*args).compile())


def executable_temp_bytes(compiled: Any) -> int | None:
  """XLA's temporary-buffer bytes of a compiled program (``jit(f).lower(...).compile()``);
  ``None`` where the backend gives no memory analysis."""
  stats = compiled.memory_analysis()
  if stats is None:
    return None
  return int(stats.temp_size_in_bytes)


def divisors(n: int) -> list[int]:
  """Positive divisors of ``n`` in increasing order."""
  small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
  return sorted(set(small + [n // d for d in small]))


def largest_divisor_within(n: int, limit: float) -> int:
  """The largest divisor of ``n`` that is ``<= limit`` (0 when ``limit < 1``)."""
  fitting = [d for d in divisors(n) if d <= limit]
  return fitting[-1] if fitting else 0


@dataclasses.dataclass(frozen=True)
class ChunkPlan:
  """How a per-device computation is cut: ``teachers`` per vmapped chunk (a divisor
  of the local teacher count) and, for prediction, ``queries`` per chunk."""
  teachers: int
  queries: int | None = None
  estimate_bytes: int | None = None   # predicted peak temporary bytes of one chunk
  budget_bytes: int | None = None     # what the chunk was allowed


def plan_teacher_chunk(num_local: int, bytes_per_teacher: float, budget: float) -> int:
  """Largest divisor of ``num_local`` whose chunk needs at most ``budget`` bytes.

  Raises:
    MemoryError: when even one teacher does not fit, with the numbers.
  """
  if bytes_per_teacher <= 0:
    return num_local
  k = largest_divisor_within(num_local, budget / bytes_per_teacher)
  if k == 0:
    raise MemoryError(
        f"one teacher needs ~{bytes_per_teacher / 2**30:.2f} GiB of activations but the memory "
        f"budget left for them is {max(budget, 0) / 2**30:.2f} GiB: raise memory_fraction, "
        "lower batch_size, or use more devices")
  return k


def plan_predict_chunks(num_local: int, num_queries: int, bytes_per_pair: float,
                        budget: float, *, max_queries: int = 1024,
                        min_queries: int = 64) -> tuple[int, int]:
  """(teachers, queries) per prediction chunk with ``teachers × queries × bytes_per_pair``
  within ``budget``.

  All local teachers are kept in one chunk (their parameters are read once per query
  chunk) while at least ``min_queries`` queries fit; past that, the teacher chunk
  shrinks. Query chunks never exceed ``max_queries`` (very large grouped convolutions
  have no cuDNN algorithm) nor the number of queries.
  """
  q_cap = max(1, min(num_queries, max_queries))
  if bytes_per_pair <= 0:
    return num_local, q_cap
  pairs = budget / bytes_per_pair
  q = int(min(q_cap, pairs // num_local))
  if q >= min(min_queries, q_cap):
    return num_local, max(q, 1)
  q = min(min_queries, q_cap)
  t = largest_divisor_within(num_local, pairs / q)
  if t == 0:
    q = max(1, int(pairs))
    t = 1
    if pairs < 1:
      raise MemoryError(
          f"one teacher on one query needs ~{bytes_per_pair / 2**20:.1f} MiB but the budget is "
          f"{max(budget, 0) / 2**20:.1f} MiB: raise memory_fraction")
  return t, q


def fits_description(plan: ChunkPlan, names: Sequence[str] = ("teachers", "queries")) -> str:
  parts = [f"{getattr(plan, n)} {n}" for n in names if getattr(plan, n) is not None]
  est = "" if plan.estimate_bytes is None else (
      f", ~{plan.estimate_bytes / 2**30:.2f} GiB of {plan.budget_bytes / 2**30:.2f} GiB budget")
  return " × ".join(parts) + " per chunk" + est
