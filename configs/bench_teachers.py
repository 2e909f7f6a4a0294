"""Throughput of the teacher-ensemble strategies (experiments/bench_teachers.py).

  python experiments/bench_teachers.py --config configs/bench_teachers.py --workdir runs/bench_teachers
  python experiments/bench_teachers.py --config configs/bench_teachers.py:cnn --workdir runs/bench_teachers_cnn

Default: the CPU teacher (2×256 MLP) with 250 teachers × 240 examples, full
batch. ``:cnn`` times the paper's MNIST CNN (minibatch 64) in bfloat16 compute, ``:cnn_f32``
in float32 — for accelerators.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.num_teachers = 250
  c.examples_per_teacher = 240
  c.image_shape = (28, 28, 1)
  c.model = ml_collections.ConfigDict({"name": "mlp", "kwargs": {"hidden": (256, 256)}})
  c.batch_size = 0         # 0 → full batch
  c.max_shift = 2
  c.steps_per_call = 10    # optimisation steps inside one compiled call (lax.scan)
  c.repeats = 3            # timed calls per strategy (after one warm-up call)
  c.strategies = ("vmap", "chunked", "loop")
  c.chunk_size = 25
  c.compute_dtype = "float32"
  c.peak_tflops = 0.0      # 0 → the datasheet value for known devices (else not reported)
  c.profile_strategies = ()  # strategies whose one extra call runs under jax.profiler:
                             # results.json keeps each timeline's busiest ops (the trace is
                             # deleted); :cnn profiles vmap
  if arg in ("cnn", "cnn_f32"):
    # The paper's CNN; overridable: --config.model.kwargs.conv=patches (convolutions as
    # matrix products over patches), --config.model.kwargs.downsample=stride,
    # --config.model.kwargs.pool=window (XLA's reduce_window; the paper config's is views).
    c.model = ml_collections.ConfigDict({"name": "mnist_cnn", "kwargs": {
        "conv": "lax", "downsample": "max_pool", "pool": "views"}})
    c.batch_size = 64
    c.steps_per_call = 20
    c.repeats = 3
    c.compute_dtype = "bfloat16" if arg == "cnn" else "float32"
    c.profile_strategies = ("vmap",)
  elif arg not in (None, ""):
    raise ValueError(f"configs/bench_teachers.py: unknown variant {arg!r}")
  return c
