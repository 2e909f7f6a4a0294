"""A newcomer's first hour: what the scripts print last, --help, one-line errors
for unknown config fields, checkpoints deleted at completion, tensorflow-datasets failing
fast offline, and the aggregate stage's ε conventions.

The scripts run in-process on tiny configs through ``experiment.run_and_report`` (what
``run_main`` does after parsing flags); two subprocesses check the command line itself.
The main job, train_student.py and attack.py are checked the same way in their own tests
(tests/test_train_student.py, tests/test_attacks_script.py).
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from pate_jax import checkpoint, data, experiment
from pate_jax.data import _images

import _scripts  # tests/_scripts.py  # pylint: disable=g-bad-import-order

REPO = pathlib.Path(__file__).resolve().parent.parent
SCRIPTS = sorted(p for p in (REPO / "experiments").glob("*.py"))

_script, _config = _scripts.script, _scripts.config


def _tail(capsys, workdir, n):
  """The last ``n`` printed lines; the very last names the results JSON by absolute path."""
  lines = capsys.readouterr().out.strip().splitlines()
  results = [l for l in lines if l.startswith("results: ")]
  assert results and lines.index(results[-1]) >= len(lines) - 2, lines[-5:]
  path = pathlib.Path(results[-1].split(": ", 1)[1].split(", ")[0])
  assert path.is_absolute() and path.is_file() and path.parent == pathlib.Path(workdir).resolve()
  return "\n".join(lines[-n:])


@pytest.fixture(scope="module")
def votes_dir(digits_votes_dir):
  """The simulated teachers' votes of conftest.digits_votes_dir (read only)."""
  return digits_votes_dir


# ------------------------------------------------------------- 1: the last lines printed


@pytest.mark.slow
def test_aggregate_prints_labels_and_both_epsilons_then_the_paths(tmp_path, votes_dir, capsys):
  work = tmp_path / "agg"
  r = experiment.run_and_report(_script("aggregate").run, _script("aggregate").report,
                                _config("aggregate_mnist", "cpu", votes_dir=str(votes_dir),
                                        num_queries=40, chunk_size=32, noise_seed=0,
                                        epsilon_max=20.0), str(work))
  tail = _tail(capsys, work, 12)
  assert "40 of 40 queries answered, label accuracy" in tail
  assert "private (data owner only): ε moments_data_dependent" in tail
  assert "tight" in tail and "δ = 1e-05" in tail
  assert "NOTE: this run's noise came from a research seed" in tail
  assert f"figures: {(work / 'privacy.png').resolve()}" in tail
  assert "{" not in tail.replace("{'gamma': 0.05}", "")  # no raw dicts
  # The paper's convention, the tight value, and the grid-edge flags (private here).
  record = json.loads((work / "results.json").read_text())
  private = record["results"]["private"]
  eps, tight = private["epsilon"], private["epsilon_tight"]
  dd = eps["moments_data_dependent"]
  assert dd["grid"] == [1, 8] and tight["moments_data_dependent"]["grid"] == [1, 128]
  assert dd["best_at_grid_edge"] == (dd["best_moment"] == 8)
  # A wider grid's optimum is no larger (to rounding: the two are separate programs).
  assert tight["moments_data_dependent"]["epsilon"] <= dd["epsilon"] * (1 + 1e-12)
  assert (("moments_data_dependent" in r["private"]["epsilon_at_grid_edge"])
          == dd["best_at_grid_edge"])
  assert not any("data_dependent" in k for k in record["results"]["epsilon"])
  # An LNMax run records no GNMax fields; the privacy curve ends at the reported ε.
  assert "gamma" in record["config"]
  assert not {"sigma", "threshold", "sigma_threshold"} & set(record["config"])
  curve = r["private"]["privacy_curve"]
  assert curve["queries_answered"][-1] == 40
  assert curve["epsilon"]["data-dependent, moments to 8 (2017 code)"][-1] == pytest.approx(
      dd["epsilon"])


