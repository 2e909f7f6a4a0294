"""Loading the repository's scripts and configs by name (shared by the script tests)."""

from __future__ import annotations

import pathlib

from pate_jax import experiment

REPO = pathlib.Path(__file__).resolve().parent.parent


def python_path() -> str:
  """``PYTHONPATH`` for a script run in a subprocess: the repository first, then this
  process's (dependencies installed with ``pip --target`` stay importable)."""
  return experiment.python_path(REPO)


def script(name: str):
  """``experiments/<name>.py`` as a module."""
  return experiment.load_script(REPO / "experiments" / f"{name}.py")


def config(name: str, arg: str | None = None, **overrides):
  """``configs/<name>.py[:arg]`` with ``overrides`` applied."""
  c = experiment.load_config(str(REPO / "configs" / f"{name}.py") + (f":{arg}" if arg else ""))
  c.update(overrides)
  return c
