"""The private figures (the teachers' gap.png, the aggregate stage's privacy.png) are drawn
from the votes, and drawing them and compressing their PNGs take a time that follows the
votes: each is drawn last, after every publishable file (whose recorded time and
modification time would otherwise carry its seconds), and its seconds are recorded
privately beside it (``<name>_seconds.json``), out of the publishable phases, stage
seconds and walls."""

import json
import math
import os
import pathlib
import time

import numpy as np
import pytest

from pate_jax import experiment
from pate_jax import votes as votes_lib
from pate_jax.experiment import load_script
from pate_jax.stages import aggregate
from pate_jax.stages import student as student_stage
from pate_jax.stages import teachers as teachers_stage

from test_hand_over_seconds import stub_student

REPO = pathlib.Path(__file__).resolve().parent.parent
DRAW = 0.4  # seconds a figure takes to draw: more the less the teachers agree


def slow_figure(starts):
  """A figure that takes DRAW seconds to draw, appending its start (time.time()) to
  ``starts``."""
  def draw(*args):
    starts.append(time.time())
    time.sleep(DRAW)
    pathlib.Path(args[-1]).write_bytes(b"png")
  return draw


def recorded(workdir, name):
  """The seconds :func:`experiment.draw_private_figures` recorded for figure ``name``."""
  record = json.loads((pathlib.Path(workdir) / f"{name}_seconds.json").read_text())
  return record["private"][f"{name}_seconds"]


def written_before(workdir, start, private=()):
  """Checks that results.json in ``workdir`` records a time no later than ``start`` and
  that ``workdir``, every directory under it and every file under it but those named
  ``private`` (the figure and its record of seconds) was last modified before ``start``:
  the directory the figure is made in and the workdir's ``.lock`` (emptied when the stage
  lets it go, after the figure) included."""
  workdir = pathlib.Path(workdir)
  record = json.loads((workdir / "results.json").read_text())
  written = time.mktime(time.strptime(record["written_at"], "%Y-%m-%dT%H:%M:%S%z"))
  assert written <= math.floor(start)
  late = [str(p.relative_to(workdir)) for p in (workdir, *workdir.rglob("*"))
          if p.name not in private and p.stat().st_mtime >= start]
  assert not late, late


def test_private_figures_are_drawn_in_order_and_their_seconds_recorded_privately(tmp_path):
  starts = []
  figures = [experiment.PrivateFigure("gap_plot", tmp_path / "gap.png", slow_figure(starts)),
             experiment.PrivateFigure("privacy_plot", tmp_path / "p" / "privacy.png",
                                      slow_figure(starts))]
  (tmp_path / "p").mkdir()
  seconds = experiment.draw_private_figures(figures)
  assert set(seconds) == {"gap_plot", "privacy_plot"} and min(seconds.values()) >= DRAW
  assert starts[1] >= starts[0] + DRAW
  for figure in figures:
    record = experiment.figure_seconds_file(figure)
    assert record == figure.path.parent / f"{figure.name}_seconds.json"
    assert json.loads(record.read_text()) == {
        "figure": figure.path.name, "private": {f"{figure.name}_seconds": seconds[figure.name]}}
    assert record.stat().st_mode & 0o077 == 0  # owner-only
    assert record.stat().st_mtime >= figure.path.stat().st_mtime  # written after it
  # The record leaves what a run discloses as it is: a publishable run's report stays so.
  assert not experiment.private_as_a_whole(tmp_path)
  with pytest.raises(ValueError, match="figures must hold PrivateFigure"):
    experiment.draw_private_figures([tmp_path / "gap.png"])


def test_a_runs_results_json_is_named_before_a_figures_seconds(tmp_path):
  for name in ("results.json", "gap_plot_seconds.json", "votes_fingerprint.json"):
    experiment.write_text(tmp_path / name, "{}\n")
  jsons, _ = experiment.output_files(tmp_path, time.time() - 10)
  assert [p.name for p in jsons] == ["results.json", "gap_plot_seconds.json",
                                     "votes_fingerprint.json"]