def test_aggregate_without_votes_names_votes_dir(tmp_path):
  with pytest.raises(FileNotFoundError, match="--config.votes_dir="):
    _script("aggregate").run(_config("aggregate_mnist", "cpu"), tmp_path)


def test_rdp_grid_edges_are_flagged_at_both_ends():
  from pate_jax import accounting, mechanisms, reporting  # pylint: disable=g-import-not-at-top
  orders = np.asarray(accounting.DEFAULT_ORDERS, np.float64)
  report = {"a": {"epsilon": 1.0, "best_order": float(orders.max())},
            "b": {"epsilon": 1.0, "best_order": float(orders.min())},
            "c": {"epsilon": 1.0, "best_order": float(orders[len(orders) // 2])},
            "strong_composition": {"epsilon": 2.0}}
  edges = reporting.flag_grid_edges(report, mechanisms.GNMAX, None, 8)
  assert edges == ["a", "b"] and report["a"]["grid"] == [orders.min(), orders.max()]
  assert not report["c"]["best_at_grid_edge"] and "grid" not in report["strong_composition"]


def test_train_teachers_prints_accuracy_deletes_checkpoints_and_reuses_votes(tmp_path,
                                                                             capsys):
  script, work = _script("train_teachers"), tmp_path / "teachers"
  config = _config("mnist_250", "cpu", dataset="digits", num_teachers=2, num_steps=4,
                   checkpoint_every=2, gap_plot=True, distill_temperatures=())
  config.model.kwargs.hidden = (16,)
  first = experiment.run_and_report(script.run, script.report, config, str(work))
  tail = _tail(capsys, work, 3)
  assert "2 teachers × " in tail and "test accuracy mean" in tail and "plurality" in tail
  assert f"figures: {(work / 'gap.png').resolve()}" in tail
  # The stage's outputs replace its checkpoints.
  ckpts = work / "checkpoints"
  assert not [p for p in ckpts.iterdir() if p.name.isdigit()]
  assert (ckpts / checkpoint.COMPLETED_FILE).exists()
  # Their size on disk (the trained parameters compressed) is private.
  assert first["private"]["checkpoint_bytes_deleted_at_completion"] > 0
  assert "bytes_deleted_at_completion" not in first["checkpoints"]
  votes = (work / "votes.npz").read_bytes()
  again = script.run(config, str(work))  # a rerun reuses votes.npz, trains nothing
  assert again["reused_votes"] and (work / "votes.npz").read_bytes() == votes
  assert "already trained" in capsys.readouterr().out


def test_plot_scripts_print_their_numbers_then_the_paths(tmp_path, votes_dir, capsys):
  gap = _script("plot_gap")
  experiment.run_and_report(gap.run, gap.report, _config("plot_gap", runs=str(votes_dir)),
                            str(tmp_path / "gap"))
  assert "n=  20  mean normalized gap" in _tail(capsys, tmp_path / "gap", 3)
  fig2 = _script("plot_aggregation")
  experiment.run_and_report(fig2.run, fig2.report,
                            _config("plot_aggregation", runs=str(votes_dir), num_points=3,
                                    num_seeds=1), str(tmp_path / "fig2"))
  tail = _tail(capsys, tmp_path / "fig2", 3)
  assert "accuracy" in tail and "plurality" in tail and "figure2.png" in tail


def test_checkpointer_complete_keeps_only_the_marker(tmp_path):
  state = {"w": np.ones((3,), np.float32)}
  fp = {"seed": 0}
  with checkpoint.Checkpointer(tmp_path, max_to_keep=2, fingerprint=fp) as ckpt:
    for step in (1, 2):
      ckpt.save(step, state)
    assert ckpt.complete(2, keep=True, outputs={"n": 2}) == 0
  assert sorted(p.name for p in tmp_path.iterdir() if p.name.isdigit()) == ["1", "2"]
  with checkpoint.Checkpointer(tmp_path, fingerprint=fp) as ckpt:
    assert ckpt.completed({"n": 2}) == 2 and ckpt.completed({"n": 3}) is None
    assert ckpt.complete(2, outputs={"n": 2}) > 0
  assert not [p for p in tmp_path.iterdir() if p.name.isdigit()]
  with checkpoint.Checkpointer(tmp_path, fingerprint={"seed": 1}) as ckpt:
    assert ckpt.completed({"n": 2}) is None  # another run
    ckpt.save(3, state)  # training again: no longer complete
  assert not (tmp_path / checkpoint.COMPLETED_FILE).exists()


# ------------------------------------------------------------------ 5: help and typos


def _cli(*args, cwd=REPO):
  return subprocess.run([sys.executable, *map(str, args)], cwd=cwd, capture_output=True,
                        text=True, timeout=120, check=False,
                        env=dict(os.environ, PYTHONPATH=_scripts.python_path(), PATE_JAX_NO_PROGRESS="1"))


def test_help_exits_0_with_usage_flags_and_fields():
  proc = _cli(REPO / "experiments" / "run_pate.py", "--help")
  assert proc.returncode == 0, proc.stderr[-2000:]
  out = proc.stdout
  assert "python experiments/run_pate.py --config configs/pate_mnist.py:cpu" in out
  assert "--config PATH[:VARIANT]" in out and "--workdir DIR" in out
  assert "--config.teachers.num_teachers=250" in out  # :cpu, the usage line's config
  assert "--config.aggregate.max_moment=8" in out


def test_unknown_field_is_a_one_line_error_naming_the_closest():
  proc = _cli(REPO / "experiments" / "train_teachers.py", "--config",
              "configs/mnist_250.py:cpu", "--workdir", "/nonexistent",
              "--config.num_teacherz=5")
  assert proc.returncode == 2
  assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
  assert "'num_teacherz'" in proc.stderr and "--config.num_teachers" in proc.stderr


def test_nested_config_hint_points_into_the_stage():
  config = _config("pate_mnist", "cpu")
  assert experiment.unknown_overrides(["--config.num_teachers=100"], config) == [
      ("num_teachers", ["teachers.num_teachers"])]
  assert experiment.unknown_overrides(["--config.teachers.num_teachers=100",
                                       "--config.student.num_steps=4"], config) == []


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.stem)
def test_every_script_documents_a_loadable_config(path):
  """--help lists the fields of the config on the script's usage line."""
  doc = ast.get_docstring(ast.parse(path.read_text()))
  spec = experiment._default_config_spec(doc, str(path))  # pylint: disable=protected-access
  assert spec, f"{path.name}: no `--config configs/x.py` on its usage line"
  config = experiment.load_config(str(REPO / spec))
  text = experiment.help_text(doc, spec, config)
  assert "--config." in text.split(f"config fields of {spec} (defaults):")[1]


# ----------------------------------------------------------------- 3: tfds fails fast


class _FakeBuilder:
  URL = "https://unreachable.invalid/mnist/"
  data_dir = "/nowhere"
  downloads = 0

  def is_prepared(self):
    return False

  def download_and_prepare(self):
    _FakeBuilder.downloads += 1
    time.sleep(30)  # what tfds does offline, minutes of retries


def test_unreachable_tfds_source_falls_back_at_once_with_one_hint(monkeypatch, caplog):
  fake = type(sys)("tensorflow_datasets")
  fake.builder = lambda *a, **k: _FakeBuilder()
  monkeypatch.setitem(sys.modules, "tensorflow_datasets", fake)
  monkeypatch.delenv("PATE_JAX_DATA_DIR", raising=False)
  monkeypatch.delenv("PATE_JAX_OFFLINE", raising=False)
  probed = []

  def refuse(address, timeout=None):
    probed.append((address, timeout))
    raise OSError("network unreachable")

  monkeypatch.setattr("socket.create_connection", refuse)
  t0 = time.perf_counter()
  with pytest.warns(UserWarning, match="FALLING BACK"):
    ds = data.load_image_dataset("mnist", allow_fallback=True)
  assert time.perf_counter() - t0 < 10 and _FakeBuilder.downloads == 0
  assert ds.fallback and probed == [(("unreachable.invalid", 443), _images.PROBE_TIMEOUT_S)]
  hints = [r.getMessage() for r in caplog.records if "PATE_JAX_DATA_DIR=DIR" in r.getMessage()]
  assert len(hints) == 1 and "\n" not in hints[0]
  with pytest.raises(FileNotFoundError, match="SourceUnreachableError"):
    data.load_image_dataset("mnist")


def test_tabular_flags_grid_edges():
  from pate_jax import tabular  # pylint: disable=g-import-not-at-top
  accountant = tabular.Accountant(delta=1e-5, max_moment=8, max_moment_wide=32)
  summary = {"best_moment_data_dependent": 8, "best_moment_data_independent": 5,
             "best_moment_data_dependent_max_moment_32": 32}
  assert _script("tabular").grid_edges(summary, accountant) == [
      "best_moment_data_dependent", "best_moment_data_dependent_max_moment_32"]
  orders = accountant.orders
  assert _script("tabular").grid_edges({"best_order_data_dependent": max(orders),
                                        "best_order_data_independent": orders[1]},
                                       accountant) == ["best_order_data_dependent"]


@pytest.mark.slow  # two processes, 3.8 s
def test_ctrl_c_ends_a_script_with_a_line_not_a_traceback(tmp_path):
  """Ctrl-C lands wherever the run is (inside orbax's save: a 70-line traceback): the script
  says what stays and how to resume, ends by SIGINT (status 130 in a shell), and removes a
  workdir it created empty;
  PATE_JAX_TRACEBACK=1 shows the traceback."""
  config = tmp_path / "config.py"
  config.write_text("import ml_collections\n\ndef get_config():\n"
                    "  return ml_collections.ConfigDict({'steps': 1})\n")
  source = ("import sys\nfrom pate_jax import experiment\n"
            "def run(config, workdir):\n  print('resumed from step 2')\n"
            "  raise KeyboardInterrupt\n"
            "experiment.run_main(run, argv=sys.argv)\n")

  def interrupted(workdir, traceback=""):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # stdout buffered
    return subprocess.run(
        [sys.executable, "-c", source, f"--config={config}", f"--workdir={workdir}"],
        capture_output=True, text=True, timeout=120,
        env={**env, "PATE_JAX_TRACEBACK": traceback, "PYTHONPATH": _scripts.python_path()})

  out = interrupted(tmp_path / "new")
  # Ended by SIGINT (a shell reads 130 and stops its loop), as Python's own Ctrl-C, once
  # what was printed before is written.
  assert out.returncode == -signal.SIGINT and "Traceback" not in out.stderr, out.stderr
  assert out.stdout == "resumed from step 2\n"
  assert out.stderr.startswith(f"interrupted: {experiment.PRIVATE_MARK}what was finished "
                               f"stays in {tmp_path / 'new'};")
  assert not (tmp_path / "new").exists()
  shown = interrupted(tmp_path / "new", traceback="1")
  assert shown.returncode != 0 and "KeyboardInterrupt" in shown.stderr


def test_side_thread_does_not_hold_an_error_back_behind_its_work():
  """Ctrl-C (or any error) in a stage reaches the user at once, not after the compilation
  or attack running beside the accelerator; leaving normally waits for that work."""
  import threading  # pylint: disable=g-import-not-at-top
  release = threading.Event()
  start = time.perf_counter()
  with pytest.raises(KeyboardInterrupt):
    with experiment.side_thread() as pool:
      running = pool.submit(release.wait, 60)
      queued = pool.submit(lambda: "never")
      raise KeyboardInterrupt
  assert time.perf_counter() - start < 10 and queued.cancelled() and not running.done()
  release.set()
  assert running.result(timeout=10)
  with experiment.side_thread() as pool:
    done = pool.submit(time.sleep, 0.2)
  assert done.done()
