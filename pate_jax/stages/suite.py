"""The test suite as a stage: one group of tests under pytest in a subprocess, its counts in
``results.json`` (the GPU acceptance's stage 5, :mod:`pate_jax.stages.gpu_acceptance`).

``run(config, workdir)`` runs ``python -m pytest -q <config.args> --junitxml=<workdir>/
junit.xml`` from the repository root with its output in ``<workdir>/pytest.log``
(``PYTHONPATH`` gets the repository first; ``XLA_PYTHON_CLIENT_PREALLOCATE=false`` leaves a
GPU to the tests' own processes; ``config.require_data`` sets ``PATE_JAX_REQUIRE_DATA=1``,
as CI). At ``config.timeout_s`` pytest is interrupted with SIGINT -- it still writes the XML
of the tests run so far -- and the results say ``interrupted``. ``results.json``: tests,
passed, failures, errors, skipped, the failing tests' ids (at most 30), the exit code and
the wall time. ``plan(config)`` is the command and its limit. ``results.json`` is marked
publishable: the tests' datasets are the public benchmarks (MNIST, UCI Adult) standing in
for private data, and its counts say how the code behaved on them. Point the data
directory at data that is private and the counts (a test asserts a student's accuracy on
it) are a function of that data: keep the file to its owner. ``pytest.log`` and
``junit.xml``, which quote what failing tests computed, are owner-only in every case.

Config: ``group`` (a name), ``args`` (pytest arguments, shell-quoted), ``timeout_s``,
``require_data``, ``workers`` (optional; > 0: that many pytest-xdist workers, ``-n``, where
pytest-xdist is installed -- results.json's ``workers`` says how many ran -- else one
process).
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import shlex
import signal
import subprocess
import sys
import time
from typing import Any
from xml.etree import ElementTree

from pate_jax import experiment, io

__all__ = ["run", "plan", "junit_counts", "REPO"]

REPO = pathlib.Path(__file__).resolve().parents[2]


def workers(config) -> int:
  """The pytest-xdist workers a group runs with: ``config.workers`` where pytest-xdist is
  installed, else 0 (one process)."""
  asked = int(config.get("workers", 0) or 0)
  if asked < 0:
    raise ValueError(f"workers must be >= 0, got {asked}")
  return asked if asked and importlib.util.find_spec("xdist") is not None else 0


def _command(args: str, junit: pathlib.Path, n: int = 0) -> list[str]:
  return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
          *(["-n", str(n)] if n else []), *shlex.split(args), f"--junitxml={junit}"]


def _shown(cmd: list[str]) -> str:
  """The command as recorded: ``python``, the XML named inside the run's directory."""
  return shlex.join(["python", *cmd[1:-1], "--junitxml=junit.xml"])


def junit_counts(path: pathlib.Path) -> dict[str, Any]:
  """Tests, passed, failures, errors, skipped and seconds of a JUnit XML file, and the
  failing tests' ids (at most 30); zeros when there is no file."""
  counts: dict[str, Any] = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0,
                            "seconds": 0.0, "failed": []}
  if pathlib.Path(path).is_file():
    for suite in ElementTree.parse(path).getroot().iter("testsuite"):
      for k in ("tests", "failures", "errors", "skipped"):
        counts[k] += int(suite.get(k, 0))
      counts["seconds"] += float(suite.get("time", 0.0))
      counts["failed"] += [f"{case.get('classname')}::{case.get('name')}"
                           for case in suite.iter("testcase")
                           if case.find("failure") is not None or case.find("error") is not None]
  counts["failed"] = counts["failed"][:30]
  counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
  return counts


def _default_sigint() -> None:
  signal.signal(signal.SIGINT, signal.SIG_DFL)


def run(config, workdir: str) -> dict:
  """Runs the group (module docstring); writes ``results.json``."""
  if not (REPO / "tests").is_dir():
    raise FileNotFoundError(f"{REPO / 'tests'}: the test suite runs from a source checkout")
  workdir = pathlib.Path(workdir).resolve()  # pytest runs in the repository, not here
  workdir.mkdir(parents=True, exist_ok=True)
  junit, log = workdir / "junit.xml", workdir / "pytest.log"
  n = workers(config)
  cmd = _command(config.args, junit, n)
  env = dict(os.environ, PATE_JAX_NO_PROGRESS="1",
             PYTHONPATH=experiment.python_path(REPO),
             XLA_PYTHON_CLIENT_PREALLOCATE="false")
  if config.require_data:
    env["PATE_JAX_REQUIRE_DATA"] = "1"
  print(f"tests {config.group}: {_shown(cmd)} (log: {log})", flush=True)
  t0, interrupted = time.time(), False
  # Owner-only, as junit.xml (below), in an owner-only folder: the tests train on the data
  # directory's files, and a failing one prints what it computed from them.
  io.open_private(junit).close()  # pytest rewrites it in place, keeping this mode
  with io.open_private(log) as f:
    # SIGINT's default action in the child: a command started in the background (nohup,
    # `&`) inherits SIGINT ignored, and Python then never turns it into KeyboardInterrupt.
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=f, stderr=subprocess.STDOUT, env=env,
                            preexec_fn=_default_sigint)
    try:
      returncode = proc.wait(timeout=float(config.timeout_s))
    except subprocess.TimeoutExpired:
      interrupted = True
      proc.send_signal(signal.SIGINT)
      try:
        returncode = proc.wait(timeout=60)
      except subprocess.TimeoutExpired:
        proc.kill()
        returncode = proc.wait()
  io.narrow(junit)  # pytest writes it with the umask's mode; its failures quote the log
  results = {"group": config.group, "command": _shown(cmd), "workers": n,
             "returncode": returncode,
             "interrupted": interrupted, "timeout_s": float(config.timeout_s),
             "wall_seconds": time.time() - t0, **junit_counts(junit)}
  print(f"tests {config.group}: {results['passed']} passed, {results['failures']} failed, "
        f"{results['errors']} errors, {results['skipped']} skipped in "
        f"{results['wall_seconds']:.0f} s" + (" (INTERRUPTED)" if interrupted else ""))
  experiment.write_results(workdir, results, config=config, seed=None,
                           disclosure=experiment.NO_PRIVATE_DATA)
  return results


def plan(config) -> dict:
  """``--dry_run``: the command and its time limit."""
  return {"command": _shown(_command(config.args, pathlib.Path("junit.xml"), workers(config))),
          "timeout_s": float(config.timeout_s)}