def test_the_student_draws_privacy_png_after_its_results(tmp_path, monkeypatch):
  starts = []
  # The aggregate stage hands its privacy.png over, to be drawn in DRAW seconds.
  c = stub_student(monkeypatch, figure=experiment.PrivateFigure(
      "privacy_plot", tmp_path / "labels" / "privacy.png", slow_figure(starts)))
  (tmp_path / "labels").mkdir()
  start = time.perf_counter()
  r = student_stage.run(c, str(tmp_path))
  outside = time.perf_counter() - start
  assert len(starts) == 1
  written_before(tmp_path, starts[0], ("privacy.png", "privacy_plot_seconds.json"))
  assert r["labels_seconds"] < DRAW and r["wall_seconds"] <= outside - DRAW
  assert "privacy_plot_seconds" not in r["private"]
  assert recorded(tmp_path / "labels", "privacy_plot") >= DRAW
  assert abs(sum(r["phase_seconds"].values()) - r["wall_seconds"]) < 0.1
  # A caller that writes files after the stage (the main job) receives it instead.
  figures = []
  student_stage.run(c, str(tmp_path / "again"), figures=figures)
  assert len(starts) == 1 and [f.name for f in figures] == ["privacy_plot"]
  with pytest.raises(ValueError, match="figures must be None or a list"):
    student_stage.run(c, str(tmp_path / "refused"), figures=())


@pytest.mark.slow  # compiles the accounting: tens of seconds on the 2-core CPU
def test_the_aggregate_stage_draws_privacy_png_after_its_files(tmp_path, monkeypatch):
  r = np.random.default_rng(0)
  votes = np.stack([r.multinomial(20, p) for p in r.dirichlet(np.ones(3), 12)])
  teachers = tmp_path / "teachers"
  votes_lib.save_votes(teachers / "votes.npz", votes.astype(np.int32),
                       votes.argmax(1).astype(np.int32), num_pool=12, dataset="synthetic")
  c = load_script(REPO / "configs" / "aggregate_mnist.py").get_config("cpu")
  c.votes_dir, c.mechanism, c.sigma, c.num_queries = str(teachers), "gnmax", 4.0, 8
  c.epsilon_max, c.noise_seed, c.chunk_size = 1000.0, 0, 8
  starts = []
  monkeypatch.setattr(aggregate.reporting, "plot_privacy", slow_figure(starts))
  work = tmp_path / "agg"
  res = aggregate.run(c, work)
  assert len(starts) == 1
  # labels.npz, results.json and the ledger (a research seed's, in the workdir) came first.
  written_before(work, starts[0], ("privacy.png", "privacy_plot_seconds.json"))
  assert recorded(work, "privacy_plot") >= DRAW
  assert "privacy_plot_seconds" not in res["private"]
  assert "privacy_plot_seconds" not in (work / "results.json").read_text()
  # A rerun without the figure leaves no earlier one, nor its seconds.
  c.privacy_plot = False
  aggregate.run(c, work)
  assert not (work / "privacy.png").exists()
  assert not (work / "privacy_plot_seconds.json").exists()


@pytest.mark.slow  # trains two teachers: compiles for several seconds on the 2-core CPU
def test_the_teachers_draw_gap_png_after_their_files(tmp_path, monkeypatch):
  c = load_script(REPO / "configs" / "mnist_250.py").get_config("cpu")
  c.update({"dataset": "digits", "num_teachers": 2, "num_steps": 1, "checkpoint_every": 1,
            "gap_plot": True})
  c.model.kwargs.hidden = (8,)
  starts = []
  monkeypatch.setattr(teachers_stage.reporting, "plot_gap", slow_figure(starts))
  start = time.perf_counter()
  r = teachers_stage.run(c, str(tmp_path))
  outside = time.perf_counter() - start
  assert len(starts) == 1
  # votes.npz, its record, results.json and the checkpoints' marks came before it.
  written_before(tmp_path, starts[0], ("gap.png", "gap_plot_seconds.json"))
  assert r["wall_seconds"] <= outside - DRAW
  assert "gap_plot_seconds" not in r["private"]
  assert recorded(tmp_path, "gap_plot") >= DRAW
  assert abs(sum(r["phase_seconds"].values()) - r["wall_seconds"]) < 0.1
  # A rerun reuses the votes and draws gap.png only where it is missing (a run stopped
  # before its last act, a main job before the student's end).
  teachers_stage.run(c, str(tmp_path))
  assert len(starts) == 1
  (tmp_path / "gap.png").unlink()
  assert teachers_stage.run(c, str(tmp_path))["reused_votes"]
  assert len(starts) == 2 and (tmp_path / "gap.png").exists()


