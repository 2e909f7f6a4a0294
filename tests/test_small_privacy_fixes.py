"""Small privacy fixes: budgets given as real numbers only, and a validation
``ValueError`` reported by a script in one line. (The accountants under a 32-bit ``jax.jit``
are tested in test_accounting.py.)"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from pate_jax import _checks as v
from pate_jax import experiment
from pate_jax import votes as votes_lib

REPO = pathlib.Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------- budget


@pytest.mark.parametrize("value,expected", [
    (2, 2.0), (0.5, 0.5), (np.float32(1.5), 1.5), (np.int64(3), 3.0), (np.array(2.5), 2.5),
    (jnp.asarray(4.0), 4.0), (float("inf"), np.inf), (np.inf, np.inf),
])
def test_budget_accepts_real_numbers(value, expected):
  out = v.budget(value)
  assert isinstance(out, np.float64) and out == expected


@pytest.mark.parametrize("value", [
    "2", "inf", b"2", True, False, np.bool_(True), np.array(True), None, 2 + 0j,
    np.complex128(2.0), np.array("2"), np.array([2.0]), [2.0], 0, -1.0, float("nan"),
])
def test_budget_refuses_anything_but_a_positive_real_number(value):
  with pytest.raises(ValueError, match="^epsilon_max must be a real number > 0") as e:
    v.budget(value)
  assert repr(value) in str(e.value)  # names the value as given


def test_user_errors_include_value_error_not_type_error():
  errors = experiment.user_errors()
  assert issubclass(ValueError, errors) and not issubclass(TypeError, errors)


# ----------------------------------------------------------------------------- one-line error


def _aggregate(workdir: pathlib.Path, **env: str) -> subprocess.CompletedProcess:
  """experiments/aggregate.py with a refused budget, on a 4-query votes.npz."""
  votes = np.array([[8, 1, 1], [5, 3, 2], [0, 10, 0], [4, 4, 2]], np.int32)
  votes_lib.save_votes(workdir / "votes.npz", votes, np.array([0, 0, 1, 2]),
                       index=np.arange(4), num_pool=4, dataset="digits")
  cmd = [sys.executable, "experiments/aggregate.py", "--config", "configs/aggregate_mnist.py",
         "--config.num_queries=4", "--config.epsilon_max=-1", f"--workdir={workdir}"]
  return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120,
                        env={**os.environ, "PATE_JAX_TRACEBACK": "", **env})


@pytest.mark.slow
def test_a_validation_value_error_is_one_line_unless_the_traceback_is_asked(tmp_path):
  proc = _aggregate(tmp_path)
  lines = proc.stderr.strip().splitlines()
  assert proc.returncode == 1, proc.stderr
  assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
  assert re.fullmatch(r"error: private \(data owner only\): ValueError: "
                      r"config\.epsilon_max must be a real number > 0 \(inf "
                      r"allowed\); got -1\.0 \(PATE_JAX_TRACEBACK=1 shows the traceback\)",
                      lines[0]), lines[0]
  shown = _aggregate(tmp_path, PATE_JAX_TRACEBACK="1")
  assert shown.returncode == 1
  assert "Traceback (most recent call last)" in shown.stderr
  assert "ValueError: config.epsilon_max must be a real number > 0" in shown.stderr
  _assert_every_line_marked(shown.stderr)


def _assert_every_line_marked(stderr: str) -> None:
  lines = stderr.rstrip("\n").split("\n")
  unmarked = [line for line in lines if not line.startswith(experiment.PRIVATE_MARK)]
  assert lines and not unmarked, unmarked


@pytest.mark.parametrize("error,traceback", [("TypeError", ""), ("ValueError", "1"),
                                             ("ValueError", "")])
def test_a_traceback_is_marked_private_on_every_line(tmp_path, error, traceback):
  """A bug's traceback (or a user error's, asked for with PATE_JAX_TRACEBACK=1) quotes its
  message and the code around it, which may hold what the run computed from the private
  data: every line of it says private, and the script exits 1. So does every line of a
  user error's message of several lines."""
  config = tmp_path / "config.py"
  config.write_text("import ml_collections\n\ndef get_config():\n"
                    "  return ml_collections.ConfigDict({'steps': 1})\n")
  source = ("import sys\nfrom pate_jax import experiment\n"
            "def run(config, workdir):\n"
            f"  raise {error}('the votes were\\n[7, 3]')\n"
            "experiment.run_main(run, argv=sys.argv)\n")
  proc = subprocess.run(
      [sys.executable, "-c", source, f"--config={config}", f"--workdir={tmp_path / 'w'}"],
      capture_output=True, text=True, timeout=120,
      env={**os.environ, "PATE_JAX_TRACEBACK": traceback,
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])})
  assert proc.returncode == 1, proc.stderr
  # A user error without the traceback asked for is its message alone, on two lines here.
  assert ("Traceback (most recent call last)" in proc.stderr) == (error == "TypeError"
                                                                 or traceback == "1")
  assert f"{error}: the votes were" in proc.stderr and "[7, 3]" in proc.stderr
  if error == "ValueError" and not traceback:
    first, *rest = proc.stderr.rstrip("\n").split("\n")
    assert first.startswith("error: " + experiment.PRIVATE_MARK) and len(rest) == 1
    _assert_every_line_marked("\n".join(rest))
  else:
    _assert_every_line_marked(proc.stderr)


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_warning_is_marked_private_on_every_line(tmp_path, dry_run):
  """A warning may quote the private data (a training row's category unseen in the public
  split, a teacher's class counts): shown during a run or its dry run, every line of it
  says private, as a traceback's."""
  config = tmp_path / "config.py"
  config.write_text("import ml_collections\n\ndef get_config():\n"
                    "  return ml_collections.ConfigDict({'steps': 1})\n")
  source = ("import sys, warnings\nfrom pate_jax import experiment\n"
            "def run(config, workdir):\n"
            "  warnings.warn('a training value unseen:\\n[Zzz-Rare]', UserWarning)\n"
            "  return {}\n"
            "def plan(config):\n"
            "  warnings.warn('a training value unseen:\\n[Zzz-Rare]', UserWarning)\n"
            "  return {}\n"
            "experiment.run_main(run, plan=plan, argv=sys.argv)\n")
  proc = subprocess.run(
      [sys.executable, "-c", source, f"--config={config}", f"--workdir={tmp_path / 'w'}"]
      + (["--dry_run"] if dry_run else []), capture_output=True, text=True, timeout=120,
      env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO),
                                                        os.environ.get("PYTHONPATH", "")])})
  assert proc.returncode == 0, proc.stderr
  assert experiment.PRIVATE_MARK + "[Zzz-Rare]" in proc.stderr
  _assert_every_line_marked(proc.stderr)


