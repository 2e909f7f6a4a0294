"""The GPU acceptance command (experiments/gpu_acceptance.py), in stages that each fit one
10-minute call and resume from the files of the earlier ones in the same workdir.

  python experiments/gpu_acceptance.py --config configs/gpu_acceptance.py --workdir W \\
      --config.stages=1 --config.publish_dir=results/runs
  python experiments/gpu_acceptance.py --config configs/gpu_acceptance.py:cpu_rehearsal --workdir W

Stages (``--config.stages``: ``all``, numbers, run names, comma-separated) and the targets
each is checked against (results.json's ``targets``, computed from the runs' results):
  1 pate_mnist      configs/pate_mnist.py as it is (250 paper-CNN teachers, GNMax labels,
                    PATE-G 300 epochs, the attack), no override. Targets: wall <= 60 s to
                    the student's end (the attack's seconds are private) with no
                    out-of-memory; mean teacher test accuracy >= 94 %.
  2 bench_teachers  configs/bench_teachers.py:cnn (examples/s and TFLOP/s against the chip's
                    peak, vmap vs chunked vs loop), with the deterministic GPU kernels the
                    paper config asks for. Target: vmap >= 300,000 examples/s.
    bench_teachers_nondeterministic  the same, first, in a subprocess without
                    --xla_gpu_deterministic_ops; results.json's deterministic_slowdown is the
                    ratio of the two (examples/s without / with; no target).
    bench_accounting configs/bench_accounting.py. Target: the public accounting API end to
                    end <= 10x its compiled kernel.
    bench_student   configs/bench_student.py: the main job's student (PATE-G, 2-pixel
                    shifts), ms per step at float32 and the default precision, one call
                    profiled (device events per step), and 3 students side by side against
                    one at a time (no target).
  3 pate_g_100, pate_g_1000  stage 1's CNN teachers -> LNMax labels (PATE 2017, gamma 0.05,
                    research noise seed) -> PATE-G for the paper's 300 epochs, three students
                    side by side (seeds 0-2, one vmapped program; every stage-3 student run
                    does so). Target (100 queries): their mean accuracy >= 98.0 % at
                    data-dependent epsilon <= 2.04.
    pate_g_shift_100  the same 100 labels, real images shifted by up to 2 pixels (the main
                    job's student; not the authors' PATE-G). Target: accuracy >= 98.0 %.
    pate_g_cgn      stage 1's CNN teachers -> Confident-GNMax on 640 queries (Papernot et al.
                    2018's MNIST row: T 200, sigma_1 150, sigma_2 40, research noise seed)
                    -> PATE-G 300 epochs with 2-pixel shifts (configs/student_confident_gnmax.py).
                    Target: accuracy >= 98.5 % at released epsilon <= 1.97 (2018: 98.5 %, 1.97).
    mnist_baseline  the paper's CNN as one "teacher" on all 60,000 training images: the
                    non-private baseline (PATE 2017 prints 99.18 %; no target).
  4 kd_gan          configs/kd_gan.py (20 seeds, Table 1, the curve to published epsilon 8:
                    Table 2's epsilon = 8 row; no target).
  5 tests_fast, tests_slow  the test suite under pytest (JUnit XML in the run's directory).
                    Target: no failure, no error.
``cpu_rehearsal``: tiny real runs of every stage (minutes on 2 CPU cores), the same files,
compiled without LLVM's optimisation (``fast_compile``).
"""

import pathlib

import ml_collections

from pate_jax.experiment import load_script


