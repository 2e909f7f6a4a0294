"""The student benchmark (``experiments/bench_student.py``): milliseconds per training step of
a student -- by default the main job's, PATE-G with its real images shifted by up to 2 pixels
(``configs/pate_mnist.py``) -- at each matrix-product precision of ``config.precisions``, on
random data of MNIST's shapes (a 9,000-image pool, 100 labelled rows, minibatches of 100).

For each precision: one warm-up call of ``steps_per_call`` steps (it compiles), then
``repeats`` timed calls of the compiled segment :func:`pate_jax.students.fit` runs
(:func:`pate_jax.students.training_segment`: the same program, batches and randomness),
and, for the precisions of ``profile_precisions``, a segment of ``profile_steps`` steps
(compiled and run once outside the profiler, then run once under it; a whole segment's
trace on an accelerator would hold hundreds of thousands of kernels, which the profiler
may drop and :func:`pate_jax.experiment.trace_summary` loads whole): ``results.json``
keeps each timeline's busiest operations and, where the trace has device timelines (a
GPU), the device events per step. A small student's step on an accelerator
is a few hundred kernels, so their count per step, not the step's FLOPs, sets its speed.
``seconds_for_num_steps`` is the training of ``num_steps`` steps (the main job's 27,000)
at the best call's speed, without the evaluations between segments; ``achieved_tflops``
reads it against the step's FLOPs counted from its jaxpr (:func:`step_flops`). Random data only:
publishable. ``plan(config)`` is ``--dry_run``.
"""

from __future__ import annotations

import pathlib
import time

import jax
import numpy as np

from pate_jax import _checks as checks
from pate_jax import experiment, flops, memory, rng, students

__all__ = ["run", "plan", "check_config", "step_flops"]


def check_config(config, prefix: str = "config.") -> None:
  """Refuses, naming the field, what the benchmark cannot run, before anything is built: a
  bad image shape failed as a shape error of Flax, a student argument as a TypeError.
  ``prefix``: how the fields are named (``config.bench_student.`` in the GPU acceptance)."""
  rng.check_seed(config.seed, f"{prefix}seed")
  checks.int_tuple(config.image_shape, f"{prefix}image_shape")
  checks.choice(config.student, f"{prefix}student", students.STUDENTS)
  kwargs = config.student_kwargs.to_dict()
  if "translate" in kwargs:
    checks.positive_int(kwargs["translate"], f"{prefix}student_kwargs.translate", minimum=0)
  for name in ("pool_size", "num_labelled", "num_eval", "batch_size", "steps_per_call",
               "repeats", "num_steps", "num_classes", "profile_steps"):
    checks.positive_int(config[name], f"{prefix}{name}")
  for s in config.get("num_seeds", ()) or ():
    checks.positive_int(s, f"{prefix}num_seeds")
  if config.num_labelled > config.pool_size:
    raise ValueError(f"{prefix}num_labelled ({config.num_labelled}) exceeds {prefix}pool_size "
                     f"({config.pool_size})")
  if not config.precisions:
    raise ValueError(f"{prefix}precisions: give at least one matmul precision")
  for p in config.precisions:
    students.checked_matmul_precision(p, f"{prefix}precisions")
  unknown = set(config.profile_precisions) - set(config.precisions)
  if unknown:
    raise ValueError(f"{prefix}profile_precisions: {sorted(unknown)} not in {prefix}precisions "
                     f"{list(config.precisions)}")
  try:  # the student's own checks of its arguments (nothing is initialised)
    _student(config, config.precisions[0])
  except (TypeError, ValueError) as e:
    raise ValueError(f"{prefix}student_kwargs: {e}") from e


