"""The last lines of the scripts not covered elsewhere: the accounting benchmark
and the KD-GAN script end with their headline numbers and the absolute path of their
results JSON. Run in-process on their smallest configs through
``experiment.run_and_report`` (what ``run_main`` does after parsing flags). The KD-GAN's
sound variant: secret noise by default, its levels composed."""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import pytest

from pate_jax import experiment

REPO = pathlib.Path(__file__).resolve().parent.parent


def _run(name, config, arg, workdir, **overrides):
  script = experiment.load_script(REPO / "experiments" / f"{name}.py")
  c = experiment.load_config(f"{REPO / 'configs' / config}.py:{arg}")
  for field, value in overrides.items():  # a__b sets the nested field a.b
    *parents, leaf = field.split("__")
    node = c
    for parent in parents:
      node = node[parent]
    node[leaf] = value
  return experiment.run_and_report(script.run, script.report, c, str(workdir))


def _tail(capsys, workdir, n):
  """The last ``n`` printed lines, after checking that one of the last two names the
  results JSON by its absolute path inside ``workdir``."""
  lines = capsys.readouterr().out.strip().splitlines()
  named = [l for l in lines[-2:] if l.startswith("results: ")]
  assert named, lines[-5:]
  path = pathlib.Path(named[-1].split(": ", 1)[1].split(", ")[0])
  assert path.is_absolute() and path.is_file() and path.parent == pathlib.Path(workdir).resolve()
  json.loads(path.read_text())
  return "\n".join(lines[-n:])


@pytest.mark.slow
def test_bench_accounting_ends_with_its_speed_and_paths(tmp_path, capsys):
  r = _run("bench_accounting", "bench_accounting", "small", tmp_path, num_queries=2_000,
           loop_queries=50, repeats=1)
  tail = _tail(capsys, tmp_path, 6)
  assert f"{r['jax_seconds_median']:.4f} s" in tail
  assert f"speedup {r['speedup_vs_loop']:.0f}x" in tail
  assert f"eps LNMax (2017) = {r['lnmax_2017']['epsilon']:.4f}" in tail
  # 2,000 x 10 int32 votes are small: copied, then read by 2 jitted calls per function.
  assert r["public_api_host_votes_transfers"] == 4 and r["public_api_host_votes_numpy_copies"] == 2
  assert (f"{r['public_api_over_kernel_host_votes_less_transfers']:.2f}x the kernel"
          in tail)


@pytest.mark.slow
def test_train_kd_gan_ends_with_accuracy_epsilon_and_paths(tmp_path, data_dir, capsys,
                                                          monkeypatch):
  monkeypatch.setenv("PATE_JAX_DATA_DIR", str(data_dir))
  r = _run("train_kd_gan", "kd_gan", "smoke", tmp_path, num_seeds=1, teacher__num_steps=20,
           table1__public_sizes=(100,), curve__num_public=200, audit_rounds=0)
  lines = _tail(capsys, tmp_path, 100_000).splitlines()
  tail = "\n".join(lines[-14:])
  # The training logs (the teacher trained on the private images, the students distilled
  # from it) are private measurements, marked as they print.
  from pate_jax import experiment  # pylint: disable=g-import-not-at-top
  logs = [l for l in lines if "eval_accuracy=" in l or "round " in l]
  assert logs and all(l.startswith(experiment.PRIVATE_MARK) for l in logs), logs[:3]
  assert "headline" in tail and f"{r['accuracy']:.2%}" in tail
  assert f"ε {r['epsilon_published']:.2f} as published" in tail
  assert "sound ε: none" in tail and "utility_vs_epsilon.png" in tail
  # A rerun restores every fit at its last round and reports the same curve and tables.
  again = _run("train_kd_gan", "kd_gan", "smoke", tmp_path, num_seeds=1,
               teacher__num_steps=20, table1__public_sizes=(100,), curve__num_public=200,
               audit_rounds=0)
  timeless = lambda rows: [{k: x for k, x in row.items() if k != "train_seconds"}  # noqa: E731
                            for row in rows]
  assert again["curve"] == r["curve"] and timeless(again["table1"]) == timeless(r["table1"])


