"""Stages compiled ahead (the main job, while its teachers train on an accelerator): the
aggregate stage on synthetic votes, after which the stage on real votes compiles nothing,
and the rehearsal neither spends the real budget nor leaves files; the student's training
on synthetic data, after which training on real data of those shapes compiles nothing; the
teachers' training, planned and compiled beside their initialisation, and their votes'
pass beside their training."""

from __future__ import annotations

import pathlib
import tempfile

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from pate_jax import experiment, memory, students, teachers
from pate_jax import votes as votes_lib
from pate_jax.stages import aggregate
from pate_jax.stages import student as student_stage
from pate_jax.stages import teachers as teachers_stage

REPO = pathlib.Path(__file__).resolve().parent.parent


def _real_votes(path: pathlib.Path, rows=60, pool=50, teachers=250, classes=10):
  r = np.random.default_rng(3)
  p = r.dirichlet(np.full(classes, 0.5), size=rows)
  votes = np.stack([r.multinomial(teachers, pi) for pi in p])
  votes_lib.save_votes(path / "votes.npz", votes, votes.argmax(1), num_pool=pool,
                       dataset="synthetic")
  return path


@pytest.mark.slow  # compiles: several seconds on the 2-core CPU
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


# The student's training compiled ahead (the main job, while its teachers train on an
# accelerator): afterwards training on real data of the same shapes compiles nothing.

TINY_GAN = {"generator_hidden": (16,), "discriminator_hidden": (16, 8), "noise_dim": 4}


def _compiled(caplog, fn):
  caplog.clear()
  with jax.log_compiles(True), caplog.at_level("DEBUG"):
    out = fn()
  return out, [m.getMessage() for m in caplog.records if "Compiling" in m.getMessage()]


def _student_data(seed, num_labelled, pool=120, num_eval=30):
  r = np.random.default_rng(seed)
  return students.make_student_data(
      r.random((pool, 8, 8, 1), np.float32), r.permutation(pool)[:num_labelled],
      r.integers(0, 10, num_labelled), r.random((num_eval, 8, 8, 1), np.float32),
      r.integers(0, 10, num_eval), 10)


@pytest.mark.slow  # compiles: several seconds on the 2-core CPU
def test_after_compile_fit_training_of_those_shapes_compiles_nothing(tmp_path, caplog):
  student = students.build_student("pate_g", 10, (8, 8, 1), **TINY_GAN)
  schedule = {"num_steps": 5, "batch_size": 8, "segment_steps": 2}  # segments of 2, 2, 1
  students.compile_fit(student, _student_data(0, 20), jax.random.key(7), **schedule)
  # The real run builds its student again from the same arguments: the same programs.
  again = students.build_student("pate_g", 10, (8, 8, 1), **TINY_GAN)
  assert again is student
  fit, compiled = _compiled(caplog, lambda: students.fit(
      again, _student_data(1, 20), jax.random.key(0), checkpoint_dir=str(tmp_path / "a"),
      log=None, **schedule))
  assert not compiled, compiled[:5]
  assert len(fit.history) == 3
  # Another number of labels is another program: the check sees compilations.
  _, compiled = _compiled(caplog, lambda: students.fit(
      again, _student_data(1, 21), jax.random.key(0), checkpoint_dir=str(tmp_path / "b"),
      log=None, **{**schedule, "num_steps": 2}))
  assert any("_segment" in m for m in compiled), compiled[:5]


@pytest.mark.slow  # compiles: several seconds on the 2-core CPU
def test_the_student_stage_compiled_ahead_trains_without_compiling(digits_votes_dir, tmp_path,
                                                                   caplog):
  c = experiment.load_script(REPO / "configs" / "student_pate_g.py").get_config("cpu")
  c.votes_dir, c.labels, c.seed = str(digits_votes_dir), "true", 0  # no labels to pay for
  c.num_steps, c.segment_steps, c.batch_size = 5, 2, 8
  c.aggregate.num_queries = 30
  c.student.kwargs.update(TINY_GAN)
  pool, eval_x, _, num_classes = students.load_public_data(
      votes_lib.load_votes(digits_votes_dir))
  seconds = student_stage.compile_ahead(c, num_classes=num_classes, image_shape=pool.shape[1:],
                                        pool_size=len(pool), num_eval=len(eval_x))
  assert seconds > 0
  r, compiled = _compiled(caplog, lambda: student_stage.run(c, str(tmp_path)))
  assert not compiled, compiled[:5]
  assert r["num_labels"] == 30 and r["steps"] == 5
  c.active = ml_collections.ConfigDict({"round_sizes": (10, 10)})
  with pytest.raises(ValueError, match="config.active"):
    student_stage.compile_ahead(c, num_classes=num_classes, image_shape=pool.shape[1:],
                                pool_size=len(pool), num_eval=len(eval_x))


# The teachers' votes planned and compiled ahead (a thread beside their training).

def _ensemble(strategy="vmap"):
  return teachers.build_ensemble("mlp", 10, model_kwargs={"hidden": (16,)}, learning_rate=1e-3,
                                 weight_decay=0.0, batch_size=8, max_shift=0,
                                 strategy=strategy)


