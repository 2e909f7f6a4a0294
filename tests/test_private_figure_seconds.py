"""The private figures (the teachers' gap.png, the aggregate stage's privacy.png) are drawn
from the votes, and drawing them and compressing their PNGs take a time that follows the
votes: their seconds are private, out of the publishable phases, stage seconds and walls."""

import json
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


def test_a_phase_clock_leaves_excluded_seconds_out_of_the_phase_and_the_wall():
  clock = experiment.PhaseClock()
  time.sleep(0.3)
  clock.exclude(0.25)
  clock.mark("a")
  elapsed = clock.elapsed()
  total = time.perf_counter() - clock.start
  assert clock.seconds["a"] <= total - 0.25 and elapsed <= total - 0.25
  assert abs(clock.seconds["a"] - elapsed) < 0.01
  with pytest.raises(ValueError, match="seconds must be in"):
    clock.exclude(10.0)  # more than the phase has taken
  with pytest.raises(ValueError, match="seconds must be in"):
    clock.exclude(-1.0)


def test_the_student_leaves_the_privacy_plot_out_of_its_labels_seconds(tmp_path,
                                                                        monkeypatch):
  # The aggregate stage drew privacy.png in DRAW seconds.
  c = stub_student(monkeypatch, {"privacy_plot_seconds": DRAW}, seconds=DRAW)
  start = time.perf_counter()
  r = student_stage.run(c, str(tmp_path))
  outside = time.perf_counter() - start
  assert r["labels_seconds"] < DRAW and r["phase_seconds"]["labels"] < DRAW
  assert r["wall_seconds"] <= outside - DRAW
  assert r["private"]["privacy_plot_seconds"] == DRAW
  assert abs(sum(r["phase_seconds"].values()) - r["wall_seconds"]) < 0.1


@pytest.mark.slow  # compiles the accounting: tens of seconds on the 2-core CPU
def test_the_aggregate_stage_reports_its_privacy_plot_seconds_privately(tmp_path,
                                                                        monkeypatch):
  r = np.random.default_rng(0)
  votes = np.stack([r.multinomial(20, p) for p in r.dirichlet(np.ones(3), 12)])
  teachers = tmp_path / "teachers"
  votes_lib.save_votes(teachers / "votes.npz", votes.astype(np.int32),
                       votes.argmax(1).astype(np.int32), num_pool=12, dataset="synthetic")
  c = load_script(REPO / "configs" / "aggregate_mnist.py").get_config("cpu")
  c.votes_dir, c.mechanism, c.sigma, c.num_queries = str(teachers), "gnmax", 4.0, 8
  c.epsilon_max, c.noise_seed, c.chunk_size = 1000.0, 0, 8

  def plot_privacy(curve, title, path):
    time.sleep(DRAW)
    pathlib.Path(path).write_bytes(b"png")

  monkeypatch.setattr(aggregate.reporting, "plot_privacy", plot_privacy)
  res = aggregate.run(c, tmp_path / "agg")
  assert res["private"]["privacy_plot_seconds"] >= DRAW
  assert "privacy_plot_seconds" not in {k for k in res if k != "private"}


@pytest.mark.slow  # trains two teachers: compiles for several seconds on the 2-core CPU
def test_the_teachers_leave_the_gap_plot_out_of_their_phases_and_wall(tmp_path, monkeypatch):
  c = load_script(REPO / "configs" / "mnist_250.py").get_config("cpu")
  c.update({"dataset": "digits", "num_teachers": 2, "num_steps": 1, "checkpoint_every": 1,
            "gap_plot": True})
  c.model.kwargs.hidden = (8,)
  drawn = []

  def plot_gap(gap, num_teachers, path):
    time.sleep(DRAW)
    drawn.append(path)

  monkeypatch.setattr(teachers_stage.reporting, "plot_gap", plot_gap)
  start = time.perf_counter()
  r = teachers_stage.run(c, str(tmp_path))
  outside = time.perf_counter() - start
  assert len(drawn) == 1
  # Out of the wall, and so out of every phase, since they add up to it. (Not "the write
  # phase < DRAW": it syncs votes.npz and its directory to disk, which took 0.58 s on a
  # busy machine.)
  assert r["wall_seconds"] <= outside - DRAW
  assert r["private"]["gap_plot_seconds"] >= DRAW
  assert abs(sum(r["phase_seconds"].values()) - r["wall_seconds"]) < 0.1


def test_the_main_job_leaves_the_private_figures_out_of_its_publishable_seconds(
    tmp_path, monkeypatch):
  from pate_jax.stages import main_job  # pylint: disable=g-import-not-at-top
  c = load_script(REPO / "configs" / "pate_mnist.py").get_config("cpu")
  c.teachers.dataset, c.attack.enabled = "digits", False
  c.compile_accounting_ahead = c.compile_student_ahead = False

  def teachers(config, workdir, restart_flag, prefix):  # drew gap.png in DRAW seconds
    time.sleep(DRAW)
    return {"dataset": "digits", "data_source": "sklearn", "fallback_data": False,
            "num_teachers": 5, "examples_per_teacher": 10, "wall_seconds": 0.0,
            "phase_seconds": {"write": 0.0},
            "private": {"teacher_test_accuracy": 0.9, "plurality_accuracy_eval": 0.9,
                        "plurality_accuracy_test": 0.9, "mean_normalized_gap": 0.5,
                        "gap_plot_seconds": DRAW}}

  # its labels drew privacy.png
  def student(config, workdir, restart_flag, on_labels, prefix, aggregate_prefix):
    time.sleep(DRAW)
    experiment.write_results(tmp_path / "aggregate", {
        "noise_source": {"public": False}, "epsilon": {}, "epsilon_at_grid_edge": [],
        "ledger": {}, "delta": 1e-5, "private": {"epsilon": {}}}, config=None, seed=0)
    return {"student": "pate_g", "eval_accuracy": 0.9, "num_eval": 4, "num_labels": 6,
            "label_accuracy": 1.0, "epochs": 1.0, "labels_seconds": 0.0,
            "train_seconds": 0.0, "wall_seconds": 0.0, "phase_seconds": {},
            "private": {"privacy_plot_seconds": DRAW}}

  monkeypatch.setattr(main_job.teachers_stage, "run", teachers)
  monkeypatch.setattr(main_job.student_stage, "run", student)
  monkeypatch.setattr(main_job, "write_report",
                      lambda s, root: experiment.write_text(root / "report.md", "report\n"))
  start = time.perf_counter()
  s = main_job.run(c, str(tmp_path))
  outside = time.perf_counter() - start
  assert s["stage_seconds"]["teachers"] < DRAW
  assert s["stage_seconds"]["labels_and_student"] < DRAW
  assert s["wall_seconds"] <= outside - 2 * DRAW
  assert s["private"]["seconds"]["gap_plot"] == s["private"]["seconds"]["privacy_plot"] == DRAW
