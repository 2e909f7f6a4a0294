"""The GPU acceptance command (experiments/gpu_acceptance.py, pate_jax/stages/gpu_acceptance.py):
stage selection, the targets computed from results, the memory planner's numbers at another
device size, the test-suite stage, the GPU rows of the report, and (slow) the CPU rehearsal
of the whole command in two calls: the second resumes from the first one's archive."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import tarfile

import jax
import ml_collections
import numpy as np
import pytest

from pate_jax import experiment, memory
from pate_jax import reproduction as rp
from pate_jax.stages import gpu_acceptance as ga
from pate_jax.stages import suite
from pate_jax.stages.bench import teachers as bench_teachers

import _scripts  # tests/_scripts.py  # pylint: disable=g-bad-import-order

REPO = pathlib.Path(__file__).resolve().parent.parent
_config = _scripts.config


def test_stage_one_is_the_default_paper_config_without_override():
  c = _config("gpu_acceptance")
  assert c.pate_mnist.to_dict() == _config("pate_mnist").to_dict()
  assert c.pate_mnist.teachers.model.name == "mnist_cnn" and c.pate_g.num_steps == 27_000
  assert c.kd_gan.num_seeds == 20 and c.kd_gan.curve.max_epsilon == 8.0
  assert c.bench_teachers.model.name == "mnist_cnn" and not c.publish_dir
  assert not _config("gpu_acceptance", "cpu_rehearsal").publish_dir


def test_select_by_stage_number_and_run_name():
  c = _config("gpu_acceptance")
  every = [n for _, n in ga.runs(c)]
  assert every == ["pate_mnist", "bench_teachers_nondeterministic", "bench_teachers",
                   "bench_accounting", "bench_student", "pate_g_100", "pate_g_1000",
                   "pate_g_shift_100", "pate_g_cgn", "mnist_baseline", "kd_gan", "tests_fast",
                   "tests_slow"]
  assert ga.select(c) == every
  c.stages = "3, 1"
  assert ga.select(c) == ["pate_mnist", "pate_g_100", "pate_g_1000", "pate_g_shift_100",
                          "pate_g_cgn", "mnist_baseline"]
  c.stages = "tests_slow,2"
  assert ga.select(c) == ["bench_teachers_nondeterministic", "bench_teachers",
                          "bench_accounting", "bench_student", "tests_slow"]
  c.stages = "6"
  with pytest.raises(ValueError, match="config.stages: '6'"):
    ga.select(c)
  for commas in (",", " , ,"):  # a typo selected nothing, and the call ran nothing
    c.stages = commas
    with pytest.raises(ValueError, match="config.stages: .* names no stage"):
      ga.select(c)
  for name in every:  # every run has an expected wall for --dry_run
    assert ("pate_g" if name.startswith("pate_g_") else name) in c.expected_wall_s


def _write(root: pathlib.Path, name: str, results: dict) -> None:
  experiment.write_results(root / name, results, config={}, seed=None)


def test_targets_are_computed_from_the_results(tmp_path):
  c = _config("gpu_acceptance")
  t = ga.targets(c, tmp_path)
  assert all(v["met"] is None for v in t.values()) and len(t) == 11  # nothing run yet
  _write(tmp_path, "pate_mnist", {"wall_seconds": 59.0, "private": {
      "teachers": {"teacher_test_accuracy": {"mean": 0.93}}}})
  _write(tmp_path, "bench_teachers", {"strategies": {"vmap": {"examples_per_second": 3.1e5}}})
  _write(tmp_path, "bench_accounting", {"public_api_over_kernel_device_votes": 3.0,
                                        "public_api_over_kernel_host_votes": 12.0})
  _write(tmp_path, "pate_g_100", {"eval_accuracy": 0.981, "num_seeds": 3, "private": {
      "epsilon": {"moments_data_dependent": {"epsilon": 2.05}}}})
  _write(tmp_path, "pate_g_shift_100", {"eval_accuracy": 0.979})
  _write(tmp_path, "pate_g_cgn", {"eval_accuracy": 0.984,
                                  "epsilon_release": {"epsilon_released": 1.9}})
  _write(tmp_path, "tests_fast", {"failures": 0, "errors": 0})
  _write(tmp_path, "tests_slow", {"failures": 0, "errors": 0, "interrupted": True})
  t = ga.targets(c, tmp_path)
  assert {k: v["met"] for k, v in t.items()} == {
      "main_job_wall": True, "main_job_no_oom": True, "teacher_accuracy": False,
      "examples_per_second": True, "pate_g_accuracy": True, "pate_g_epsilon": False,
      "pate_g_shift_accuracy": False,
      "api_over_kernel": False, "suite_passes": None,  # the slow tier was interrupted
      "cgn_accuracy": False, "cgn_epsilon": True}
  assert t["api_over_kernel"]["value"] == 12.0 and t["pate_g_epsilon"]["value"] == 2.05
  # Students side by side: the target reads their mean, and says so.
  assert "held-out accuracy, the mean of 3 students >= 0.98" in t["pate_g_accuracy"]["target"]
  assert t["cgn_accuracy"]["target"].endswith("held-out accuracy >= 0.985")  # one student
  # A failure before the interruption already fails the target.
  _write(tmp_path, "tests_slow", {"failures": 0, "errors": 2, "interrupted": True})
  t = ga.targets(c, tmp_path)
  assert t["suite_passes"]["met"] is False and t["suite_passes"]["value"] == "2 failed or errored"
  # A group that ran no test (its JUnit file elsewhere) does not pass.
  _write(tmp_path, "tests_slow", {"tests": 0, "failures": 0, "errors": 0})
  t = ga.targets(c, tmp_path)
  assert t["suite_passes"]["met"] is False
  assert t["suite_passes"]["value"] == "0 failed or errored; no test ran in slow"
  _write(tmp_path, "tests_slow", {"failures": 1, "errors": 0})
  (tmp_path / "pate_mnist" / "results.json").unlink()
  (tmp_path / "pate_mnist" / "error.txt").write_text("XlaRuntimeError: RESOURCE_EXHAUSTED: ...")
  t = ga.targets(c, tmp_path)
  assert t["suite_passes"]["met"] is False and t["main_job_no_oom"]["met"] is False
  assert t["main_job_wall"]["met"] is None


def test_private_targets_are_printed_and_reported_as_private(tmp_path, capsys):
  """The teachers' accuracy and the data-dependent ε are private, and so is whether they met
  their thresholds; so are the students' targets where their labels came from a research
  noise seed (stage 3's): their lines say so on screen, and RESULTS.md marks their rows."""
  c = _config("gpu_acceptance")
  _write(tmp_path, "pate_mnist", {"wall_seconds": 59.0, "private": {
      "teachers": {"teacher_test_accuracy": {"mean": 0.95}}}})
  research = {"noise_source": {"source": "research seed", "public": True}}
  _write(tmp_path, "pate_g_100", {"eval_accuracy": 0.981, **research, "private": {
      "epsilon": {"moments_data_dependent": {"epsilon": 1.5}}}})
  _write(tmp_path, "pate_g_shift_100", {"eval_accuracy": 0.988, **research})
  _write(tmp_path, "pate_g_cgn", {"eval_accuracy": 0.984, **research,
                                  "epsilon_release": {"epsilon_released": 1.5}})
  t = ga.targets(c, tmp_path)
  private = {k for k, v in t.items() if v["private"]}
  assert private == {"teacher_accuracy", "pate_g_epsilon", "pate_g_accuracy",
                     "pate_g_shift_accuracy", "cgn_accuracy", "cgn_epsilon"} == set(
                         rp.PRIVATE_TARGETS + rp.RESEARCH_SEED_TARGETS)
  # With secret noise the students' targets would be publishable.
  _write(tmp_path, "pate_g_100", {"eval_accuracy": 0.981, "noise_source": {"public": False}})
  assert not ga.targets(c, tmp_path)["pate_g_accuracy"]["private"]
  rows = {r.key.split(".")[1]: r for r in rp.GPU_ROWS if r.run == "acceptance_gpu"}
  assert rows and {k for k, r in rows.items() if r.private} == private | set(
      rp.COMMITTED_PRIVATE_TARGETS)
  # Every target the committed run's file calls private, the report marks (the file predates
  # the research-seed marks, which the report adds).
  committed = json.loads((pathlib.Path(__file__).parents[1] / "results" / "runs"
                          / "acceptance_gpu" / "results.json").read_text())["results"]["targets"]
  assert {k for k, v in committed.items() if v["private"]} == set(
      rp.PRIVATE_TARGETS + rp.COMMITTED_PRIVATE_TARGETS)
  ga.report({"status": {}, "targets": t, "results_json": "results.json"})
  lines = [line for line in capsys.readouterr().out.splitlines() if "target " in line]
  assert len(lines) == len(t)
  for line in lines:
    assert ("private (data owner only)" in line) == any(
        t[k]["target"] in line for k in private), line


def test_a_deadline_starts_only_the_runs_that_fit_and_each_run_is_handed_over(
    tmp_path, monkeypatch):
  """config.deadline_s: a run whose expected wall does not fit the time left is not started
  (a later one that fits still is); a test group's pytest is cut before the deadline; the
  archive and the published copies are written after every run, not only at the end."""
  c = _config("gpu_acceptance")
  c.stages, c.deadline_s = "bench_accounting,pate_g_100,pate_g_cgn,tests_fast", 100
  c.expected_wall_s.bench_accounting, c.expected_wall_s.pate_g = 5, 500
  archive, published = tmp_path / "a.tar.gz", tmp_path / "published"
  c.archive, c.publish_dir = str(archive), str(published)
  seen = []

  def fake_run(config, name, root):
    seen.append((name, float(config.tests.timeout_s), archive.exists(),
                 sorted(p.name for p in published.glob("*_gpu"))))
    _write(root, name, {"failures": 0, "errors": 0} if name.startswith("tests_") else {})
    return {}, None

  monkeypatch.setattr(ga, "_run_one", fake_run)
  s = ga.run(c, str(tmp_path / "w"))
  assert {n: st["status"].split(" (")[0] for n, st in s["status"].items()} == {
      "bench_accounting": "ran", "pate_g_100": "not started", "pate_g_cgn": "not started",
      "tests_fast": "ran"}
  assert "500 s expected" in s["status"]["pate_g_100"]["status"]
  (first, _, before_first, _), (last, timeout, before_last, pub) = seen
  assert (first, last, before_first, before_last) == ("bench_accounting", "tests_fast", False,
                                                      True)
  assert "bench_accounting_gpu" in pub and 80 < timeout <= 90  # cut 10 s before the deadline
  assert json.loads((tmp_path / "w" / "results.json").read_text())["results"]["status"] == (
      s["status"])
  # A copy of an owner-only file (the acceptance's summary, private as a whole) stays so.
  summary = published / "acceptance_gpu"
  assert (summary / "results.json").stat().st_mode & 0o777 == 0o600
  assert summary.stat().st_mode & 0o777 == 0o700
  for copy in published.glob("*_gpu/results.json"):
    source = tmp_path / "w" / copy.parent.name.removesuffix("_gpu") / "results.json"
    assert bool(copy.stat().st_mode & 0o077) == bool(source.stat().st_mode & 0o077), copy
  c.deadline_s = -1
  with pytest.raises(ValueError, match="config.deadline_s"):
    ga.run(c, str(tmp_path / "w2"))


def test_the_main_job_hands_its_spent_budget_over_before_its_student_trains(tmp_path,
                                                                            monkeypatch):
  """A call killed during the main job's student (its log shows the labels' noise) has
  archived the teachers' ledger as it was spent: the next call, on a fresh machine, finds
  the rows answered instead of answering them again with new secret noise."""
  c = _config("gpu_acceptance")
  c.stages, c.archive = "pate_mnist", str(tmp_path / "a.tar.gz")
  root = tmp_path / "w"

  def main_job_run(config, workdir, *, on_labels=None, prefix="config."):
    ledger = pathlib.Path(workdir) / "teachers" / "ledger.npz"
    ledger.parent.mkdir(parents=True)
    ledger.write_bytes(b"spent")
    on_labels()
    ledger.write_bytes(b"spent, then more")  # (a later spend: not this call's hand-over)
    raise KeyboardInterrupt  # killed while its student trains

  monkeypatch.setattr(ga.main_job, "run", main_job_run)
  with pytest.raises(KeyboardInterrupt):
    ga.run(c, str(root))
  with tarfile.open(c.archive) as tar:
    assert tar.extractfile("pate_mnist/teachers/ledger.npz").read() == b"spent"
  c.archive = ""  # without an archive, no hand-over is asked for
  monkeypatch.setattr(ga.main_job, "run", lambda config, workdir, *, on_labels=None, prefix="":
                      (on_labels is None) or pytest.fail("a hand-over without an archive"))
  ga._run_one(c, "pate_mnist", tmp_path / "w2")  # pylint: disable=protected-access


@pytest.mark.slow
def test_a_main_job_killed_after_its_labels_resumes_on_a_fresh_machine_without_new_noise(
    tmp_path):
  """The hand-over end to end: a tiny main job (secret noise) killed as its student starts,
  its archive unpacked into a fresh workdir with a fresh budget registry (another machine),
  and the main job run again there: its labels are the first call's, row for row, taken
  from the spent ledger (not drawn again)."""
  def config(registry):
    c = _scripts.config("pate_mnist", "cpu")
    c.teachers.dataset, c.teachers.gap_plot = "digits", False
    c.teachers.num_teachers, c.teachers.num_steps, c.teachers.checkpoint_every = 5, 10, 10
    c.aggregate.num_queries, c.aggregate.chunk_size = 20, 32
    c.aggregate.sigma, c.aggregate.epsilon_max = 2.0, 1000.0  # σ 2: 5 teachers
    c.aggregate.budget_registry = str(registry)
    c.student.num_steps, c.student.segment_steps, c.student.batch_size = 2, 2, 8
    c.student.student.kwargs.update(generator_hidden=(16,), discriminator_hidden=(16, 8),
                                    noise_dim=4)
    # The attack runs after the labels and spends nothing of the teachers' ledger (the one
    # it replays is simulated): off here; the rehearsal's main job
    # (test_cpu_rehearsal_of_every_stage_resumes_on_a_fresh_workdir) and
    # tests/test_neighbouring_votes.py run it.
    c.attack.enabled = False
    return c

  def killed():
    ga._archive(tmp_path / "w1", tmp_path / "a.tar.gz")  # pylint: disable=protected-access
    raise KeyboardInterrupt

  with pytest.raises(KeyboardInterrupt):
    ga.main_job.run(config(tmp_path / "registry_1"), str(tmp_path / "w1" / "pate_mnist"),
                    on_labels=killed)
  with tarfile.open(tmp_path / "a.tar.gz") as tar:
    tar.extractall(tmp_path / "w2")
  ga.main_job.run(config(tmp_path / "registry_2"), str(tmp_path / "w2" / "pate_mnist"))
  first, second = (np.load(tmp_path / w / "pate_mnist" / "aggregate" / "labels.npz")
                   for w in ("w1", "w2"))
  np.testing.assert_array_equal(first["query_index"], second["query_index"])
  np.testing.assert_array_equal(first["labels"], second["labels"])
  # Nothing asked anew, nothing charged: the same ledger, not a second draw.
  again = experiment.read_results(tmp_path / "w2" / "pate_mnist" / "aggregate")
  assert again["num_asked_now"] == 0, again
  spent = []
  for w in ("w1", "w2"):
    with np.load(tmp_path / w / "pate_mnist" / "teachers" / "ledger.npz") as f:
      spent.append(float(f["ledger_epsilon"]))
  assert spent[0] == spent[1] > 0


def _bench(examples_per_second: dict, deterministic: bool) -> dict:
  return {"deterministic_ops": deterministic, "strategies": {
      s: {"examples_per_second": v} for s, v in examples_per_second.items()}}


def test_deterministic_slowdown_compares_the_two_teachers_benchmarks(tmp_path):
  c = _config("gpu_acceptance")
  assert ga.deterministic_slowdown(tmp_path)["value"] is None  # neither ran
  _write(tmp_path, "bench_teachers", _bench({"vmap": 9.4e4, "loop": 5.0e4}, True))
  assert ga.deterministic_slowdown(tmp_path)["by_strategy"] == {}
  _write(tmp_path, "bench_teachers_nondeterministic",
         _bench({"vmap": 1.88e5, "loop": 6.0e4}, False))
  d = ga.deterministic_slowdown(tmp_path)
  assert d["value"] == pytest.approx(2.0) and d["by_strategy"]["loop"] == pytest.approx(1.2)
  assert d["deterministic_ops"] == {"bench_teachers_nondeterministic": False,
                                    "bench_teachers": True} and "note" not in d
  # The target keeps reading the deterministic run (the paper config's kernels).
  assert ga.targets(c, tmp_path)["examples_per_second"]["value"] == 9.4e4
  _write(tmp_path, "bench_teachers", _bench({"vmap": 9.4e4}, False))
  assert "does not measure" in ga.deterministic_slowdown(tmp_path)["note"]
  fast = _bench({"vmap": 1.88e5}, False)
  fast["strategies"]["vmap"]["teachers_per_chunk"] = 125  # a device shared with this process
  _write(tmp_path, "bench_teachers_nondeterministic", fast)
  assert "vmap: 125 teachers per chunk without, None with" in ga.deterministic_slowdown(
      tmp_path)["note"]


@pytest.fixture(scope="module")
def stage_two(tmp_path_factory):
  """Stage 2's teachers benchmarks (the rehearsal's, vmap only) run once by :func:`ga.run`
  for the tests below, with deterministic kernels asked for in ``XLA_FLAGS`` -- the only
  difference on a CPU, whose XLA ignores the flag: ``(workdir, the call's summary)``. The
  deterministic run, ``bench_teachers``, is :func:`bench_teachers.run` in this process."""
  root = tmp_path_factory.mktemp("stage_two")
  with pytest.MonkeyPatch.context() as monkeypatch:
    monkeypatch.setenv("XLA_FLAGS", f"--xla_cpu_enable_fast_math=false "
                       f"{experiment.DETERMINISTIC_FLAG}")
    c = _config("gpu_acceptance", "cpu_rehearsal")
    c.bench_teachers.strategies = ("vmap",)
    c.stages = "bench_teachers_nondeterministic,bench_teachers"
    return root, ga.run(c, str(root))


@pytest.mark.slow
def test_teachers_benchmark_counts_flops_from_the_jaxpr(stage_two):
  # The benchmark in this process (stage two's bench_teachers: bench_teachers.run's results).
  r = experiment.read_results(stage_two[0] / "bench_teachers")
  # 4 teachers × 16 examples, 784 → 16 → 10: forward, kernel gradients and the second
  # layer's input gradient, counted from the jaxpr; XLA's count adds the elementwise ops.
  assert r["flops_source"] == "jaxpr" and r["deterministic_ops"] is True
  assert r["flops_per_example"] == 2 * (3 * (784 * 16 + 16 * 10) - 784 * 16)
  assert r["flops_per_step"] == 64 * r["flops_per_example"]
  if r["flops_per_step_xla"] is not None or jax.default_backend() == "cpu":  # none on a GPU
    assert r["flops_per_step"] <= r["flops_per_step_xla"] <= 1.5 * r["flops_per_step"]
  vmap = r["strategies"]["vmap"]
  assert vmap["achieved_tflops"] == pytest.approx(
      r["flops_per_example"] * vmap["examples_per_second"] / 1e12)


@pytest.mark.slow
def test_stage_two_runs_the_teachers_benchmark_with_and_without_deterministic_kernels(
    stage_two):
  root, s = stage_two
  assert {n: st["status"] for n, st in s["status"].items()} == {
      "bench_teachers_nondeterministic": "ran", "bench_teachers": "ran"}
  fast, det = (experiment.read_results(root / n) for n in (
      "bench_teachers_nondeterministic", "bench_teachers"))
  # This process holds the flag, the subprocess's environment does not (other flags kept).
  assert (fast["deterministic_ops"], det["deterministic_ops"]) == (False, True)
  assert fast["xla_env"]["XLA_FLAGS"] == "--xla_cpu_enable_fast_math=false"
  assert "vmap" in (root / "bench_teachers_nondeterministic" / "subprocess.log").read_text()
  assert fast["flops_per_step"] == det["flops_per_step"]
  assert s["deterministic_slowdown"]["value"] == pytest.approx(
      fast["strategies"]["vmap"]["examples_per_second"]
      / det["strategies"]["vmap"]["examples_per_second"])


_NESTED_BAD = [
    ("mnist_baseline", "baseline.num_teachers", 0,
     r"config\.baseline\.num_teachers must be an integer >= 1; got 0$"),
    ("mnist_baseline", "baseline.learning_rate", -1.0,
     r"config\.baseline\.learning_rate must be > 0"),
    ("bench_teachers", "bench_teachers.num_teachers", 0,
     r"config\.bench_teachers\.num_teachers must be an integer >= 1; got 0$"),
    ("bench_teachers", "bench_teachers.max_shift", 100,
     r"config\.bench_teachers\.max_shift must be smaller than the images' height and width "
     r"\(config\.bench_teachers\.image_shape \(H, W, C\)\)"),
    ("bench_teachers_nondeterministic", "bench_teachers.repeats", 0,
     r"config\.bench_teachers\.repeats must be an integer >= 1; got 0$"),
    ("pate_mnist", "pate_mnist.teachers.num_teachers", 0,
     r"config\.pate_mnist\.teachers\.num_teachers must be an integer >= 1; got 0$"),
    ("pate_mnist", "pate_mnist.aggregate.num_queries", 0,
     r"config\.pate_mnist\.aggregate\.num_queries must be an integer >= 1; got 0$"),
    ("pate_mnist", "pate_mnist.student.segment_steps", 0,
     r"config\.pate_mnist\.student\.segment_steps must be an integer >= 1; got 0$"),
    ("pate_mnist", "pate_mnist.student.labels", "plurality",
     r"config\.pate_mnist\.student\.labels must be 'noisy' in the main job"),
    ("pate_mnist", "pate_mnist.attack.device", "gpu",
     r"config\.pate_mnist\.attack\.device must be one of"),
    ("bench_accounting", "bench_accounting.devices", 0,
     r"config\.bench_accounting\.devices must be an integer >= 1; got 0$"),
    ("bench_accounting", "bench_accounting.sigma", -1.0,
     r"config\.bench_accounting\.sigma must be > 0; got -1\.0$"),
    ("bench_student", "bench_student.repeats", 0,
     r"config\.bench_student\.repeats must be an integer >= 1; got 0$"),
    ("pate_g_100", "pate_g.num_steps", 0,
     r"config\.pate_g\.num_steps must be an integer >= 1; got 0$"),
    ("pate_g_shift_100", "pate_g.labels", "noisiest",
     r"config\.pate_g\.labels must be one of"),
    ("pate_g_cgn", "pate_g_cgn.aggregate.delta", 2.0,
     r"config\.pate_g_cgn\.aggregate\.delta must lie in \(0, 1\); got 2\.0$"),
    ("kd_gan", "kd_gan.clip", -1.0, r"config\.kd_gan\.clip must be > 0; got -1\.0$"),
    ("kd_gan", "kd_gan.table1.lambdas", (0.5, 2.0),
     r"config\.kd_gan\.table1\.lambdas must lie in \[0, 1\]; got 2\.0$"),
    ("kd_gan", "kd_gan.noise_seed", -3, r"config\.kd_gan\.noise_seed must be None"),
]


def _set(c, path: str, value) -> None:
  *parents, field = path.split(".")
  for name in parents:
    c = c[name]
  with c.ignore_type():
    c[field] = value


@pytest.mark.parametrize("variant", ["", "cpu_rehearsal"])
@pytest.mark.parametrize("name, path, value, match", _NESTED_BAD)
def test_a_bad_nested_setting_is_refused_by_its_nested_name_before_any_run(
    tmp_path, monkeypatch, variant, name, path, value, match):
  """Each nested config's settings were refused as config.<field> (their own scripts'
  names), and only once their run's turn came (after the runs before it), or, for the main
  job's student and the KD-GAN, after their teachers trained. Now the call and --dry_run
  refuse them as the user types them (``--config.kd_gan.clip``) before any run starts or is
  planned, whether all the runs are selected or that run alone."""
  c = _config("gpu_acceptance", variant or None)
  _set(c, path, value)

  def nothing_runs(*args):
    raise AssertionError(f"{args[1]} started before the bad setting was refused")

  monkeypatch.setattr(ga, "_run_one", nothing_runs)
  monkeypatch.setattr(ga, "_plan_one", nothing_runs)
  for stages in ("all", name):
    c.stages = stages
    with pytest.raises(ValueError, match="^" + match):
      ga.plan(c)
    with pytest.raises(ValueError, match="^" + match):
      ga.run(c, str(tmp_path / "w"))
    assert not (tmp_path / "w").exists()


def test_each_run_names_its_fields_and_restart_flag_by_its_nested_config(tmp_path,
                                                                         monkeypatch):
  """What a stage refuses once it runs (a batch larger than the votes' pool, a resume of
  other settings) is named as the user types it: every run gets its nested config's prefix,
  and its restart flag is that config's (``--config.pate_g_cgn.restart``, not
  ``--config.pate_g.restart``; the main job's teachers ``--config.pate_mnist.teachers.``)."""
  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import kd_gan, main_job, student, teachers
  from pate_jax.stages.bench import accounting as bench_accounting
  from pate_jax.stages.bench import student as bench_student
  seen = {}

  def spy(module):
    def run(config, workdir, **kwargs):
      seen[pathlib.Path(workdir).name] = (kwargs["prefix"], kwargs.get("restart_flag"))
      return {}
    monkeypatch.setattr(module, "run", run)

  for module in (kd_gan, main_job, student, teachers, bench_accounting, bench_student,
                 bench_teachers):
    spy(module)
  c = _config("gpu_acceptance")
  (tmp_path / "pate_mnist" / "teachers").mkdir(parents=True)
  (tmp_path / "pate_mnist" / "teachers" / "votes.npz").touch()
  for name in ("pate_mnist", "bench_teachers", "bench_accounting", "bench_student",
               "pate_g_100", "pate_g_shift_100", "pate_g_cgn", "mnist_baseline", "kd_gan"):
    ga._run_one(c, name, tmp_path)  # pylint: disable=protected-access
  assert seen == {
      "pate_mnist": ("config.pate_mnist.", None),
      "bench_teachers": ("config.bench_teachers.", None),
      "bench_accounting": ("config.bench_accounting.", None),
      "bench_student": ("config.bench_student.", None),
      "pate_g_100": ("config.pate_g.", "--config.pate_g.restart"),
      "pate_g_shift_100": ("config.pate_g.", "--config.pate_g.restart"),
      "pate_g_cgn": ("config.pate_g_cgn.", "--config.pate_g_cgn.restart"),
      "mnist_baseline": ("config.baseline.", "--config.baseline.restart"),
      "kd_gan": ("config.kd_gan.", "--config.kd_gan.restart")}


def test_the_nested_checks_start_no_backend():
  """The checks of every run's nested config, made before any run, neither load data nor
  start JAX's backend: the nondeterministic teachers benchmark's subprocess runs first,
  while this process may not hold the device yet."""
  out = _scripts.run_result(
      "import json, sys\n"
      "from pate_jax import experiment\n"
      "from pate_jax.stages import gpu_acceptance as ga\n"
      "for variant in (None, 'cpu_rehearsal'):\n"
      "  c = experiment.load_script(sys.argv[1]).get_config(variant)\n"
      "  ga.check_runs(c, ga.select(c))\n"
      "print('RESULT ' + json.dumps({'started': experiment.backend_started()}))\n",
      str(REPO / "configs" / "gpu_acceptance.py"))
  assert out == {"started": False}


def test_at_budget_rescales_the_planner_chunks():
  gib = 2**30
  train = {"teachers_per_chunk": 25, "estimate_bytes_per_chunk": 25 * gib // 10,
           "budget_bytes_left_for_chunks": 6 * gib}  # host: 8 GiB budget, 2 GiB resident
  big = ga.at_budget(train, host_budget=8 * gib, budget=30 * gib, local=250)
  assert big["teachers_per_chunk"] == 250 and big["fits"]  # 0.1 GiB × 250 + 2 of 30
  assert big["resident_bytes"] == 2 * gib and big["estimate_bytes_per_chunk"] == 25 * gib
  small = ga.at_budget(train, host_budget=8 * gib, budget=12 * gib, local=250)
  assert small["teachers_per_chunk"] == 50  # the largest divisor of 250 within 100
  assert ga.at_budget(train, host_budget=8 * gib, budget=2 * gib, local=250).startswith(
      "DOES NOT FIT")
  predict = dict(train, queries_per_chunk=100, estimate_bytes_per_chunk=25 * 100 * 2**20)
  p = ga.at_budget(predict, host_budget=8 * gib, budget=10 * gib, local=250, num_queries=10_000)
  assert (p["teachers_per_chunk"], p["queries_per_chunk"]) == memory.plan_predict_chunks(
      250, 10_000, 2**20, 8 * gib)
  # A CPU host's estimate carries its analysis factor; the GPU plan takes XLA's account alone.
  cpu_host = dict(train, estimate_bytes_per_chunk=8 * 25 * gib // 10, analysis_factor=8.0)
  assert ga.at_budget(cpu_host, host_budget=8 * gib, budget=12 * gib, local=250) == small
  assert ga.at_budget("DOES NOT FIT: x", host_budget=1, budget=1, local=1).startswith(
      "not measured")


@pytest.mark.slow
def test_plan_prints_every_run_with_its_memory_at_80_gib(data_dir, monkeypatch):
  monkeypatch.setattr(memory, "temp_bytes", lambda fn, *args: 8 * 10**6)
  monkeypatch.setattr(experiment, "compiled_temp_bytes", lambda fn, *args: 10**6)
  c = _config("gpu_acceptance", "cpu_rehearsal")
  for sub in (c.pate_mnist.teachers, c.pate_mnist.student, c.pate_g, c.pate_g_cgn, c.baseline,
              c.kd_gan):
    sub.data_dir = str(data_dir)
  p = ga.plan(c)
  assert p["fits_80gib"] == "every planned chunk fits"
  train = p["pate_mnist"]["at_80gib"]["teachers"]["train_plan"]
  assert train["budget_bytes"] == int(0.6 * 0.75 * 80 * 2**30) and train["fits"]
  assert p["mnist_baseline"]["at_80gib"]["predict_plan"]["fits"]
  assert p["bench_teachers"]["at_80gib"]["vmap_train_plan"]["fits"]
  nondet = p["bench_teachers_nondeterministic"]
  assert nondet["plan"]["process"].endswith("lack --xla_gpu_deterministic_ops")
  assert nondet["stage"] == 2 and nondet["expected_wall_s"] == 15
  assert p["pate_g_100"]["plan"]["labelled"] == 100 and p["pate_g_100"]["at_80gib"]["fits"]
  assert p["tests_fast"]["plan"]["command"].startswith("python -m pytest -q")
  assert set(p["expected_wall_s_per_stage"]) == {"1", "2", "3", "4", "5"}
  assert p["pate_g_cgn"]["plan"]["labelled"] == 640 and p["pate_g_cgn"]["at_80gib"]["fits"]
  assert p["bench_student"]["at_80gib"]["fits"] and p["bench_student"]["plan"]["state_bytes"]
  # Stages 1-5 expect 40, 45, 50, 20, 15 s: all of them fit one period, or only the first two.
  assert p["expected_wall_s_total"] == "170 s: all stages fit one 25-minute period"
  c.period_limit_s = 90
  assert ga.plan(c)["expected_wall_s_total"] == (
      "170 s > one 1.5-minute period: stages 1, 2 (85 s) fit it; the rest needs another period")
  text = experiment.dry_run_text(c, p, {})
  assert "  pate_mnist.at_80gib.teachers.train_plan.description: " in text


def test_junit_counts(tmp_path):
  xml = tmp_path / "junit.xml"
  xml.write_text('<testsuites><testsuite tests="4" failures="1" errors="1" skipped="1" '
                 'time="2.5"><testcase classname="tests.test_a" name="test_ok"/>'
                 '<testcase classname="tests.test_a" name="test_bad"><failure/></testcase>'
                 '<testcase classname="tests.test_b" name="test_err"><error/></testcase>'
                 '<testcase classname="tests.test_b" name="test_skip"><skipped/></testcase>'
                 '</testsuite></testsuites>')
  c = suite.junit_counts(xml)
  assert (c["tests"], c["passed"], c["failures"], c["errors"], c["skipped"]) == (4, 1, 1, 1, 1)
  assert c["failed"] == ["tests.test_a::test_bad", "tests.test_b::test_err"]
  assert suite.junit_counts(tmp_path / "none.xml")["tests"] == 0


def test_suite_workers_only_where_pytest_xdist_is_installed(monkeypatch):
  config = ml_collections.ConfigDict({"group": "g", "args": "-m 'not slow' tests",
                                      "timeout_s": 30, "require_data": False, "workers": 12})
  real = suite.importlib.util.find_spec
  for installed in (True, False):
    monkeypatch.setattr(suite.importlib.util, "find_spec",
                        lambda name, installed=installed: (object() if installed else None)
                        if name == "xdist" else real(name))
    assert suite.workers(config) == (12 if installed else 0)
    assert (" -n 12 -m 'not slow' tests " in suite.plan(config)["command"]) == installed
  config.workers = -1
  with pytest.raises(ValueError, match="workers must be >= 0"):
    suite.workers(config)
  assert _config("gpu_acceptance").tests.workers == 12
  assert _config("gpu_acceptance", "cpu_rehearsal").tests.workers == 0


@pytest.mark.slow
def test_suite_stage_counts_and_is_interrupted_at_its_limit(tmp_path):
  tests = tmp_path / "t" / "test_toy.py"
  tests.parent.mkdir()
  tests.write_text("import time\ndef test_ok(): pass\ndef test_bad(): assert False\n"
                   "def test_zslow(): time.sleep(600)\n")
  # The limit leaves pytest's start-up (its plugins import JAX) time on a loaded 2-core
  # machine: a SIGINT before pytest handles it would not interrupt a test.
  config = ml_collections.ConfigDict({"group": "toy", "args": str(tests),
                                      "timeout_s": 30, "require_data": False})
  r = suite.run(config, str(tmp_path / "w"))
  assert r["interrupted"] and (r["passed"], r["failures"], r["errors"]) == (1, 1, 0)
  # JUnit names the test from pytest's rootdir, which depends on the files above tmp_path.
  assert len(r["failed"]) == 1 and r["failed"][0].endswith("test_toy::test_bad")
  assert r["command"].endswith("--junitxml=junit.xml")
  assert experiment.read_results(tmp_path / "w")["interrupted"]
  assert (tmp_path / "w" / "junit.xml").is_file() and (tmp_path / "w" / "pytest.log").is_file()
  # The tests' output (from the data directory's files) is the owner's, as is its folder.
  assert (tmp_path / "w" / "pytest.log").stat().st_mode & 0o777 == 0o600
  assert (tmp_path / "w" / "junit.xml").stat().st_mode & 0o777 == 0o600
  assert (tmp_path / "w").stat().st_mode & 0o777 == 0o700


def test_gpu_rows_render_only_once_published_and_quote_the_papers(tmp_path):
  assert rp.render(tmp_path) == rp.render(tmp_path, optional_runs=())
  names = {r.name for r in rp.GPU_RUNS}
  assert all(r.run in names for r in rp.GPU_ROWS) and not names & {r.name for r in rp.RUNS}
  papers = REPO.parent / "shared" / "papers"
  if os.environ.get("PATE_JAX_DATA_DIR"):
    papers = pathlib.Path(os.environ["PATE_JAX_DATA_DIR"]).parent / "papers"
  if not papers.is_dir():
    pytest.skip("../shared/papers not found")
  for row in rp.GPU_ROWS:
    text = " ".join((papers / f).read_text() for f in rp.PAPERS[row.paper][1]).replace(",", "")
    for number in rp.published_numbers(row.published):
      assert re.search(rf"(?<![\d.]){re.escape(number.replace(',', ''))}(?!\d)", text), row


def _command(workdir: pathlib.Path, data_dir, *overrides: str) -> subprocess.CompletedProcess:
  return subprocess.run(
      [sys.executable, "experiments/gpu_acceptance.py", "--config",
       "configs/gpu_acceptance.py:cpu_rehearsal", "--workdir", str(workdir), *overrides],
      cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
      env=dict(os.environ, PYTHONPATH=_scripts.python_path(), PATE_JAX_NO_PROGRESS="1",
               PATE_JAX_DATA_DIR=str(data_dir), PATE_JAX_OFFLINE="1",
               JAX_PLATFORMS="cpu"))  # a CPU rehearsal, on an accelerator machine too


# Two quick tests of the rehearsal's test file (configs/gpu_acceptance.py:cpu_rehearsal).
_REHEARSAL_TESTS = "-m 'not slow' tests/test_rng.py -k 'from_the_table or its_own_streams'"


@pytest.mark.slow
def test_cpu_rehearsal_of_every_stage_resumes_on_a_fresh_workdir(data_dir, tmp_path):
  # Call 1: stages 1-2, then the hand-over archive (as at the end of one device call).
  first = _command(tmp_path / "w1", data_dir, "--config.stages=1,2",
                   f"--config.archive={tmp_path / 'handover.tar.gz'}")
  assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
  # It holds the teachers' votes and ledger: the owner's only, as they are.
  assert (tmp_path / "handover.tar.gz").stat().st_mode & 0o777 == 0o600
  call_1 = json.loads((tmp_path / "w1" / "results.json").read_text())["results"]["status"]
  main_1 = json.loads((tmp_path / "w1" / "pate_mnist" / "results.json").read_text())["results"]
  assert call_1["pate_mnist"]["wall_seconds"] == main_1["wall_seconds"]  # not the attack's
  with tarfile.open(tmp_path / "handover.tar.gz") as tar:
    names = tar.getnames()
    assert "pate_mnist/teachers/votes.npz" in names
    assert not [n for n in names if "checkpoints" in n or n.endswith(".lock")]
    tar.extractall(tmp_path / "w2")
  # Call 2, on a fresh workdir holding the archive: the acceptance command as documented.
  runs_dir = tmp_path / "runs"
  # Its test stage runs two tests of the rehearsal's test file: pytest's counts, its JUnit
  # file and an interruption are test_suite_stage_counts_and_is_interrupted_at_its_limit's.
  # The KD-GAN's teacher trains 48 steps, not 50: segments of 12 (num_steps // 4) without
  # a last one of 2 steps, a second program to compile.
  second = _command(tmp_path / "w2", data_dir, f"--config.publish_dir={runs_dir}",
                    f"--config.tests.groups.fast={_REHEARSAL_TESTS}",
                    "--config.kd_gan.teacher.num_steps=48")
  assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
  s = json.loads((tmp_path / "w2" / "results.json").read_text())["results"]
  assert {n: st["status"] for n, st in s["status"].items() if st["stage"] <= 2} == {
      n: "done earlier (results.json found)" for n in (
          "pate_mnist", "bench_teachers_nondeterministic", "bench_teachers",
          "bench_accounting", "bench_student")}
  assert all(st["status"] == "ran" for st in s["status"].values() if st["stage"] > 2)
  # The rehearsal asks for deterministic kernels (mnist_250's nested config; XLA:CPU ignores
  # the flag): the subprocess's XLA_FLAGS lack it, this process's hold it.
  slow = s["deterministic_slowdown"]
  assert slow["deterministic_ops"] == {"bench_teachers_nondeterministic": False,
                                       "bench_teachers": True} and "note" not in slow
  assert set(slow["by_strategy"]) == {"vmap", "loop"} and slow["value"] > 0
  main = json.loads((tmp_path / "w2" / "pate_mnist" / "results.json").read_text())["results"]
  stages = main["stage_seconds"]  # where the main job's wall goes
  assert set(stages) == {"teachers", "labels_and_student"}  # the attack's are private
  assert 0 < sum(stages.values()) <= main["wall_seconds"]
  assert main["wall_seconds"] < main["private"]["seconds"]["wall_end_to_end"]
  assert 0 < main["student"]["labels_seconds"] < stages["labels_and_student"]
  # Its teachers' and student's own results (the seconds of each phase) are published too.
  for stage in ("teachers", "student"):
    published = json.loads((runs_dir / f"pate_mnist_{stage}_gpu" / "results.json").read_text())
    assert published["results"]["phase_seconds"] == main["phase_seconds"][stage]
  bench = json.loads((tmp_path / "w2" / "bench_teachers" / "results.json").read_text())
  assert bench["results"]["flops_source"] == "jaxpr" and bench["results"]["flops_per_step"]
  student_bench = json.loads((tmp_path / "w2" / "bench_student" / "results.json").read_text())
  assert student_bench["results"]["precisions"]["float32"]["ms_per_step"] > 0
  assert student_bench["results"]["seeds"]["2"]["ms_per_step"] > 0  # side by side
  pate_g = json.loads((tmp_path / "w2" / "pate_g_100" / "results.json").read_text())["results"]
  assert pate_g["seeds"] == [0, 1] and len(pate_g["eval_accuracy_seeds"]) == 2
  assert len(s["runs_done"]) == 11 and set(s["targets"]) == {
      "main_job_wall", "main_job_no_oom", "teacher_accuracy", "examples_per_second",
      "pate_g_accuracy", "pate_g_epsilon", "pate_g_shift_accuracy", "api_over_kernel",
      "suite_passes", "cgn_accuracy",
      "cgn_epsilon"}
  assert s["targets"]["suite_passes"]["met"] is True  # the two tests pass
  tests = experiment.read_results(tmp_path / "w2" / "tests_fast")
  assert (tests["tests"], tests["passed"]) == (2, 2), tests
  assert all(isinstance(t["met"], bool) for t in s["targets"].values())
  # The published copies render in the report, with the hardware named.
  config = _config("gpu_acceptance", "cpu_rehearsal")
  rows = tuple(r for r in rp.GPU_ROWS if not (  # the rehearsal's Table 1 has its n = 100 rows
      r.key.startswith("table1[") and int(r.key[7]) >= len(config.kd_gan.table1.public_sizes) * 2))
  text = rp.render(runs_dir, optional_rows=rows)
  assert re.search(r"Hardware: CPU \(\d+ cores\): \d+ of the \d+ runs", text)
  assert "| MNIST, 100 queries: PATE-G student, 300 epochs (GPU) | 98.00% |" in text
  assert "### run pate_mnist_gpu" in text and "### run tests_slow_gpu" not in text


def test_the_hand_over_keeps_votes_over_the_size_limit_and_its_copies_keep_times(tmp_path):
  """A file over the archive's limit stays behind, but never the teachers' votes, ledger
  or journal: a ledger left behind would lose what was spent, and the next call would
  refuse teachers beside a ledger whose votes are gone. A published copy keeps its file's
  times (the main job's summary carries its student's end, not its private attack's)."""
  from pate_jax import io  # pylint: disable=g-import-not-at-top
  root = tmp_path / "w"
  (root / "pate_mnist" / "teachers").mkdir(parents=True)
  for name in ("teachers/votes.npz", "teachers/ledger.npz", "teachers/ledger.npz.journal",
               "big.bin"):
    (root / "pate_mnist" / name).write_bytes(b"x" * 2048)
  archive = ga._archive  # pylint: disable=protected-access
  out = archive(root, tmp_path / "a.tar.gz", max_bytes=1024)
  assert out["skipped_over_limit"] == ["pate_mnist/big.bin"]
  with tarfile.open(tmp_path / "a.tar.gz") as tar:
    names = set(tar.getnames())
  assert {f"pate_mnist/teachers/{n}" for n in (
      "votes.npz", "ledger.npz", "ledger.npz.journal")} <= names
  assert "pate_mnist/big.bin" not in names
  for mode in (0o600, 0o644):  # owner-only (copied privately) or not
    src = tmp_path / f"results_{mode:o}.json"
    src.write_text("{}")
    os.chmod(src, mode)
    os.utime(src, (1_000_000_000, 1_000_000_000))
    dst = io.copy_file(src, tmp_path / "published" / src.name)
    assert os.stat(dst).st_mtime == 1_000_000_000 and os.stat(dst).st_mode & 0o777 == mode


def test_a_failed_run_marks_every_line_of_its_message_private(tmp_path, monkeypatch, capsys):
  """A run's error may quote what it computed from the private data on any of its lines:
  each line printed says so, as the harness marks a script's error."""
  c = _config("gpu_acceptance")
  c.stages = "bench_accounting"

  def fake_run(config, name, root):
    raise ValueError("the labels disagree:\nplurality accuracy 0.9312 on the pool")

  monkeypatch.setattr(ga, "_run_one", fake_run)
  ga.run(c, str(tmp_path / "w"))
  lines = capsys.readouterr().out.splitlines()
  failed = lines.index(next(line for line in lines if "FAILED" in line))
  assert lines[failed].endswith(experiment.PRIVATE_MARK + "ValueError: the labels disagree:")
  assert lines[failed + 1] == experiment.PRIVATE_MARK + "plurality accuracy 0.9312 on the pool"


@pytest.mark.parametrize("field, value, match, in_run", [
    ("call_limit_s", 0, r"^config.call_limit_s must be > 0; got 0.0$", True),
    ("call_limit_s", "x", r"^config.call_limit_s must be a real number; got 'x'$", True),
    ("deadline_s", float("nan"), r"^config.deadline_s must be finite; got nan$", True),
    ("pate_g_queries", (100, 0), r"^config.pate_g_queries\[1\] must be an integer >= 1; got 0$",
     True),
    ("plan_device_gib", -1.0, r"^config.plan_device_gib must be > 0; got -1.0$", False),
    ("period_limit_s", float("nan"), r"^config.period_limit_s must be finite; got nan$", False),
    ("plan_allocator_fraction", 2.0,
     r"^config.plan_allocator_fraction must lie in \(0, 1\]; got 2$", False),
])
def test_the_calls_settings_are_refused_naming_the_field(tmp_path, field, value, match, in_run):
  """--dry_run read a device of -1 GiB, a NaN period or a fraction of 2 as numbers (its
  verdicts then said nothing), a 0 s call limit as every stage too long, and a string as
  float()'s error; a run of 0 PATE-G queries was planned as pate_g_0. Refused naming the
  field, by --dry_run and (for the call's own settings) before any run starts."""
  c = experiment.load_script(REPO / "configs" / "gpu_acceptance.py").get_config(
      "cpu_rehearsal")
  c.stages = "bench_accounting"
  with c.ignore_type():
    c[field] = value
  with pytest.raises(ValueError, match=match):
    ga.plan(c)
  if in_run:
    with pytest.raises(ValueError, match=match):
      ga.run(c, str(tmp_path / "w"))
    assert not (tmp_path / "w").exists()