def test_the_line_ctrl_c_prints_is_marked_private(tmp_path):
  """The one line a script prints on Ctrl-C (where what was finished stays) is marked
  private: every line a research run prints says so."""
  config = tmp_path / "config.py"
  config.write_text("import ml_collections\n\ndef get_config():\n"
                    "  return ml_collections.ConfigDict({'steps': 1})\n")
  source = ("import sys\nfrom pate_jax import experiment\n"
            "def run(config, workdir):\n  raise KeyboardInterrupt\n"
            "experiment.run_main(run, argv=sys.argv)\n")
  proc = subprocess.run(
      [sys.executable, "-c", source, f"--config={config}", f"--workdir={tmp_path / 'w'}"],
      capture_output=True, text=True, timeout=120,
      env={**os.environ, "PATE_JAX_TRACEBACK": "",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])})
  assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
  assert proc.stderr.startswith("interrupted: " + experiment.PRIVATE_MARK), proc.stderr
  assert len(proc.stderr.rstrip("\n").split("\n")) == 1, proc.stderr


def test_pdb_post_mortem_opens_the_debugger_on_a_caught_error(tmp_path):
  """absl's --pdb_post_mortem still opens the debugger at the failing frame, although the
  harness catches the exception to print its traceback marked."""
  config = tmp_path / "config.py"
  config.write_text("import ml_collections\n\ndef get_config():\n"
                    "  return ml_collections.ConfigDict({'steps': 1})\n")
  source = ("import sys\nfrom pate_jax import experiment\n"
            "def run(config, workdir):\n"
            "  secret_value = 41\n"
            "  raise TypeError('a bug')\n"
            "experiment.run_main(run, argv=sys.argv)\n")
  proc = subprocess.run(
      [sys.executable, "-c", source, f"--config={config}", f"--workdir={tmp_path / 'w'}",
       "--pdb_post_mortem"], input="p secret_value + 1\nq\n", capture_output=True,
      text=True, timeout=120,
      env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO),
                                                        os.environ.get("PYTHONPATH", "")])})
  assert proc.returncode == 1, proc.stderr
  assert "(Pdb)" in proc.stdout and "42" in proc.stdout, proc.stdout
  _assert_every_line_marked(proc.stderr)


