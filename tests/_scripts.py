"""Loading the repository's scripts and configs by name (shared by the script tests)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from pate_jax import experiment

REPO = pathlib.Path(__file__).resolve().parent.parent


def python_path() -> str:
  """``PYTHONPATH`` for a script run in a subprocess: the repository first, then this
  process's (dependencies installed with ``pip --target`` stay importable)."""
  return experiment.python_path(REPO)


def assert_refused_before_work(run, plan, config, workdir: pathlib.Path, match: str) -> None:
  """``run(config, workdir)`` and ``plan(config)`` (the script's ``--dry_run``) both refuse
  ``config`` with a ``ValueError`` matching ``match``, ``run`` before it creates
  ``workdir``."""
  with pytest.raises(ValueError, match=match):
    run(config, str(workdir))
  assert not pathlib.Path(workdir).exists()
  with pytest.raises(ValueError, match=match):
    plan(config)


def script(name: str):
  """``experiments/<name>.py`` as a module."""
  return experiment.load_script(REPO / "experiments" / f"{name}.py")


def config(name: str, arg: str | None = None, **overrides):
  """``configs/<name>.py[:arg]`` with ``overrides`` applied."""
  c = experiment.load_config(str(REPO / "configs" / f"{name}.py") + (f":{arg}" if arg else ""))
  c.update(overrides)
  return c


def run_result(source: str, *args: str, timeout: int = 300, fast_compile: bool = True,
               **env: str) -> dict:
  """``python -c source *args`` in a fresh process on the CPU, this process's environment
  with ``env`` added (what XLA reads once at start-up, such as ``XLA_FLAGS``): asserts it
  succeeded and returns the JSON it printed on its line starting ``RESULT``. The suite's
  ``FAST_COMPILE_FLAG`` (``tests/conftest.py``), where this process has it, stays beside a
  given ``XLA_FLAGS``; ``fast_compile=False`` drops it (a child that measures XLA's
  default build)."""
  fast = experiment.FAST_COMPILE_FLAG
  flags = [f for f in env.get("XLA_FLAGS", os.environ.get("XLA_FLAGS", "")).split() if f != fast]
  if fast_compile and experiment.fast_compile_enabled():
    flags.append(fast)
  env["XLA_FLAGS"] = " ".join(flags)
  proc = subprocess.run([sys.executable, "-c", source, *args],
                        env=dict(os.environ, JAX_PLATFORMS="cpu", **env),
                        capture_output=True, text=True, timeout=timeout, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT"))
  return json.loads(line[len("RESULT"):])


class Killed(Exception):
  """A teachers run stopped by :func:`kill_teachers_after`."""


def kill_teachers_after(monkeypatch, step: int) -> None:
  """The teachers stage, while ``monkeypatch`` holds, stops as a killed job would after the
  checkpoint of ``step``: its checkpointer closed (the save on disk), then :class:`Killed`
  raised from inside training, so that no later line of the stage runs."""
  from pate_jax import teachers  # pylint: disable=g-import-not-at-top
  train = teachers.train_with_checkpoints

  def killed_after(ensemble, state, keys, images, labels, ckpt, **kwargs):
    def after_save(saved: int) -> None:
      if saved == step:
        ckpt.close()
        raise Killed(step)
    return train(ensemble, state, keys, images, labels, ckpt, after_save=after_save, **kwargs)
  monkeypatch.setattr(teachers, "train_with_checkpoints", killed_after)
