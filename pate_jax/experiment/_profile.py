"""A profile of one call: ``jax.profiler``'s Perfetto trace, summarised per timeline.

:func:`profile_call` runs a function once under ``jax.profiler.trace`` and returns
:func:`trace_summary` of what it recorded: for each timeline (a thread of the device's
process -- on a GPU its streams, "XLA Ops" and "XLA Modules" lines; on a CPU the host's
XLA threads), the busy time and the events that took most of it. The benchmarks keep the
summary in ``results.json`` and delete the trace, which can run to tens of MB.
"""

from __future__ import annotations

import collections
import gzip
import json
import pathlib
import re
import shutil
import time
from typing import Any, Callable

import jax

__all__ = ["profile_call", "trace_summary"]

_TRACE_NAME = "perfetto_trace.json.gz"


def profile_call(fn: Callable[[], Any], trace_dir: str | pathlib.Path, *, top: int = 12,
                 keep_trace: bool = False) -> dict:
  """Runs ``fn()`` once (blocking on its result) under the profiler; returns
  :func:`trace_summary` of its trace plus ``wall_ms``, the call's own wall time. The trace
  directory is removed afterwards unless ``keep_trace``."""
  trace_dir = pathlib.Path(trace_dir)
  with jax.profiler.trace(str(trace_dir), create_perfetto_trace=True):
    start = time.perf_counter()
    jax.block_until_ready(fn())
    wall = time.perf_counter() - start
  summary = {"wall_ms": 1e3 * wall, **trace_summary(trace_dir, top=top)}
  if not keep_trace:
    shutil.rmtree(trace_dir, ignore_errors=True)
  return summary


def trace_summary(trace_dir: str | pathlib.Path, *, top: int = 12) -> dict:
  """The newest Perfetto trace under ``trace_dir``, per timeline: busy milliseconds (the
  sum of its complete events' durations; threads that differ only by an id suffix are one
  timeline, so it can exceed the wall time), event count, and the ``top`` event names by
  time with their milliseconds, count and share of that timeline's busy time.

  Timelines are the threads of the device processes (``/device:...``) when there are
  any, else the host's threads less Python's own (the ``python`` thread, and events
  named ``$file:line``, which are Python frames).

  Raises:
    FileNotFoundError: no trace under ``trace_dir``.
  """
  traces = sorted(pathlib.Path(trace_dir).glob(f"**/{_TRACE_NAME}"),
                  key=lambda p: p.stat().st_mtime)
  if not traces:
    raise FileNotFoundError(f"trace_dir: no {_TRACE_NAME} under {trace_dir}")
  with gzip.open(traces[-1], "rt") as f:
    data = json.load(f)
  events = data["traceEvents"] if isinstance(data, dict) else data
  processes, threads = {}, {}
  for e in events:
    if e.get("ph") == "M" and e.get("name") == "process_name":
      processes[e["pid"]] = e["args"]["name"]
    elif e.get("ph") == "M" and e.get("name") == "thread_name":
      threads[(e["pid"], e.get("tid"))] = e["args"]["name"]
  device = {p for p, name in processes.items() if name.startswith("/device:")}
  per_line: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
  counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
  for e in events:
    if e.get("ph") != "X" or "dur" not in e:
      continue
    # Worker threads differ only by an id suffix ("tf_XLAEigen/-77953..."): one timeline.
    thread = re.sub(r"/-?\d+$", "", threads.get((e["pid"], e.get("tid")), str(e.get("tid"))))
    if device:
      if e["pid"] not in device:
        continue
      line = f"{processes[e['pid']]} {thread}"
    else:
      if thread == "python" or str(e.get("name", "")).startswith("$"):
        continue
      line = f"{processes.get(e['pid'], e['pid'])} {thread}"
    per_line[line][e["name"]] += float(e["dur"])
    counts[line][e["name"]] += 1
  lines = {}
  for line, durations in per_line.items():
    busy = sum(durations.values())
    lines[line] = {
        "busy_ms": busy / 1e3, "events": sum(counts[line].values()),
        "top": [{"name": name, "ms": us / 1e3, "count": counts[line][name],
                 "share": us / busy if busy else 0.0}
                for name, us in durations.most_common(top)]}
  return {"source": "device" if device else "host", "timelines": lines}
