"""The ensemble benchmark: examples/s and achieved TFLOP/s of the ensemble strategies for
T teachers (default 250) (``experiments/bench_teachers.py``).

(a) ``vmap``: one jitted program over all teachers (sharded over devices, chunked
over teachers only if the memory budget demands it); (b) ``chunked``: vmapped
chunks of ``chunk_size`` teachers run one after another; (c) ``loop``: a Python
loop over teachers calling the same jitted single-teacher segment (the library's
``"loop"`` strategy, its CPU default, is the baseline). Each strategy runs one
warm-up (compiling) call, then ``repeats`` timed calls of ``steps_per_call`` steps;
data are random (speed does not depend on pixel values). FLOPs per step are counted
from the one-step program's jaxpr (:func:`pate_jax.flops.jaxpr_flops`: 2 × the
multiply-accumulates of its convolutions and matrix products, the same on every backend;
XLA's cost analysis of the lowered program, which on a GPU may give none, is kept beside
it as ``flops_per_step_xla``), so speed is read against the device's peak
(``peak_tflops``, or a datasheet value for known devices). ``deterministic_ops`` records
whether ``XLA_FLAGS`` asked for deterministic GPU kernels
(:func:`pate_jax.experiment.deterministic_ops_enabled`), ``xla_env`` the ``XLA_*``
environment it ran under.

``run(config, workdir)`` prints each strategy's line as it is measured (a long benchmark
shows its progress; there is no separate ``report``) and writes ``results.json`` with
examples/s, TFLOP/s and the fraction of peak per strategy, and each strategy relative to
the loop (synthetic data only: publishable). ``plan(config)`` is ``--dry_run``; both refuse
a bad setting naming its field first (:func:`check_config`).
"""

from __future__ import annotations

import os
import pathlib
import time

import jax
import jax.numpy as jnp
import optax

from pate_jax import _checks as checks
from pate_jax import experiment, flops, memory, models, rng, teachers

__all__ = ["run", "plan", "check_config", "step_flops", "xla_step_flops", "PEAK_TFLOPS"]

# Dense datasheet peaks (TFLOP/s) by device kind and compute dtype; float32 matmuls on
# NVIDIA GPUs run as TF32 by default.
PEAK_TFLOPS = {
    "NVIDIA H100 80GB HBM3": {"bfloat16": 989.0, "float32": 494.7},
    "NVIDIA H200": {"bfloat16": 989.0, "float32": 494.7},
    "NVIDIA A100-SXM4-80GB": {"bfloat16": 312.0, "float32": 156.0},
}


def _one_step(fns: teachers.TeacherFns):
  """One optimisation step of every teacher: the vmapped one-step segment."""
  def one_step(s, k, x, y):
    return jax.vmap(lambda *a: fns.train_segment(*a, jnp.int32(0), 1))(s, k, x, y)
  return one_step


def step_flops(fns: teachers.TeacherFns, state, keys, images, labels) -> float:
  """FLOPs of one vmapped optimisation step of every teacher, counted from its jaxpr
  (:func:`pate_jax.flops.jaxpr_flops`; abstract inputs suffice)."""
  return flops.jaxpr_flops(_one_step(fns), state, keys, images, labels)


def xla_step_flops(fns: teachers.TeacherFns, state, keys, images, labels) -> float | None:
  """XLA's cost analysis of the same lowered step (it also counts elementwise ops), or
  ``None`` where the backend reports no FLOPs (XLA:GPU in jax 0.11)."""
  try:
    cost = jax.jit(_one_step(fns)).lower(state, keys, images, labels).cost_analysis()
  except Exception:  # pylint: disable=broad-except  # a backend without cost analysis
    return None
  if isinstance(cost, (list, tuple)):
    cost = cost[0] if cost else None
  return None if not cost or "flops" not in cost else float(cost["flops"])