def _sibling(name: str, arg: str | None = None) -> ml_collections.ConfigDict:
  return load_script(pathlib.Path(__file__).with_name(name + ".py")).get_config(arg)


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  if arg not in (None, "", "cpu_rehearsal"):
    raise ValueError(f"configs/gpu_acceptance.py: unknown variant {arg!r}; use '' or "
                     "'cpu_rehearsal'")
  c = ml_collections.ConfigDict()
  c.stages = "all"            # "all" | stage numbers and/or run names: "1", "2,3", "tests_slow"
  c.publish_dir = ""          # "" off; results/runs: each run's results.json (and top-level
                              # PNGs) copied to <publish_dir>/<run>_gpu/ for experiments/report.py
  c.archive = ""              # "" off; a path: a .tar.gz of the workdir without checkpoints,
                              # written after the call (a fresh machine's next call unpacks it)
  c.call_limit_s = 600        # one call's limit: --dry_run says whether each stage fits
  c.deadline_s = 0            # 0 off; seconds from this call's start: a run starts only if
                              # its expected wall (expected_wall_s) fits what is left, a test
                              # group if 60 s are left (its pytest cut 10 s before); the
                              # results, published copies and archive are written after
                              # each run, so a call cut short keeps what it finished
  c.plan_device_gib = 80.0    # --dry_run: the memory planner's chunks on a device this size
  c.plan_allocator_fraction = 0.75  # JAX's default share of it (XLA_PYTHON_CLIENT_MEM_FRACTION)
  c.period_limit_s = 1_500    # one GPU period (25 minutes): --dry_run says
                              # whether all the stages together fit it
  c.fast_compile = False      # True: XLA:CPU compiles without LLVM's optimisation (the CPU
                              # rehearsal's tiny programs: experiment.set_fast_compile;
                              # declined where an accelerator may run, JAX_PLATFORMS unset)

  # Stage 1: the default paper config, no override.
  c.pate_mnist = _sibling("pate_mnist")
  # Stage 2.
  c.bench_teachers = _sibling("bench_teachers", "cnn")
  c.bench_accounting = _sibling("bench_accounting")
  c.bench_student = _sibling("bench_student")
  # Stage 3: one student config for every entry of pate_g_queries (run pate_g_<n>).
  c.pate_g_queries = (100, 1_000)
  # The same students with every real image shifted by up to 2 pixels per axis (run
  # pate_g_shift_<n>; the main job's student, not the authors' PATE-G, whose 300 epochs end
  # at 97.7-97.9 % on this 9,000-image pool even with true labels: README, Students).
  c.pate_g_shift_queries = (100,)
  c.pate_g_shift_pixels = 2
  c.pate_g = _sibling("student_pate_g")    # 27,000 steps = 300 epochs of the 9,000-image pool
  c.pate_g.aggregate.noise_seed = 0        # research seed: the ledger is the run's own
  c.pate_g.aggregate.epsilon_max = 25.0    # 1,000 LNMax answers: data-independent 20.8
  # Three students side by side on the same labels (one vmapped program; the students of
  # seeds 0, 1, 2): the targets read their mean, results.json each one's accuracy.
  c.pate_g.num_seeds = 3
  c.pate_g_cgn = _sibling("student_confident_gnmax")  # the 2018 row, on the same teachers
  c.pate_g_cgn.aggregate.noise_seed = 0    # research seed: the ledger is the run's own
  c.pate_g_cgn.num_seeds = 3
  c.baseline = _sibling("mnist_250")       # the paper CNN on all of MNIST, non-private
  c.baseline.num_teachers = 1
  c.baseline.num_steps = 20_000            # batch 64: 21 epochs of 60,000 images
  c.baseline.checkpoint_every = 5_000
  c.baseline.distill_temperatures = ()
  c.baseline.gap_plot = False
  # Stage 4.
  c.kd_gan = _sibling("kd_gan")
  # Stage 5: one run per group (tests_<group>), each its own pytest process.
  c.tests = ml_collections.ConfigDict()
  c.tests.groups = ml_collections.ConfigDict({"fast": "-m 'not slow' tests",
                                              "slow": "-m slow tests"})
  c.tests.timeout_s = 480     # then pytest is interrupted (SIGINT) and its partial XML kept
  c.tests.require_data = True  # PATE_JAX_REQUIRE_DATA=1, as CI: missing data is a failure
  c.tests.workers = 12        # pytest-xdist workers (-n) where it is installed (the H100 and
                              # H200 hosts have 16 cores: the fast tier took 171 s with 12 on
                              # one H100); 0 or no pytest-xdist: one process

  # The acceptance targets (results.json's "targets": measured value, met or not).
  c.targets = ml_collections.ConfigDict({
      "main_job_wall_s": 60.0, "teacher_accuracy": 0.94, "examples_per_second": 300_000.0,
      "pate_g_queries": 100, "pate_g_accuracy": 0.98, "pate_g_epsilon": 2.04,
      "api_over_kernel": 10.0, "cgn_accuracy": 0.985, "cgn_epsilon": 1.97})
  # Expected wall per run on one H100, seconds (for --dry_run), from one H200 at 41e3f06
  # (README), with room for the H100's slower memory: pate_mnist 91 s (teachers 67 s,
  # labels and student 23 s); bench_teachers 43 s for vmap and chunked with 2 repeats (the
  # loop, the profiled call and 3 repeats: ~120 s) and bench_accounting 17 s at 0b5a9f2;
  # pate_g_100 38 s, pate_g_shift_100 21 s, pate_g_1000 39 s, pate_g_cgn 35 s, one student
  # each (three side by side: 90 s, an estimate; PATE-G's step is small, 0.8 ms);
  # mnist_baseline 18 s; tests_fast 118 s with 12 workers, tests_slow 108 of its 112 tests
  # by its 304 s limit (its stage's wall 315 s); the nondeterministic bench as the bench;
  # kd_gan and bench_student estimated (not run there; bench_student: three compilations
  # of the student's segment, ~22 s each in the main job, 9 calls of 900 steps at ~0.8 ms
  # a step and 4 of 3 students).
  # kd_gan resumes from its checkpoints if a call runs out; the test groups are
  # interrupted at tests.timeout_s.
  c.expected_wall_s = ml_collections.ConfigDict({
      "pate_mnist": 110, "bench_teachers_nondeterministic": 120, "bench_teachers": 120,
      "bench_accounting": 30, "bench_student": 120, "pate_g": 90, "mnist_baseline": 25,
      "kd_gan": 420,
      "tests_fast": 150, "tests_slow": 480})

  if arg == "cpu_rehearsal":
    _rehearsal(c)
  return c


