"""The KD-GAN discriminator ablation (pate_jax/stages/kd_gan_ablation.py): the smoke variant
end to end, the paired gain and its standard error, the shared KD-only fit, unknown
override keys, --dry_run, and the unlabelled-input option of the KD-GAN loop."""

from __future__ import annotations

import json
import math

import jax
import numpy as np
import pytest

from pate_jax import kd_gan as K

import _scripts  # tests/_scripts.py  # pylint: disable=g-bad-import-order

_script, _config = _scripts.script, _scripts.config


def _smoke(**overrides):
  c = _config("kd_gan_ablation", "smoke", **overrides)
  c.teacher.num_steps = 10
  return c


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory, data_dir):
  """The smoke variant run once: (results, workdir)."""
  mp = pytest.MonkeyPatch()
  mp.setenv("PATE_JAX_DATA_DIR", str(data_dir))
  work = tmp_path_factory.mktemp("kd_gan_ablation")
  try:
    script = _script("ablate_kd_gan")
    yield script.run(_smoke(), str(work)), work
  finally:
    mp.undo()


@pytest.mark.slow
def test_smoke_end_to_end_records_every_variant(smoke_run, capsys):
  r, work = smoke_run
  record = json.loads((work / "results.json").read_text())
  assert record["disclosure"].startswith("private: a research measurement")
  assert record["results"]["num_public"] == 200 and record["config"]["num_public"] == 200
  assert [v["name"] for v in r["variants"]] == ["paper", "lam_0.9", "tau_1"]
  seeds = r["seeds"]
  assert seeds == [0, 1]
  for v in r["variants"]:
    assert len(v["kd_only"]["accuracy"]) == len(v["joint"]["accuracy"]) == len(seeds)
    assert v["rounds"] == math.ceil(200 / 50) and len(v["segments"]) == 2
    for seg in ("disc_first", "disc_last"):
      assert 0.0 <= v[seg]["accuracy"] <= 1.0 and v[seg]["loss"] > 0  # λ < 1: D trained
    assert v["disc_first"]["rounds"] == 2 and v["disc_last"]["rounds"] == 4
    for fit in ("kd_only", "joint"):
      for where in ("public", "held_out"):
        dist = v["distance"][fit][where]
        assert 0.0 <= dist["tv_mean"] <= 1.0 and 0.0 <= dist["agreement_mean"] <= 1.0
        assert dist["oracle_hard_disc_accuracy"] == pytest.approx(0.5 + dist["tv_mean"] / 2)
  assert r["teacher_public"]["accuracy"] > 0.1
  _scripts.script("ablate_kd_gan").report(r)
  out = capsys.readouterr().out
  assert "KD-GAN discriminator ablation" in out and "lam_0.9" in out


@pytest.mark.slow
def test_paired_gain_is_the_mean_of_per_seed_differences_with_its_se(smoke_run):
  r, _ = smoke_run
  for v in r["variants"]:
    kd, joint = np.asarray(v["kd_only"]["accuracy"]), np.asarray(v["joint"]["accuracy"])
    diff = joint - kd
    np.testing.assert_allclose(v["gain"]["per_seed"], diff, atol=1e-7)
    assert v["gain"]["mean"] == pytest.approx(diff.mean(), abs=1e-7)
    assert v["gain"]["mean"] == pytest.approx(
        v["joint"]["accuracy_mean"] - v["kd_only"]["accuracy_mean"], abs=1e-7)
    sd = math.sqrt(((diff - diff.mean()) ** 2).sum() / (len(diff) - 1))
    assert v["gain"]["se"] == pytest.approx(sd / math.sqrt(len(diff)), abs=1e-9)


@pytest.mark.slow
def test_kd_only_fit_is_shared_by_variants_that_differ_only_in_d(smoke_run):
  r, work = smoke_run
  by_name = {v["name"]: v for v in r["variants"]}
  assert by_name["paper"]["kd_only_fit"] == by_name["lam_0.9"]["kd_only_fit"] == "kd_only"
  assert by_name["tau_1"]["kd_only_fit"] == "kd_only_tau1.0"
  assert r["fits"] == {"kd_only": 2, "joint": 3, "total": 5}
  assert r["kd_only_fits"]["kd_only"]["variants"] == ["paper", "lam_0.9"]
  assert by_name["paper"]["kd_only"] == by_name["lam_0.9"]["kd_only"]
  fits = sorted(p.name for p in (work / "checkpoints").iterdir())
  assert fits == ["joint_lam_0.9", "joint_paper", "joint_tau_1", "kd_only", "kd_only_tau1.0"]
  plan = _script("ablate_kd_gan").plan(_smoke())
  assert plan["fits"] == r["fits"]


def test_plan_lists_every_variant_and_its_rounds():
  config = _config("kd_gan_ablation")
  plan = _script("ablate_kd_gan").plan(config)
  names = [name for name, _ in config.variants]
  assert len(names) >= 13 and {"paper", "lam_0", "epochs_100", "k_d_5"} <= set(names)
  assert [k[len("variant "):] for k in plan if k.startswith("variant ")] == names
  assert "400 rounds (50 per segment)" in plan["variant paper"]
  assert "2000 rounds" in plan["variant epochs_100"]
  # D-only variants share one KD-only fit; epochs and τ need their own.
  assert plan["fits"]["kd_only"] == 3 and plan["fits"]["joint"] == len(names)
  only = _script("ablate_kd_gan").plan(_config("kd_gan_ablation", only=("paper", "lam_0")))
  assert [k for k in only if k.startswith("variant ")] == ["variant paper", "variant lam_0"]