def check_config(config, prefix: str = "config.") -> None:
  """Refuses, naming the field, what the benchmark cannot run (a count of 0 divided by zero,
  a negative size or width failed as a shape error of JAX), before anything is built.
  ``prefix``: how the fields are named (``config.bench_teachers.`` in the GPU acceptance)."""
  rng.check_seed(config.seed, f"{prefix}seed")
  for name in ("num_teachers", "examples_per_teacher", "steps_per_call", "repeats",
               "chunk_size"):
    checks.positive_int(config[name], f"{prefix}{name}")
  for name in ("batch_size", "max_shift"):  # batch_size 0: full batch; max_shift 0: none
    checks.positive_int(config[name], f"{prefix}{name}", minimum=0)
  shape = checks.int_tuple(config.image_shape, f"{prefix}image_shape")
  if config.max_shift and (len(shape) < 3 or config.max_shift >= min(shape[:2])):
    raise ValueError(f"{prefix}max_shift must be smaller than the images' height and width "
                     f"({prefix}image_shape (H, W, C)); got {config.max_shift} for {shape}")
  checks.choice(config.model.name, f"{prefix}model.name", models.model_names())
  models.check_kwargs(config.model.name, config.model.kwargs, f"{prefix}model.kwargs")
  checks.choice(config.compute_dtype, f"{prefix}compute_dtype", models.COMPUTE_DTYPES)
  if isinstance(config.strategies, str) or not config.strategies:
    raise ValueError(f"{prefix}strategies must be a non-empty tuple of {teachers.STRATEGIES}; "
                     f"got {config.strategies!r}")
  for s in config.strategies:
    checks.choice(s, f"{prefix}strategies", teachers.STRATEGIES)
  unknown = set(config.profile_strategies) - set(config.strategies)
  if isinstance(config.profile_strategies, str) or unknown:
    raise ValueError(f"{prefix}profile_strategies must be a tuple of {prefix}strategies "
                     f"{tuple(config.strategies)}; got {config.profile_strategies!r}")
  if not checks.scalar(config.peak_tflops, f"{prefix}peak_tflops") >= 0:
    raise ValueError(f"{prefix}peak_tflops must be >= 0 (0: the datasheet value); "
                     f"got {config.peak_tflops!r}")


def plan(config, prefix: str = "config.") -> dict:
  """``--dry_run``: the synthetic ensemble's sizes, its stacked state, and the chunk the
  memory planner picks for the ``vmap`` strategy on the teacher mesh (abstract inputs:
  nothing is trained). ``prefix`` as :func:`check_config`'s."""
  check_config(config, prefix)
  t, n = int(config.num_teachers), int(config.examples_per_teacher)
  model = models.get_model(config.model.name, 10, compute_dtype=config.compute_dtype,
                           **config.model.kwargs)
  fns = teachers.TeacherFns(model, optax.adamw(1e-3, weight_decay=1e-2),
                            config.batch_size or None, config.max_shift)
  ens = teachers.Ensemble(fns, "vmap", None, teachers.teacher_mesh())
  padded = ens.padded_size(t)
  keys = jax.eval_shape(lambda: jax.random.split(rng.root_key(config.seed), padded))
  images = jax.ShapeDtypeStruct((padded, n, *config.image_shape), jnp.float32)
  labels = jax.ShapeDtypeStruct((padded, n), jnp.int32)
  sample = jax.ShapeDtypeStruct(images.shape[1:], jnp.float32)  # one teacher's shard
  state = jax.eval_shape(jax.vmap(fns.init, in_axes=(0, None)), keys, sample)
  p = ens.plan_train(state, keys, images, labels)
  per_step = t * (config.batch_size or n)
  step = step_flops(fns, state, keys, images, labels) / padded * t  # linear in teachers
  return {"num_teachers": t, "examples_per_teacher": n, "image_shape": tuple(config.image_shape),
          "model": config.model.name, "compute_dtype": config.compute_dtype,
          "examples_per_step": per_step, "flops_per_step": step,
          "flops_per_example": step / per_step,
          "strategies": tuple(config.strategies), "chunked_chunk_size": int(config.chunk_size),
          "steps_per_call": int(config.steps_per_call), "repeats": int(config.repeats),
          "padded_teachers": padded, "devices": ens.num_shards,
          "state_bytes": memory.tree_bytes(state),
          "data_bytes": memory.tree_bytes((images, labels)),
          "vmap_train_plan": {"teachers_per_chunk": p.teachers,
                              "estimate_bytes_per_chunk": p.estimate_bytes,
                              "analysis_factor": memory.analysis_factor(),
                              "budget_bytes_left_for_chunks": p.budget_bytes,
                              "description": memory.fits_description(p, ("teachers",))}}


def _print_profile(strategy: str, profile: dict, lines: int = 3, top: int = 5) -> None:
  """The profiled call's busiest timelines and their top events."""
  print(f"profile of one {strategy} call ({profile['wall_ms']:.0f} ms wall, "
        f"{profile['source']} timelines):")
  busiest = sorted(profile["timelines"].items(), key=lambda kv: -kv[1]["busy_ms"])
  for name, line in busiest[:lines]:
    print(f"  {name}: {line['busy_ms']:.0f} ms busy in {line['events']} events")
    for e in line["top"][:top]:
      print(f"    {e['share']:6.1%} {e['ms']:9.1f} ms  x{e['count']:<5d} {e['name'][:90]}")


