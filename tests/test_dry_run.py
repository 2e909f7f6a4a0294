"""``--dry_run``: every script's ``plan(config)`` on its cheapest config, the
printed text, and one command line that exits 0 without creating its workdir.

The plans run in-process (``experiment.load_script``); one subprocess checks the flag on 8
forced host devices. Kept cheap (CI's time budget): small configs, no training.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import subprocess
import sys

import jax
import numpy as np
import optax
import pytest

from pate_jax import experiment
from pate_jax import memory
from pate_jax import votes as votes_lib

import _scripts  # tests/_scripts.py  # pylint: disable=g-bad-import-order

REPO = pathlib.Path(__file__).resolve().parent.parent
# Every script in experiments/ (run_pate.plan composes the teachers' and the student's).
SCRIPTS = ("ablate", "ablate_kd_gan", "aggregate", "attack", "bench_accounting", "bench_attack",
           "bench_smooth_sensitivity", "bench_student", "bench_teachers", "plot_aggregation",
           "plot_gap", "plot_students", "published_accounting", "release_epsilon", "report",
           "run_pate", "tabular", "teacher_steps", "train_kd_gan", "train_student",
           "train_teachers", "gpu_acceptance", "compare_runs")


def test_every_script_in_experiments_is_listed():
  assert sorted(p.stem for p in (REPO / "experiments").glob("*.py")) == sorted(SCRIPTS)

_script, _config = _scripts.script, _scripts.config


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_script_passes_a_plan_to_run_main(name):
  script = _script(name)
  assert callable(script.plan) and "plan=plan" in (REPO / "experiments" / f"{name}.py"
                                                   ).read_text(), name


def test_dry_run_text_lists_every_field_the_mesh_and_the_plan():
  config = _config("mnist_250", "cpu")
  mesh = experiment.mesh_info(config)
  assert mesh["global_device_count"] == jax.device_count()
  assert mesh["backend"] == jax.default_backend() and mesh["process_count"] == 1
  assert mesh["num_teachers"] == 250 and mesh["teacher_mesh"] == {"teachers": jax.device_count()}
  text = experiment.dry_run_text(config, {"queries": 10, "state_bytes": 3 * 2**20,
                                          "train_plan": {"teachers_per_chunk": 5}}, mesh)
  for name, value in experiment.config_items(config):
    if not hasattr(value, "to_dict"):
      assert f"  {name}: {value!r}" in text
  assert f"  global_device_count: {jax.device_count()}" in text
  assert "  teacher_mesh.teachers: " in text
  assert "  queries: 10" in text and "  train_plan.teachers_per_chunk: 5" in text
  assert "  state_bytes: 3,145,728 B (3.00 MiB)" in text
  assert "(this script has no plan)" in experiment.dry_run_text(config, None, {})
  assert "num_teachers" not in experiment.mesh_info(_config("aggregate_mnist", "cpu"))


def test_help_mentions_dry_run():
  assert "--dry_run" in experiment.help_text("doc", None, None)


@dataclasses.dataclass(frozen=True)
class _TwoDevices:
  """A mesh of two devices as far as the planner reads one (its size): the plan is made
  from abstract shapes only, so nothing is placed on them."""
  size: int = 2


def _mlp_fns():
  from pate_jax import models, teachers  # pylint: disable=g-import-not-at-top
  return teachers.TeacherFns(models.get_model("mlp", 10, hidden=(16,)), optax.adam(1e-3), None)


def test_memory_plan_counts_chunks_and_bytes_per_device():
  """5 teachers on 2 devices pad to 6, 3 per device; chunks of 2 teachers and 4 of the 10
  queries take ceil(3 / 2) = 2 and ceil(10 / 4) = 3 chunks; the state splits evenly."""
  from pate_jax import teachers  # pylint: disable=g-import-not-at-top
  ens = teachers.Ensemble(_mlp_fns(), "chunked", chunk_size=2, mesh=_TwoDevices())
  x, y = np.zeros((5, 6, 28, 28, 1), np.uint8), np.zeros((5, 6), np.int32)
  p = teachers.memory_plan(ens, 5, x, y, 10, 4, jax.random.key(0))
  assert (p["padded_teachers"], p["devices"], p["teachers_per_device"]) == (6, 2, 3)
  assert p["state_bytes_per_device"] * 2 == p["state_bytes"]
  assert p["params_bytes_per_teacher"] * 6 < p["state_bytes"]  # + Adam's two moments
  for name in ("train_plan", "predict_plan"):
    assert (p[name]["teachers_per_chunk"], p[name]["teacher_chunks"]) == (2, 2), name
  assert (p["predict_plan"]["queries_per_chunk"], p["predict_plan"]["query_chunks"]) == (4, 3)


def test_memory_plan_predicts_beside_the_optimizer_state():
  """The prediction's budget is what is left beside everything resident while it runs: the
  parameters, the query images (float32) and the optimizer state, all of the state."""
  from pate_jax import teachers  # pylint: disable=g-import-not-at-top
  x, y = np.zeros((5, 6, 28, 28, 1), np.uint8), np.zeros((5, 6), np.int32)
  p = teachers.memory_plan(teachers.Ensemble(_mlp_fns(), "vmap"), 5, x, y, 10, None,
                           jax.random.key(0))
  resident = p["state_bytes_per_device"] + 10 * 28 * 28 * 4
  assert p["budget_bytes_per_device"] - p["predict_plan"]["budget_bytes_left_for_chunks"] == (
      resident)


@pytest.mark.slow
def test_train_teachers_plan_sizes_and_chunks(data_dir, monkeypatch):
  tt = _script("train_teachers")
  config = _config("mnist_250", "cpu", num_teachers=10, train_subset=2_405,
                   data_dir=str(data_dir))
  # XLA's accounts are read for real by the command-line test below; here fixed ones (8 MB
  # per probe, 1 MB per teacher of the whole training program) keep the chunks predictable.
  probes, programs = [], []
  monkeypatch.setattr(memory, "temp_bytes", lambda fn, *args: probes.append(
      jax.tree.leaves(args)[-1].shape) or 8 * 10**6)
  monkeypatch.setattr(memory, "executable_temp_bytes", lambda compiled: programs.append(
      compiled.in_avals[0][2].shape) or 10**6 * compiled.in_avals[0][2].shape[0])
  p = tt.plan(config)
  local = p["teachers_per_device"]
  # The run's training program (all local teachers, its first segment) fits: no probe for
  # it, only the queries' probe.
  assert programs == [(p["padded_teachers"], 240, 28, 28, 1)]
  assert probes == [(min(p["queries"], 128), 28, 28, 1)]
  assert p["train_plan"]["teachers_per_chunk"] == local
  factor = memory.analysis_factor()  # the planner's correction of XLA's account (8 on a CPU)
  assert p["train_plan"]["analysis_factor"] == factor
  assert p["train_plan"]["estimate_bytes_per_chunk"] == factor * 10**6 * p["padded_teachers"]
  assert p["fallback_data"] is False and p["train_examples"] == 2_405
  assert (p["examples_per_teacher"], p["dropped_examples"]) == (240, 5)
  assert p["examples_per_teacher"] * p["num_teachers"] <= p["train_examples"]
  assert p["queries_pool"] + p["queries_eval"] == p["queries"] == p["test_examples"]
  assert p["padded_teachers"] % p["devices"] == 0 and p["padded_teachers"] >= 10
  train, predict = p["train_plan"], p["predict_plan"]
  assert local % train["teachers_per_chunk"] == 0
  assert train["teacher_chunks"] * train["teachers_per_chunk"] == local
  assert predict["teachers_per_chunk"] <= local and predict["queries_per_chunk"] <= p["queries"]
  assert predict["query_chunks"] * predict["queries_per_chunk"] >= p["queries"]
  assert p["state_bytes"] > 10 * p["params_bytes_per_teacher"]  # + Adam's two moments
  assert p["budget_bytes_per_device"] == memory.memory_budget(0.6)

  # A budget of ~2.5 teachers' activations beside the resident state: the whole program
  # does not fit, and its account per teacher makes several chunks (still no probe).
  per_teacher = factor * 10**6 * p["padded_teachers"] / local
  resident = p["budget_bytes_per_device"] - train["budget_bytes_left_for_chunks"]
  fraction = (resident + 2.5 * per_teacher) / memory.device_memory_bytes()
  with config.unlocked():
    config.memory_fraction = fraction
  small = tt.plan(config)["train_plan"]
  assert len(programs) == 2 and (min(local, 8), 240) not in probes
  assert small["teachers_per_chunk"] == 2 and small["teacher_chunks"] == local // 2
  assert small["estimate_bytes_per_chunk"] <= small["budget_bytes_left_for_chunks"]


@pytest.mark.slow
def test_train_student_plan_with_and_without_votes(digits_votes_dir, data_dir, monkeypatch):
  ts = _script("train_student")
  config = _config("student_supervised", "cpu", votes_dir=str(digits_votes_dir),
                   data_dir=str(data_dir))
  config.student.kwargs.model = "mlp"
  config.student.kwargs.model_kwargs = {"hidden": (16,)}
  config.aggregate.num_queries = 50
  p = ts.plan(config)
  assert p["votes_dataset"] == "digits" and p["pool_size"] == p["votes_num_pool"]
  assert p["pool_size"] + p["num_eval"] == p["votes_rows"]
  assert p["labelled"] == 50 and p["num_classes"] == 10
  assert p["parameters"] == (64 * 16 + 16 + 16 * 10 + 10)  # 8×8 digits, one hidden layer
  assert p["parameter_bytes"] == 4 * p["parameters"] <= p["state_bytes"]
  assert isinstance(p["train_step_temp_bytes_per_batch"], int)
  assert p["epochs"] == pytest.approx(p["num_steps"] * p["batch_size"] / p["pool_size"])
  with config.unlocked():
    config.num_seeds = 3  # three students' states, stacked, in one program
  seeds = ts.plan(config)
  assert seeds["num_seeds"] == 3 and seeds["state_bytes"] == 3 * p["state_bytes"]
  assert seeds["train_step_temp_bytes_per_batch"] >= p["train_step_temp_bytes_per_batch"]

  with config.unlocked():
    config.num_seeds = 1
    config.votes_dir = ""
  seen = _abstract_shapes(monkeypatch)
  p = ts.plan(config)  # before the teachers ran: MNIST's student split
  assert seen[0][-3:] == [((9_000, 28, 28, 1), "float32"), ((50,), "int32"), ((50,), "int32")]
  assert p["votes"].startswith("MISSING") and (p["pool_size"], p["num_eval"]) == (9_000, 1_000)
  assert p["image_shape"] == (28, 28, 1)


@pytest.mark.slow
def test_the_release_plan_says_the_rules_order_is_for_this_query_count():
  """The rule's order is for this run's num_queries; a budget already created keeps its
  own (the dry run cannot tell which without reading the private ledger)."""
  from pate_jax.stages import aggregate  # pylint: disable=g-import-not-at-top
  gnmax = aggregate.release_plan(_config("aggregate_mnist", "cpu", mechanism="gnmax"), 10)
  assert gnmax["order_from"].startswith("the data-independent rule for config.num_queries")
  config = _config("aggregate_mnist", "cpu", mechanism="gnmax")
  config.release.order = 20.0
  fixed = aggregate.release_plan(config, 10)
  assert "order_from" not in fixed and fixed["order"] == 20.0


def test_the_aggregate_plan_measures_the_key_the_run_draws_from(digits_votes_dir,
                                                               monkeypatch):
  """The answers' memory is planned with the run's key type: a secret key's four words by
  default, a threefry key with a research noise seed."""
  from pate_jax import rng  # pylint: disable=g-import-not-at-top
  seen, measure = [], experiment.compiled_temp_bytes
  monkeypatch.setattr(experiment, "compiled_temp_bytes",
                      lambda fn, key, *args: seen.append(key.dtype) or measure(fn, key, *args))
  votes = str(digits_votes_dir)
  for seed in (None, 0):
    plan = _script("aggregate").plan(_config("aggregate_mnist", "cpu", votes_dir=votes,
                                             noise_seed=seed))
    assert isinstance(plan["answer_temp_bytes_per_chunk"], int)
  assert seen == [rng.SECRET_KEY_DTYPE, jax.random.key_dtype("threefry2x32")]


def test_votes_scripts_plan_with_votes_and_say_when_missing(digits_votes_dir, tmp_path):
  votes = str(digits_votes_dir)
  missing = str(tmp_path / "none")
  agg = _script("aggregate").plan(_config("aggregate_mnist", "cpu", votes_dir=votes))
  assert agg["votes_num_teachers"] == 20 and agg["num_queries_within_pool"]
  assert isinstance(agg["answer_temp_bytes_per_chunk"], int)
  assert _script("aggregate").plan(_config("aggregate_mnist", "cpu"))["votes"].startswith(
      "MISSING")
  rel = _script("release_epsilon").plan(_config("release_epsilon", votes_dir=missing))
  assert rel["votes"].startswith("MISSING") and rel["num_orders"] > 100
  fig2 = _script("plot_aggregation").plan(_config("plot_aggregation",
                                                  runs=f"{votes},{missing}"))
  assert fig2["runs"] == 2 and fig2["run0"]["queries"] == fig2["run0"]["votes_rows"]
  assert fig2["run1"]["votes"].startswith("MISSING")
  gap = _script("plot_gap").plan(_config("plot_gap", runs=votes))
  assert gap["run0"]["votes_num_classes"] == 10
  assert _script("plot_students").plan(_config("plot_students", runs=missing))[
      "run0"].startswith("MISSING")


def _abstract_shapes(monkeypatch):
  """Stubs ``experiment.compiled_temp_bytes`` (compiling the accounting programs takes
  seconds; the aggregate test compiles one for real): records the abstract arguments and
  checks the function traces on them."""
  seen = []

  def stub(fn, *args):
    jax.eval_shape(fn, *args)
    seen.append([(a.shape, str(a.dtype)) for a in jax.tree.leaves(args)])
    return 0
  monkeypatch.setattr(experiment, "compiled_temp_bytes", stub)
  return seen


def test_bench_attack_tabular_and_kd_gan_plans(real_adult_dir, monkeypatch):
  seen = _abstract_shapes(monkeypatch)
  acc = _script("bench_accounting").plan(_config("bench_accounting", "small",
                                                 num_queries=200))
  assert acc["votes_bytes"] == 200 * 10 * 8 and acc["accounting_temp_bytes"] == 0
  ss = _script("bench_smooth_sensitivity").plan(_config("bench_smooth_sensitivity", "small",
                                                        num_queries=50))
  assert ss["num_queries"] == 50 and ss["release_temp_bytes"] == 0
  assert seen == [[((200, 10), "float64")], [((50, 10), "float64")]]
  ba = _script("bench_attack").plan(_config("attack_bench", "cpu"))
  assert ba["sweep_attacks"] == ba["histograms"] * len(ba["sigmas"])
  monkeypatch.setattr(memory, "temp_bytes", lambda fn, *args: len(seen.append(
      [a.shape for a in jax.tree.leaves(args)]) or []) + 1000)  # not compiled (seconds)
  bt = _script("bench_teachers").plan(_config("bench_teachers", num_teachers=6,
                                              examples_per_teacher=16))
  assert [s for s in seen[-1] if len(s) == 5] == [(min(6, 8), 16, 28, 28, 1)]  # probe images
  assert bt["examples_per_step"] == 96
  # 784 → 256 → 256 → 10, full batch: forward, kernel gradients and the input gradients
  # but the first layer's, two FLOPs per multiply-accumulate (pate_jax.flops).
  forward = 784 * 256 + 256 * 256 + 256 * 10
  assert bt["flops_per_example"] == 2 * (3 * forward - 784 * 256)
  assert bt["flops_per_step"] == 96 * bt["flops_per_example"]
  assert (bt["padded_teachers"] // bt["devices"]) % bt["vmap_train_plan"][
      "teachers_per_chunk"] == 0
  fixed = _script("attack").plan(_config("attack_fixed", "cpu"))
  assert fixed["attacks"] == fixed["histograms"] * len(fixed["sigmas"]) * fixed["num_seeds"]
  assert _script("attack").plan(_config("attack_dirichlet", "cpu"))["histograms"] == 24
  tab = _script("tabular").plan(_config("adult_rf", "cpu", data_dir=str(real_adult_dir)))
  assert tab["rows_per_teacher"] == tab["train_rows"] // 25 and tab["num_pool_valid"]
  assert tab["eval_rows"] == tab["query_rows"] - 500
  kd = _script("train_kd_gan").plan(_config("kd_gan", "smoke"))
  assert kd["table1_fits"] == 4 and kd["num_seeds"] == 2


def test_the_sound_plan_says_when_votes_have_no_soft_counts(tmp_path):
  """A votes.npz of float probabilities only (written before the integer soft counts) is
  reported as missing what the sound release needs; soft counts on other rows than
  MNIST's student split, or public inputs from the training split, as refused; the
  teachers' own votes are not."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from pate_jax import data, votes as votes_lib  # pylint: disable=g-import-not-at-top
  split = data.student_split("mnist", 10_000)
  index = np.concatenate([split.pool_index, split.eval_index])
  votes, y = np.tile([[3, 1], [2, 2]], (5_000, 1)), np.tile([0, 1], 5_000)
  counts = np.full((1, 10_000, 2), 65_536 * 2)
  votes_lib.save_votes(tmp_path / "old" / "votes.npz", votes, y, index=index,
                       probabilities=np.full((1, 10_000, 2), 0.5), temperatures=(1.0,))
  votes_lib.save_votes(tmp_path / "rows" / "votes.npz", votes, y, temperatures=(1.0,),
                       soft_counts=counts)
  votes_lib.save_votes(tmp_path / "new" / "votes.npz", votes, y, index=index,
                       temperatures=(1.0,), num_pool=len(split.pool_index), dataset="mnist",
                       soft_counts=counts)
  seen = {}
  for name, public in (("old", "pool"), ("rows", "pool"), ("new", "train"), ("new", "pool")):
    config = _config("kd_gan_sound", "smoke")
    config.sound.votes_dir, config.public = str(tmp_path / name), public
    seen[name, public] = _script("train_kd_gan").plan(config)["sound"]["votes"]
  assert seen["old", "pool"].startswith("MISSING soft_counts")
  assert seen["rows", "pool"].startswith("REFUSED: config.sound.votes_dir")
  assert seen["new", "train"].startswith("REFUSED: config.public must be 'pool'")
  assert seen["new", "pool"] == str(tmp_path / "new")


