"""Milliseconds per training step of a student (experiments/bench_student.py).

  python experiments/bench_student.py --config configs/bench_student.py --workdir runs/bench_student
  python experiments/bench_student.py --config configs/bench_student.py:cpu --workdir runs/bench_student_cpu

Default: the main job's student (PATE-G, real images shifted by up to 2 pixels; the
student of configs/pate_mnist.py) on random data of MNIST's shapes, in segments of the main
job's 900 steps, at float32 products (the students' setting) and at the backend's default
(TF32 on recent NVIDIA GPUs), the first profiled over a 50-step segment of its own, then
3 students side by side (one
vmapped program: the student configs' ``num_seeds``). ``:cpu``: 50-step calls, float32
only, no profile, 2 students side by side.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.student = "pate_g"
  c.student_kwargs = ml_collections.ConfigDict({"translate": 2})
  c.num_classes = 10
  c.image_shape = (28, 28, 1)
  c.pool_size = 9_000          # the MNIST student's public pool
  c.num_labelled = 100
  c.num_eval = 100             # the data's held-out part (the benchmark evaluates nothing)
  c.batch_size = 100
  c.steps_per_call = 900       # one compiled segment (the main job's segment_steps)
  c.repeats = 3                # timed calls per precision, after one warm-up call
  c.num_steps = 27_000         # seconds_for_num_steps: the main job's 300 epochs
  c.precisions = ("float32", "default")  # students.MATMUL_PRECISIONS or "default"
  c.profile_precisions = ("float32",)    # a segment of profile_steps under jax.profiler each
  c.profile_steps = 50         # its own compiled segment: a 900-step trace is ~10^5 kernels
  # Students side by side (config.num_seeds of the student configs): that many in one
  # vmapped program, at the first precision, against one at a time.
  c.num_seeds = (3,)
  if arg == "cpu":
    c.steps_per_call = 50
    c.repeats = 2
    c.precisions = ("float32",)
    c.profile_precisions = ()
    c.num_seeds = (2,)
  elif arg not in (None, ""):
    raise ValueError(f"configs/bench_student.py: unknown variant {arg!r}; use '' or 'cpu'")
  return c
