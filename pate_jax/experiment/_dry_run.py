"""``--dry_run``: the devices a run would use and the plan a stage reports, as text.

:func:`mesh_info` describes the devices (and a teachers config's mesh and padding),
:func:`votes_plan` and :func:`compiled_temp_bytes` are pieces of a stage's ``plan``,
and :func:`dry_run_text` prints the resolved config, the devices and the plan
(``*bytes`` fields also in KiB/MiB/GiB, :func:`format_bytes`).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from pate_jax.experiment._config import _is_node, config_items


def format_bytes(n: Any) -> str:
  """``n`` bytes as ``"123,456 B (0.12 MiB)"``: exact and readable."""
  n = int(n)
  for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
    if abs(n) >= size:
      return f"{n:,} B ({n / size:.2f} {unit})"
  return f"{n:,} B"


def mesh_info(config: Any = None) -> dict[str, Any]:
  """The devices a run would use: backend, processes, local/global device counts and kinds;
  for a teachers config (one with ``num_teachers`` and ``strategy``, or a ``teachers``
  sub-config with them), the teacher mesh's shape and the padded teachers per device
  (:mod:`pate_jax.teachers`). Starts the backend (after :func:`set_deterministic`)."""
  import jax  # pylint: disable=g-import-not-at-top
  devices, local = jax.devices(), jax.local_devices()
  info: dict[str, Any] = {
      "backend": jax.default_backend(),
      "process_count": jax.process_count(),
      "process_index": jax.process_index(),
      "local_device_count": len(local),
      "global_device_count": len(devices),
      "device_kinds": sorted({d.device_kind for d in devices}),
  }
  stage = config
  if stage is not None and "num_teachers" not in stage and "teachers" in stage:
    stage = stage.teachers
  if stage is not None and _is_node(stage) and "num_teachers" in stage and "strategy" in stage:
    from pate_jax import teachers  # pylint: disable=g-import-not-at-top
    mesh = teachers.teacher_mesh()
    t, d = int(stage.num_teachers), int(mesh.size)
    strategy = (teachers.default_strategy() if stage.strategy == "auto" else stage.strategy)
    info["teacher_mesh"] = dict(mesh.shape)
    info["teacher_strategy"] = strategy + (" (auto)" if stage.strategy == "auto" else "")
    info["num_teachers"] = t
    if strategy == "loop":  # one teacher at a time on the default device: no padding
      info["padded_teachers"] = t
      info["teachers_per_device"] = f"{t} on one device (loop strategy: no teacher mesh used)"
    else:
      info["padded_teachers"] = t + (-t) % d
      info["teachers_per_device"] = (t + (-t) % d) // d
  return info


def _plan_lines(plan: Mapping[str, Any], prefix: str = "") -> list[str]:
  lines = []
  for key, value in plan.items():
    name = f"{prefix}{key}"
    if hasattr(value, "to_dict"):
      value = value.to_dict()
    if isinstance(value, Mapping):
      if value:
        lines += _plan_lines(value, name + ".")
      else:
        lines.append(f"  {name}: {{}}")
    elif "bytes" in str(key) and isinstance(value, (int, np.integer)):
      lines.append(f"  {name}: {format_bytes(value)}")
    else:
      lines.append(f"  {name}: {value}")
  return lines


def votes_plan(votes_dir: Any, what: str = "config.votes_dir") -> tuple[dict[str, Any],
                                                                     dict | None]:
  """For a ``plan``: the sizes of the ``votes.npz`` in ``votes_dir`` and the votes, or
  ``({"votes": "MISSING: ..."}, None)`` when there are none (a dry run says so rather than
  fail)."""
  from pate_jax import votes as votes_lib  # pylint: disable=g-import-not-at-top
  if not votes_dir:
    return {"votes": f"MISSING: {what} is empty (name a teachers workdir with votes.npz)"}, None
  try:
    v = votes_lib.load_votes(votes_dir)
  except (FileNotFoundError, NotADirectoryError, OSError) as e:
    return {"votes": f"MISSING: {e}"}, None
  return {"votes": str(votes_dir), "votes_dataset": v["dataset"],
          "votes_num_teachers": int(v["num_teachers"]),
          "votes_rows": int(v["votes"].shape[0]), "votes_num_pool": int(v["num_pool"]),
          "votes_num_classes": int(v["votes"].shape[1])}, v


def compiled_temp_bytes(fn: Callable, *args) -> int | str | None:
  """:func:`pate_jax.memory.temp_bytes` of ``jit(fn)(*args)`` for a ``plan`` (``args``
  abstract), or why it could not be measured (a plan must print what it can)."""
  from pate_jax import memory  # pylint: disable=g-import-not-at-top
  try:
    return memory.temp_bytes(fn, *args)
  except Exception as e:  # pylint: disable=broad-except
    return f"not measured ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"


def dry_run_text(config: Any, plan: Mapping[str, Any] | None,
                 mesh: Mapping[str, Any] | None) -> str:
  """What ``--dry_run`` prints: the resolved config (every field, ``name: value``), the
  device mesh (:func:`mesh_info`) and the script's plan (data sizes, planned memory per
  chunk; nested dicts as dotted names, ``*bytes`` fields also in KiB/MiB/GiB)."""
  lines = ["dry run: nothing is trained or written", "", "config:"]
  for name, value in config_items(config):
    if not _is_node(value):
      lines.append(f"  {name}: {value!r}")
  lines += ["", "devices:"] + _plan_lines(mesh or {})
  lines += ["", "plan:"]
  lines += _plan_lines(plan) if plan else ["  (this script has no plan)"]
  return "\n".join(lines)


def dry_run(config: Any, plan: Callable[[Any], Mapping[str, Any]] | None) -> str:
  """The text of ``--dry_run`` for ``config``: joins a multi-process run if asked (as
  the scripts do), describes the devices and calls ``plan(config)``. Reads inputs,
  compiles small probes; writes nothing."""
  from pate_jax import distributed  # pylint: disable=g-import-not-at-top
  distributed.initialize()
  mesh = mesh_info(config)
  return dry_run_text(config, None if plan is None else plan(config), mesh)