@pytest.mark.slow
def test_command_line_dry_run_prints_mesh_and_chunks_and_creates_nothing(data_dir, tmp_path):
  workdir = tmp_path / "w"
  proc = subprocess.run(
      [sys.executable, "experiments/train_teachers.py", "--config", "configs/mnist_250.py:cpu",
       "--workdir", str(workdir), "--dry_run"],
      cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
      env=dict(os.environ, PYTHONPATH=_scripts.python_path(), PATE_JAX_NO_PROGRESS="1",
               PATE_JAX_DATA_DIR=str(data_dir),
               XLA_FLAGS=os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8",
               JAX_PLATFORMS="cpu"))  # the 8 host devices, where an accelerator is present too
  assert proc.returncode == 0, proc.stderr[-3000:]
  out = proc.stdout
  assert "  num_teachers: 250" in out and "  model.name: 'mlp'" in out  # the config
  assert "  global_device_count: 8" in out and "  teacher_mesh.teachers: 8" in out
  assert "  examples_per_teacher: 240" in out and "  padded_teachers: 256" in out
  assert "  train_plan.teachers_per_chunk: " in out and "  predict_plan.queries_per_chunk: " in out
  assert not workdir.exists()


@pytest.mark.slow
def test_main_job_and_ablation_plans(data_dir, tmp_path, monkeypatch):
  _abstract_shapes(monkeypatch)
  monkeypatch.setattr(memory, "temp_bytes", lambda fn, *args: 8 * 10**6)
  config = _config("pate_mnist", "cpu")
  config.teachers.data_dir = config.student.data_dir = str(data_dir)
  p = _script("run_pate").plan(config)
  assert p["teachers"]["num_teachers"] == 250 and p["teachers"]["examples_per_teacher"] == 240
  # The votes are the job's own (its teachers stage writes them), not missing.
  assert p["student"]["votes"].startswith("the teachers stage's") and (
      p["student"]["pool_size"] == 9_000)
  assert "MISSING" not in experiment.dry_run_text(config, p, {})
  config.teachers.dataset = "digits"  # the student's sizes follow the teachers' dataset
  digits = _script("run_pate").plan(config)["student"]
  assert digits["pool_size"] == 450 and digits["sizes_from"].startswith("digits student split")
  assert p["aggregate"] == {"mechanism": "gnmax", "num_queries": 100}
  assert p["attack"]["histograms"] == 5 and p["attack"]["repeats_each"] == 10_000
  on_accelerator = jax.devices()[0].platform != "cpu"  # host work beside it, else none
  assert p["host_work_beside_the_accelerator"] == {
      "compile_accounting_ahead": on_accelerator, "compile_student_ahead": on_accelerator,
      "attack_beside_student": on_accelerator}
  assert p["teachers"]["compile_ahead"] == on_accelerator  # vmapped there, a loop here
  text = experiment.dry_run_text(config, p, {})
  assert "  teachers.train_plan.description: " in text and "  attack.histograms: 5" in text

  ablate = _script("ablate")
  c = _config("ablation_mnist")
  p = ablate.plan(c)
  assert p["cells"] == 3 * 5 * 10 * 5 and p["votes"].startswith("MISSING")
  predictions = np.array([[0, 1, 1], [0, 1, 2], [1, 1, 2]], np.int32)  # [T, Q]
  votes_lib.save_votes(tmp_path / "votes.npz", votes=votes_lib.histogram(predictions, 3), labels=[0, 1, 2],
                       index=[0, 1, 2], num_pool=3, dataset="toy", predictions=predictions)
  c.votes_dir, c.num_queries, c.teacher_counts = str(tmp_path), 3, (1, 3)
  p = ablate.plan(c)
  assert p["predictions"] == "[3, 3]" and p["teacher_counts_within_ensemble"]
  assert p["noise_bytes_estimate"] == 3 * 2 * 10 * 5 * 3 * 3 * 8  # float64 noise


