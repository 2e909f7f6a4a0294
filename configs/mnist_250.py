"""PATE teachers on MNIST: 250 teachers on disjoint shards (Papernot et al. 2017, §4).

  python experiments/train_teachers.py --config configs/mnist_250.py --workdir runs/mnist_cnn_n250
  python experiments/train_teachers.py --config configs/mnist_250.py:cpu --workdir runs/mnist_n250
  python experiments/train_teachers.py --config configs/mnist_250.py:cpu_cnn --workdir runs/mnist_cnn_cpu

The default is the paper's setting for an accelerator: its CNN (two 5×5 conv
layers with max-pooling, one 384-unit ReLU layer) computed in bfloat16 with
float32 parameters, max-pools taken as maxima of strided views, the vmapped
strategy with the teacher axis sharded across devices, chunk sizes planned from a
memory budget (``memory_fraction`` of each device), deterministic GPU kernels and
asynchronous checkpoints. ``:cpu`` trains the same 250-teacher
ensemble with a 2×256 MLP (XLA's convolutions on a small CPU are ~30× slower per
example), full-batch AdamW with ±2-pixel random shifts, in a few minutes on 2
cores. Much of the CNN's slowness on a CPU is XLA's convolutions inside the compiled
segment's loop: ``--config.unroll_segments=True`` compiles each segment unrolled (a
16/32-channel CNN teacher, 250 full-batch steps in segments of 50: 34 s instead of 194 s).
``:cpu_cnn`` trains CNN teachers on the CPU: 16/32 channels and 128 hidden units, with
5×5 stride-2 convolutions in place of conv + max-pool (XLA's max-pool gradient on a CPU
costs several times the convolutions), unrolled segments, full batch, learning rate
3e-3; ≈ 13 ms a teacher step on 2 cores, a few points more accurate than the MLPs.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.dataset = "mnist"
  c.data_dir = ""              # "" → $PATE_JAX_DATA_DIR, then tensorflow-datasets.
  c.allow_fallback = False     # True: sklearn 8×8 digits when MNIST is nowhere (loudly).
  c.train_subset = 0           # >0: use only the first N training images (tests).
  c.use_extra = False          # SVHN: add the "extra" split to the private data.
  c.num_teachers = 250

  # pool "views": max-pools as maxima of strided views (models.MnistCNN; the same network,
  # no select_and_scatter, whose deterministic GPU kernel made a vmapped step 2.7x slower
  # on one H100); --config.model.kwargs.pool=window is XLA's reduce_window, conv=patches
  # convolutions as matrix products (slower there).
  c.model = ml_collections.ConfigDict({"name": "mnist_cnn", "kwargs": {
      "conv": "lax", "pool": "views"}})
  c.learning_rate = 1e-3
  c.weight_decay = 1e-4
  c.batch_size = 64            # 0 → full batch (the whole shard each step).
  # 500 steps (133 epochs of a 240-image shard): the first 6 teachers' held-out accuracy
  # was within 0.3 points of 1,000 steps' (RESULTS.md, experiments/teacher_steps.py), in
  # half the time.
  c.num_steps = 500
  c.max_shift = 2              # random-translation augmentation, pixels.

  c.compute_dtype = "bfloat16"  # activations/matmuls; parameters and Adam state stay float32.
  c.deterministic = True       # GPU: deterministic XLA kernels (bit-identical resume).

  c.strategy = "auto"          # "vmap" | "chunked" | "loop"; auto: loop on CPU, vmap else.
  c.chunk_size = 0             # teachers per vmapped chunk per device; 0 → from the budget.
  c.query_chunk = 0            # queries per prediction chunk; 0 → from the budget.
  c.memory_fraction = 0.6      # share of each device's memory the chunk planner may use.
  # Whether a thread plans and compiles ahead (nothing runs on the devices meanwhile) the
  # training while the state is initialised, and the votes' pass while the teachers train.
  # None: for a vmapped ensemble on an accelerator; on a CPU-only machine the two would
  # share the cores.
  c.compile_ahead = ml_collections.config_dict.placeholder(bool)
  c.checkpoint_every = 500     # steps; saves are asynchronous (results.json: their cost;
                               # one 250-teacher save blocked training ~7 s on one H100).
  c.unroll_segments = False    # True: compile each checkpoint segment unrolled (a CNN on a
                               # CPU: several times faster; compile time grows with it)
  c.max_to_keep = 1            # checkpoint steps kept while training (resume needs one).
  c.keep_checkpoints = False   # False: delete them once votes.npz is written (the CPU
                               # run's state is ~0.8 GB a step; votes.npz < 1 MB).
  c.restart = False            # True: discard the workdir's checkpoints and start over
                               # (a rerun with other training fields is refused otherwise);
                               # refused once votes.npz exists: use another workdir.
  c.gap_plot = True
  c.distill_temperatures = (1.0, 5.0)  # votes.npz also keeps the averaged teacher
                                       # probabilities at these T (distillation students)

  if arg == "cpu":
    c.model = ml_collections.ConfigDict({"name": "mlp", "kwargs": {"hidden": (256, 256)}})
    c.compute_dtype = "float32"
    c.weight_decay = 1e-2
    c.batch_size = 0
    c.num_steps = 250
    c.checkpoint_every = 50
  elif arg == "cpu_cnn":
    c.model = ml_collections.ConfigDict({"name": "mnist_cnn", "kwargs": {
        "features": (16, 32), "hidden": (128,), "downsample": "stride"}})
    c.compute_dtype = "float32"
    c.learning_rate = 3e-3
    c.weight_decay = 1e-2
    c.batch_size = 0
    c.num_steps = 250
    c.checkpoint_every = 50
    c.unroll_segments = True
  elif arg not in (None, ""):
    raise ValueError(
        f"configs/mnist_250.py: unknown variant {arg!r}; use '', 'cpu' or 'cpu_cnn'")
  return c
