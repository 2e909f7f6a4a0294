"""Stages compiled ahead (the main job, while its teachers train on an accelerator): the
aggregate stage on synthetic votes, after which the stage on real votes compiles nothing,
and the rehearsal neither spends the real budget nor leaves files; the student's training
on synthetic data, after which training on real data of those shapes compiles nothing; the
teachers' training, planned and compiled beside their initialisation, and their votes'
pass beside their training."""

from __future__ import annotations

import concurrent.futures
import pathlib
import tempfile

import chex
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from pate_jax import data, experiment, rng, students
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
                       dataset="synthetic", private_data=experiment.data_digest(votes))
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


@pytest.mark.slow  # compiles: several seconds on the 2-core CPU
@pytest.mark.parametrize("num_seeds", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_the_student_stage_compiled_ahead_trains_without_compiling(digits_votes_dir, tmp_path,
                                                                   caplog, num_seeds):
  c = experiment.load_script(REPO / "configs" / "student_pate_g.py").get_config("cpu")
  c.votes_dir, c.labels, c.seed = str(digits_votes_dir), "true", 0  # no labels to pay for
  c.num_seeds = num_seeds  # 2: the students of seeds 0 and 1 in one vmapped program
  c.num_steps, c.segment_steps, c.batch_size = 5, 2, 8
  c.aggregate.num_queries = 30
  c.student.kwargs.update(TINY_GAN)
  pool, eval_x, _, num_classes = students.load_public_data(
      votes_lib.load_votes(digits_votes_dir))
  seconds = student_stage.compile_ahead(c, num_classes=num_classes, image_shape=pool.shape[1:],
                                        pool_size=len(pool), num_eval=len(eval_x))
  assert seconds > 0
  # The stage builds its student again from the same config: the same object, whose
  # compiled programs (init, segments of 2 and 1 steps, evaluation) it finds.
  kwargs = c.student.kwargs.to_dict()
  assert (students.build_student("pate_g", num_classes, pool.shape[1:], **kwargs) is
          students.build_student("pate_g", num_classes, tuple(pool.shape[1:]), **kwargs))
  r, compiled = _compiled(caplog, lambda: student_stage.run(c, str(tmp_path)))
  assert not compiled, compiled[:5]
  assert r["num_labels"] == 30 and r["steps"] == 5
  c.active = ml_collections.ConfigDict({"round_sizes": (10, 10)})
  with pytest.raises(ValueError, match="config.active"):
    student_stage.compile_ahead(c, num_classes=num_classes, image_shape=pool.shape[1:],
                                pool_size=len(pool), num_eval=len(eval_x))


class _Stop(Exception):
  """A fit stopped after a segment."""


@pytest.mark.slow  # compiles: several seconds on the 2-core CPU
@pytest.mark.parametrize("num_seeds", [1, 2])
def test_a_student_compiled_ahead_and_resumed_compiles_nothing(tmp_path, caplog, num_seeds):
  """The programs compiled ahead are those a resumed fit calls, not only a fresh one: a
  restored state is committed to its device and a fresh one is not, so the loop and
  ``compile_fit`` both run the committed state. A fit stopped after its first segment
  and resumed compiles nothing, and trains the student of the uninterrupted fit."""
  r = np.random.default_rng(0)
  pool = r.random((40, 4, 4, 1), np.float32)
  data = students.make_student_data(pool, np.arange(12), np.arange(12) % 3, pool[:8],
                                    np.arange(8) % 3, 3)
  student = students.build_student("supervised", 3, (4, 4, 1), model="mlp",
                                   model_kwargs=(("hidden", (8,)),))
  key = rng.root_key(0)
  schedule = {"num_steps": 5, "batch_size": 4, "segment_steps": 2, "init_examples": 8}
  students.compile_fit(student, data, key, num_seeds=num_seeds, **schedule)
  fit, keys = ((students.fit, key) if num_seeds == 1 else
                (students.fit_seeds, jnp.stack([key] * num_seeds)))

  def stop_at_2(text):
    if text.startswith("step=2 "):
      raise _Stop(text)

  def run(directory, log=None):
    return fit(student, data, keys, **schedule, checkpoint_dir=str(directory), log=log)

  with pytest.raises(_Stop):
    _compiled(caplog, lambda: run(tmp_path / "cut", stop_at_2))
  resumed, compiled = _compiled(caplog, lambda: run(tmp_path / "cut"))
  assert resumed.resumed_from == 2 and not compiled, compiled[:5]
  whole, compiled = _compiled(caplog, lambda: run(tmp_path / "whole"))
  assert not compiled, compiled[:5]
  assert resumed.history == whole.history
  chex.assert_trees_all_equal(resumed.state, whole.state)


# The teachers' training and votes planned and compiled ahead (a thread of the stage).

@pytest.mark.slow  # compiles: several seconds on the 2-core CPU
def test_teachers_compiled_ahead_train_the_same_teachers_and_compile_in_the_thread(
    tmp_path, caplog):
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
  c.strategy = "loop"  # one small program per teacher: nothing compiled ahead
  loop = teachers_stage.build_ensemble(c, 10)
  assert not teachers_stage.compiles_ahead(c, loop)
  assert loop.compile_train(None, None, None, None, [1]) is None
  assert loop.compile_predict(None, None) is None


def test_a_failed_head_start_is_reported_and_gives_nothing(capsys):
  # On a GPU, say, autotuning out of memory beside the work: the stage then compiles
  # when it needs the program, as without the head start.
  failed = concurrent.futures.Future()
  failed.set_exception(RuntimeError("no memory left for autotuning"))
  assert teachers_stage._head_start(failed, "the votes") is None  # pylint: disable=protected-access
  assert ("compiling the votes ahead failed (RuntimeError: no memory left for autotuning)"
          in capsys.readouterr().out)
  done = concurrent.futures.Future()
  done.set_result(1.5)
  assert teachers_stage._head_start(done, "the votes") == 1.5  # pylint: disable=protected-access
  assert teachers_stage._head_start(None, "the votes") is None  # pylint: disable=protected-access


def test_the_abstract_inputs_are_the_prepared_ones():
  # The head start compiles from the host shards' shapes, before they are converted and
  # placed: those shapes, dtypes and placements are the ones the training then gets.
  c = experiment.load_script(REPO / "configs" / "mnist_250.py").get_config("cpu")
  c.update({"dataset": "digits", "num_teachers": 5, "strategy": "vmap"})
  c.model.kwargs.hidden = (8,)
  ds, _, _, (shard_x, shard_y, _), root = teachers_stage.prepare_data(c)
  ensemble = teachers_stage.build_ensemble(c, ds.num_classes)
  abstract = teachers_stage.abstract_inputs(ensemble, shard_x, shard_y)
  keys = jax.random.split(rng.stream(root, "teacher_train"), 5)
  keys, x, y = ensemble.prepare((keys, data.to_float(shard_x), shard_y))
  state = ensemble.init(jax.random.split(rng.stream(root, "teacher_init"), 5),
                        data.to_float(shard_x[0]))
  prepared = (state, keys, x, y)
  assert jax.tree.structure(abstract) == jax.tree.structure(prepared)
  for a, b in zip(jax.tree.leaves(abstract), jax.tree.leaves(prepared), strict=True):
    assert (a.shape, a.dtype) == (b.shape, b.dtype)
    assert a.sharding is None or a.sharding.is_equivalent_to(b.sharding, b.ndim)
