"""What identifies a run, so that a resume continues the same one.

Owns :func:`fingerprint` (a flat JSON record of what determines a run),
:func:`fingerprint_diff` (the fields that differ, for :class:`ResumeMismatchError`),
how to start over, named in its message (:func:`how_to_restart`)
and the completion record of a finished run (:data:`COMPLETED_FILE`,
:func:`read_completed`). The module docstring of :mod:`pate_jax.checkpoint` says how
:class:`pate_jax.checkpoint.Checkpointer` uses them.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any, Mapping

import numpy as np

FINGERPRINT_FILE = "fingerprint.json"
COMPLETED_FILE = "completed.json"


class ResumeMismatchError(ValueError):
  """The checkpoints in a directory were written by a different run configuration."""


def _jsonable(value: Any) -> Any:
  if isinstance(value, (list, tuple)):
    return [_jsonable(v) for v in value]
  if isinstance(value, np.ndarray):
    return _jsonable(value.tolist())
  if isinstance(value, np.generic):
    return value.item()
  if value is None or isinstance(value, (bool, int, float, str)):
    return value
  raise ValueError(f"fingerprint: value {value!r} of type {type(value).__name__} is not a "
                   "number, string, bool, None, list or mapping")


def fingerprint(fields: Mapping[str, Any]) -> dict[str, Any]:
  """A flat, JSON-stable record of ``fields``: nested mappings become dotted keys
  (``{"model": {"name": "mlp"}}`` → ``{"model.name": "mlp"}``), tuples lists, numpy
  scalars Python numbers. Equal records mean the same run."""
  out = {}
  for key, value in fields.items():
    if hasattr(value, "to_dict"):  # ml_collections.ConfigDict
      value = value.to_dict()
    if isinstance(value, Mapping):
      out.update({f"{key}.{k}": v for k, v in fingerprint(value).items()})
    else:
      out[str(key)] = _jsonable(value)
  return out


def fingerprint_diff(stored: Mapping[str, Any], current: Mapping[str, Any],
                     stored_name: str = "checkpoint") -> list[str]:
  """``"field: old (checkpoint) -> new (now)"`` for every field that differs (values as
  JSON; a field one side lacks shows as ``<absent>``; a digest, a field named ``*sha256*``,
  as ``<a digest>``: that of private data is private); ``stored_name`` names the old side."""
  raw = lambda d, k: json.dumps(d[k]) if k in d else "<absent>"
  show = lambda d, k: "<a digest>" if "sha256" in k and k in d else raw(d, k)
  return [f"{k}: {show(stored, k)} ({stored_name}) -> {show(current, k)} (now)"
          for k in sorted(set(stored) | set(current)) if raw(stored, k) != raw(current, k)]


def how_to_restart(how: str | None = None) -> str:
  """How to start over: restart=True, which deletes the checkpoints, with ``how`` the
  caller's user asks for it (a command-line flag, ``--config.restart=True``), or another
  directory."""
  return (f"start over with restart=True{f' ({how})' if how else ''}, which deletes these "
          "checkpoints, or use another directory")


def check_restart_hint(how: Any) -> str | None:
  """``how`` if it is None or a non-empty string, else ValueError."""
  if how is not None and not (isinstance(how, str) and how.strip()):
    raise ValueError(f"restart_hint must be None or a non-empty string; got {how!r}")
  return how


def read_completed(directory: str | os.PathLike) -> dict[str, Any] | None:
  """The completion record :meth:`Checkpointer.complete` left in ``directory``
  (``{"step", "fingerprint", "outputs"}``), or None (none, or unreadable)."""
  try:
    record = json.loads((pathlib.Path(directory) / COMPLETED_FILE).read_text())
  except (OSError, ValueError):
    return None
  return record if isinstance(record, dict) else None


_as_fingerprint = fingerprint  # Checkpointer's argument of the same name shadows it
