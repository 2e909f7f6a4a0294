"""The student benchmark (pate_jax/stages/bench/student.py): it times the very program the
student's fit runs, writes what it measured, and refuses bad settings naming them."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from pate_jax import experiment, students
from pate_jax.stages.bench import student as bench_student

import _scripts  # tests/_scripts.py  # pylint: disable=g-bad-import-order

TINY_GAN = {"generator_hidden": (8,), "discriminator_hidden": (16, 8), "noise_dim": 4,
            "translate": 1}


def _config(**overrides):
  c = _scripts.config("bench_student", "cpu")
  c.student_kwargs.update(TINY_GAN)
  c.update({"image_shape": (6, 6, 1), "pool_size": 40, "num_labelled": 10, "num_eval": 10,
            "batch_size": 5, "steps_per_call": 3, "repeats": 2, "num_steps": 30, "profile_steps": 2})
  c.update(overrides)
  return c


@pytest.mark.slow
def test_the_timed_segment_is_the_fits_program():
  # The benchmark's segment, run from its initial state, gives the state fit trains: the
  # same program, batches and randomness (bit for bit on one backend).
  c = _config()
  data = bench_student._data(c)  # pylint: disable=protected-access
  st = bench_student._student(c, "float32")  # pylint: disable=protected-access
  key = jax.random.key(4)
  state, segment = students.training_segment(st, data, key, num_steps=3, batch_size=5)
  state, _ = segment(state, 0)
  state, _ = segment(state, 3)
  fitted = students.fit(st, data, key, num_steps=6, batch_size=5, segment_steps=3, log=None)
  for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(fitted.state)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.slow
def test_the_benchmark_records_each_precision_and_profiles_the_asked_one(tmp_path, capsys):
  c = _config(precisions=("float32", "default"), profile_precisions=("default",),
              num_seeds=())
  r = bench_student.run(c, str(tmp_path))
  record = json.loads((tmp_path / "results.json").read_text())
  assert record["disclosure"] == experiment.NO_PRIVATE_DATA
  assert record["results"]["precisions"].keys() == {"float32", "default"}
  for name, p in r["precisions"].items():
    assert len(p["seconds_per_call"]) == 2 and p["first_call_seconds"] > 0
    assert p["ms_per_step"] == pytest.approx(1e3 * min(p["seconds_per_call"]) / 3)
    assert p["achieved_tflops"] == pytest.approx(
        r["flops_per_step"] * 3 / min(p["seconds_per_call"]) / 1e12)
    assert p["seconds_for_num_steps"] == pytest.approx(p["ms_per_step"] * 30 / 1e3)
    assert ("profile" in p) == (name == "default")
  profile = r["precisions"]["default"]["profile"]
  assert profile["timelines"] and profile["wall_ms"] > 0
  assert r["profile_steps"] == 2  # its own short segment, not a timed call's 3 steps
  events = r["precisions"]["default"]["device_events_per_step"]
  if profile["source"] == "device":
    assert events > 0
  else:  # a CPU trace has no device timelines: no device events per step to count
    assert events is None
  out = capsys.readouterr().out
  assert "ms/step" in out and "30 steps:" in out
  assert not list(tmp_path.glob("profile_*"))  # the trace is summarised, then deleted
  assert r["seeds"] == {}  # none asked for here


@pytest.mark.slow
def test_the_benchmark_times_students_side_by_side_in_fit_seeds_program(tmp_path, capsys):
  c = _config()  # the :cpu config's 2 students side by side
  r = bench_student.run(c, str(tmp_path))
  two = r["seeds"]["2"]
  assert two["ms_per_step"] == pytest.approx(1e3 * min(two["seconds_per_call"]) / 3)
  assert two["ms_per_student_step"] == pytest.approx(two["ms_per_step"] / 2)
  assert two["speedup_over_one_at_a_time"] == pytest.approx(
      2 * r["precisions"]["float32"]["ms_per_step"] / two["ms_per_step"])
  assert "2 students side by side (float32)" in capsys.readouterr().out
  # The timed program is fit_seeds': the same states, bit for bit.
  data = bench_student._data(c)  # pylint: disable=protected-access
  st = bench_student._student(c, "float32")  # pylint: disable=protected-access
  key = jax.random.key(4)
  state, segment = students.training_segment(st, data, key, num_steps=3, batch_size=5,
                                             num_seeds=2)
  state, _ = segment(state, 0)
  keys = jax.numpy.stack([jax.random.fold_in(key, i) for i in range(2)])
  fitted = students.fit_seeds(st, data, keys, num_steps=3, batch_size=5, segment_steps=3,
                              log=None)
  for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(fitted.state)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_device_events_are_counted_per_step_from_a_device_trace():
  count = bench_student._device_events_per_step  # pylint: disable=protected-access
  profile = {"source": "device", "timelines": {"/device:GPU:0 Stream #1": {"events": 900},
                                                "/device:GPU:0 Stream #2": {"events": 300}}}
  assert count(profile, 3) == 400
  assert count({"source": "host", "timelines": {"python3": {"events": 5}}}, 3) is None


@pytest.mark.parametrize("overrides, match", [
    ({"steps_per_call": 0}, "config.steps_per_call"),
    ({"repeats": -1}, "config.repeats"),
    ({"num_labelled": 50}, "config.num_labelled"),
    ({"precisions": ()}, "config.precisions"),
    ({"precisions": ("float64",)}, "config.precisions"),
    ({"profile_precisions": ("default",)}, "config.profile_precisions"),
    ({"profile_steps": 0}, "config.profile_steps"),
    ({"num_seeds": (0,)}, "config.num_seeds"),
])
def test_bad_settings_are_refused_naming_the_field(overrides, match):
  with pytest.raises(ValueError, match=match):
    bench_student.check_config(_config(**overrides))


def test_dry_run_plans_without_compiling():
  p = _scripts.script("bench_student").plan(_config())
  assert p["pool_bytes"] == 40 * 36 * 4 and p["state_bytes"] > 0
  assert p["calls_per_precision"] == 3 and p["precisions"] == ("float32",)


def test_the_step_flops_are_the_hand_count_of_the_tiny_gan():
  # Multiply-accumulates per row: D 36·16 + 16·8 + 8·10 = 784 (its features: after 16·8),
  # G 4·8 + 8·36 = 320. D's step (5 fakes from G, D on 15 rows, its weights' gradients on
  # 15 rows and the deltas through its 2nd and 3rd layers): 5·320 + 15·784 + 15·(784 + 208).
  # G's step (G on 5 rows, D up to its features on 10, the deltas back through them to the
  # stacked input, G's weights' gradients and the delta through its 2nd layer):
  # 5·320 + 10·(576 + 128) + 10·(128 + 576) + 5·320 + 5·288. FLOPs = 2 × MACs.
  macs = (5 * 320 + 15 * 784 + 15 * (784 + 208)
          + 5 * 320 + 10 * 704 + 10 * 704 + 5 * 320 + 5 * 288)
  assert bench_student.step_flops(_config()) == 2 * macs


@pytest.mark.parametrize("overrides, match", [
    ({"image_shape": (-1,)}, r"config\.image_shape must hold integers >= 1; found -1"),
    ({"image_shape": (6, 0, 1)}, r"config\.image_shape must hold integers >= 1; found 0"),
    ({"image_shape": 36}, r"config\.image_shape must be a non-empty tuple"),
    ({"seed": "x"}, r"config\.seed must be an integer"),
    ({"student": "gan"}, r"config\.student must be one of"),
])
def test_bad_shapes_seeds_and_students_are_refused_before_work_and_by_the_dry_run(
    tmp_path, overrides, match):
  # An image shape of (-1,) failed as a shape error of Flax, once the data were drawn.
  c = _config()
  with c.ignore_type():
    c.update(overrides)
  _scripts.assert_refused_before_work(bench_student.run, bench_student.plan, c, tmp_path / "w",
                                      match)


@pytest.mark.parametrize("kwargs, match", [
    ({"translate": "x"}, r"config\.student_kwargs\.translate must be an integer >= 0; got 'x'"),
    ({"translate": 1.5}, r"config\.student_kwargs\.translate must be an integer >= 0"),
    ({"translate": -1}, r"config\.student_kwargs\.translate must be an integer >= 0"),
    ({"noise_dim_": 4}, r"config\.student_kwargs: .*unexpected keyword argument 'noise_dim_'"),
    ({"learning_rate": "x"}, r"config\.student_kwargs: learning_rate must be a real number"),
])
def test_bad_student_arguments_are_refused_naming_the_field(tmp_path, kwargs, match):
  # translate='x' failed comparing a string with 0 (a TypeError), an unknown argument as a
  # TypeError of the student's builder.
  c = _config()
  with c.student_kwargs.ignore_type():
    c.student_kwargs.update(kwargs)
  _scripts.assert_refused_before_work(bench_student.run, bench_student.plan, c, tmp_path / "w",
                                      match)
