"""experiments/train_teachers.py end to end: results, votes, kill and resume."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import chex
import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from pate_jax import experiment
from pate_jax import votes as votes_lib
from pate_jax.stages import teachers as teachers_stage

import _scripts  # tests/_scripts.py  # pylint: disable=g-bad-import-order

REPO = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = REPO / "experiments" / "train_teachers.py"
SMALL = ["--config.dataset=digits", "--config.num_teachers=4", "--config.num_steps=30",
         "--config.checkpoint_every=10", "--config.gap_plot=False"]


def _run(workdir, *overrides, config="configs/mnist_250.py:cpu", check=True):
  proc = subprocess.run(
      [sys.executable, str(SCRIPT), f"--config={REPO / config}", f"--workdir={workdir}",
       *overrides], cwd=REPO, capture_output=True, text=True, timeout=900,
      env=dict(os.environ, PATE_JAX_NO_PROGRESS="1"), check=False)
  if check:
    assert proc.returncode == 0, proc.stderr[-3000:]
  return proc


def _final_params(workdir, step):
  return ocp.StandardCheckpointer().restore(pathlib.Path(workdir) / "checkpoints" / str(step)
                                            / "default")


def _small_config(**overrides):
  config = experiment.load_script(REPO / "configs" / "mnist_250.py").get_config("cpu")
  config.update({"dataset": "digits", "num_teachers": 4, "num_steps": 30,
                 "checkpoint_every": 10, "gap_plot": False, "keep_checkpoints": True,
                 **overrides})  # kept: the test compares the final checkpoints
  return config


@pytest.mark.slow
def test_killed_run_resumes_bit_identical(tmp_path, monkeypatch):
  """In-process: the run stops inside training after the step-20 checkpoint
  (``_scripts.kill_teachers_after``), its checkpointer closed, and the same run again
  resumes there to the clean run's parameters and votes, bit for bit."""
  script = experiment.load_script(SCRIPT)
  clean, killed = tmp_path / "clean", tmp_path / "killed"
  script.run(_small_config(), str(clean))
  with monkeypatch.context() as m:
    _scripts.kill_teachers_after(m, 20)
    with pytest.raises(_scripts.Killed) as exited:
      script.run(_small_config(), str(killed))
  assert exited.value.args == (20,)
  assert not (killed / "votes.npz").exists()
  script.run(_small_config(), str(killed))  # the same run again
  results = json.loads((killed / "results.json").read_text())["results"]
  assert results["resumed_from_step"] == 20

  a, b = _final_params(clean, 30), _final_params(killed, 30)
  assert jax.tree.structure(a) == jax.tree.structure(b)
  chex.assert_trees_all_equal(a, b)  # every leaf bit-identical
  va, vb = votes_lib.load_votes(clean), votes_lib.load_votes(killed)
  np.testing.assert_array_equal(va["votes"], vb["votes"])


@pytest.mark.slow
def test_killed_run_in_a_workdir_with_brackets_resumes_from_its_checkpoint(tmp_path,
                                                                           monkeypatch):
  """Under ``run[1]`` every checkpoint was once set aside as corrupt (orbax globs
  the path unescaped) and the resumed run started from step 0."""
  script = experiment.load_script(SCRIPT)
  workdir = tmp_path / "run[1]"

  def config(**overrides):
    c = _small_config(num_teachers=2, num_steps=4, checkpoint_every=2,
                      distill_temperatures=(), **overrides)
    c.model.kwargs.hidden = (16,)
    return c

  with monkeypatch.context() as m:
    _scripts.kill_teachers_after(m, 2)
    with pytest.raises(_scripts.Killed):
      script.run(config(), str(workdir))
  assert [p.name for p in (workdir / "checkpoints").iterdir() if p.name.isdigit()] == ["2"]
  results = script.run(config(), str(workdir))
  assert results["resumed_from_step"] == 2
  assert not (workdir / "checkpoints" / "corrupt").exists()
  votes_lib.load_votes(workdir)


@pytest.mark.slow
def test_a_run_killed_after_its_last_save_reports_its_final_loss(tmp_path, monkeypatch):
  """Killed after the checkpoint of its last step, the rerun trains nothing, and reports
  the final training loss from the checkpoints' history (before: null)."""
  script = experiment.load_script(SCRIPT)

  def config():
    c = _small_config(num_teachers=2, num_steps=4, checkpoint_every=2,
                      distill_temperatures=())
    c.model.kwargs.hidden = (16,)
    return c

  clean = script.run(config(), str(tmp_path / "clean"))
  with monkeypatch.context() as m:
    _scripts.kill_teachers_after(m, 4)
    with pytest.raises(_scripts.Killed):
      script.run(config(), str(tmp_path / "killed"))
  rerun = script.run(config(), str(tmp_path / "killed"))
  assert rerun["resumed_from_step"] == 4
  loss = clean["private"]["final_train_loss"]
  assert isinstance(loss, float) and rerun["private"]["final_train_loss"] == loss