@pytest.mark.parametrize("bad", [["2", "3"], "2", np.array([True, False])])
def test_orders_and_moments_refuse_strings_and_booleans(bad):
  with pytest.raises(ValueError, match="orders must be a 1-D array of real"):
    v.orders(bad)
  with pytest.raises(ValueError, match="moments must be a 1-D array of real"):
    v.moments(bad)


# ----------------------------------------------------------------------------- file modes


def test_files_holding_private_values_are_owner_only(tmp_path):
  """A results.json with a private part (at any depth) or of a measurement, and every
  figure, is 0600 whatever the umask, in a directory made 0700; a file of public values
  only keeps the umask's, and so does its directory."""
  from pate_jax import io  # pylint: disable=g-import-not-at-top
  from pate_jax.reporting import _plots  # pylint: disable=g-import-not-at-top
  old = os.umask(0o022)
  try:
    cases = {"nested": ({"a": [{"private": {"votes": [3, 1]}}]}, experiment.PUBLISHABLE),
             "top": ({"epsilon": 1.0, "private": {}}, experiment.PUBLISHABLE),
             "measurement": ({"accuracy": 0.9}, experiment.MEASUREMENT),
             "public": ({"epsilon": 1.0, "note": "private"}, experiment.PUBLISHABLE),
             "synthetic": ({"seconds": 2.0}, experiment.NO_PRIVATE_DATA)}
    for name, (results, disclosure) in cases.items():
      path = experiment.write_results(tmp_path / name, results, config={}, seed=0,
                                      disclosure=disclosure)
      mode = path.stat().st_mode & 0o777
      public = name in ("public", "synthetic")
      assert mode == (0o644 if public else 0o600), (name, oct(mode))
      # Whoever enters a directory reads its files' sizes, which follow their contents.
      mode = path.parent.stat().st_mode & 0o777
      assert mode == (0o755 if public else 0o700), (name, oct(mode))
    fig = _plots._figure(figsize=(2, 2))  # pylint: disable=protected-access
    fig.subplots().plot([0, 1], [1, 0])
    png = io.save_figure(fig, tmp_path / "figures" / "f.png", dpi=40)
    assert png.stat().st_mode & 0o777 == 0o600
    assert png.parent.stat().st_mode & 0o777 == 0o700
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  finally:
    os.umask(old)


def test_a_research_seeds_results_are_private_as_a_whole(tmp_path):
  """A run whose noise came from a research seed (recorded, so anyone recomputes it) writes
  its results as a measurement: private as a whole, owner-only. Secret noise keeps the
  stage's disclosure: publishable outside its ``private`` part."""
  from pate_jax import rng  # pylint: disable=g-import-not-at-top
  research = experiment.noise_disclosure(rng.noise_record(7))
  assert research == experiment.MEASUREMENT
  assert experiment.noise_disclosure(rng.noise_record(None)) == experiment.PUBLISHABLE
  old = os.umask(0o022)
  try:
    path = experiment.write_results(tmp_path / "w", {"accuracy": 0.9}, config={}, seed=0,
                                    disclosure=research)
  finally:
    os.umask(old)
  assert path.stat().st_mode & 0o777 == 0o600
  assert experiment.private_as_a_whole(tmp_path / "w")


