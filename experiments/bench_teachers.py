"""Examples/s of the three ensemble strategies for T teachers (default 250).

  python experiments/bench_teachers.py --config configs/bench_teachers.py --workdir runs/bench

(a) ``vmap``: one jitted vmapped segment over all teachers (sharded over local
devices); (b) ``chunked``: ``lax.map`` over chunks of teachers, vmapped within a
chunk; (c) ``loop``: a Python loop over teachers calling the same jitted
single-teacher segment. Each strategy runs one warm-up (compiling) call, then
``repeats`` timed calls of ``steps_per_call`` steps; data are random (speed does
not depend on pixel values). Writes results.json with examples/s per strategy
and each strategy's time relative to the loop.
"""

from __future__ import annotations

import time

import jax
import optax

from pate_jax import experiment, models, teachers



def run(config, workdir: str) -> dict:
  t, n = config.num_teachers, config.examples_per_teacher
  key = jax.random.key(config.seed)
  images = jax.random.uniform(jax.random.fold_in(key, 0), (t, n, *config.image_shape))
  labels = jax.random.randint(jax.random.fold_in(key, 1), (t, n), 0, 10)
  keys = jax.random.split(jax.random.fold_in(key, 2), t)
  model = models.get_model(config.model.name, 10, **config.model.kwargs)
  fns = teachers.TeacherFns(model, optax.adamw(1e-3, weight_decay=1e-2),
                            config.batch_size or None, config.max_shift)
  per_step = t * (config.batch_size or n)
  results = {"num_teachers": t, "examples_per_step": per_step,
             "default_strategy": teachers.default_strategy(), "strategies": {}}
  for strategy in experiment.progress(config.strategies, desc="strategies"):
    ens = teachers.Ensemble(fns, strategy, config.chunk_size,
                            teachers.teacher_mesh() if strategy == "vmap" else None)
    state = ens.init(keys, images[0])
    t0 = time.perf_counter()
    state, _ = ens.train(state, keys, images, labels, 0, config.steps_per_call)
    jax.block_until_ready(state)
    compile_and_first = time.perf_counter() - t0
    times = []
    for r in range(config.repeats):
      t0 = time.perf_counter()
      state, _ = ens.train(state, keys, images, labels, (r + 1) * config.steps_per_call,
                           config.steps_per_call)
      jax.block_until_ready(state)
      times.append(time.perf_counter() - t0)
    best = min(times)
    results["strategies"][strategy] = {
        "examples_per_second": per_step * config.steps_per_call / best,
        "seconds_per_call": times, "first_call_seconds": compile_and_first}
    print(f"{strategy:8s} {per_step * config.steps_per_call / best:10.0f} examples/s "
          f"(first call {compile_and_first:.1f}s)")
  if "loop" in results["strategies"]:
    loop = results["strategies"]["loop"]["examples_per_second"]
    for s, r in results["strategies"].items():
      r["throughput_vs_loop"] = r["examples_per_second"] / loop
  experiment.write_results(workdir, results, config=config, seed=config.seed)
  return results


if __name__ == "__main__":
  experiment.run_main(run)
