"""The main job's hand-over (the GPU acceptance archives the teachers' directory when the
labels are paid for) takes seconds that follow the votes: they are private, out of the
student's publishable wall and phases."""

import pathlib
import time

import numpy as np

from pate_jax import students
from pate_jax.experiment import load_script
from pate_jax.stages import student as student_stage

REPO = pathlib.Path(__file__).resolve().parent.parent


def stub_student(monkeypatch, figure=None):
  """The student stage's config (the supervised CPU student, 4 steps) with its votes, data,
  model and fit stubbed out while ``monkeypatch`` holds: what is left is its clock. Its
  aggregate step hands ``figure`` over (a private figure to draw), if given."""
  c = load_script(REPO / "configs" / "student_supervised.py").get_config("cpu")
  c.votes_dir, c.num_steps, c.batch_size = "teachers", 4, 2
  n = 6
  votes = {"dataset": "digits", "num_teachers": 5, "labels": np.arange(20) % 3,
           "votes": np.ones((20, 3), np.int32)}

  def noisy_labels(config, out, figures, prefix):  # the aggregate stage
    if figure is not None:
      figures.append(figure)
    return {}, {"num_queries": n, "noise_source": {"public": False},
                "private": {"epsilon": {"x": {"epsilon": 1.0}}}}

  monkeypatch.setattr(student_stage.votes_lib, "load_votes", lambda d: votes)
  monkeypatch.setattr(students, "load_public_data", lambda v, d: (
      np.zeros((20, 2), np.float32), np.zeros((4, 2), np.float32), np.zeros(4, int), 3))
  monkeypatch.setattr(students, "build_student", lambda *a, **k: None)
  monkeypatch.setattr(students, "make_student_data", lambda *a: None)
  monkeypatch.setattr(students, "answered_labels", lambda f: (np.arange(n), np.zeros(n, int)))
  monkeypatch.setattr(student_stage, "noisy_labels", noisy_labels)
  fit = students.FitResult(None, 0.5, [], 0, 0.0)
  monkeypatch.setattr(student_stage, "_fit_checked", lambda *a: (fit, []))
  return c


def test_the_hand_over_seconds_are_private_in_the_student_results(tmp_path, monkeypatch):
  c = stub_student(monkeypatch)
  hand_over = 0.4  # compressing votes.npz: slower the less the teachers agree
  start = time.perf_counter()
  r = student_stage.run(c, str(tmp_path), on_labels=lambda: time.sleep(hand_over))
  outside = time.perf_counter() - start
  assert r["private"]["on_labels_seconds"] >= hand_over
  assert "on_labels" not in r["phase_seconds"]
  # The hand-over's seconds taken out of the wall (whatever the rest took: a loaded host).
  assert r["wall_seconds"] <= outside - hand_over
  assert abs(sum(r["phase_seconds"].values()) - r["wall_seconds"]) < 0.1


def test_a_phase_set_aside_is_neither_recorded_nor_in_the_elapsed_time():
  from pate_jax.experiment import PhaseClock  # pylint: disable=g-import-not-at-top
  clock = PhaseClock()
  time.sleep(0.05)
  clock.mark("a")
  time.sleep(0.2)
  aside = clock.set_aside()
  time.sleep(0.05)
  clock.mark("b")
  elapsed = clock.elapsed()
  total = time.perf_counter() - clock.start
  assert aside >= 0.2 and set(clock.seconds) == {"a", "b"}
  assert elapsed <= total - aside and abs(sum(clock.seconds.values()) - elapsed) < 0.01