def test_report_plan_counts_the_runs_present(tmp_path):
  c = _config("report")
  c.runs_dir = str(REPO / "results" / "runs")
  p = _script("report").plan(c)
  assert p["runs_present"] == p["runs"] and p["runs_missing"] == "none"
  c.runs_dir = str(tmp_path)
  assert _script("report").plan(c)["runs_present"] == 0


def test_results_files_hold_no_absolute_path(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  workdir = tmp_path / "runs" / "x"
  path = experiment.write_results(
      workdir, {"workdir": str(workdir), "figure": workdir / "a.png", "label": "1/γ"},
      config={"votes_dir": str(tmp_path / "teachers")}, seed=0)
  record = json.loads(path.read_text())
  assert record["results"] == {"workdir": "runs/x", "figure": "runs/x/a.png", "label": "1/γ"}
  assert record["config"]["votes_dir"] == "teachers"
  assert str(tmp_path) not in path.read_text()


def test_deterministic_kernels_are_asked_for_by_a_nested_stage_config():
  from pate_jax.experiment import _main  # pylint: disable=import-outside-toplevel
  main_job = _config("pate_mnist", "cpu")  # the pipeline nests the teachers' config
  assert "deterministic" not in main_job and main_job.teachers.deterministic
  assert _main.deterministic_requested(main_job) is True
  assert _main.deterministic_requested(_config("mnist_250", "cpu")) is True
  assert _main.deterministic_requested(_config("aggregate_mnist", "cpu")) is None
  # The GPU acceptance's second teachers benchmark runs without the flag, others kept.
  flags = f"--xla_dump_to=d {_main.DETERMINISTIC_FLAG} --xla_gpu_deterministic_ops=false"
  assert _main.without_deterministic_flag(flags) == "--xla_dump_to=d"


def test_fast_compile_is_asked_for_before_the_backend_and_refused_after(monkeypatch):
  from pate_jax.experiment import _main  # pylint: disable=import-outside-toplevel
  assert _config("gpu_acceptance", "cpu_rehearsal").fast_compile is True
  assert _config("gpu_acceptance").fast_compile is False  # the GPU command: XLA's defaults
  monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=d")
  assert _main.set_fast_compile(False) is False and os.environ["XLA_FLAGS"] == "--xla_dump_to=d"
  monkeypatch.setattr(_main, "backend_started", lambda: False)
  monkeypatch.setattr(_main, "compiles_for_cpu_only", lambda: False)  # an accelerator may run
  assert _main.set_fast_compile(True) is False and os.environ["XLA_FLAGS"] == "--xla_dump_to=d"
  monkeypatch.setattr(_main, "compiles_for_cpu_only", lambda: True)
  assert _main.set_fast_compile(True) is True
  assert os.environ["XLA_FLAGS"] == f"--xla_dump_to=d {_main.FAST_COMPILE_FLAG}"
  assert _main.set_fast_compile(True) is True  # already there: added once
  assert os.environ["XLA_FLAGS"].count(_main.FAST_COMPILE_FLAG) == 1
  monkeypatch.setenv("XLA_FLAGS", "")
  monkeypatch.setattr(_main, "backend_started", lambda: True)
  with pytest.raises(RuntimeError, match="fast_compile=True must be set before JAX starts"):
    _main.set_fast_compile(True)


@pytest.mark.parametrize("platforms, installed, cpu_only", [
    ("cpu", True, True), ("cuda", False, False), ("cpu,cuda", False, False),
    (" cpu ", True, True), ("", False, True), ("", True, False), (None, True, False)])
def test_fast_compile_only_where_every_backend_is_a_cpu(monkeypatch, platforms, installed,
                                                       cpu_only):
  """XLA:GPU reads the fast-compile flag too: it is asked for only where JAX_PLATFORMS names
  only the CPU, or (unset) no accelerator is installed."""
  from pate_jax.experiment import _main  # pylint: disable=import-outside-toplevel
  if platforms is None:
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
  else:
    monkeypatch.setenv("JAX_PLATFORMS", platforms)
  monkeypatch.setattr(_main, "accelerator_installed", lambda: installed)
  assert _main.compiles_for_cpu_only() is cpu_only
