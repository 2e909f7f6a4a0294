"""Stages compiled ahead (the main job, while its teachers train on an accelerator): the
aggregate stage on synthetic votes, after which the stage on real votes compiles nothing,
and the rehearsal neither spends the real budget nor leaves files; the student's training
on synthetic data, after which training on real data of those shapes compiles nothing."""

from __future__ import annotations

import pathlib
import tempfile

import jax
import ml_collections
import numpy as np
import pytest

from pate_jax import experiment, students
from pate_jax import votes as votes_lib
from pate_jax.stages import aggregate
from pate_jax.stages import student as student_stage

REPO = pathlib.Path(__file__).resolve().parent.parent


def _real_votes(path: pathlib.Path, rows=60, pool=50, teachers=250, classes=10):
  r = np.random.default_rng(3)
  p = r.dirichlet(np.full(classes, 0.5), size=rows)
  votes = np.stack([r.multinomial(teachers, pi) for pi in p])
  votes_lib.save_votes(path / "votes.npz", votes, votes.argmax(1), num_pool=pool,
                       dataset="synthetic")
  return path


def test_after_compile_ahead_the_stage_compiles_nothing_and_spends_nothing(tmp_path, caplog,
                                                                          monkeypatch):
  teachers = _real_votes(tmp_path / "teachers")
  c = experiment.load_script(REPO / "configs" / "aggregate_mnist.py").get_config("cpu")
  c.votes_dir, c.mechanism, c.sigma, c.num_queries = str(teachers), "gnmax", 40.0, 20
  c.epsilon_max, c.privacy_plot, c.seed = 20.0, False, 0   # secret noise: the real budget
  scratch = tmp_path / "tmp"  # this test's temporary directories only
  scratch.mkdir()
  monkeypatch.setattr(tempfile, "tempdir", str(scratch))
  seconds = aggregate.compile_ahead(c, num_teachers=250, num_classes=10, num_rows=60,
                                    num_pool=50)
  assert seconds > 0
  # Nothing spent from the real teachers' budget, nothing left behind.
  assert sorted(p.name for p in teachers.iterdir()) == ["votes.npz"]
  assert not list(scratch.iterdir())
  with jax.log_compiles(True), caplog.at_level("DEBUG"):
    r = aggregate.run(c, tmp_path / "w")
  compiled = [m.getMessage() for m in caplog.records if "ompil" in m.getMessage()]
  assert not compiled, compiled[:5]
  assert r["num_answered"] > 0 and (teachers / "ledger.npz").exists()


# The student's training compiled ahead (the main job, while its teachers train on an
# accelerator): afterwards training on real data of the same shapes compiles nothing.

TINY_GAN = {"generator_hidden": (16,), "discriminator_hidden": (16, 8), "noise_dim": 4}


def _compiled(caplog, fn):
  caplog.clear()
  with jax.log_compiles(True), caplog.at_level("DEBUG"):
    out = fn()
  return out, [m.getMessage() for m in caplog.records if "Compiling" in m.getMessage()]


def _student_data(seed, num_labelled, pool=120, num_eval=30):
  r = np.random.default_rng(seed)
  return students.make_student_data(
      r.random((pool, 8, 8, 1), np.float32), r.permutation(pool)[:num_labelled],
      r.integers(0, 10, num_labelled), r.random((num_eval, 8, 8, 1), np.float32),
      r.integers(0, 10, num_eval), 10)


def test_after_compile_fit_training_of_those_shapes_compiles_nothing(tmp_path, caplog):
  student = students.build_student("pate_g", 10, (8, 8, 1), **TINY_GAN)
  schedule = {"num_steps": 5, "batch_size": 8, "segment_steps": 2}  # segments of 2, 2, 1
  students.compile_fit(student, _student_data(0, 20), jax.random.key(7), **schedule)
  # The real run builds its student again from the same arguments: the same programs.
  again = students.build_student("pate_g", 10, (8, 8, 1), **TINY_GAN)
  assert again is student
  fit, compiled = _compiled(caplog, lambda: students.fit(
      again, _student_data(1, 20), jax.random.key(0), checkpoint_dir=str(tmp_path / "a"),
      log=None, **schedule))
  assert not compiled, compiled[:5]
  assert len(fit.history) == 3
  # Another number of labels is another program: the check sees compilations.
  _, compiled = _compiled(caplog, lambda: students.fit(
      again, _student_data(1, 21), jax.random.key(0), checkpoint_dir=str(tmp_path / "b"),
      log=None, **{**schedule, "num_steps": 2}))
  assert any("_segment" in m for m in compiled), compiled[:5]


def test_the_student_stage_compiled_ahead_trains_without_compiling(digits_votes_dir, tmp_path,
                                                                   caplog):
  c = experiment.load_script(REPO / "configs" / "student_pate_g.py").get_config("cpu")
  c.votes_dir, c.labels, c.seed = str(digits_votes_dir), "true", 0  # no labels to pay for
  c.num_steps, c.segment_steps, c.batch_size = 5, 2, 8
  c.aggregate.num_queries = 30
  c.student.kwargs.update(TINY_GAN)
  pool, eval_x, _, num_classes = students.load_public_data(
      votes_lib.load_votes(digits_votes_dir))
  seconds = student_stage.compile_ahead(c, num_classes=num_classes, image_shape=pool.shape[1:],
                                        pool_size=len(pool), num_eval=len(eval_x))
  assert seconds > 0
  r, compiled = _compiled(caplog, lambda: student_stage.run(c, str(tmp_path)))
  assert not compiled, compiled[:5]
  assert r["num_labels"] == 30 and r["steps"] == 5
  c.active = ml_collections.ConfigDict({"round_sizes": (10, 10)})
  with pytest.raises(ValueError, match="config.active"):
    student_stage.compile_ahead(c, num_classes=num_classes, image_shape=pool.shape[1:],
                                pool_size=len(pool), num_eval=len(eval_x))
