"""Configs and scripts by path: loading, listing fields, ``--help`` and overrides.

:func:`load_script` imports a config or experiment file by path and
:func:`load_config` the ConfigDict of ``path[:variant]``; :func:`config_items` lists a
config's dotted fields (:func:`config_fields` reads some of them),
:func:`unknown_overrides` and :func:`closest_fields` catch a mistyped
``--config.field``, and :func:`help_text` is what ``--help`` prints.
"""

from __future__ import annotations

import os
import pathlib
import re
from typing import Any, Iterable


def config_fields(config: Any, fields: Iterable[str]) -> dict[str, Any]:
  """``{field: value}`` of dotted ``fields`` of a ConfigDict (``"model.kwargs"``); a field
  the config lacks is ``None``. The input of a checkpoint fingerprint
  (:class:`pate_jax.checkpoint.Checkpointer`)."""
  out = {}
  for name in fields:
    value = config
    for part in name.split("."):
      value = value.get(part) if hasattr(value, "get") else None
    out[name] = value
  return out


HELP_FLAGS = ("--help", "-h", "-?", "--helpshort")
RESTART_FLAG = "--config.restart"
"""The flag that sets a stage's ``config.restart`` when its own script runs it (a main job
whose stage configs are nested names them: ``--config.teachers.restart``)."""


def check_restart_flag(restart_flag: Any) -> str:
  """``restart_flag`` if it names a config flag (``--config.restart``,
  ``--config.teachers.restart``), else ValueError: a refused resume names it to the user."""
  if not isinstance(restart_flag, str) or not re.fullmatch(r"--config(\.\w+)+", restart_flag):
    raise ValueError("restart_flag must name a config flag such as '--config.restart' or "
                     f"'--config.teachers.restart'; got {restart_flag!r}")
  return restart_flag


def restart_hint(restart_flag: str = RESTART_FLAG) -> str:
  """What the core's refusals name as the way to ``restart=True`` (their ``restart_hint``):
  ``restart_flag`` (checked, :func:`check_restart_flag`) set to True."""
  return f"{check_restart_flag(restart_flag)}=True"


def _config_arg(argv: list[str]) -> str | None:
  """The ``--config`` value on a command line (``--config=x`` or ``--config x``)."""
  for i, a in enumerate(argv):
    if a.startswith("--config="):
      return a.split("=", 1)[1]
    if a == "--config" and i + 1 < len(argv):
      return argv[i + 1]
  return None


def load_config(spec: str) -> Any:
  """The ConfigDict of ``path[:variant]`` as ``--config`` would load it."""
  path, _, arg = spec.partition(":")
  module = load_script(path)
  return module.get_config(arg) if arg else module.get_config()


def config_items(config: Any, prefix: str = "") -> list[tuple[str, Any]]:
  """``(dotted name, value)`` of every field of a ConfigDict, nested ones included (a
  sub-config is listed before its fields)."""
  items = []
  for key, value in config.items():
    name = f"{prefix}{key}"
    items.append((name, value))
    if _is_node(value):
      items.extend(config_items(value, name + "."))
  return items


def _is_node(value: Any) -> bool:
  return hasattr(value, "items") and hasattr(value, "to_dict")


def closest_fields(name: str, config: Any, n: int = 3) -> list[str]:
  """The valid dotted names nearest to ``name``: nested fields ending in it first (for a
  composed config such as ``run_pate.py``'s), then :func:`difflib.get_close_matches` over
  the full and the last component of every name."""
  import difflib  # pylint: disable=g-import-not-at-top
  names = [k for k, _ in config_items(config)]
  nested = [k for k in names if k.endswith("." + name)]
  if nested:
    return nested[:n]
  out = difflib.get_close_matches(name, names, n=n, cutoff=0.6)
  last = name.rsplit(".", 1)[-1]
  out += [k for k in names if k.rsplit(".", 1)[-1] in
          difflib.get_close_matches(last, [k.rsplit(".", 1)[-1] for k in names], n=n,
                                    cutoff=0.75)]
  return list(dict.fromkeys(out))[:n]


def unknown_overrides(argv: list[str], config: Any) -> list[tuple[str, list[str]]]:
  """``(field, closest valid names)`` for every ``--config.field=value`` on ``argv`` whose
  field the config lacks."""
  names = {k for k, _ in config_items(config)}
  bad = []
  for a in argv:
    if a.startswith("--config.") and len(a) > len("--config."):
      field = a[len("--config."):].split("=", 1)[0]
      if field not in names:
        bad.append((field, closest_fields(field, config)))
  return bad


def help_text(doc: str | None, config_spec: str | None, config: Any | None) -> str:
  """``--help``: the script's docstring (its usage), the flags, and the config's fields
  with their defaults."""
  lines = [(doc or "").strip(), "", "flags:",
           "  --config PATH[:VARIANT]  the experiment's config file (configs/*.py; "
           "':cpu' is the small CPU variant)",
           "  --workdir DIR            where results.json, plots and checkpoints go "
           "(a rerun resumes)",
           "  --config.FIELD=VALUE     override one config field (fields below)",
           "  --dry_run                print the resolved config, data sizes, device mesh and",
           "                           planned memory per chunk; train and write nothing (no",
           "                           --workdir needed)",
           "  --helpfull               every absl flag"]
  if config is not None:
    lines += ["", f"config fields of {config_spec} (defaults):"]
    for name, value in config_items(config):
      if not _is_node(value):
        lines.append(f"  --config.{name}={value!r}")
  elif config_spec:
    lines += ["", f"(could not load {config_spec} to list its fields)"]
  return "\n".join(lines)


def _default_config_spec(doc: str | None, script: str) -> str | None:
  """The config named by the script's usage line in its docstring (``python
  experiments/<script>.py ... --config configs/x.py[:variant]``)."""
  import re  # pylint: disable=g-import-not-at-top
  doc = doc or ""
  at = doc.find(pathlib.Path(script).name)
  m = re.search(r"--config[= ](\S+\.py(?::\w+)?)", doc[max(at, 0):])
  return m.group(1) if m else None


def load_script(path: str | os.PathLike) -> Any:
  """Imports a config or experiment file by path (``configs/`` and ``experiments/`` are
  directories of scripts, not packages)."""
  import importlib.util  # pylint: disable=g-import-not-at-top
  path = pathlib.Path(path)
  spec = importlib.util.spec_from_file_location(f"_pate_jax_script_{path.stem}", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module