def test_unknown_override_key_names_the_key_and_the_variant(tmp_path):
  stage = _script("ablate_kd_gan")
  bad = _smoke(variants=(("paper", {}), ("typo", {"disc_lr": 1e-2})))
  with pytest.raises(ValueError, match=r"'disc_lr'.*'typo'"):
    stage.plan(bad)
  with pytest.raises(ValueError, match=r"'disc_lr'.*'typo'"):
    stage.run(bad, str(tmp_path / "w"))  # refused before any training
  assert not (tmp_path / "w").exists()
  with pytest.raises(ValueError, match="unique"):
    stage.plan(_smoke(variants=(("a", {}), ("a", {"lam": 0.9}))))
  with pytest.raises(ValueError, match="no variant named"):
    stage.plan(_smoke(only=("nope",)))
  with pytest.raises(ValueError, match="unknown config variant"):
    _config("kd_gan_ablation", "cpu")


@pytest.mark.parametrize("override, match", [
    ({"lam": 1.5}, r"^config.variants: 'bad': config.lam must lie in \[0, 1\]; got 1.5$"),
    ({"k_s": 0}, r"^config.variants: 'bad': config.k_s must be"),
    ({"k_d": -1}, r"^config.variants: 'bad': config.k_d must be"),
    ({"epochs": 0}, r"^config.variants: 'bad': config.epochs must be"),
    ({"learning_rate": -1.0}, r"^config.variants: 'bad': config.learning_rate must be"),
    ({"disc_learning_rate": 0.0}, r"^config.variants: 'bad': config.disc_learning_rate must be"),
    ({"gumbel_temperature": float("inf")}, r"^config.variants: 'bad': config.gumbel_temperature"),
    ({"tau": 0.0}, r"^config.variants: 'bad': config.tau must be"),
    ({"clip": -1.0}, r"^config.variants: 'bad': config.clip must be"),
    ({"batch_size": 0}, r"^config.variants: 'bad': config.batch_size must be"),
    ({"num_unlabelled": -1}, r"^config.variants: 'bad': config.num_unlabelled must be"),
])
def test_a_variants_bad_setting_is_refused_naming_it_before_any_fit(tmp_path, override,
                                                                     match):
  """A variant's override (and the base's own settings) were read only by its fit, after
  the teacher trained: refused by --dry_run and before the run creates anything."""
  stage = _script("ablate_kd_gan")
  bad = _smoke(variants=(("paper", {}), ("bad", override)))
  _scripts.assert_refused_before_work(stage.run, stage.plan, bad, tmp_path / "w", match)


@pytest.mark.parametrize("field, value, match", [
    ("only", "paper", r"^config.only must be a tuple of variant names \(\(\) for all\); "
                      r"got 'paper'$"),
    ("only", ("paper", "nope"), r"^config.only: no variant named \['nope'\]; variants: "),
    ("variants", "paper", r"^config.variants must be a tuple of \(name, \{key: value\}\) "
                          r"pairs; got 'paper'$"),
    ("variants", (("paper", {}), 3),
     r"^config.variants: each entry must be \(name, \{key: value\}\); got 3$"),
    ("variants", (("a", {}), ("a", {"lam": 0.9})),
     r"^config.variants: name 'a' must be a unique, non-empty file name$"),
])
def test_the_variants_and_only_are_refused_naming_the_field(tmp_path, field, value, match):
  """A string of names was read letter by letter (only="paper": no variant named 'a',
  'e', ...), an entry that is no pair failed as a TypeError, and the messages named the
  bare field."""
  c = _smoke()
  with c.ignore_type():
    c[field] = value
  stage = _script("ablate_kd_gan")
  _scripts.assert_refused_before_work(stage.run, stage.plan, c, tmp_path / "w", match)


@pytest.mark.parametrize("field", ["num_public", "num_segments"])
def test_the_bases_counts_are_refused_naming_them(field):
  with pytest.raises(ValueError, match=rf"config.{field} must be"):
    _script("ablate_kd_gan").plan(_smoke(**{field: 0}))


@pytest.mark.slow
def test_unlabelled_inputs_change_only_the_student_samples():
  """With unlabelled inputs the KD-only student is unchanged, the joint one trains, and a
  wrong shape is refused."""
  rs = np.random.default_rng(0)
  x = rs.random((64, 4, 4, 1), dtype=np.float32)
  u = rs.random((48, 4, 4, 1), dtype=np.float32)
  tl = np.asarray(jax.nn.log_softmax(rs.normal(size=(64, 10)) * 3), np.float32)
  y = tl.argmax(1)
  keys = jax.random.split(jax.random.key(0), 2)
  gan = lambda lam: K.make_kd_gan(10, lam=lam, tau=2.0, clip=5.0, noise_multiplier=0.0,
                                  batch_size=8, student_kwargs={"hidden": (8,)},
                                  disc_hidden=(8,))
  fit = lambda g, **kw: K.fit(g, keys, x, tl, x, y, num_rounds=4, segment_rounds=4,
                              log=None, **kw)
  kd, kd_u = fit(gan(1.0)), fit(gan(1.0), unlabelled_x=u)
  jax.tree.map(np.testing.assert_array_equal, kd.state["student"], kd_u.state["student"])
  joint_u = fit(gan(0.5), unlabelled_x=u)
  assert np.isfinite(joint_u.history[-1]["disc"]) and joint_u.history[-1]["disc"] > 0
  moved = jax.tree.map(lambda a, b: float(np.abs(a - b).max()), joint_u.state["student"],
                       kd.state["student"])
  assert max(jax.tree.leaves(moved)) > 0  # the adversarial term on U reaches the student
  with pytest.raises(ValueError, match="unlabelled_x"):
    fit(gan(0.5), unlabelled_x=u[:, :2])