@pytest.mark.slow
def test_mnist_results_and_votes(tmp_path, data_dir):
  tmp_path.chmod(0o755)  # as a workdir made under the usual umask (pytest's are 0700)
  _run(tmp_path, f"--config.data_dir={data_dir}", "--config.num_teachers=5",
       "--config.train_subset=1000", "--config.num_steps=40", "--config.checkpoint_every=20")
  record = json.loads((tmp_path / "results.json").read_text())
  r = record["results"]
  assert r["dataset"] == "mnist" and not r["fallback_data"]
  assert r["examples_per_teacher"] == 200 and r["dropped_examples"] == 0
  p = r["private"]
  assert p["num_eval"] == 1000 and p["num_test"] == 10_000
  assert 0.5 < p["teacher_test_accuracy"]["mean"] <= p["teacher_test_accuracy"]["max"]
  assert p["plurality_accuracy_test"] > 0.5 and 0 < p["mean_normalized_gap"] <= 1
  for key in ("config", "seed", "git", "versions", "device"):
    assert key in record
  assert record["config"]["num_teachers"] == 5 and record["versions"]["jax"]
  v = votes_lib.load_votes(tmp_path)
  assert v["votes"].shape == (10_000, 10) and v["num_pool"] == 9_000
  # The budget registry's key: the digest of the whole training split (these teachers
  # were trained on its first 1,000 rows, their own fingerprint's digest).
  from pate_jax import data as data_lib  # pylint: disable=g-import-not-at-top
  ds = data_lib.load_image_dataset("mnist", data_dir)
  assert v["private_data"] == experiment.data_digest(ds.train_images, ds.train_labels)
  recorded = json.loads((tmp_path / "votes_fingerprint.json").read_text())
  digest = recorded["fingerprint"]["data_sha256"]
  assert v["private_data"] != digest
  # No one else enters the directory: votes.npz's size follows the votes.
  assert tmp_path.stat().st_mode & 0o077 == 0
  # The data's digests (a test of any guess at a private row) are in owner-only files only.
  for path in tmp_path.rglob("*"):
    if path.is_file() and path.stat().st_mode & 0o077:
      held = path.read_bytes()
      assert v["private_data"].encode() not in held and digest.encode() not in held, path
  np.testing.assert_array_equal(v["votes"].sum(1), 5)
  assert (tmp_path / "gap.png").stat().st_size > 1000
  # The soft counts at the config's temperatures: integers, at most S per teacher per
  # query, and the stored averaged probabilities are their rows over their sums.
  s = votes_lib.SOFT_COUNT_SCALE
  assert v["soft_counts"].shape == (2, 10_000, 10) and v["soft_count_scale"] == s
  assert v["soft_counts"].min() >= 0 and v["soft_counts"].sum(-1).max() <= 5 * s
  assert v["soft_counts"].sum(-1).min() >= 5 * (s - 10)  # floors lose < 1 per entry
  np.testing.assert_allclose(v["probabilities"], v["soft_counts"] / (5 * s), rtol=2e-4)
  np.testing.assert_allclose(v["probabilities"].sum(-1), 1.0, rtol=1e-6)


@pytest.mark.parametrize("value, message", [
    ((0.0,), "found 0.0 at (0,)"), ((1.0, -1.0), "found -1.0 at (1,)"),
    ((float("nan"),), "found nan at (0,)"), ((float("inf"),), "found inf at (0,)"),
])
def test_a_bad_distillation_temperature_is_refused_before_the_teachers_train(
    tmp_path, value, message):
  """The soft counts at these temperatures come after the training: 0 or -1 failed there,
  NaN wrote NaN probabilities into votes.npz. Refused before anything is read or written."""
  config = _small_config(distill_temperatures=value)
  with pytest.raises(ValueError, match=r"^config.distill_temperatures must be finite and > 0"
                     ) as e:
    teachers_stage.run(config, str(tmp_path / "work"))
  assert message in str(e.value)
  assert not (tmp_path / "work").exists()


