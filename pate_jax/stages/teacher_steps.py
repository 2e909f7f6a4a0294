"""How many steps a teachers config needs: its first teachers' held-out accuracy against
training steps (``experiments/teacher_steps.py``).

``run(config, workdir)`` trains the first ``config.num_checked`` teachers of the teachers
config ``config.teachers`` (its partition, initial keys and training keys, as
:mod:`pate_jax.stages.teachers` draws them: the run's own first teachers), one at a time
with each step its own compiled call (a CNN step inside a compiled loop is several times
slower on a CPU), and measures each teacher's accuracy on the first ``config.num_test``
test images after each of ``config.eval_steps``. The accuracies are functions of the
private data: results.json keeps them in its private part; the setting and the time are
publishable.

A killed run resumes: each teacher's accuracies go to ``progress.json`` (owner-only, private)
as it finishes, with the settings they were measured under (the teachers config but how it
trains and writes, the data's name and source, the steps, the test images); a rerun on the
workdir with the same settings measures only the teachers not yet there (with more
``num_checked``, only the new ones), and one with other settings is refused, naming them.
The workdir is locked meanwhile.
"""

from __future__ import annotations

import json
import pathlib
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks, checkpoint, data, experiment, io, reporting, rng
from pate_jax.stages import teachers as teachers_stage

__all__ = ["run", "plan", "report", "eval_steps", "PROGRESS_FILE"]

PROGRESS_FILE = "progress.json"
# Teachers config fields that do not change what is measured (how the stage trains and
# where it writes, not which teachers): a rerun may change them and go on.
_NOT_MEASURED = ("allow_fallback", "checkpoint_every", "chunk_size", "compile_ahead",
                 "data_dir", "distill_temperatures", "gap_plot", "keep_checkpoints",
                 "max_to_keep", "memory_fraction", "num_steps", "query_chunk", "restart",
                 "strategy", "unroll_segments")


def eval_steps(config: Any) -> list[int]:
  """``config.eval_steps``, checked: increasing positive steps."""
  steps = [_checks.positive_int(s, "config.eval_steps") for s in config.eval_steps]
  if not steps or any(b <= a for a, b in zip(steps, steps[1:])):
    raise ValueError(f"config.eval_steps must be increasing positive steps; got {steps}")
  return steps


def _checked(config: Any) -> tuple[list[int], int]:
  """The validated ``(eval_steps, num_checked)`` (errors name the field)."""
  teachers_stage.check_config(config.teachers, "config.teachers.")
  steps = eval_steps(config)
  k = _checks.positive_int(config.num_checked, "config.num_checked")
  if k > config.teachers.num_teachers:
    raise ValueError(f"config.num_checked={k} exceeds config.teachers.num_teachers="
                     f"{config.teachers.num_teachers}")
  _checks.positive_int(config.num_test, "config.num_test")
  return steps, k


def plan(config: Any) -> dict[str, Any]:
  """``--dry_run``: the teachers checked, the steps each trains and where it is measured."""
  steps, k = _checked(config)
  return {"teachers_checked": k, "of_teachers": config.teachers.num_teachers,
          "eval_steps": steps, "steps_per_teacher": steps[-1], "steps_in_all": k * steps[-1],
          "model": config.teachers.model.to_dict(), "num_test": config.num_test}


def run(config: Any, workdir: str) -> dict[str, Any]:
  """Runs the stage (module docstring); resumes from ``progress.json``. Bad settings are
  refused before the workdir is made."""
  _checked(config)
  with experiment.locked_workdir(workdir):
    return _run(config, pathlib.Path(workdir))


def _load_progress(path: pathlib.Path, settings: dict[str, Any]) -> dict[int, list[float]]:
  """The accuracies per teacher that ``path`` holds ({} if there is none); measured under
  other ``settings``, :class:`pate_jax.checkpoint.ResumeMismatchError` naming the fields."""
  try:
    record = json.loads(path.read_text())
  except FileNotFoundError:
    return {}
  except ValueError as e:
    raise checkpoint.ResumeMismatchError(f"{path} is not a progress record ({e}): remove it "
                                         "to start over, or use another --workdir") from e
  if not isinstance(record, dict) or not isinstance(record.get("accuracy"), dict):
    raise checkpoint.ResumeMismatchError(f"{path} is not a progress record: remove it to "
                                         "start over, or use another --workdir")
  if record.get("settings") != settings:
    diff = checkpoint.fingerprint_diff(record.get("settings", {}), settings, path.name)
    raise checkpoint.ResumeMismatchError(
        f"{path} was measured with other settings ({'; '.join(diff)}): remove it to start "
        "over, or use another --workdir")
  return {int(t): acc for t, acc in record["accuracy"].items()}


