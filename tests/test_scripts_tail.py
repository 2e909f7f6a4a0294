"""The last lines of the scripts not covered elsewhere (issue 15): the accounting benchmark
and the KD-GAN script end with their headline numbers and the absolute path of their
results JSON. Run in-process on their smallest configs through
``experiment.run_and_report`` (what ``run_main`` does after parsing flags)."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

from pate_jax import experiment

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "experiments"))  # the scripts import their siblings


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


@pytest.mark.slow
def test_train_kd_gan_ends_with_accuracy_epsilon_and_paths(tmp_path, data_dir, capsys,
                                                          monkeypatch):
  monkeypatch.setenv("PATE_JAX_DATA_DIR", str(data_dir))
  r = _run("train_kd_gan", "kd_gan", "smoke", tmp_path, num_seeds=1, teacher__num_steps=20,
           table1__public_sizes=(100,), curve__num_public=200, audit_rounds=0)
  tail = _tail(capsys, tmp_path, 14)
  assert "headline" in tail and f"{r['accuracy']:.2%}" in tail
  assert f"ε {r['epsilon_published']:.2f} as published" in tail
  assert "sound ε: none" in tail and "utility_vs_epsilon.png" in tail