def _data(config) -> students.StudentData:
  """Random images and labels of the configured shapes (the ``bench_data`` stream)."""
  key = rng.stream(rng.root_key(config.seed), "bench_data")
  shape = tuple(config.image_shape)
  pool = jax.random.uniform(jax.random.fold_in(key, 0), (config.pool_size, *shape))
  eval_x = jax.random.uniform(jax.random.fold_in(key, 1), (config.num_eval, *shape))
  labels = jax.random.randint(jax.random.fold_in(key, 2), (config.num_labelled,), 0,
                              config.num_classes)
  eval_y = jax.random.randint(jax.random.fold_in(key, 3), (config.num_eval,), 0,
                              config.num_classes)
  return students.make_student_data(np.asarray(pool), np.arange(config.num_labelled),
                                    np.asarray(labels), np.asarray(eval_x),
                                    np.asarray(eval_y), config.num_classes)


def _student(config, precision: str) -> students.Student:
  return students.build_student(config.student, config.num_classes, tuple(config.image_shape),
                                **config.student_kwargs.to_dict(), matmul_precision=precision)


def _abstract_state(config, st: students.Student):
  """The student's initial state as ``jax.ShapeDtypeStruct``s (nothing runs)."""
  sample = (min(500, config.pool_size), *config.image_shape)
  return jax.eval_shape(st.init, jax.random.key(0), jax.ShapeDtypeStruct(sample, np.float32))


def step_flops(config, state=None) -> float:
  """FLOPs of one training step of the configured student, counted from its jaxpr
  (:func:`pate_jax.flops.jaxpr_flops`: 2 × the multiply-accumulates of its matrix products;
  abstract inputs: nothing runs). ``state``: its abstract initial state, if at hand."""
  st = _student(config, config.precisions[0])
  state = _abstract_state(config, st) if state is None else state
  b = config.batch_size
  images = jax.ShapeDtypeStruct((b, *config.image_shape), np.float32)
  batch = {"x_lab": images, "y_lab": jax.ShapeDtypeStruct((b,), np.int32), "x_unl": images,
           "x_unl2": images}
  return flops.jaxpr_flops(st.step, state, jax.random.key(0), batch,
                           jax.ShapeDtypeStruct((), np.int32))


def _device_events_per_step(profile: dict, steps: int) -> float | None:
  """Device events (kernels, copies) per step of a profiled call; None for a host trace."""
  if profile.get("source") != "device":
    return None
  return sum(t["events"] for t in profile["timelines"].values()) / steps


def run(config, workdir: str, prefix: str = "config.") -> dict:
  """Times every precision of ``config.precisions``; writes results.json. ``prefix`` as
  :func:`check_config`'s."""
  check_config(config, prefix)
  data = _data(config)
  key = rng.stream(rng.root_key(config.seed), "student_train")
  n = int(config.steps_per_call)
  device = jax.devices()[0]
  results = {"student": config.student, "student_kwargs": config.student_kwargs.to_dict(),
             "pool_size": config.pool_size, "num_labelled": config.num_labelled,
             "batch_size": config.batch_size, "steps_per_call": n,
             "profile_steps": config.profile_steps,
             "num_steps": config.num_steps, "flops_per_step": step_flops(config),
             "flops_source": "jaxpr", "device_kind": device.device_kind,
             "platform": device.platform, "precisions": {}}
  for precision in config.precisions:
    state, segment = students.training_segment(_student(config, precision), data, key,
                                               num_steps=n, batch_size=config.batch_size)
    state, first, times = _timed_calls(config, state, segment)
    best = min(times)
    out = {"ms_per_step": 1e3 * best / n, "steps_per_second": n / best,
           "achieved_tflops": results["flops_per_step"] * n / best / 1e12,
           "seconds_per_call": times, "first_call_seconds": first,
           "seconds_for_num_steps": best / n * config.num_steps,
           "device_events_per_step": None}  # counted where a profile has device timelines
    del state
    if precision in tuple(config.profile_precisions):
      out["profile"] = _profile(config, _student(config, precision), data, key,
                                pathlib.Path(workdir) / f"profile_{precision}")
      out["device_events_per_step"] = _device_events_per_step(out["profile"],
                                                              config.profile_steps)
    results["precisions"][precision] = out
    events = out.get("device_events_per_step")
    print(f"{precision:9s} {out['ms_per_step']:8.3f} ms/step  {out['steps_per_second']:9.0f} "
          f"steps/s  {out['achieved_tflops']:.3f} TFLOP/s  {config.num_steps:,} steps: "
          f"{out['seconds_for_num_steps']:.1f} s"
          + ("" if events is None else f"  {events:.0f} device events/step")
          + f"  (first call {first:.1f} s)")
  results["seeds"] = _seeds(config, data, key, results["precisions"][config.precisions[0]])
  experiment.write_results(workdir, results, config=config, seed=config.seed,
                           disclosure=experiment.NO_PRIVATE_DATA)
  return results