def measure_teacher(init: Callable, step: Callable, init_key: jax.Array, train_key: jax.Array,
                    x: jax.Array, y: jax.Array, steps: list[int],
                    accuracy: Callable[[Any], float]) -> list[float]:
  """One teacher, ``init(init_key, x)`` trained by ``step(state, train_key, x, y, s)`` (the
  teachers' own ``init`` and jitted ``train_step``), its ``accuracy`` after each of
  ``steps``."""
  state, done, out = init(init_key, x), 0, []
  for until in steps:
    for s in range(done, until):
      state, _ = step(state, train_key, x, y, jnp.int32(s))
    done = until
    out.append(accuracy(state["params"]))
  return out


def _run(config: Any, workdir: pathlib.Path) -> dict[str, Any]:
  t0 = time.time()
  tc = config.teachers
  steps, k = _checked(config)
  ds, _, _, (shard_x, shard_y, _), root = teachers_stage.prepare_data(
      tc, prefix="config.teachers.")
  n_test = min(int(config.num_test), len(ds.test_labels))
  fns = teachers_stage.build_ensemble(tc, ds.num_classes).fns
  init_keys = jax.random.split(rng.stream(root, "teacher_init"), tc.num_teachers)
  train_keys = jax.random.split(rng.stream(root, "teacher_train"), tc.num_teachers)
  test_x = jnp.asarray(data.to_float(ds.test_images[:n_test]))
  test_y = np.asarray(ds.test_labels[:n_test])
  step_fn, predict = jax.jit(fns.train_step), jax.jit(fns.predict)

  def accuracy(params) -> float:
    preds = [np.asarray(predict(params, test_x[i:i + 1000])) for i in range(0, n_test, 1000)]
    return float(np.mean(np.concatenate(preds) == test_y))

  settings = checkpoint.fingerprint({
      "teachers": {k: v for k, v in tc.to_dict().items() if k not in _NOT_MEASURED},
      "data": {"name": ds.name, "source": ds.source, "fallback": bool(ds.fallback)},
      "eval_steps": steps, "num_test": n_test})
  progress = workdir / PROGRESS_FILE
  done = _load_progress(progress, settings)
  resumed = sorted(t for t in done if t < k)
  acc = np.zeros((k, len(steps)))
  for t in range(k):
    if t in done:
      acc[t] = done[t]
      print(f"teacher {t + 1}/{k} from {PROGRESS_FILE}", flush=True)
      continue
    x, y = jnp.asarray(data.to_float(shard_x[t])), jnp.asarray(shard_y[t])
    acc[t] = done[t] = measure_teacher(fns.init, step_fn, init_keys[t], train_keys[t], x, y,
                                       steps, accuracy)
    io.write_text(progress, json.dumps({"settings": settings, "accuracy": {
        str(i): a for i, a in sorted(done.items())}}), private=True)
    print(f"teacher {t + 1}/{k} done ({time.time() - t0:.0f} s)", flush=True)
  results = {
      "dataset": ds.name, "data_source": ds.source, "fallback_data": ds.fallback,
      "num_checked": k, "of_teachers": int(tc.num_teachers), "eval_steps": steps,
      "num_test": n_test, "model": tc.model.to_dict(), "compute_dtype": tc.compute_dtype,
      "batch_size": tc.batch_size, "learning_rate": tc.learning_rate,
      "wall_seconds": time.time() - t0,  # this process's: resumed teachers cost none
      "resumed_teachers": len(resumed),
      "private": reporting.private_part(
          mean_accuracy=dict(zip(map(str, steps), acc.mean(0).tolist())),
          min_accuracy=dict(zip(map(str, steps), acc.min(0).tolist())),
          accuracy=acc.tolist()),
  }
  experiment.write_results(workdir, results, config=config, seed=tc.seed)
  return results


def report(r: dict[str, Any]) -> None:
  means = r["private"]["mean_accuracy"]
  print(f"{experiment.PRIVATE_MARK}mean test accuracy of the first {r['num_checked']} of "
        f"{r['of_teachers']} teachers ({r['num_test']} test images) by step: "
        + ", ".join(f"{s}: {100 * a:.2f}%" for s, a in means.items()))
