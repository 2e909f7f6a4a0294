"""The teachers' and the smooth-sensitivity benchmarks (pate_jax/stages/bench/teachers.py,
smooth_sensitivity.py) refuse a bad setting naming its field, before they build or draw
anything and in their dry runs: a count of 0, a negative size or width, a seed of 'x' once
failed deep inside (a ZeroDivisionError, a shape error of JAX, numpy's SeedSequence)."""

from __future__ import annotations

import pytest

from pate_jax import models
from pate_jax.stages.bench import smooth_sensitivity as bench_ss
from pate_jax.stages.bench import teachers as bench_teachers

import _scripts  # tests/_scripts.py  # pylint: disable=g-bad-import-order


def _teachers_config(**overrides):
  c = _scripts.config("bench_teachers")
  c.update({"num_teachers": 4, "examples_per_teacher": 8, "steps_per_call": 1, "repeats": 1,
            "strategies": ("vmap",), "chunk_size": 2})
  c.model.kwargs.hidden = (8,)
  for field, value in overrides.items():  # "model.kwargs.hidden": the nested field
    *path, last = field.split(".")
    target = c
    for p in path:
      target = target[p]
    with target.ignore_type():
      target[last] = value
  return c


@pytest.mark.parametrize("field, value, match", [
    ("num_teachers", 0, r"config\.num_teachers must be an integer >= 1; got 0"),
    ("num_teachers", -1, r"config\.num_teachers must be an integer >= 1; got -1"),
    ("examples_per_teacher", 0, r"config\.examples_per_teacher must be an integer >= 1"),
    ("examples_per_teacher", -1, r"config\.examples_per_teacher must be an integer >= 1"),
    ("image_shape", (-1,), r"config\.image_shape must hold integers >= 1; found -1"),
    ("image_shape", (28, 0, 1), r"config\.image_shape must hold integers >= 1; found 0"),
    ("image_shape", "x", r"config\.image_shape must be a non-empty tuple"),
    ("image_shape", (784,), r"config\.max_shift must be smaller than the images"),
    ("model.kwargs.hidden", 0, r"config\.model\.kwargs\.hidden must be a tuple"),
    ("model.kwargs.hidden", (0,), r"config\.model\.kwargs\.hidden must hold integers >= 1"),
    ("model.kwargs.hidden", (16, -1), r"config\.model\.kwargs\.hidden must hold integers"),
    ("model.kwargs.hidden", "x", r"config\.model\.kwargs\.hidden must be a tuple"),
    ("model.kwargs.hidden", (1.5,), r"config\.model\.kwargs\.hidden must hold integers"),
    ("model.kwargs.hiden", (8,), r"config\.model\.kwargs\.hiden: model 'mlp' has no such"),
    ("model.name", "mlpp", r"config\.model\.name must be one of"),
    ("seed", "x", r"config\.seed must be an integer"),
    ("batch_size", -1, r"config\.batch_size must be an integer >= 0"),
    ("strategies", "vmap", r"config\.strategies must be a non-empty tuple"),
    ("strategies", ("vmap", "scan"), r"config\.strategies must be one of"),
    ("profile_strategies", ("loop",), r"config\.profile_strategies must be a tuple of"),
    ("compute_dtype", "float64", r"config\.compute_dtype must be one of"),
    ("peak_tflops", "x", r"config\.peak_tflops must be a real number"),
    ("repeats", 0, r"config\.repeats must be an integer >= 1"),
])
def test_bench_teachers_refuses_bad_settings_before_work(tmp_path, field, value, match):
  _scripts.assert_refused_before_work(bench_teachers.run, bench_teachers.plan,
                                      _teachers_config(**{field: value}), tmp_path / "w", match)


def test_bench_teachers_cnn_choices_are_checked_naming_the_field():
  c = _teachers_config(**{"model.name": "mnist_cnn", "model.kwargs.hidden": (8,),
                          "model.kwargs.pool": "max"})
  with pytest.raises(ValueError, match=r"config\.model\.kwargs\.pool must be one of"):
    bench_teachers.plan(c)


def test_model_kwargs_are_checked_by_get_model_too():
  with pytest.raises(ValueError, match=r"kwargs\.hidden must hold integers >= 1; found 0"):
    models.get_model("mlp", 10, hidden=(8, 0))
  assert models.get_model("mlp", 10, hidden=[8]).hidden == (8,)  # a list becomes a tuple


def _ss_config(**overrides):
  c = _scripts.config("bench_smooth_sensitivity", "small")
  c.update({"num_queries": 10, "loop_queries": 2, "repeats": 1, "num_teachers": 20})
  with c.ignore_type():
    c.update(overrides)
  return c


@pytest.mark.parametrize("field, value, match", [
    ("seed", "x", r"config\.seed must be an integer in \[0, 2\*\*32\), got 'x'"),
    ("seed", 1.5, r"config\.seed must be an integer in \[0, 2\*\*32\), got 1\.5"),
    ("seed", -1, r"config\.seed must be an integer"),
    ("num_queries", 0, r"config\.num_queries must be an integer >= 1"),
    ("num_teachers", 0, r"config\.num_teachers must be an integer >= 1"),
    ("num_classes", 1, r"config\.num_classes must be an integer >= 2"),
    ("loop_queries", 0, r"config\.loop_queries must be an integer >= 1"),
    ("repeats", 0, r"config\.repeats must be an integer >= 1"),
    ("order", 1.0, r"config\.order must be a finite real number > 1"),
    ("order", "x", r"config\.order must be a real number"),
    ("threshold", -1.0, r"config\.threshold must be >= 0"),
    ("sigma", 0.0, r"config\.sigma must be > 0"),
    ("sigma_threshold", 0.0, r"config\.sigma_threshold must be > 0"),
    ("delta", 2.0, r"config\.delta must lie in \(0, 1\)"),
])
def test_bench_smooth_sensitivity_refuses_bad_settings_before_work(tmp_path, field, value,
                                                                     match):
  _scripts.assert_refused_before_work(bench_ss.run, bench_ss.plan, _ss_config(**{field: value}),
                                      tmp_path / "w", match)


@pytest.mark.slow  # about 8 s on the 2-core CPU: the release compiles
@pytest.mark.parametrize("field, value", [("threshold", 0.0), ("order", 1.01)])
def test_bench_smooth_sensitivity_compares_a_release_of_zero_sensitivity(tmp_path, field,
                                                                          value):
  # A release whose smooth sensitivity and beta are 0 (every query answered, or an order
  # near 1) failed comparing with the loop baseline: a ZeroDivisionError after the timing.
  r = bench_ss.run(_ss_config(**{field: value}), str(tmp_path))
  assert r["release"]["smooth_sensitivity"] == 0.0
  assert r["loop_vs_jax_relative_difference_on_subset"]["smooth_sensitivity"] == 0.0
  assert r["loop_vs_jax_relative_difference_on_subset"]["sigma_ss"] == 0.0  # inf, both
  assert r["loop_vs_jax_relative_difference_on_subset"]["epsilon"] < 1e-6


def test_relative_difference_of_zeros_and_infinities():
  assert bench_ss.relative_difference(0.0, 0.0) == 0.0
  assert bench_ss.relative_difference(float("inf"), float("inf")) == 0.0
  assert bench_ss.relative_difference(0.5, 0.0) == 0.5
  assert bench_ss.relative_difference(1.1, 1.0) == pytest.approx(0.1)
