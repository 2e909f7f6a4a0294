"""The aggregate stage compiled ahead on synthetic votes (the main job, while its teachers
train on an accelerator): afterwards the stage on real votes compiles nothing, and the
rehearsal neither spends the real budget nor leaves files."""

from __future__ import annotations

import pathlib
import tempfile

import jax
import numpy as np

from pate_jax import experiment
from pate_jax import votes as votes_lib
from pate_jax.stages import aggregate

REPO = pathlib.Path(__file__).resolve().parent.parent


def _real_votes(path: pathlib.Path, rows=60, pool=50, teachers=250, classes=10):
  r = np.random.default_rng(3)
  p = r.dirichlet(np.full(classes, 0.5), size=rows)
  votes = np.stack([r.multinomial(teachers, pi) for pi in p])
  votes_lib.save_votes(path / "votes.npz", votes, votes.argmax(1), num_pool=pool,
                       dataset="synthetic")
  return path


def test_after_compile_ahead_the_stage_compiles_nothing_and_spends_nothing(tmp_path, caplog,
                                                                          monkeypatch):
  teachers = _real_votes(tmp_path / "teachers")
  c = experiment.load_script(REPO / "configs" / "aggregate_mnist.py").get_config("cpu")
  c.votes_dir, c.mechanism, c.sigma, c.num_queries = str(teachers), "gnmax", 40.0, 20
  c.epsilon_max, c.privacy_plot, c.seed = 20.0, False, 0   # secret noise: the real budget
  scratch = tmp_path / "tmp"  # this test's temporary directories only
  scratch.mkdir()
  monkeypatch.setattr(tempfile, "tempdir", str(scratch))
  seconds = aggregate.compile_ahead(c, num_teachers=250, num_classes=10, num_rows=60,
                                    num_pool=50)
  assert seconds > 0
  # Nothing spent from the real teachers' budget, nothing left behind.
  assert sorted(p.name for p in teachers.iterdir()) == ["votes.npz"]
  assert not list(scratch.iterdir())
  with jax.log_compiles(True), caplog.at_level("DEBUG"):
    r = aggregate.run(c, tmp_path / "w")
  compiled = [m.getMessage() for m in caplog.records if "ompil" in m.getMessage()]
  assert not compiled, compiled[:5]
  assert r["num_answered"] > 0 and (teachers / "ledger.npz").exists()