def run(config, workdir: str, prefix: str = "config.") -> dict:
  """Times every strategy of ``config.strategies``; writes results.json. ``prefix`` as
  :func:`check_config`'s."""
  check_config(config, prefix)
  t, n = config.num_teachers, config.examples_per_teacher
  root = rng.root_key(config.seed)
  data_key = rng.stream(root, "bench_data")
  images = jax.random.uniform(jax.random.fold_in(data_key, 0), (t, n, *config.image_shape))
  labels = jax.random.randint(jax.random.fold_in(data_key, 1), (t, n), 0, 10)
  keys = jax.random.split(rng.stream(root, "teacher_train"), t)
  model = models.get_model(config.model.name, 10, compute_dtype=config.compute_dtype,
                           **config.model.kwargs)
  fns = teachers.TeacherFns(model, optax.adamw(1e-3, weight_decay=1e-2),
                            config.batch_size or None, config.max_shift)
  per_step = t * (config.batch_size or n)
  device = jax.devices()[0]
  peak = config.peak_tflops or PEAK_TFLOPS.get(device.device_kind, {}).get(
      config.compute_dtype)
  abstract_state = jax.eval_shape(jax.vmap(fns.init, in_axes=(0, None)), keys, images[0])
  # A teacher step is one scan (no while loop), so the jaxpr count always exists.
  step = step_flops(fns, abstract_state, keys, images, labels)
  results = {"num_teachers": t, "examples_per_step": per_step, "flops_per_step": step,
             "flops_per_example": step / per_step, "flops_source": "jaxpr",
             "flops_per_step_xla": xla_step_flops(fns, abstract_state, keys, images, labels),
             "deterministic_ops": experiment.deterministic_ops_enabled(),
             "xla_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("XLA_")},
             "peak_tflops": peak, "compute_dtype": config.compute_dtype,
             "device_kind": device.device_kind,
             "default_strategy": teachers.default_strategy(), "strategies": {}}
  for strategy in experiment.progress(config.strategies, desc="strategies"):
    ens = teachers.Ensemble(fns, strategy, config.chunk_size if strategy == "chunked" else None,
                            teachers.teacher_mesh() if strategy != "loop" else None)
    state = ens.init(keys, images[0])
    k, x, y = ens.prepare((keys, images, labels))
    plan = None if strategy == "loop" else ens.plan_train(state, k, x, y)
    t0 = time.perf_counter()
    state, _ = ens.train(state, k, x, y, 0, config.steps_per_call, plan=plan)
    jax.block_until_ready(state)
    compile_and_first = time.perf_counter() - t0
    times = []
    for r in range(config.repeats):
      t0 = time.perf_counter()
      state, _ = ens.train(state, k, x, y, (r + 1) * config.steps_per_call,
                           config.steps_per_call, plan=plan)
      jax.block_until_ready(state)
      times.append(time.perf_counter() - t0)
    profile = None
    if strategy in tuple(config.profile_strategies):
      start = (config.repeats + 1) * config.steps_per_call
      profile = experiment.profile_call(
          lambda: ens.train(state, k, x, y, start, config.steps_per_call, plan=plan)[0],
          pathlib.Path(workdir) / f"profile_{strategy}")
      _print_profile(strategy, profile)
    del state
    best = min(times)
    tflops = step * config.steps_per_call / best / 1e12
    results["strategies"][strategy] = {
        "examples_per_second": per_step * config.steps_per_call / best,
        "achieved_tflops": tflops,
        "fraction_of_peak": tflops / peak if peak else None,
        "teachers_per_chunk": None if plan is None else plan.teachers,
        "seconds_per_call": times, "first_call_seconds": compile_and_first}
    if profile is not None:
      results["strategies"][strategy]["profile"] = profile
    print(f"{strategy:8s} {per_step * config.steps_per_call / best:10.0f} examples/s"
          + f"  {tflops:7.2f} TFLOP/s"
          + ("" if not peak else f" ({tflops / peak:.1%} of {peak:g} peak)")
          + f"  (first call {compile_and_first:.1f}s)")
  if "loop" in results["strategies"]:
    loop = results["strategies"]["loop"]["examples_per_second"]
    for s, r in results["strategies"].items():
      r["throughput_vs_loop"] = r["examples_per_second"] / loop
  experiment.write_results(workdir, results, config=config, seed=config.seed,
                           disclosure=experiment.NO_PRIVATE_DATA)
  return results