@pytest.mark.slow  # compiles: several seconds on the 2-core CPU
def test_after_compile_predict_the_votes_compile_nothing(caplog):
  ens = _ensemble()
  images = np.random.default_rng(0).random((6, 20, 8, 8, 1), np.float32)
  state = ens.init(jax.random.split(jax.random.key(0), 6), images[0])
  queries = jnp.asarray(np.random.default_rng(1).random((50, 8, 8, 1), np.float32))
  shapes = jax.eval_shape(lambda s: s, state)
  resident = memory.tree_bytes(shapes["opt_state"])
  plan = ens.compile_predict(shapes["params"], jax.ShapeDtypeStruct(queries.shape, jnp.float32),
                             (1.0,), None, resident)
  assert plan.teachers == 6 and plan.queries == 50
  out, compiled = _compiled(caplog, lambda: teachers.compute_votes(
      ens, state, queries, np.zeros(50, np.int32), num_classes=10, num_teachers=5,
      temperatures=(1.0,)))
  assert out[3] == plan
  big = [m for m in compiled if "jit(run)" in m or "jit(<lambda>)" in m]
  assert not big, big[:3]
  # Votes on a number of queries not compiled ahead plan (a probe program) and compile.
  _, compiled = _compiled(caplog, lambda: teachers.compute_votes(
      ens, state, queries[:40], np.zeros(40, np.int32), num_classes=10, num_teachers=5,
      temperatures=(1.0,)))
  assert any("jit(run)" in m for m in compiled) and any("<lambda>" in m for m in compiled)
  assert _ensemble("loop").compile_predict(shapes["params"], queries) is None


@pytest.mark.slow  # compiles: several seconds on the 2-core CPU
def test_after_compile_train_the_training_compiles_nothing(caplog):
  ens = _ensemble()
  init_keys, keys = (jax.random.split(jax.random.key(i), 6) for i in (0, 1))
  r = np.random.default_rng(0)
  keys, x, y = ens.prepare((keys, r.random((6, 20, 8, 8, 1), np.float32),
                            r.integers(0, 10, (6, 20))))
  plan = ens.compile_train(ens.init_shapes(init_keys, x[0]), keys, x, y, num_steps=[3, 1])
  assert plan == ens.plan_train(ens.init(init_keys, x[0]), keys, x, y)
  state = ens.init(init_keys, x[0])

  def train():
    s, _ = ens.train(state, keys, x, y, 0, 3, plan=plan)
    return ens.train(s, keys, x, y, 3, 1, plan=plan)
  _, compiled = _compiled(caplog, train)
  assert not [m for m in compiled if "jit(run)" in m], compiled[:3]
  # A segment length not compiled ahead is compiled when it comes.
  _, compiled = _compiled(caplog, lambda: ens.train(ens.init(init_keys, x[0]), keys, x, y, 0,
                                                    2, plan=plan))
  assert any("jit(run)" in m for m in compiled)
  assert _ensemble("loop").compile_train(state, keys, x, y, [1]) is None


@pytest.mark.slow  # compiles: several seconds on the 2-core CPU
def test_teachers_compiled_ahead_train_the_same_teachers_and_compile_in_the_thread(
    tmp_path, monkeypatch, caplog, capsys):
  c = experiment.load_script(REPO / "configs" / "mnist_250.py").get_config("cpu")
  c.update({"dataset": "digits", "num_teachers": 4, "num_steps": 7, "checkpoint_every": 3,
            "gap_plot": False, "strategy": "vmap"})
  c.model.kwargs.hidden = (16,)
  assert c.compile_ahead is None
  assert teachers_stage.compiles_ahead(c, teachers_stage.build_ensemble(c, 10)) == (
      jax.devices()[0].platform != "cpu")
  runs = {}
  for ahead in (False, True):
    c.compile_ahead = ahead
    caplog.clear()
    with jax.log_compiles(True), caplog.at_level("DEBUG"):
      runs[ahead] = teachers_stage.run(c, str(tmp_path / str(ahead)))
    # The training's segments (3, 3, 1 steps), its planner's probe and the votes' pass:
    # compiled by the thread, not where the work runs.
    threads = {m.threadName for m in caplog.records
               if "Compiling jit(run)" in m.getMessage() or
               "Compiling jit(<lambda>)" in m.getMessage()}
    assert threads and (("MainThread" in threads) != ahead), threads
  assert runs[False]["compiled_ahead_seconds"] == {}
  assert set(runs[True]["compiled_ahead_seconds"]) == {"training_beside_init",
                                                       "votes_beside_training"}
  a, b = (votes_lib.load_votes(tmp_path / str(k)) for k in (False, True))
  np.testing.assert_array_equal(a["predictions"], b["predictions"])
  assert (runs[False]["private"]["final_train_loss"] ==
          runs[True]["private"]["final_train_loss"])
  # A failed head start (on a GPU, say, autotuning out of memory) loses nothing.
  def fail(*args, **kwargs):
    raise RuntimeError("no memory left for autotuning")
  monkeypatch.setattr(teachers.Ensemble, "compile_train", fail)
  monkeypatch.setattr(teachers.Ensemble, "compile_predict", fail)
  failed = teachers_stage.run(c, str(tmp_path / "failed"))
  out = capsys.readouterr().out
  assert "compiling the training ahead failed" in out
  assert "compiling the votes ahead failed" in out
  assert failed["compiled_ahead_seconds"] == {}
  np.testing.assert_array_equal(votes_lib.load_votes(tmp_path / "failed")["predictions"],
                                a["predictions"])
  c.strategy = "loop"  # one small program per teacher: nothing compiled ahead
  assert not teachers_stage.compiles_ahead(c, teachers_stage.build_ensemble(c, 10))
