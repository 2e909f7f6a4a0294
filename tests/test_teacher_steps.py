"""experiments/teacher_steps.py: the teachers it checks are the teachers stage's own."""

from __future__ import annotations

import json

import ml_collections
import numpy as np
import pytest

from pate_jax import experiment
from pate_jax.stages import teacher_steps
from pate_jax.stages import teachers as teachers_stage

from tests._scripts import REPO


def _config(data_dir) -> ml_collections.ConfigDict:
  c = experiment.load_script(REPO / "configs" / "teacher_steps.py").get_config("cpu")
  t = c.teachers
  t.data_dir, t.num_teachers, t.train_subset = str(data_dir), 4, 400
  t.model = ml_collections.ConfigDict({"name": "mlp", "kwargs": {"hidden": (16,)}})
  t.batch_size, t.num_steps, t.checkpoint_every, t.strategy = 16, 6, 3, "loop"
  t.gap_plot = False
  c.eval_steps, c.num_checked, c.num_test = (3, 6), 2, 10_000
  return c


@pytest.mark.slow
def test_the_last_step_gives_the_teachers_stage_accuracies(data_dir, tmp_path):
  c = _config(data_dir)
  r = teacher_steps.run(c, str(tmp_path / "steps"))
  teachers_stage.run(c.teachers, str(tmp_path / "teachers"))
  votes = np.load(tmp_path / "teachers" / "votes.npz")
  want = (votes["predictions"][:2] == votes["labels"][None]).mean(axis=1)  # every test row
  got = np.asarray(r["private"]["accuracy"])
  assert got.shape == (2, 2)
  np.testing.assert_allclose(got[:, -1], want, atol=2e-4)  # the same teachers and steps
  record = json.loads((tmp_path / "steps" / "results.json").read_text())["results"]
  assert set(record["private"]) >= {"note", "mean_accuracy", "accuracy"}
  assert record["eval_steps"] == [3, 6] and record["of_teachers"] == 4


@pytest.mark.parametrize("field,value,match", [
    ("eval_steps", (5, 3), "config.eval_steps"), ("eval_steps", (0,), "config.eval_steps"),
    ("num_checked", 5, "config.num_checked"), ("num_test", 0, "config.num_test")])
def test_bad_settings_are_refused_by_name(data_dir, tmp_path, field, value, match):
  c = _config(data_dir)
  c[field] = value
  with pytest.raises(ValueError, match=match):
    teacher_steps.run(c, str(tmp_path / "w"))


@pytest.mark.parametrize("field, value, match", [
    ("num_teachers", 0, r"^config\.teachers\.num_teachers must be an integer >= 1; got 0$"),
    ("learning_rate", -1.0, r"^config\.teachers\.learning_rate must be > 0"),
    ("seed", "x", r"^config\.teachers\.seed must be an integer"),
])
def test_the_teachers_settings_are_named_as_nested_fields(data_dir, tmp_path, field, value,
                                                          match):
  """The teachers' fields were named config.num_teachers, as in train_teachers' config."""
  c = _config(data_dir)
  with c.teachers.ignore_type():
    c.teachers[field] = value
  with pytest.raises(ValueError, match=match):
    teacher_steps.run(c, str(tmp_path / "w"))
  assert not (tmp_path / "w").exists()
  with pytest.raises(ValueError, match=match):
    teacher_steps.plan(c)


def test_a_teachers_setting_the_data_refuses_is_named_as_a_nested_field(data_dir, tmp_path):
  """A train_subset larger than the data is refused once it is loaded: it was named
  config.train_subset."""
  c = _config(data_dir)
  c.teachers.train_subset = 10**7
  with pytest.raises(ValueError, match=r"^config\.teachers\.train_subset must be <= the "):
    teacher_steps.run(c, str(tmp_path / "w"))


@pytest.mark.slow
def test_a_killed_run_resumes_with_the_teachers_it_measured(data_dir, tmp_path, monkeypatch,
                                                             capsys):
  """Each teacher's accuracies are kept as it finishes: a rerun trains only the teachers not
  measured yet and ends where one uninterrupted run does; other settings are refused."""
  c = _config(data_dir)
  whole = teacher_steps.run(c, str(tmp_path / "whole"))
  trained = []
  measure = teacher_steps.measure_teacher

  def counting(*args):
    trained.append(args[2])
    if len(trained) == 2:
      raise KeyboardInterrupt  # killed during the second teacher
    return measure(*args)

  monkeypatch.setattr(teacher_steps, "measure_teacher", counting)
  with pytest.raises(KeyboardInterrupt):
    teacher_steps.run(c, str(tmp_path / "w"))
  progress = tmp_path / "w" / teacher_steps.PROGRESS_FILE
  assert progress.stat().st_mode & 0o077 == 0  # private: the accuracies
  counted = []
  monkeypatch.setattr(teacher_steps, "measure_teacher",
                      lambda *a: counted.append(a[2]) or measure(*a))
  r = teacher_steps.run(c, str(tmp_path / "w"))
  assert len(counted) == 1 and r["resumed_teachers"] == 1
  np.testing.assert_array_equal(r["private"]["accuracy"], whole["private"]["accuracy"])
  assert "teacher 1/2 from progress.json" in capsys.readouterr().out
  c.teachers.strategy, c.teachers.checkpoint_every = "vmap", 2  # how it trains: goes on
  assert teacher_steps.run(c, str(tmp_path / "w"))["resumed_teachers"] == 2
  c.num_test = 500  # other settings: refused, naming them
  with pytest.raises(ValueError, match=r"num_test: 10000 \(progress.json\) -> 500 \(now\)"):
    teacher_steps.run(c, str(tmp_path / "w"))
  progress.write_text("{}")  # not a progress record: refused, saying how to start over
  with pytest.raises(ValueError, match="not a progress record.*remove it"):
    teacher_steps.run(c, str(tmp_path / "w"))