def test_the_main_job_draws_the_private_figures_after_the_students_end(
    tmp_path, monkeypatch):
  from pate_jax.stages import main_job  # pylint: disable=g-import-not-at-top
  c = load_script(REPO / "configs" / "pate_mnist.py").get_config("cpu")
  c.teachers.dataset, c.attack.enabled = "digits", False
  c.compile_accounting_ahead = c.compile_student_ahead = False
  starts = []

  def teachers(config, workdir, restart_flag, prefix, figures):  # hands gap.png over
    experiment.write_results(workdir, {"num_teachers": 5}, config=None, seed=0)
    figures.append(experiment.PrivateFigure("gap_plot", pathlib.Path(workdir) / "gap.png",
                                            slow_figure(starts)))
    return {"dataset": "digits", "data_source": "sklearn", "fallback_data": False,
            "num_teachers": 5, "examples_per_teacher": 10, "wall_seconds": 0.0,
            "phase_seconds": {"write": 0.0},
            "private": {"teacher_test_accuracy": 0.9, "plurality_accuracy_eval": 0.9,
                        "plurality_accuracy_test": 0.9, "mean_normalized_gap": 0.5}}

  def student(config, workdir, restart_flag, on_labels, prefix, aggregate_prefix,
              figures):  # and privacy.png
    experiment.write_results(tmp_path / "aggregate", {
        "noise_source": {"public": False}, "epsilon": {}, "epsilon_at_grid_edge": [],
        "ledger": {}, "delta": 1e-5, "private": {"epsilon": {}}}, config=None, seed=0)
    figures.append(experiment.PrivateFigure(
        "privacy_plot", tmp_path / "aggregate" / "privacy.png", slow_figure(starts)))
    experiment.write_results(workdir, {"eval_accuracy": 0.9}, config=None, seed=0)
    return {"student": "pate_g", "eval_accuracy": 0.9, "num_eval": 4, "num_labels": 6,
            "label_accuracy": 1.0, "epochs": 1.0, "labels_seconds": 0.0,
            "train_seconds": 0.0, "wall_seconds": 0.0, "phase_seconds": {}}

  monkeypatch.setattr(main_job.teachers_stage, "run", teachers)
  monkeypatch.setattr(main_job.student_stage, "run", student)
  monkeypatch.setattr(main_job, "write_report",
                      lambda s, root: experiment.write_text(root / "report.md", "report\n"))
  start = time.perf_counter()
  s = main_job.run(c, str(tmp_path))
  outside = time.perf_counter() - start
  assert len(starts) == 2
  # The stages' files came before either figure; the summary and the report record the
  # student's end, before them too.
  for stage in ("teachers", "aggregate", "student"):
    written_before(tmp_path / stage, starts[0], ("gap.png", "gap_plot_seconds.json",
                                                 "privacy.png", "privacy_plot_seconds.json"))
  for name in ("results.json", "report.md"):
    assert (tmp_path / name).stat().st_mtime < starts[0]
  assert s["stage_seconds"]["teachers"] < DRAW
  assert s["stage_seconds"]["labels_and_student"] < DRAW
  assert s["wall_seconds"] <= outside - 2 * DRAW
  seconds = s["private"]["seconds"]
  assert seconds["gap_plot"] >= DRAW and seconds["privacy_plot"] >= DRAW
  assert seconds["gap_plot"] == recorded(tmp_path / "teachers", "gap_plot")


def test_a_figures_directory_keeps_its_times_when_the_drawing_fails(tmp_path):
  def fails(path):
    pathlib.Path(path).write_bytes(b"half a png")
    raise RuntimeError("no room left")

  os.utime(tmp_path, (1_000_000_000, 1_000_000_000))
  with pytest.raises(RuntimeError, match="no room left"):
    experiment.draw_private_figures([experiment.PrivateFigure("gap_plot",
                                                              tmp_path / "gap.png", fails)])
  assert tmp_path.stat().st_mtime == 1_000_000_000
  # A figure in a directory the drawing makes: the nearest one that exists keeps them.
  made = []
  experiment.draw_private_figures([experiment.PrivateFigure(
      "gap_plot", tmp_path / "new" / "gap.png",
      lambda p: made.append(p.parent.mkdir() or p.write_bytes(b"png")))])
  assert made and tmp_path.stat().st_mtime == 1_000_000_000