def _rehearsal(c: ml_collections.ConfigDict) -> None:
  """Tiny real runs of every stage: the same code paths and files, in under 5 minutes on 2
  cores (MLP teachers on 2,000 images, tens of steps, the KD-GAN's smoke config, one small
  test file)."""
  tiny_mlp = lambda: ml_collections.ConfigDict({"name": "mlp", "kwargs": {"hidden": (32,)}})
  c.pate_mnist = _sibling("pate_mnist", "cpu")
  t = c.pate_mnist.teachers
  t.num_teachers, t.train_subset, t.num_steps, t.checkpoint_every = 8, 2_000, 10, 5
  t.model, t.strategy, t.batch_size = tiny_mlp(), "vmap", 32  # the accelerator's strategy
  c.pate_mnist.student.num_steps, c.pate_mnist.student.segment_steps = 10, 5
  c.pate_mnist.attack.num_queries, c.pate_mnist.attack.num_histograms = 100, 2
  c.bench_teachers = _sibling("bench_teachers")
  b = c.bench_teachers
  b.num_teachers, b.examples_per_teacher, b.steps_per_call, b.repeats = 4, 16, 2, 1
  b.model.kwargs.hidden, b.peak_tflops, b.strategies = (16,), 1.0, ("vmap", "loop")
  c.bench_accounting = _sibling("bench_accounting", "small")
  c.bench_accounting.num_queries, c.bench_accounting.loop_queries = 1_000, 100
  c.bench_accounting.repeats = 1
  c.bench_student = _sibling("bench_student", "cpu")
  c.bench_student.student_kwargs.update({"generator_hidden": (16,), "noise_dim": 4,
                                         "discriminator_hidden": (16, 8)})
  c.bench_student.pool_size, c.bench_student.steps_per_call = 200, 5
  c.pate_g_queries = (100,)  # pate_g_1000 runs the same code
  c.pate_g = _sibling("student_pate_g", "cpu")
  c.pate_g.aggregate.noise_seed, c.pate_g.aggregate.epsilon_max = 0, 25.0
  c.pate_g.num_steps, c.pate_g.segment_steps, c.pate_g.num_seeds = 10, 5, 2
  c.pate_g_cgn = _sibling("student_confident_gnmax", "cpu")
  c.pate_g_cgn.aggregate.noise_seed = 0
  c.pate_g_cgn.num_steps, c.pate_g_cgn.segment_steps, c.pate_g_cgn.num_seeds = 10, 5, 2
  c.baseline = _sibling("mnist_250", "cpu")
  c.baseline.update({"num_teachers": 1, "train_subset": 2_000, "num_steps": 10,
                     "checkpoint_every": 5, "distill_temperatures": (), "gap_plot": False})
  c.baseline.model = tiny_mlp()
  c.kd_gan = _sibling("kd_gan", "smoke")
  c.kd_gan.table1.public_sizes, c.kd_gan.teacher.num_steps = (100,), 50
  c.tests.groups = ml_collections.ConfigDict({"fast": "-m 'not slow' tests/test_rng.py"})
  c.tests.timeout_s = 120
  c.tests.workers = 0
  # Its programs are tiny: compiling them is most of its wall, LLVM's optimisation most of
  # that. Its processes (the subprocess bench and pytest too) compile without it.
  c.fast_compile = True
  c.expected_wall_s = ml_collections.ConfigDict({
      "pate_mnist": 40, "bench_teachers_nondeterministic": 15, "bench_teachers": 10,
      "bench_accounting": 10, "bench_student": 10, "pate_g": 15, "mnist_baseline": 5, "kd_gan": 20,
      "tests_fast": 15})