def _profile(config, student: students.Student, data, key, trace_dir) -> dict:
  """A segment of ``config.profile_steps`` steps from the initial state: one call compiles
  it, the next runs under the profiler (:func:`pate_jax.experiment.profile_call`)."""
  m = int(config.profile_steps)
  state, segment = students.training_segment(student, data, key, num_steps=m,
                                             batch_size=config.batch_size)
  state, _ = segment(state, 0)
  jax.block_until_ready(state)
  return experiment.profile_call(lambda: segment(state, m)[0], trace_dir)


def _timed_calls(config, state, segment) -> tuple:
  """One warm-up call of ``segment`` (it compiles), then ``config.repeats`` timed calls:
  ``(state, first call's seconds, timed calls' seconds)``."""
  n = int(config.steps_per_call)
  t0 = time.perf_counter()
  state, _ = segment(state, 0)
  jax.block_until_ready(state)
  first = time.perf_counter() - t0
  times = []
  for r in range(config.repeats):
    t0 = time.perf_counter()
    state, _ = segment(state, (r + 1) * n)
    jax.block_until_ready(state)
    times.append(time.perf_counter() - t0)
  return state, first, times


def _seeds(config, data, key, one: dict) -> dict:
  """Each count of ``config.num_seeds`` above 1: that many students in one vmapped program
  (:func:`pate_jax.students.fit_seeds`'s), at ``config.precisions[0]``: ms per step of them
  all, per student, and the speed-up over training them one after the other at ``one``'s
  (that precision's single student) ms per step."""
  out = {}
  n = int(config.steps_per_call)
  for s in (int(x) for x in config.get("num_seeds", ()) or ()):
    if s <= 1:
      continue
    state, segment = students.training_segment(
        _student(config, config.precisions[0]), data, key, num_steps=n,
        batch_size=config.batch_size, num_seeds=s)
    state, first, times = _timed_calls(config, state, segment)
    del state
    ms = 1e3 * min(times) / n
    out[str(s)] = {"ms_per_step": ms, "ms_per_student_step": ms / s,
                   "speedup_over_one_at_a_time": s * one["ms_per_step"] / ms,
                   "seconds_per_call": times, "first_call_seconds": first,
                   "seconds_for_num_steps": ms / 1e3 * config.num_steps}
    print(f"{s} students side by side ({config.precisions[0]}): {ms:8.3f} ms/step, "
          f"{ms / s:.3f} per student, {out[str(s)]['speedup_over_one_at_a_time']:.2f}x one "
          f"at a time  (first call {first:.1f} s)")
  return out


def plan(config, prefix: str = "config.") -> dict:
  """``--dry_run``: the data's and the student state's sizes and the calls to be timed
  (abstract shapes: nothing is compiled or trained). ``prefix`` as :func:`check_config`'s."""
  check_config(config, prefix)
  shape = tuple(config.image_shape)
  state = _abstract_state(config, _student(config, config.precisions[0]))
  return {"student": config.student, "image_shape": shape, "pool_size": config.pool_size,
          "pool_bytes": config.pool_size * int(np.prod(shape)) * 4,
          "state_bytes": memory.tree_bytes(state), "batch_size": config.batch_size,
          "flops_per_step": step_flops(config, state),
          "steps_per_call": config.steps_per_call,
          "calls_per_precision": config.repeats + 1,
          "profile_steps": config.profile_steps,
          "precisions": tuple(config.precisions),
          "profile_precisions": tuple(config.profile_precisions),
          "num_seeds": tuple(config.get("num_seeds", ()) or ())}
