"""Trains a PATE teacher ensemble and writes its vote histograms.

  python experiments/train_teachers.py --config configs/mnist_250.py:cpu --workdir runs/mnist_n250

Writes into ``--workdir``: ``checkpoints/`` (orbax, the newest ``max_to_keep`` steps while
it trains; a restarted run resumes; deleted when the run finishes unless
``--config.keep_checkpoints=True``), ``votes.npz`` (see pate_jax.votes), ``results.json``
and, last, the private ``gap.png`` (and its seconds, ``gap_plot_seconds.json``:
:func:`pate_jax.experiment.draw_private_figures`). Rerunning a finished run reuses its
``votes.npz`` (and draws ``gap.png`` where it is missing).

A rerun resumes only the same run: the checkpoints carry a fingerprint of
``FINGERPRINT_FIELDS`` and of the training data, and a rerun with other values is
refused (``--config.restart=True`` discards the checkpoints and starts over). Once
``votes.npz`` exists it is never replaced by other votes (labels answered from it would
lose the votes they were paid from): its run's fingerprint and ``num_steps`` are kept
beside it (``votes_fingerprint.json``), and a rerun with other values, or with
``restart``, is refused; a new run needs another workdir. A checkpoint that does not
restore is set aside for the newest one that does. The workdir is locked while a run
uses it.

The stage owns what the core library (:mod:`pate_jax.teachers`, plain arguments only)
must not see: the config (:data:`FINGERPRINT_FIELDS`, :func:`check_config`,
:func:`build_ensemble` from a config), the work directory's files (:func:`protect_votes`,
:func:`write_votes_record`, :func:`reused_results`).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import json
import pathlib
import time
from typing import Any

from absl import logging
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from pate_jax import _checks as checks
from pate_jax import budget, checkpoint, data, distributed, experiment, io, memory, models
from pate_jax import reporting, rng
from pate_jax import teachers
from pate_jax import votes as votes_lib
from pate_jax.checkpoint import Checkpointer

# What determines the partition and the training (with the training data's digest);
# not num_steps (a longer run continues the same one), nor how it is computed.
FINGERPRINT_FIELDS = ("seed", "dataset", "train_subset", "use_extra", "num_teachers", "model",
                      "learning_rate", "weight_decay", "batch_size", "max_shift",
                      "compute_dtype")


def check_config(config: ml_collections.ConfigDict, prefix: str = "config.") -> None:
  """Rejects out-of-range values before anything is loaded or written (naming the field;
  ``prefix``: how the fields are named, ``config.teachers.`` where the config is nested)."""
  rng.check_seed(config.seed, f"{prefix}seed")
  checks.choice(config.model.name, f"{prefix}model.name", models.model_names())
  models.check_kwargs(config.model.name, config.model.kwargs, f"{prefix}model.kwargs")
  for name in ("num_teachers", "num_steps", "checkpoint_every"):
    checks.positive_int(config[name], f"{prefix}{name}")
  for name in ("train_subset", "batch_size", "max_shift", "query_chunk", "chunk_size"):
    checks.positive_int(config.get(name, 0), f"{prefix}{name}", minimum=0)  # 0: off / auto
  checks.positive(config.learning_rate, f"{prefix}learning_rate")
  if not checks.scalar(config.weight_decay, f"{prefix}weight_decay") >= 0:
    raise ValueError(f"{prefix}weight_decay must be >= 0; got {config.weight_decay}")
  checks.boolean(config.get("restart", False), f"{prefix}restart")
  # The soft counts of the distillation students, computed once the teachers are trained:
  # a bad temperature failed (0, -1) or wrote NaN probabilities (nan) after the training.
  temperatures = config.get("distill_temperatures", ()) or ()
  if len(temperatures):
    checks.positive_vector(temperatures, f"{prefix}distill_temperatures", "temperatures")


def check_data(config: ml_collections.ConfigDict, images: np.ndarray,
               prefix: str = "config.") -> None:
  """The config values that depend on the data (``images [N, H, W, C]``; ``prefix`` as
  :func:`check_config`'s)."""
  if config.max_shift >= min(images.shape[1:3]):
    raise ValueError(f"{prefix}max_shift must be smaller than the images "
                     f"({images.shape[1]}×{images.shape[2]}); got {config.max_shift}")
  if config.train_subset > len(images):
    raise ValueError(f"{prefix}train_subset must be <= the {len(images)} training examples; "
                     f"got {config.train_subset}")


def load_data(config: ml_collections.ConfigDict) -> data.ImageDataset:
  ds = data.load_image_dataset(config.dataset, config.data_dir or None,
                               allow_fallback=config.allow_fallback)
  if ds.fallback:
    logging.warning("!!! FALLBACK DATA: %s — these are not %s results !!!", ds.source,
                    config.dataset)
    print(f"\n!!! FALLBACK DATA: {ds.source} — these are NOT {config.dataset} results !!!\n")
  return ds


def run(config: ml_collections.ConfigDict, workdir: str, *,
        restart_flag: str = experiment.RESTART_FLAG, prefix: str = "config.",
        figures: list[experiment.PrivateFigure] | None = None) -> dict:
  """Trains (or resumes) the ensemble, computes votes and writes results.

  ``restart_flag``: the flag that sets ``config.restart`` on the command line of the script
  that runs this stage, named in the messages that refuse a resume:
  ``--config.teachers.restart`` in a main job whose teachers' config is nested.
  ``prefix``: how the settings are named in the errors that refuse them
  (:func:`check_config`; ``config.teachers.`` there).
  ``figures``: ``None`` draws the private ``gap.png`` (``config.gap_plot``) as the stage's
  last act, once its other files are written; a list receives it instead
  (:class:`pate_jax.experiment.PrivateFigure`), for a caller that writes files of its own
  after this stage to draw it after them (:func:`pate_jax.experiment.draw_private_figures`).

  With ``PATE_JAX_COORDINATOR`` / ``PATE_JAX_NUM_PROCESSES`` / ``PATE_JAX_PROCESS_ID``
  (or ``PATE_JAX_DISTRIBUTED=auto``) set, one such command per host trains one
  ensemble whose teachers are spread over every host's devices; process 0 writes
  the files.
  """
  check_config(config, prefix)
  experiment.check_restart_flag(restart_flag)
  distributed.initialize()  # no-op for one process; precedes any JAX computation
  with (experiment.locked_workdir(workdir, enabled=distributed.is_main_process()),
        experiment.private_figures(figures) as drawn):
    return _run(config, workdir, restart_flag, prefix, drawn)


def prepare_data(config: ml_collections.ConfigDict,
                 clock: experiment.PhaseClock | None = None, prefix: str = "config.") -> tuple:
  """The run's data, root key and teachers' shards: ``(ds, train_x, train_y, (shard_x
  [T, n, H, W, C], shard_y [T, n], dropped), root)`` (what :func:`run` trains on and
  :func:`plan` sizes). ``clock``: marks the phases "load" (the files read and checked)
  and "partition" (the shards drawn). ``prefix``: how the settings are named in the errors
  that refuse them (:func:`check_data`)."""
  ds = load_data(config)
  train_x, train_y = ds.train_images, ds.train_labels
  if config.get("use_extra") and ds.extra_images is not None:  # SVHN: train + extra.
    train_x = np.concatenate([train_x, ds.extra_images])
    train_y = np.concatenate([train_y, ds.extra_labels])
  check_data(config, train_x, prefix)
  if config.train_subset:
    train_x, train_y = train_x[:config.train_subset], train_y[:config.train_subset]
  if clock is not None:
    clock.mark("load")
  root = rng.root_key(config.seed)  # the run's root seed; stages draw named streams
  shards = data.partition(rng.stream(root, "partition"), train_x, train_y, config.num_teachers)
  if clock is not None:
    clock.mark("partition")
  return ds, train_x, train_y, shards, root


def abstract_inputs(ensemble: teachers.Ensemble, shard_x: np.ndarray,
                    shard_y: np.ndarray) -> tuple:
  """The training's inputs ``(state, keys, images, labels)`` as ``jax.ShapeDtypeStruct``s,
  from the host shards' shapes alone (``shard_x [T, n, H, W, C]``, ``shard_y [T, n]``):
  what the stage will convert, place and initialise (the teacher axis padded to the
  ensemble's shards, float32 images), so that the training compiles meanwhile."""
  padded = ensemble.padded_size(shard_y.shape[0])
  n, image_shape = shard_y.shape[1], tuple(shard_x.shape[2:])
  keys = jax.ShapeDtypeStruct((padded,), jax.eval_shape(lambda: rng.root_key(0)).dtype)
  images = jax.ShapeDtypeStruct((padded, n, *image_shape), np.float32)
  labels = jax.ShapeDtypeStruct((padded, n), jax.dtypes.canonicalize_dtype(shard_y.dtype))
  state = ensemble.init_shapes(keys, jax.ShapeDtypeStruct((n, *image_shape), np.float32))
  return state, keys, images, labels


def teacher_keys(root: jax.Array, num_teachers: int) -> tuple[jax.Array, jax.Array]:
  """``(initialisation keys, training keys)``, ``[T]`` each, of the teachers of the run with
  root key ``root``: the one derivation of every stage that trains them."""
  return (jax.random.split(rng.stream(root, "teacher_init"), num_teachers),
          jax.random.split(rng.stream(root, "teacher_train"), num_teachers))


def build_ensemble(config: ml_collections.ConfigDict, num_classes: int) -> teachers.Ensemble:
  """The ensemble a teachers config describes (model by name, AdamW, strategy, mesh:
  :func:`pate_jax.teachers.build_ensemble`)."""
  return teachers.build_ensemble(
      config.model.name, num_classes, model_kwargs=dict(config.model.kwargs),
      learning_rate=config.learning_rate, weight_decay=config.weight_decay,
      batch_size=config.batch_size or None, max_shift=config.max_shift,
      strategy=config.strategy, chunk_size=config.chunk_size or None,
      memory_fraction=config.get("memory_fraction", 0.6),
      compute_dtype=config.get("compute_dtype", "float32"),
      unroll_segments=config.get("unroll_segments", False))


def compiles_ahead(config: ml_collections.ConfigDict, ensemble: teachers.Ensemble) -> bool:
  """Whether a thread compiles ahead (nothing runs on the devices: the work beside it
  keeps them) the training while the state is initialised, and the votes' pass while the
  teachers train (:meth:`pate_jax.teachers.Ensemble.compile_train`, ``compile_predict``):
  ``config.compile_ahead``, or where that is ``None``, whenever the ensemble is vmapped (not
  the per-teacher ``loop``) on an accelerator, whose compiling is host work; on a CPU-only
  machine the two would share the cores."""
  if ensemble.strategy == "loop":
    return False
  choice = config.get("compile_ahead")
  return bool(choice) if choice is not None else jax.devices()[0].platform != "cpu"


def plan_steps(config: ml_collections.ConfigDict) -> int:
  """The training segment's length the memory plan is made for (its real program, all
  teachers in one vmap, where that fits): the first segment's, whatever step a run
  resumes from, so that a resumed run plans the same chunks."""
  return min(int(config.num_steps), int(config.checkpoint_every))


def _compile_training(config, ensemble: teachers.Ensemble, inputs: tuple
                      ) -> tuple[memory.ChunkPlan, float]:
  """:meth:`pate_jax.teachers.Ensemble.compile_train` on ``inputs`` (:func:`abstract_inputs`)
  for a run from step 0 (a resumed run compiles its other segment lengths itself); returns
  the plan and the seconds taken."""
  t = time.time()
  plan = ensemble.compile_train(*inputs, num_steps=checkpoint.segment_lengths(
      int(config.num_steps), int(config.checkpoint_every)))
  return plan, time.time() - t


def _compile_votes(config, ensemble: teachers.Ensemble, shapes, queries_shape: tuple) -> float:
  """:meth:`pate_jax.teachers.Ensemble.compile_predict` for the votes
  :func:`pate_jax.teachers.compute_votes` will make after training a state of ``shapes``
  (the training keeps them); returns its seconds."""
  t = time.time()
  ensemble.compile_predict(
      shapes["params"], jax.ShapeDtypeStruct(queries_shape, np.float32), _temperatures(config),
      config.query_chunk or None,
      resident_bytes=memory.tree_bytes(shapes["opt_state"]) // ensemble.num_shards)
  return time.time() - t


def _head_start(future: concurrent.futures.Future | None, what: str):
  """The result of compiling ``what`` ahead, or None where it was not (``future`` None) or
  failed: a head start only (on a GPU, say, autotuning out of memory beside the work),
  reported, after which ``what`` compiles when it is needed, as without it."""
  if future is None:
    return None
  try:
    return future.result()
  except Exception as e:  # pylint: disable=broad-except
    print(f"compiling {what} ahead failed ({type(e).__name__}: {e}); it is compiled when "
          "needed")
    return None


def plan(config: ml_collections.ConfigDict, prefix: str = "config.") -> dict:
  """``--dry_run``: data sizes, the stacked state's size and the memory planner's chunks
  (:meth:`pate_jax.teachers.Ensemble.plan_train` / ``plan_predict`` on abstract inputs of
  the run's padded shapes: the plans the run would make). With the ``loop`` strategy (the
  CPU default) the run trains one teacher at a time; the plans shown are then those of
  ``vmap`` on the teacher mesh, for comparison. Loads the data; trains nothing. ``prefix``:
  how the settings are named in the errors that refuse them (:func:`check_config`)."""
  check_config(config, prefix)
  ds, train_x, _, (shard_x, shard_y, dropped), root = prepare_data(config, prefix=prefix)
  t, n = config.num_teachers, int(shard_y.shape[1])
  ensemble = build_ensemble(config, ds.num_classes)
  index, num_pool = teachers.query_set(ds)
  out = {
      "dataset": ds.name, "data_source": ds.source, "fallback_data": ds.fallback,
      "train_examples": len(train_x), "test_examples": len(ds.test_labels),
      "num_classes": ds.num_classes, "image_shape": tuple(shard_x.shape[2:]),
      "num_teachers": t, "examples_per_teacher": n, "dropped_examples": int(dropped),
      "queries": len(index), "queries_pool": num_pool, "queries_eval": len(index) - num_pool,
      "batch_size": config.batch_size or f"full batch ({n})", "num_steps": config.num_steps,
      "checkpoint_every": config.checkpoint_every, "strategy": ensemble.strategy,
      "compile_ahead": compiles_ahead(config, ensemble),
  }
  out.update(teachers.memory_plan(ensemble, t, shard_x, shard_y, len(index), config.query_chunk,
                                  rng.stream(root, "teacher_init"), _temperatures(config),
                                  num_steps=plan_steps(config)))
  return out


# ------------------------------------------------------------------ the work directory


def reused_results(workdir: Any, ckpt: Any, num_steps: int,
                   outputs: dict[str, Any]) -> dict[str, Any] | None:
  """The recorded results of this very run if it finished (``ckpt`` marked complete at
  ``num_steps`` with these ``outputs``, and its votes.npz and results.json are in
  ``workdir``): its votes.npz is reused and nothing is trained (``reused_votes``: True).
  Else None. Without kept checkpoints, a finished run whose votes.npz is gone trains again
  from step 0 (deterministic: the same teachers as a resume); while it is there, a rerun
  with other values is refused first (:func:`protect_votes`)."""
  path = pathlib.Path(workdir)
  if (ckpt.completed(outputs) != num_steps
      or not (path / "votes.npz").exists() or not (path / "results.json").exists()):
    if ckpt.latest_step() is None and (ckpt.directory / checkpoint.COMPLETED_FILE).exists():
      print("the earlier run's checkpoints were deleted when it finished "
            "(keep_checkpoints=False): training from step 0")
    return None
  votes_lib.load_votes(path)  # validated
  print(f"teachers already trained ({num_steps} steps; this configuration): reusing "
        f"{path / 'votes.npz'}")
  results = experiment.read_results(path)
  results["reused_votes"] = True
  return results


VOTES_FILE = "votes.npz"
VOTES_RECORD = "votes_fingerprint.json"  # beside votes.npz: the run that wrote it


def _record(fingerprint: dict[str, Any], outputs: dict[str, Any]) -> dict[str, Any]:
  return {"fingerprint": checkpoint.fingerprint(fingerprint),
          "outputs": checkpoint.fingerprint(outputs)}


def write_votes_record(workdir: Any, fingerprint: dict[str, Any],
                       outputs: dict[str, Any]) -> None:
  """Writes ``<workdir>/votes_fingerprint.json``: the ``fingerprint`` (the checkpoints'
  fields) and ``outputs`` (what else votes.npz depends on) of the run about to write
  votes.npz. Written *before* votes.npz, so a votes.npz of this version always has its
  record (:func:`protect_votes`); it outlives the checkpoints. Owner-only: it holds the
  training rows' SHA-256, which tests any guess at a private row."""
  record = _record(fingerprint, outputs)
  experiment.write_text(pathlib.Path(workdir) / VOTES_RECORD,
                        json.dumps(record, indent=1, sort_keys=True) + "\n", private=True)


def recorded_data_digest(workdir: Any) -> str | None:
  """The digest of the training rows that the run which wrote ``workdir``'s votes.npz
  recorded (its fingerprint's ``data_sha256``), or ``None``: the budget registry's key for
  votes written before votes.npz carried ``private_data``."""
  record = _votes_record(pathlib.Path(workdir))
  digest = (record or {}).get("fingerprint", {}).get("data_sha256")
  return digest if checks.is_sha256(digest) else None


def warn_without_data_digest(workdir: Any) -> None:
  """Warns that the votes in ``workdir`` carry no digest of their private data and no run
  recorded one, so that a secret-noise budget spent on them is not registered."""
  logging.warning("%s carries no digest of the teachers' private data (private_data), and "
                  "no run recorded one: the budget registry cannot tell other budgets on "
                  "the same data, whose ε would add up", workdir)


def warn_unsalted_votes(workdir: Any) -> None:
  """Warns that the votes in ``workdir`` predate their secret salt, so that the digest of
  them which labels.npz carries can be recomputed from guessed votes (one who knows every
  vote but one tests each guess against it): keep such labels private."""
  logging.warning("%s predates the votes' secret salt: the digest of the votes in the "
                  "labels.npz it releases is unsalted, and one who knows every vote but one "
                  "can test guesses against it; keep those labels private, or train the "
                  "teachers again into a new workdir (their votes get a salt)", workdir)


def _votes_record(workdir: pathlib.Path) -> dict[str, Any] | None:
  """The record of the run that wrote ``workdir``'s votes.npz: votes_fingerprint.json, else
  (a workdir of an older version) the completion record of its checkpoints, else None."""
  try:
    record = json.loads((workdir / VOTES_RECORD).read_text())
  except (OSError, ValueError):
    record = checkpoint.read_completed(workdir / "checkpoints")
  if not isinstance(record, dict) or not isinstance(record.get("fingerprint"), dict):
    return None
  return {"fingerprint": record["fingerprint"], "outputs": record.get("outputs") or {}}


def protect_votes(workdir: Any, fingerprint: dict[str, Any], outputs: dict[str, Any], *,
                  restart: bool = False, restart_flag: str = experiment.RESTART_FLAG) -> None:
  """Refuses a run that would replace the votes.npz in ``workdir`` by other votes.

  Labels answered from these votes, and the privacy ledger that paid for them, refer to
  them: votes from another partition, model or training would leave those labels (and
  their ε, recomputed on the new votes) without the votes that produced them. So once
  votes.npz exists, only the run that wrote it (the same ``fingerprint`` and ``outputs``,
  as recorded by :func:`write_votes_record`) may go on here (it reuses them, or recomputes
  the same ones), and ``restart`` is refused. With no votes.npz anything may run, unless a
  privacy ledger there spent on the votes that were there (``budget.refuse_spent_votes``).

  Raises:
    ResumeMismatchError: ``restart``, another configuration (naming the differing fields),
      votes.npz without a record, or a spent ledger without its votes.npz; the message says
      to use another workdir.
  """
  workdir = pathlib.Path(workdir)
  votes = workdir / VOTES_FILE
  if not votes.exists():
    budget.refuse_spent_votes(workdir)
    return
  invalidated = ("labels answered from these votes (and their privacy ledger) would refer to "
                 "votes that no longer exist")
  new_workdir = ("use another --workdir for a new run (teachers of the same data there "
                 "need a second privacy budget, whose ε adds to this one's: the aggregate "
                 "stage refuses it unless config.another_budget is True)")
  if restart:
    raise checkpoint.ResumeMismatchError(
        f"refusing {restart_flag}=True: {votes} holds the teachers' votes, and {invalidated}; "
        f"a restart discards checkpoints only while no votes exist: {new_workdir}")
  stored = _votes_record(workdir)
  if stored is None:
    raise checkpoint.ResumeMismatchError(
        f"refusing to replace {votes}: there is no record of the run that wrote it "
        f"({VOTES_RECORD}, or checkpoints/{checkpoint.COMPLETED_FILE}), and {invalidated}; "
        f"{new_workdir}")
  now = _record(fingerprint, outputs)
  diff = checkpoint.fingerprint_diff({**stored["fingerprint"], **stored["outputs"]},
                                     {**now["fingerprint"], **now["outputs"]}, VOTES_FILE)
  if diff:
    raise checkpoint.ResumeMismatchError(
        f"refusing to replace {votes}: it was written with another configuration, and "
        f"{invalidated}. Differing fields: {'; '.join(diff)}. Rerun with the original values "
        f"to reuse these votes, or {new_workdir}")


def _run(config: ml_collections.ConfigDict, workdir: str, restart_flag: str,
         prefix: str, figures: list[experiment.PrivateFigure]) -> dict:
  clock = experiment.PhaseClock()
  ds, train_x, train_y, (shard_x, shard_y, dropped), root = prepare_data(config, clock, prefix)
  print(f"{shard_y.shape[0]} teachers × {shard_y.shape[1]} examples ({dropped} dropped); "
        f"data: {ds.source}")
  fingerprint = {**experiment.config_fields(config, FINGERPRINT_FIELDS),
                 "data_sha256": experiment.data_digest(train_x, train_y)}
  private_data = private_data_digest(ds, train_x, train_y, fingerprint["data_sha256"])
  if jax.process_index() == 0:
    io.narrow(pathlib.Path(workdir) / VOTES_RECORD)  # an older version's, written 0644
    for tmp in votes_lib.temporary_files(workdir):  # left by a run killed while writing
      tmp.unlink(missing_ok=True)
  clock.mark("digest")
  restart = config.get("restart", False)
  # Refuses a changed configuration before anything is compiled: one that would replace
  # votes.npz, then one that would resume other checkpoints. The checkpointer is closed
  # (and its lock released) whatever happens below.
  protect_votes(workdir, fingerprint, _outputs(config), restart=restart,
                restart_flag=restart_flag)
  with Checkpointer(f"{workdir}/checkpoints", max_to_keep=config.get("max_to_keep", 1),
                    fingerprint=fingerprint, restart=restart, private=True,
                    restart_hint=experiment.restart_hint(restart_flag)) as ckpt:
    done = reused_results(workdir, ckpt, config.num_steps, _outputs(config))
    if done is not None:
      # A run stopped before its last act (or a main job before the student's end) left
      # no gap.png: drawn from the votes reused.
      gap = pathlib.Path(workdir) / "gap.png"
      if distributed.is_main_process() and config.gap_plot and not gap.exists():
        figures.append(experiment.PrivateFigure("gap_plot", gap, lambda path: _plot_gap(
            votes_lib.load_votes(workdir)["votes"], config.num_teachers, path)))
      return done
    clock.mark("setup")
    return _train_and_vote(config, workdir, ds, (shard_x, shard_y, dropped), root, ckpt,
                           clock, private_data, restart_flag, prefix, figures)


def private_data_digest(ds: data.ImageDataset, train_x: np.ndarray, train_y: np.ndarray,
                        digest: str) -> str:
  """The key of the teachers' privacy budget (votes.npz's ``private_data``): the digest of
  the dataset's whole training split, whatever subset of it (``train_subset``) and
  whatever extra split the teachers were trained on (``train_x``, ``train_y``, whose
  ``digest`` it is), so that teachers of any part of it meet one budget."""
  if train_x is ds.train_images and train_y is ds.train_labels:
    return digest
  return experiment.data_digest(ds.train_images, ds.train_labels)


def _temperatures(config: ml_collections.ConfigDict) -> tuple[float, ...]:
  """The distillation temperatures whose averaged teacher probabilities votes.npz keeps."""
  return tuple(float(x) for x in config.get("distill_temperatures", ()) or ())


def _outputs(config: ml_collections.ConfigDict) -> dict:
  """What votes.npz depends on besides the fingerprint."""
  return {"num_steps": config.num_steps,
          "distill_temperatures": list(config.get("distill_temperatures", ()) or ())}


def _train_and_vote(config, workdir, ds, shards, root, ckpt, clock, private_data, restart_flag,
                    prefix, figures) -> dict:
  """Trains (resuming from ``ckpt``), computes the votes and writes the results; ``clock``
  (an :class:`pate_jax.experiment.PhaseClock`) times its phases; ``private_data``: the key of
  the teachers' budget (:func:`private_data_digest`), written into votes.npz;
  ``restart_flag`` and ``prefix`` as :func:`run`'s; ``figures``: receives the private
  gap.png, to be drawn after every file written here."""
  peak_before = memory.peak_bytes()  # the allocators' peak from earlier work, if any
  shard_x, shard_y, dropped = shards
  ensemble = build_ensemble(config, ds.num_classes)
  t = config.num_teachers
  ahead = compiles_ahead(config, ensemble)
  # A host thread compiles ahead (``compile_ahead``): the training, from the shards' shapes,
  # while they are converted and placed and the state is initialised; then the votes' pass
  # while the teachers train.
  with experiment.side_thread() as thread:
    abstract = abstract_inputs(ensemble, shard_x, shard_y) if ahead else None
    training_ahead = (thread.submit(_compile_training, config, ensemble, abstract)
                      if ahead else None)
    shard_x = data.to_float(shard_x)  # host arrays: each device receives only its teachers
    init_keys, train_keys = teacher_keys(root, t)
    # Padded to the device count and sharded once; the state stays so between segments.
    sample = shard_x[0]
    train_keys, shard_x, shard_y = ensemble.prepare((train_keys, shard_x, shard_y))
    index, num_pool = teachers.query_set(ds)
    state = ensemble.init(init_keys, sample)

    # Unless the checkpoints are kept, the last step saves the trained parameters only: the
    # votes need no optimizer state, and the checkpoints go once the votes are written.
    final_keys = () if config.get("keep_checkpoints", False) else ("params",)
    state, step = ckpt.restore_or(state, final_step=config.num_steps, final_keys=("params",))
    if step > config.num_steps:
      raise ValueError(f"{prefix}num_steps={config.num_steps} is below the step of the "
                       f"checkpoint restored ({step}); ask for at least {step} steps, or "
                       f"start over with {restart_flag}=True")
    if step:
      print(f"resumed from checkpoint at step {step}")
    resumed_from = step
    clock.mark("init")
    plan, compiled_seconds = None, {}
    if ensemble.strategy != "loop":
      planned = _head_start(training_ahead, "the training")
      if planned is not None:
        plan, compiled_seconds["training_beside_init"] = planned
      else:
        plan = ensemble.plan_train(state, train_keys, shard_x, shard_y,
                                   num_steps=plan_steps(config))
      print(f"training plan per device: {memory.fits_description(plan, ('teachers',))}")
    clock.mark("plan")
    votes_ahead = (thread.submit(_compile_votes, config, ensemble, abstract[0],
                                 (len(index), *ds.test_images.shape[1:])) if ahead else None)
    state, loss = teachers.train_with_checkpoints(
        ensemble, state, train_keys, shard_x, shard_y, ckpt, step=step,
        num_steps=config.num_steps, checkpoint_every=config.checkpoint_every, num_teachers=t,
        plan=plan, final_keys=final_keys)
    train_seconds = clock.mark("train")
    seconds = _head_start(votes_ahead, "the votes")
    if seconds is not None:
      compiled_seconds["votes_beside_training"] = seconds
  clock.mark("wait_for_votes_compiled")

  queries = jnp.asarray(data.to_float(ds.test_images[index]))
  labels = ds.test_labels[index]
  temps = _temperatures(config)
  votes, teacher_acc, counts, predict_plan, predictions = teachers.compute_votes(
      ensemble, state, queries, labels, num_classes=ds.num_classes, num_teachers=t,
      query_chunk=config.query_chunk or None, temperatures=temps, return_predictions=True)
  votes_seconds = clock.mark("votes")
  if predict_plan is not None:
    print(f"prediction plan per device: {memory.fits_description(predict_plan)}")
  checkpoint_wait = ckpt.wait()  # the last save was written while the votes were computed
  clock.mark("checkpoint_wait")
  if distributed.is_main_process():
    write_votes_record(workdir, ckpt.fingerprint, _outputs(config))
    votes_lib.save_votes(f"{workdir}/votes.npz", votes, labels, index=index,
                         num_pool=num_pool, dataset=ds.name, soft_counts=counts,
                         temperatures=temps or None, predictions=predictions,
                         private_data=private_data)
  clock.mark("write")

  steps_trained = config.num_steps - resumed_from
  results = {
      "dataset": ds.name,
      "data_source": ds.source,
      "fallback_data": ds.fallback,
      "num_teachers": t,
      "examples_per_teacher": int(shard_y.shape[1]),
      "dropped_examples": dropped,
      "strategy": ensemble.strategy,
      "devices": jax.device_count(),
      "compute_dtype": config.get("compute_dtype", "float32"),
      "deterministic_ops": experiment.deterministic_ops_enabled(),
      "train_plan": None if plan is None else dataclasses.asdict(plan),
      "predict_plan": None if predict_plan is None else dataclasses.asdict(predict_plan),
      "resumed_from_step": resumed_from,
      "train_seconds": train_seconds,
      "train_examples_per_second": (steps_trained * t * (config.batch_size or shard_y.shape[1])
                                    / train_seconds if steps_trained else None),
      "votes_seconds": votes_seconds,
      # Seconds of compiling in a thread beside the work (not in the wall's sum): the
      # training beside the initialisation, the votes beside the training (compile_ahead).
      "compiled_ahead_seconds": compiled_seconds,
      "checkpoints": {"saves": ckpt.saves, "blocking_seconds": ckpt.blocking_seconds,
                      "final_wait_seconds": checkpoint_wait,
                      "share_of_training": ckpt.blocking_seconds / max(train_seconds, 1e-9),
                      "bytes": memory.tree_bytes(state)},
      # The allocators' peak so far in this process against the planner's per-device
      # budget, judged only where it grew during this stage (else peak_is_earlier: another
      # run's in the same process); None on a CPU (no allocator statistics).
      "device_memory": memory.peak_bytes(ensemble.budget_bytes(), before=peak_before),
      "wall_seconds": clock.elapsed(),
      # Where the wall went, phase by phase (they add up to it, but for the results' write).
      "phase_seconds": dict(clock.seconds),
      # The teachers' accuracy, their votes' gap and loss are functions of the private data.
      "private": reporting.private_part(
          **reporting.vote_summary(votes, labels, num_pool, teacher_acc),
          final_train_loss=loss),
  }
  keep = bool(config.get("keep_checkpoints", False))
  results["checkpoints"]["kept"] = keep
  # The checkpoints' size on disk is that of the trained parameters compressed: a function
  # of the private data (unlike "bytes", the state's size from its shapes).
  results["private"]["checkpoint_bytes_deleted_at_completion"] = 0
  if distributed.is_main_process():
    experiment.write_results(workdir, results, config=config, seed=config.seed)
  # The outputs are on disk: a rerun reuses them; the checkpoints go unless kept.
  freed = ckpt.complete(config.num_steps, keep=keep, outputs=_outputs(config))
  ckpt.close()
  if distributed.is_main_process() and freed:
    results["private"]["checkpoint_bytes_deleted_at_completion"] = freed
    experiment.write_results(workdir, results, config=config, seed=config.seed)
  # The private gap.png: drawing it and compressing its PNG take a time that follows the
  # votes, so it comes after every file above (their times would carry its seconds).
  if distributed.is_main_process() and config.gap_plot:
    figures.append(experiment.PrivateFigure("gap_plot", pathlib.Path(workdir) / "gap.png",
                                            functools.partial(_plot_gap, votes, t)))
  return results


def _plot_gap(votes: np.ndarray, num_teachers: int, path: pathlib.Path) -> None:
  """Draws ``gap.png`` at ``path`` from the votes' normalised top-two gaps."""
  reporting.plot_gap(np.asarray(votes_lib.normalized_gap(votes)), num_teachers, path)


def report(results: dict) -> None:
  if results["fallback_data"]:
    print(f"!!! FALLBACK DATA ({results['data_source']}): NOT a {results['dataset']} result !!!")
  print(experiment.PRIVATE_MARK + reporting.teachers_headline(results))