def test_a_results_file_carries_the_time_it_records(tmp_path):
  """``written_at`` is the time a results file records and its modification time too (the
  main job's summary carries its student's end, not the private attack's after it)."""
  import json  # pylint: disable=g-import-not-at-top
  import time  # pylint: disable=g-import-not-at-top
  when = 1_000_000_000.0
  path = experiment.write_results(tmp_path / "w", {"accuracy": 0.9}, config={}, seed=0,
                                  written_at=when)
  assert path.stat().st_mtime == when and path.stat().st_atime == when
  recorded = json.loads(path.read_text())["written_at"]
  assert time.mktime(time.strptime(recorded, "%Y-%m-%dT%H:%M:%S%z")) == when


def test_narrow_makes_an_older_versions_file_owner_only(tmp_path):
  """A record an older version wrote readable by others (0644) is made 0600; an owner-only
  one is left as it is, and a missing one stays missing."""
  from pate_jax import io  # pylint: disable=g-import-not-at-top
  wide, own = tmp_path / "votes.npz", tmp_path / "ledger.npz"
  for path, mode in ((wide, 0o644), (own, 0o600)):
    path.write_bytes(b"x")
    path.chmod(mode)
    io.narrow(path)
    assert path.stat().st_mode & 0o777 == 0o600, (path, oct(path.stat().st_mode))
  io.narrow(tmp_path / "absent")
  assert not (tmp_path / "absent").exists()


def test_a_refused_run_leaves_no_workdir_it_created(tmp_path):
  """A run refused before it wrote anything (a bad value, a refused budget) left an empty
  workdir holding its lock; the script removes what it created, never a file or a workdir
  that was there before."""
  from pate_jax.experiment import _main  # pylint: disable=g-import-not-at-top
  created = tmp_path / "new"
  (created / "checkpoints").mkdir(parents=True)
  for lock in (created / ".lock", created / "checkpoints" / ".lock"):
    lock.write_text("123\n")
  assert _main.remove_if_left_empty(created) and not created.exists()
  kept = tmp_path / "kept"
  kept.mkdir()
  (kept / ".lock").write_text("1\n")
  (kept / "results.json").write_text("{}\n")
  assert not _main.remove_if_left_empty(kept) and (kept / "results.json").exists()
  assert not _main.remove_if_left_empty(tmp_path / "absent")
  assert not _main.remove_if_left_empty(None)


def test_a_directory_shared_on_purpose_is_left_as_it_is(tmp_path):
  """An owner-only file narrows its own directory, never a shared one: ``/tmp``-like
  (sticky) or another user's, which warn instead; the user's own setgid directory (made
  inside a group's project tree) is narrowed, its setgid bit kept."""
  from pate_jax import io  # pylint: disable=g-import-not-at-top

  def written_into(name, mode):
    """A directory of ``mode`` (what the kernel kept of it) after a votes.npz is written."""
    directory = tmp_path / name
    directory.mkdir()
    directory.chmod(mode)
    kept = directory.stat().st_mode & 0o7777
    with io.open_private(directory / "votes.npz") as f:
      f.write(b"x")
    return kept, directory.stat().st_mode & 0o7777

  assert written_into("own", 0o755) == (0o755, 0o700)
  with pytest.warns(UserWarning, match="is shared"):
    assert written_into("sticky", 0o1777) == (0o1777, 0o1777)
  kept, after = written_into("group", 0o2775)
  assert after == (0o2700 if kept == 0o2775 else 0o700)  # the kernel may drop setgid
  if os.geteuid() == 0:  # only root can give a directory to another user
    other = tmp_path / "other"
    other.mkdir(mode=0o777)
    other.chmod(0o777)
    os.chown(other, 65534, -1)
    with pytest.warns(UserWarning, match="owner uid 65534"):
      io.private_directory(other)
    assert other.stat().st_mode & 0o777 == 0o777
  archive = tmp_path / "handover"
  archive.mkdir(mode=0o755)
  archive.chmod(0o755)
  with io.open_private(archive / "a.tar.gz", narrow_directory=False) as f:
    f.write(b"x")
  assert archive.stat().st_mode & 0o777 == 0o755
  assert (archive / "a.tar.gz").stat().st_mode & 0o777 == 0o600