@pytest.mark.parametrize("field, value, match", [
    ("num_teachers", 0, r"config\.num_teachers must be an integer >= 1; got 0"),
    ("num_teachers", -1, r"config\.num_teachers must be an integer >= 1; got -1"),
    ("seed", "x", r"config\.seed must be an integer in \[0, 2\*\*32\)"),
    ("seed", 1.5, r"config\.seed must be an integer in \[0, 2\*\*32\)"),
    ("model.name", "mlpp", r"config\.model\.name must be one of"),
    ("model.kwargs.hidden", (0,), r"config\.model\.kwargs\.hidden must hold integers >= 1"),
    ("model.kwargs.hidden", (1.5,), r"config\.model\.kwargs\.hidden must hold integers"),
    ("model.kwargs.hidden", "x", r"config\.model\.kwargs\.hidden must be a tuple"),
    ("model.kwargs.hiden", (8,), r"config\.model\.kwargs\.hiden: model 'mlp' has no such"),
])
def test_bad_teachers_settings_are_refused_naming_the_field_before_work(
    tmp_path, field, value, match):
  """A count of teachers of 0 was refused by the partition naming its own argument, after
  the data were loaded; a bad width by the model, as kwargs.hidden (or as a shape error)."""
  config = _small_config()
  *path, last = field.split(".")
  target = config
  for p in path:
    target = target[p]
  with target.ignore_type():
    target[last] = value
  _scripts.assert_refused_before_work(teachers_stage.run, teachers_stage.plan, config,
                                      tmp_path / "work", match)


@pytest.mark.parametrize("override,message", [
    ("--config.num_teachers=0", "config.num_teachers must be an integer >= 1"),
    ("--config.num_teachers=5000", "larger than the training set"),
    ("--config.dataset=imagenet", "unknown dataset 'imagenet'"),
])
@pytest.mark.slow
def test_bad_config_is_rejected(tmp_path, override, message):
  proc = _run(tmp_path, *SMALL, override, check=False)
  assert proc.returncode != 0 and message in proc.stderr


@pytest.mark.slow
def test_svhn_config_uses_extra_split(tmp_path):
  import scipy.io  # pylint: disable=g-import-not-at-top
  svhn = tmp_path / "data" / "svhn"
  svhn.mkdir(parents=True)
  rng = np.random.default_rng(0)
  for split, n in (("train", 20), ("test", 30), ("extra", 10)):
    scipy.io.savemat(svhn / f"{split}_32x32.mat", {
        "X": rng.integers(0, 256, (32, 32, 3, n)).astype(np.uint8),
        "y": (np.arange(n) % 10 + 1).reshape(-1, 1).astype(np.uint8)})
  work = tmp_path / "work"
  # In this process: the script's command line is test_bad_config_is_rejected's.
  config = experiment.load_script(REPO / "configs" / "svhn_250.py").get_config("cpu")
  config.update({"data_dir": str(tmp_path / "data"), "num_teachers": 3, "num_steps": 2,
                 "checkpoint_every": 2, "gap_plot": False})
  teachers_stage.run(config, str(work))
  r = json.loads((work / "results.json").read_text())["results"]
  assert r["dataset"] == "svhn" and r["examples_per_teacher"] == 10  # (20 + 10) // 3
  v = votes_lib.load_votes(work)
  assert v["votes"].shape == (30, 10) and v["num_pool"] == 27  # small test set: 90/10


@pytest.mark.slow
def test_the_attack_stage_trains_the_teachers_stage_teachers(tmp_path):
  """The near-duplicates attack trains its teachers in memory (no checkpoints, no votes
  file); they are the teachers stage's own: the same votes on the same queries."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from pate_jax import data, teachers  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import attack  # pylint: disable=g-import-not-at-top
  experiment.load_script(SCRIPT).run(_small_config(keep_checkpoints=False), str(tmp_path))
  ensemble, params, ds = attack._trained_teachers(  # pylint: disable=protected-access
      _small_config(), "config.")
  index, _ = teachers.query_set(ds)
  votes = ensemble.votes(params, jnp.asarray(data.to_float(ds.test_images[index])),
                         ds.num_classes, 4)
  np.testing.assert_array_equal(np.asarray(votes), votes_lib.load_votes(tmp_path)["votes"])


@pytest.mark.parametrize("field, value, match", [
    ("num_teachers", 0, r"^config\.teachers\.num_teachers must be an integer >= 1; got 0$"),
    ("model.kwargs.hidden", (0,),
     r"^config\.teachers\.model\.kwargs\.hidden must hold integers >= 1"),
])
def test_the_main_job_and_the_attack_name_the_nested_teachers_settings(
    tmp_path, monkeypatch, field, value, match):
  """The main job (``--config.teachers.*``) and the near-duplicates attack
  (``config.teachers``) named them config.num_teachers, as in train_teachers' config; the
  main job loaded its query set first, and the attack's dry run accepted them."""
  from pate_jax.stages import attack, main_job  # pylint: disable=g-import-not-at-top

  def load(*args, **kwargs):
    raise AssertionError(f"data loaded: {args}")

  monkeypatch.setattr(main_job, "_query_set", load)
  monkeypatch.setattr(teachers_stage, "prepare_data", load)
  for name, stage in (("pate_mnist", main_job), ("attack_near_duplicates", attack)):
    config = _scripts.config(name, "cpu")
    *path, last = field.split(".")
    target = config.teachers
    for p in path:
      target = target[p]
    with target.ignore_type():
      target[last] = value
    _scripts.assert_refused_before_work(stage.run, stage.plan, config, tmp_path / name, match)
