"""Trains a PATE teacher ensemble and writes its vote histograms.

  python experiments/train_teachers.py --config configs/mnist_250.py:cpu --workdir runs/cpu

Writes into ``--workdir``: ``checkpoints/`` (orbax; a restarted run resumes),
``votes.npz`` (see pate_jax.votes), ``results.json`` and ``gap.png``.
"""

from __future__ import annotations

import time

from absl import logging
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from pate_jax import data, experiment, models, teachers, votes as votes_lib
from pate_jax.checkpoint import Checkpointer

# Named PRNG streams folded into the root key.
STREAM_PARTITION, STREAM_INIT, STREAM_TRAIN = 0, 1, 2


def load_data(config: ml_collections.ConfigDict) -> data.ImageDataset:
  ds = data.load_image_dataset(config.dataset, config.data_dir or None,
                               allow_fallback=config.allow_fallback)
  if ds.fallback:
    logging.warning("!!! FALLBACK DATA: %s — these are not %s results !!!", ds.source,
                    config.dataset)
    print(f"\n!!! FALLBACK DATA: {ds.source} — these are NOT {config.dataset} results !!!\n")
  return ds


def query_set(ds: data.ImageDataset) -> tuple[np.ndarray, int]:
  """Rows of the test split in student-split order (public pool, then evaluation)."""
  split = data.student_split(ds.name, len(ds.test_labels))
  return np.concatenate([split.pool_index, split.eval_index]), len(split.pool_index)


def build_ensemble(config: ml_collections.ConfigDict, num_classes: int) -> teachers.Ensemble:
  model = models.get_model(config.model.name, num_classes, **config.model.kwargs)
  tx = optax.adamw(config.learning_rate, weight_decay=config.weight_decay)
  fns = teachers.TeacherFns(model, tx, config.batch_size or None, config.max_shift)
  strategy = teachers.default_strategy() if config.strategy == "auto" else config.strategy
  mesh = teachers.teacher_mesh() if strategy == "vmap" else None
  return teachers.Ensemble(fns, strategy, config.chunk_size, mesh)


def run(config: ml_collections.ConfigDict, workdir: str) -> dict:
  """Trains (or resumes) the ensemble, computes votes and writes results."""
  t_start = time.time()
  ds = load_data(config)
  train_x, train_y = ds.train_images, ds.train_labels
  if config.get("use_extra") and ds.extra_images is not None:  # SVHN: train + extra.
    train_x = np.concatenate([train_x, ds.extra_images])
    train_y = np.concatenate([train_y, ds.extra_labels])
  if config.train_subset:
    train_x, train_y = train_x[:config.train_subset], train_y[:config.train_subset]
  root = jax.random.key(config.seed)
  shard_x, shard_y, dropped = data.partition(jax.random.fold_in(root, STREAM_PARTITION),
                                             train_x, train_y, config.num_teachers)
  print(f"{shard_y.shape[0]} teachers × {shard_y.shape[1]} examples ({dropped} dropped); "
        f"data: {ds.source}")
  shard_x, shard_y = jnp.asarray(data.to_float(shard_x)), jnp.asarray(shard_y)

  ensemble = build_ensemble(config, ds.num_classes)
  t = config.num_teachers
  init_keys = jax.random.split(jax.random.fold_in(root, STREAM_INIT), t)
  train_keys = jax.random.split(jax.random.fold_in(root, STREAM_TRAIN), t)
  state = ensemble.init(init_keys, shard_x[0])

  ckpt = Checkpointer(f"{workdir}/checkpoints")
  state, step = ckpt.restore_or(state)
  if step:
    print(f"resumed from checkpoint at step {step}")
  resumed_from = step
  t_train = time.time()
  bar = experiment.progress(total=config.num_steps, initial=step, desc="teachers", unit="step")
  loss = None
  while step < config.num_steps:
    n = min(config.checkpoint_every, config.num_steps - step)
    state, loss = ensemble.train(state, train_keys, shard_x, shard_y, step, n)
    step += n
    ckpt.save(step, state)
    bar.update(n)
    bar.set_postfix(loss=f"{float(loss.mean()):.3f}")
    if step == config.crash_after_step:
      ckpt.close()
      import os  # pylint: disable=g-import-not-at-top
      os._exit(3)  # Simulates a killed job (no cleanup) for the resume test.
  bar.close()
  jax.block_until_ready(state)
  train_seconds = time.time() - t_train
  ckpt.close()

  index, num_pool = query_set(ds)
  queries = jnp.asarray(data.to_float(ds.test_images[index]))
  labels = ds.test_labels[index]
  preds = np.asarray(ensemble.predict(state["params"], queries, config.query_chunk))
  votes = np.asarray(votes_lib.histogram(preds, ds.num_classes))
  votes_lib.save_votes(f"{workdir}/votes.npz", votes, labels, index=index, num_pool=num_pool,
                       dataset=ds.name)

  teacher_acc = (preds == labels[None]).mean(axis=1)
  plurality = votes.argmax(axis=1)
  gap = np.asarray(votes_lib.normalized_gap(votes))
  steps_trained = config.num_steps - resumed_from
  results = {
      "dataset": ds.name,
      "data_source": ds.source,
      "fallback_data": ds.fallback,
      "num_teachers": t,
      "examples_per_teacher": int(shard_y.shape[1]),
      "dropped_examples": dropped,
      "strategy": ensemble.strategy,
      "teacher_test_accuracy": {"mean": teacher_acc.mean(), "min": teacher_acc.min(),
                                "max": teacher_acc.max()},
      "plurality_accuracy_eval": (plurality[num_pool:] == labels[num_pool:]).mean(),
      "plurality_accuracy_test": (plurality == labels).mean(),
      "num_eval": len(labels) - num_pool,
      "num_test": len(labels),
      "mean_normalized_gap": gap.mean(),
      "final_train_loss": None if loss is None else float(loss.mean()),
      "resumed_from_step": resumed_from,
      "train_seconds": train_seconds,
      "train_examples_per_second": (steps_trained * t * (config.batch_size or shard_y.shape[1])
                                    / train_seconds if steps_trained else None),
      "wall_seconds": time.time() - t_start,
  }
  if config.gap_plot:
    _plot_gap(gap, t, f"{workdir}/gap.png")
  experiment.write_results(workdir, results, config=config, seed=config.seed)
  return results


def _plot_gap(gap: np.ndarray, num_teachers: int, path: str) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(5, 3.5))
  ax.hist(gap * 100, bins=50, color="tab:blue")
  ax.set_xlabel("normalized gap between top two vote counts (%)")
  ax.set_ylabel("test queries")
  ax.set_title(f"{num_teachers} teachers: mean gap {gap.mean():.1%}")
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def report(results: dict) -> None:
  print({k: results[k] for k in ("teacher_test_accuracy", "plurality_accuracy_eval",
                                 "plurality_accuracy_test", "mean_normalized_gap",
                                 "wall_seconds")})


if __name__ == "__main__":
  experiment.run_main(run, report=report, quiet_logs=True)