def _sound_votes(path, num_teachers=250, private_data=None):
  """votes.npz of ``num_teachers`` simulated teachers on MNIST's 9,000-row student pool,
  with soft counts at temperature 1 (the sound variant's input), trained on
  ``private_data`` (a SHA-256; None: not named)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from pate_jax import votes as votes_lib  # pylint: disable=g-import-not-at-top
  rs = np.random.default_rng(0)
  y = rs.integers(0, 10, 9_000)
  probs = 0.5 * np.eye(10)[y] + 0.5 * rs.dirichlet(np.ones(10), 9_000)
  votes = np.stack([rs.multinomial(num_teachers, p) for p in probs])
  counts = np.floor(probs * votes_lib.SOFT_COUNT_SCALE * num_teachers).astype(np.int32)
  from pate_jax import data as data_lib  # pylint: disable=g-import-not-at-top
  votes_lib.save_votes(path / "votes.npz", votes, y, dataset="mnist",
                       index=data_lib.student_split("mnist", 10_000).pool_index,
                       soft_counts=counts[None], temperatures=(1.0,),
                       private_data=private_data)
  return path


def _spy_sound_releases(monkeypatch) -> list:
  """The released soft labels the sound students of each run train on, in order (their
  checkpoints' fingerprint keeps only a keyed digest)."""
  from pate_jax import kd_gan  # pylint: disable=g-import-not-at-top
  seen, fit = [], kd_gan.fit

  def spy(gan, keys, public_x, teacher_log_probs, *args, checkpoint_dir=None, **kwargs):
    if checkpoint_dir and pathlib.Path(checkpoint_dir).name == "sound":
      seen.append(np.asarray(teacher_log_probs))
    return fit(gan, keys, public_x, teacher_log_probs, *args, checkpoint_dir=checkpoint_dir,
               **kwargs)

  monkeypatch.setattr(kd_gan, "fit", spy)
  return seen


def _restore_from(src: pathlib.Path, dst: pathlib.Path, *fits: str) -> None:
  """Copies the teacher and the student ``fits``' checkpoints of the run in ``src`` into
  ``dst``, so that a run there of the same config restores them rather than training the
  same networks again (their fingerprints name the config, the teacher's outputs and the
  targets: a fit whose targets differ is refused, not restored). What the sound test
  checks is the release, drawn before them; tests/test_kill_and_resume.py checks that a
  restored run's results are those of the run trained again."""
  shutil.copytree(src / "teacher", dst / "teacher")
  for fit in fits:
    shutil.copytree(src / "checkpoints" / fit, dst / "checkpoints" / fit)


@pytest.mark.slow
def test_train_kd_gan_sound_noise_is_secret_and_levels_compose(tmp_path, data_dir, capsys,
                                                               monkeypatch):
  """Secret noise (``noise_seed`` None) is recorded as such; the release is drawn once (a
  rerun reads it) and is a budget on the teachers' data: a second release of the same
  teachers is refused before the teacher trains unless another budget is asked for, and
  then draws other soft labels. A research seed repeats the release and says that the
  noise is public. The curve's points are alternative releases; publishing them all
  composes."""
  import hashlib  # pylint: disable=g-import-not-at-top
  from pate_jax import budget, kd_gan, rng  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import kd_gan as stage  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv("PATE_JAX_DATA_DIR", str(data_dir))
  data = hashlib.sha256(b"private rows").hexdigest()
  votes = _sound_votes(tmp_path, private_data=data)
  releases = _spy_sound_releases(monkeypatch)
  registry = tmp_path / "registry"
  small = dict(num_seeds=1, teacher__num_steps=20, curve__num_public=200,
               curve__max_epsilon=1.0, audit_rounds=0, sound__votes_dir=str(votes),
               budget_registry=str(registry))
  r = _run("train_kd_gan", "kd_gan_sound", "smoke", tmp_path / "a", **small)
  tail = _tail(capsys, tmp_path / "a", 6)
  assert r["noise"] == rng.noise_record(None) and not r["noise"]["public"]
  assert r["budgets_on_private_data"] == 1
  sigmas = [p["noise_multiplier"] for p in r["sound"]]
  total = r["sound_all_published"]["epsilon_if_all_published"]
  assert len(sigmas) == 2 and all(p["release"] == "alternative" for p in r["sound"])
  assert total > max(p["epsilon"] for p in r["sound"])
  assert total == kd_gan.soft_label_epsilon(sigmas, 200, r["delta"])[0]
  assert "alternative release" in tail and f"composes to ε {total:.2f}" in tail
  assert "secret" in tail
  assert (tmp_path / "a" / stage.SOUND_RELEASE).stat().st_mode & 0o077 == 0
  again = _run("train_kd_gan", "kd_gan_sound", "smoke", tmp_path / "a", **small)
  assert again["sound"] == r["sound"] and len(releases) == 2
  np.testing.assert_array_equal(*releases)                  # read back, not drawn again
  with pytest.raises(budget.BudgetError, match=r"was drawn before .*Copy that file here"):
    _run("train_kd_gan", "kd_gan_sound", "smoke", tmp_path / "b", **small)
  assert not (tmp_path / "b" / "teacher").exists()          # refused before any training
  _restore_from(tmp_path / "a", tmp_path / "b", "curve")    # only the release is new there
  r = _run("train_kd_gan", "kd_gan_sound", "smoke", tmp_path / "b", another_budget=True,
           **small)
  assert r["budgets_on_private_data"] == 2 and len(releases) == 3
  assert not np.array_equal(releases[0], releases[2])
  assert len(budget.BudgetRegistry(registry).budgets(data)) == 2
  for name in ("c", "d"):
    if name == "d":  # the same fits again: restored, as they must be from the same release
      _restore_from(tmp_path / "c", tmp_path / "d", "curve", "sound")
    r = _run("train_kd_gan", "kd_gan_sound", "smoke", tmp_path / name, noise_seed=0, **small)
  assert r["noise"]["public"] and r["noise"]["noise_seed"] == 0
  assert r["budgets_on_private_data"] is None
  assert "PUBLIC (research noise_seed 0)" in capsys.readouterr().out
  assert len(releases) == 5 and len(budget.BudgetRegistry(registry).budgets(data)) == 2
  np.testing.assert_array_equal(releases[3], releases[4])


@pytest.mark.slow
def test_a_secret_sound_release_of_votes_naming_no_private_data_is_refused(tmp_path):
  """Votes whose private data nothing names (a copy without ``private_data``, no run's
  record) key no budget in the registry, and nothing beside them keeps the release: each
  work directory would draw its own secret release of the same teachers. Refused before
  anything is drawn, unless another budget is asked for; then drawn once per directory,
  and read back by a rerun there without the flag."""
  from pate_jax import budget  # pylint: disable=g-import-not-at-top
  from pate_jax.stages import kd_gan as stage  # pylint: disable=g-import-not-at-top
  (tmp_path / "teachers").mkdir()
  votes = _sound_votes(tmp_path / "teachers", num_teachers=10)
  c = experiment.load_config(f"{REPO / 'configs' / 'kd_gan_sound'}.py:smoke")
  c.sound.votes_dir, c.budget_registry = str(votes), str(tmp_path / "registry")
  data = {"public_rows": np.arange(20), "num_test": 10_000}
  with pytest.raises(budget.BudgetError, match="no digest of the teachers' private data.*"
                                               "another_budget=True"):
    stage._sound_release(c, tmp_path / "a", data)  # pylint: disable=protected-access
  assert not (tmp_path / "a" / stage.SOUND_RELEASE).exists()
  c.noise_seed = 5  # a research release there first: replaced freely, no way past the refusal
  stage._sound_release(c, tmp_path / "r", data)  # pylint: disable=protected-access
  c.noise_seed = None
  with pytest.raises(budget.BudgetError, match="no digest of the teachers' private data"):
    stage._sound_release(c, tmp_path / "r", data)  # pylint: disable=protected-access
  c.another_budget = True
  (tmp_path / "a").mkdir()
  first = stage._sound_release(c, tmp_path / "a", data)  # pylint: disable=protected-access
  c.another_budget = False
  again = stage._sound_release(c, tmp_path / "a", data)  # pylint: disable=protected-access
  np.testing.assert_array_equal(first["targets"], again["targets"])  # read back, not redrawn
  assert first["budgets_on_private_data"] is None
  with pytest.raises(budget.BudgetError, match="no digest of the teachers' private data"):
    stage._sound_release(c, tmp_path / "b", data)  # pylint: disable=protected-access
