"""The student protocol and the one training loop every student uses.

A :class:`Student` is a NamedTuple of pure functions, like an optax transform:

  init(key, sample)              -> state        (``sample``: pool images for
                                                   data-dependent initialisation)
  step(state, key, batch, step)  -> (state, metrics)
  logits(state, images)          -> [B, C]        (evaluation: no noise, averaged
                                                   parameters where the student keeps them)

``state`` is any pytree. Students keep their non-parameter collections (batch
statistics, fixed weight-norm scales) next to, not inside, what the optimizer
updates. ``batch`` is a dict: ``x_lab`` / ``y_lab`` (a labelled minibatch;
``y_lab`` classes ``[B]`` or probabilities ``[B, C]``) and ``x_unl`` / ``x_unl2``
(two independent minibatches of the public pool).

:func:`fit` runs ``step`` in ``lax.scan`` segments of ``segment_steps`` steps
compiled once, with per-step randomness ``fold_in(key, step)``, saving an orbax
checkpoint after each segment; a killed run resumes from the newest one and
continues bit-identically (the batches are a function of ``(key, step)``).
:func:`fit_seeds` trains several students, one per key, side by side in one vmapped
program (a seed's student is the one :func:`fit` trains with its key).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax.checkpoint import Checkpointer, committed_state, run_segments, segment_lengths
from pate_jax.io import data_digest
from pate_jax.students._data import StudentData, epoch_batches

PyTree = Any
Batch = dict[str, jax.Array]

# Sub-streams of a student's key.
_INIT, _STEP, _LABELLED, _POOL, _POOL2, _INIT_SAMPLE = range(6)


class Student(NamedTuple):
  """A student: pure functions over a pytree state (see the module docstring).

  ``matmul_precision``: the precision of its float32 matrix products and convolutions
  wherever the loop runs it (``jax.default_matmul_precision``). "float32", the default,
  computes a student at the same precision on every backend; ``None`` takes the
  backend's default, which on NVIDIA GPUs since Ampere rounds float32 operands to TF32
  (10-bit mantissas) and on TPUs to bfloat16. The students are small MLPs, so float32
  should cost them little (not measured on a GPU).
  """
  init: Callable[[jax.Array, jax.Array], PyTree]
  step: Callable[[PyTree, jax.Array, Batch, jax.Array], tuple[PyTree, dict]]
  logits: Callable[[PyTree, jax.Array], jax.Array]
  matmul_precision: str | None = "float32"


# Values of a ``matmul_precision`` (``jax.default_matmul_precision``'s names), besides
# "default" (or None): the backend's own.
MATMUL_PRECISIONS = ("float32", "tensorfloat32", "bfloat16", "highest", "high")


def checked_matmul_precision(value: str | None, name: str) -> str | None:
  """``value`` as a ``matmul_precision`` field holds it ("default" becomes None); anything
  else than :data:`MATMUL_PRECISIONS`, "default" or None is refused naming ``name``."""
  if value == "default":
    return None
  if value not in (None, *MATMUL_PRECISIONS):
    raise ValueError(f"{name}: {value!r} is not one of {['default', *MATMUL_PRECISIONS]}")
  return value


def matmul_precision(student: Any):
  """The context, entered while tracing, in which ``student``'s functions run (``student``:
  a :class:`Student`, or anything else with a ``matmul_precision`` field)."""
  if student.matmul_precision is None:
    return contextlib.nullcontext()
  return jax.default_matmul_precision(student.matmul_precision)


class GameCheck(NamedTuple):
  """A check of a run's own training metrics (never the held-out set): on the first history
  entry at or after ``step``, ``metric`` must not exceed ``max_value``; on every entry after
  that one, it must not exceed ``late_max_value`` (None: no later bound).

  It detects an adversarial game that failed (PATE-G's discriminator wins: the generator's
  feature-matching loss climbs without bound), which otherwise trains on as a plain
  classifier: early, against ``max_value``, or later in the run, against the looser
  ``late_max_value`` (a working game's loss may spike for a segment or two and recover).
  Deciding on training losses, not held-out accuracy, keeps the held-out set out of the
  run's choices.
  """
  step: int
  metric: str
  max_value: float
  late_max_value: float | None = None


class GameFailed(RuntimeError):
  """:func:`fit` stopped: the run's :class:`GameCheck` failed (its checkpoints are kept)."""

  def __init__(self, step: int, metric: str, value: float, max_value: float):
    super().__init__(f"the game failed: {metric} = {value:.4g} at step {step} exceeds "
                     f"{max_value:g}")
    self.step, self.metric, self.value, self.max_value = step, metric, value, max_value


def judge(check: GameCheck | None, history: list[dict]) -> None:
  """Raises :class:`GameFailed` if ``history``'s first entry at or after ``check.step`` has
  ``check.metric`` above ``check.max_value``, or a later entry above
  ``check.late_max_value``; nothing before that step, or no check."""
  if check is None:
    return
  if history:  # at the first record, not at check.step
    _check_metric(check, history[0])
  judged = [e for e in history if e["step"] >= check.step]
  for i, entry in enumerate(judged if check.late_max_value is not None else judged[:1]):
    _judge_entry(check, entry, late=i > 0)


def _check_metric(check: GameCheck | None, entry: dict) -> None:
  """A ``ValueError`` naming ``check.metric`` where it is not among a history entry's
  metrics (checked at the first record, not only at ``check.step``)."""
  if check is not None and check.metric not in entry:
    raise ValueError(f"check.metric: {check.metric!r} is not a training metric of this "
                     f"student ({', '.join(sorted(entry))})")


def _judge_entry(check: GameCheck, entry: dict, late: bool) -> None:
  """One history entry against ``check``'s first bound, or its later one if ``late``."""
  _check_metric(check, entry)
  bound = check.late_max_value if late else check.max_value
  value = float(entry[check.metric])
  if not value <= bound:  # NaN fails too
    raise GameFailed(int(entry["step"]), check.metric, value, bound)


class FitResult(NamedTuple):
  state: PyTree
  eval_accuracy: float
  history: list[dict]      # one entry per segment: step, mean metrics, eval accuracy
  resumed_from: int
  train_seconds: float


def segment_batches(key: jax.Array, start: jax.Array, num_steps: int, pool_size: int,
                    num_labelled: int, batch_size: int) -> dict[str, jax.Array]:
  """Row indices of minibatches ``start, ..., start + num_steps - 1``, each ``[num_steps,
  batch_size]``: ``lab`` into the labelled rows, ``unl`` and ``unl2`` (two independent
  streams) into the pool."""
  return {"lab": epoch_batches(jax.random.fold_in(key, _LABELLED), start, num_steps,
                               num_labelled, batch_size),
          "unl": epoch_batches(jax.random.fold_in(key, _POOL), start, num_steps, pool_size,
                               batch_size),
          "unl2": epoch_batches(jax.random.fold_in(key, _POOL2), start, num_steps, pool_size,
                                batch_size)}


def gather_batch(rows: Mapping[str, jax.Array], pool: jax.Array, labelled_index: jax.Array,
                 labels: jax.Array) -> Batch:
  """The minibatch of one step's ``rows`` (one slice of :func:`segment_batches`): the pool's
  three minibatches gathered as one."""
  parts = (labelled_index[rows["lab"]], rows["unl"], rows["unl2"])
  bounds = np.cumsum([0, *(p.shape[0] for p in parts)])
  x = pool[jnp.concatenate(parts)]
  return {"x_lab": x[:bounds[1]], "y_lab": labels[rows["lab"]],
          "x_unl": x[bounds[1]:bounds[2]], "x_unl2": x[bounds[2]:]}


def _segment_steps(student: Student, batch_size: int, num_steps: int, state: PyTree,
                   key: jax.Array, start: jax.Array, pool: jax.Array,
                   labelled_index: jax.Array, labels: jax.Array) -> tuple[PyTree, dict]:
  """Steps ``start .. start + num_steps - 1`` of one student (``key``): the body of
  :func:`_segment` and, vmapped over states and keys, of :func:`_seeds_segment`."""
  step_key = jax.random.fold_in(key, _STEP)
  rows = segment_batches(key, start, num_steps, pool.shape[0], labelled_index.shape[0],
                         batch_size)

  def body(s, xs):
    i, step_rows = xs
    step = start + i
    batch = gather_batch(step_rows, pool, labelled_index, labels)
    return student.step(s, jax.random.fold_in(step_key, step), batch, step)

  with matmul_precision(student):
    state, metrics = jax.lax.scan(body, state, (jnp.arange(num_steps), rows))
  return state, jax.tree.map(jnp.mean, metrics)


_segment = functools.partial(jax.jit, static_argnums=(0, 1, 2), donate_argnums=3)(
    _segment_steps)


@functools.partial(jax.jit, static_argnums=(0, 1, 2), donate_argnums=3)
def _seeds_segment(student: Student, batch_size: int, num_steps: int, states: PyTree,
                   keys: jax.Array, start: jax.Array, pool: jax.Array,
                   labelled_index: jax.Array, labels: jax.Array) -> tuple[PyTree, dict]:
  """:func:`_segment` for ``N`` students at once: ``states`` and ``keys`` stacked on a
  leading seed axis, the data shared; metrics ``[N]``."""
  return jax.vmap(functools.partial(_segment_steps, student, batch_size, num_steps),
                  in_axes=(0, 0, None, None, None, None))(states, keys, start, pool,
                                                          labelled_index, labels)


@functools.partial(jax.jit, static_argnums=0)
def _probabilities(student: Student, state: PyTree, images: jax.Array) -> jax.Array:
  with matmul_precision(student):
    return jax.nn.softmax(student.logits(state, images), axis=-1)


@functools.partial(jax.jit, static_argnums=0)
def _seeds_predictions(student: Student, states: PyTree, images: jax.Array) -> jax.Array:
  """Predicted classes ``[N, B]`` of ``images`` under each of the stacked ``states``."""
  with matmul_precision(student):
    return jax.vmap(lambda s: jnp.argmax(student.logits(s, images), axis=-1))(states)


def _init_from_pool(student: Student, key: jax.Array, pool: jax.Array,
                    init_examples: int) -> PyTree:
  """``student.init`` on ``init_examples`` random rows of ``pool`` (all of them where it has
  fewer: the slice stops at the pool's end): the rows and the
  initialisation from distinct sub-streams of ``key`` (the body of :func:`_init` and,
  vmapped over keys, of :func:`_seeds_init`)."""
  rows = jax.random.permutation(jax.random.fold_in(key, _INIT_SAMPLE), pool.shape[0])
  with matmul_precision(student):
    return student.init(jax.random.fold_in(key, _INIT), pool[rows[:init_examples]])


_init = functools.partial(jax.jit, static_argnums=(0, 3))(_init_from_pool)


@functools.partial(jax.jit, static_argnums=(0, 3))
def _seeds_init(student: Student, keys: jax.Array, pool: jax.Array,
                init_examples: int) -> PyTree:
  """:func:`init_state` for each of ``keys [N]`` in one program (stacked states)."""
  return jax.vmap(lambda key: _init_from_pool(student, key, pool, init_examples))(keys)


def probabilities(student: Student, state: PyTree, images: Any, batch_size: int = 1000
                  ) -> np.ndarray:
  """Class probabilities ``[N, C]`` of ``images`` (host array), in batches."""
  images = np.asarray(images, np.float32)
  return np.concatenate([np.asarray(_probabilities(student, state,
                                                   jnp.asarray(images[i:i + batch_size])))
                         for i in range(0, images.shape[0], batch_size)])


def predict(student: Student, state: PyTree, images: Any, batch_size: int = 1000
            ) -> np.ndarray:
  """Predicted classes of ``images`` (host array), in batches."""
  return probabilities(student, state, images, batch_size).argmax(axis=1)


def accuracy(student: Student, state: PyTree, images: Any, labels: Any) -> float:
  return float(np.mean(predict(student, state, images) == np.asarray(labels)))


def init_state(student: Student, pool: jax.Array, key: jax.Array,
               init_examples: int = 500) -> PyTree:
  """``student.init`` on ``init_examples`` random pool rows (data-dependent initialisation),
  compiled as one program: run op by op, a GAN discriminator's data-dependent
  initialisation compiles each of its hundreds of small operations separately.

  The rows and the initialisation draw from distinct sub-streams of ``key``.
  """
  return _init(student, key, pool, init_examples)


def _check_schedule(num_steps: int, batch_size: int, segment_steps: int) -> None:
  for name, value in (("num_steps", num_steps), ("batch_size", batch_size),
                      ("segment_steps", segment_steps)):
    if int(value) < 1:
      raise ValueError(f"{name} must be >= 1, got {value}")


def fit(student: Student, data: StudentData, key: jax.Array, *, num_steps: int,
        batch_size: int, segment_steps: int, checkpoint_dir: str | None = None,
        init_examples: int = 500, fingerprint: Mapping[str, Any] | None = None,
        restart: bool = False, max_to_keep: int = 1, restart_hint: str | None = None,
        log: Callable[[str], None] | None = print, check: GameCheck | None = None,
        private_checkpoints: bool = False) -> FitResult:
  """Trains ``student`` on ``data`` for ``num_steps`` steps (resuming if checkpointed).

  Args:
    student: the student's functions.
    data: pool, labelled subset and held-out set.
    key: the student's key; every random choice derives from it.
    num_steps: total minibatch steps.
    batch_size: size of each of the labelled and pool minibatches.
    segment_steps: steps per compiled ``lax.scan`` segment (and per checkpoint).
    checkpoint_dir: where to save after every segment and resume from; None: no
      checkpoints.
    init_examples: random pool rows given to ``student.init``.
    fingerprint: what else determines the run (e.g. the student's hyperparameters),
      stored with the checkpoints next to the key, the data's digest, the batch size
      and ``init_examples``: resuming checkpoints written with other values is
      refused (:class:`pate_jax.checkpoint.ResumeMismatchError`), naming the fields.
    restart: discard the checkpoints in ``checkpoint_dir`` and start over.
    max_to_keep: checkpoint steps kept (the newest; at the end, the final state: the
      trained student, which a rerun restores instead of training again).
    restart_hint: how the caller's user asks for ``restart``, named by a refused resume's
      message (the main job's ``--config.student.restart=True``; None: ``restart=True``).
    log: prints one line per segment (None: silent).
    check: a :class:`GameCheck` on the training metrics; a failed check raises
      :class:`GameFailed` after that segment's checkpoint (a resumed run judges its
      restored history again, so it raises again).
    private_checkpoints: the student is private (trained on labels that are no release:
      the teachers' un-noised ones, noise from a research seed, or the private data
      itself): its checkpoints are made owner-only (:class:`pate_jax.checkpoint.Checkpointer`'s
      ``private``). False: a released student's, left with orbax's modes.

  Returns:
    The final state, held-out accuracy, per-segment history, the step resumed
    from and the training seconds of this call.
  """
  _check_schedule(num_steps, batch_size, segment_steps)
  if data.num_labelled == 0:
    raise ValueError("data: the student has no labelled examples")
  state, arrays = _start(student, data, key, init_examples)
  ckpt = _checkpointer(checkpoint_dir, {"key": key}, data, batch_size=batch_size,
                       init_examples=init_examples, fingerprint=fingerprint, restart=restart,
                       max_to_keep=max_to_keep, restart_hint=restart_hint,
                       private=private_checkpoints)
  try:
    return _train(student, data, arrays, key, state, ckpt, num_steps, batch_size,
                  segment_steps, log, check)
  finally:
    if ckpt is not None:
      ckpt.close()


class SeedsFitResult(NamedTuple):
  """What :func:`fit_seeds` returns: per seed, in the order of its ``keys``."""
  state: PyTree                    # the final states, stacked on a leading seed axis
  eval_accuracy: list[float]
  history: list[list[dict]]        # each seed's records, as :func:`fit`'s history
  failed: list[GameFailed | None]  # each seed's first failed check (None: passed or none)
  resumed_from: int
  train_seconds: float


def seeds_accuracy(student: Student, states: PyTree, images: Any, labels: Any,
                   batch_size: int = 1000) -> list[float]:
  """The accuracy on ``images`` (host array) of each of the stacked ``states``."""
  images, labels = np.asarray(images, np.float32), np.asarray(labels)
  predicted = np.concatenate(
      [np.asarray(_seeds_predictions(student, states, jnp.asarray(images[i:i + batch_size])))
       for i in range(0, images.shape[0], batch_size)], axis=1)
  return [float(a) for a in np.mean(predicted == labels, axis=1)]


def fit_seeds(student: Student, data: StudentData, keys: jax.Array, *, num_steps: int,
              batch_size: int, segment_steps: int, checkpoint_dir: str | None = None,
              init_examples: int = 500, fingerprint: Mapping[str, Any] | None = None,
              restart: bool = False, max_to_keep: int = 1, restart_hint: str | None = None,
              log: Callable[[str], None] | None = print, check: GameCheck | None = None,
              private_checkpoints: bool = False) -> SeedsFitResult:
  """:func:`fit` for ``N`` students at once, one per key of ``keys [N]``, vmapped in one
  compiled program on the same data: seed ``i`` is the student :func:`fit` trains with
  ``keys[i]`` (the same initialisation, batches and randomness; equal up to the rounding of
  batched products). The stacked state is checkpointed after every segment, as one.

  ``check`` is judged per seed without stopping the others: a seed's first failed record
  is its ``failed`` entry, and it trains on to the end with the rest (a caller retrains
  it, as :func:`fit`'s callers restart a failed game). The other arguments are
  :func:`fit`'s; a history record holds each metric as a list over the seeds, split into
  one history per seed in the result.
  """
  _check_schedule(num_steps, batch_size, segment_steps)
  if data.num_labelled == 0:
    raise ValueError("data: the student has no labelled examples")
  keys = jnp.asarray(keys)
  if keys.ndim != 1 or keys.shape[0] < 1:
    raise ValueError(f"keys: a one-dimensional array of at least one key, got shape "
                     f"{tuple(keys.shape)}")
  num_seeds = keys.shape[0]
  state, arrays = _seeds_start(student, data, keys, init_examples)
  ckpt = _checkpointer(checkpoint_dir, {"keys": keys}, data, batch_size=batch_size,
                       init_examples=init_examples, fingerprint=fingerprint, restart=restart,
                       max_to_keep=max_to_keep, restart_hint=restart_hint,
                       private=private_checkpoints)
  failed: list[GameFailed | None] = [None] * num_seeds
  try:
    state, step = _restore(ckpt, state, num_steps, log)

    def segment(state, start, n):
      return _seeds_segment(student, batch_size, n, state, keys, jnp.asarray(start), *arrays)

    def record(state, step, metrics):
      return {"eval_accuracy": seeds_accuracy(student, state, data.eval_images,
                                              data.eval_labels),
              **{k: [float(x) for x in np.asarray(v)] for k, v in metrics.items()}}

    def after(step, n, metrics, entry):
      _check_metric(check, entry)
      if log:
        acc = entry["eval_accuracy"]
        log(f"step={step} eval_accuracy mean={np.mean(acc):.4f} seeds="
            + " ".join(f"{a:.4f}" for a in acc))

    out = run_segments(segment, state, start=step, total=num_steps,
                       segment_steps=segment_steps, ckpt=ckpt, record=record,
                       after_segment=after)
  finally:
    if ckpt is not None:
      ckpt.close()
  histories = [[{k: (v[i] if isinstance(v, list) else v) for k, v in e.items()}
                for e in out.history] for i in range(num_seeds)]
  for i, history in enumerate(histories):
    try:
      judge(check, history)
    except GameFailed as e:
      failed[i] = e
  acc = ([h[-1]["eval_accuracy"] for h in histories] if out.history else
         seeds_accuracy(student, out.state, data.eval_images, data.eval_labels))
  return SeedsFitResult(out.state, acc, histories, failed, out.resumed_from, out.seconds)


def compile_fit(student: Student, data: StudentData, key: jax.Array, *, num_steps: int,
                batch_size: int, segment_steps: int, init_examples: int = 500,
                num_seeds: int = 1) -> None:
  """Compiles the programs :func:`fit` will run on data of ``data``'s shapes, without
  training: the initialisation (run, on ``init_examples`` pool rows), each length of
  training segment a run from step 0 takes (compiled ahead of time, not run) and the
  evaluation (run). ``data``'s values do not matter (synthetic data of the real shapes
  will do), nor ``key``'s; ``student`` must be the object :func:`fit` will get (the compiled
  programs are cached by it: :func:`pate_jax.students.build_student` returns one object per
  arguments). A later :func:`fit` on real data of those shapes then compiles nothing, so
  this may run while something else (the teachers' training) keeps the accelerator busy;
  nor does one that resumes from a checkpoint (the programs are compiled for the state the
  training loop runs, :func:`pate_jax.checkpoint.committed_state`, placed as a restored
  one). ``num_seeds`` > 1: :func:`fit_seeds`'s programs for that many keys instead.
  """
  _check_schedule(num_steps, batch_size, segment_steps)
  if num_seeds > 1:
    keys = jnp.stack([key] * num_seeds)  # as callers stack their seeds' keys
    state, arrays = _seeds_start(student, data, keys, init_examples)
    state = committed_state(state)
    for n in sorted(segment_lengths(num_steps, segment_steps)):
      _seeds_segment.lower(student, batch_size, n, state, keys, jnp.asarray(0),
                           *arrays).compile()
    seeds_accuracy(student, state, data.eval_images, data.eval_labels)
    return
  state, arrays = _start(student, data, key, init_examples)
  state = committed_state(state)
  for n in sorted(segment_lengths(num_steps, segment_steps)):
    _segment.lower(student, batch_size, n, state, key, jnp.asarray(0), *arrays).compile()
  accuracy(student, state, data.eval_images, data.eval_labels)


def training_segment(student: Student, data: StudentData, key: jax.Array, *, num_steps: int,
                     batch_size: int, init_examples: int = 500, num_seeds: int = 1
                     ) -> tuple[PyTree, Callable[[PyTree, int], tuple[PyTree, dict]]]:
  """The compiled training segment :func:`fit` runs, for benchmarks: ``(state, run)``, the
  initial state :func:`fit` starts from and ``run(state, start) -> (state, metrics)``,
  steps ``start .. start + num_steps - 1`` (the same program, batches and randomness as
  :func:`fit` with ``segment_steps=num_steps``; ``state`` is donated; nothing waits for
  the result). ``num_seeds`` > 1: :func:`fit_seeds`'s program for that many students
  (keys ``fold_in(key, i)``), stacked states."""
  _check_schedule(num_steps, batch_size, num_steps)
  if num_seeds > 1:
    keys = jnp.stack([jax.random.fold_in(key, i) for i in range(num_seeds)])
    state, arrays = _seeds_start(student, data, keys, init_examples)
    state = committed_state(state)  # as the loop runs it

    def run_seeds(state: PyTree, start: int) -> tuple[PyTree, dict]:
      return _seeds_segment(student, batch_size, num_steps, state, keys, jnp.asarray(start),
                            *arrays)
    return state, run_seeds
  state, arrays = _start(student, data, key, init_examples)
  state = committed_state(state)

  def run(state: PyTree, start: int) -> tuple[PyTree, dict]:
    return _segment(student, batch_size, num_steps, state, key, jnp.asarray(start), *arrays)
  return state, run


def _arrays(data: StudentData) -> tuple[jax.Array, jax.Array, jax.Array]:
  """``data``'s arrays the training reads, each copied to the device once: ``(pool,
  labelled_index, labels)``."""
  return (jnp.asarray(data.pool), jnp.asarray(data.labelled_index, jnp.int32),
          jnp.asarray(data.labels))


def _start(student: Student, data: StudentData, key: jax.Array, init_examples: int
           ) -> tuple[PyTree, tuple[jax.Array, jax.Array, jax.Array]]:
  """The initial state :func:`fit` starts from and :func:`_arrays`."""
  arrays = _arrays(data)
  return init_state(student, arrays[0], key, init_examples), arrays


def _seeds_start(student: Student, data: StudentData, keys: jax.Array, init_examples: int
                 ) -> tuple[PyTree, tuple[jax.Array, jax.Array, jax.Array]]:
  """:func:`_start` for :func:`fit_seeds`: the stacked initial states of ``keys``."""
  arrays = _arrays(data)
  return _seeds_init(student, keys, arrays[0], init_examples), arrays


def _checkpointer(checkpoint_dir: str | None, keys: Mapping[str, jax.Array], data: StudentData,
                  *, batch_size: int, init_examples: int,
                  fingerprint: Mapping[str, Any] | None, restart: bool, max_to_keep: int,
                  restart_hint: str | None, private: bool) -> Checkpointer | None:
  """The checkpointer of :func:`fit` and :func:`fit_seeds` (None without a directory): its
  fingerprint holds the run's key(s) (``keys``: ``{"key": key}`` or ``{"keys": keys}``),
  the batch size, ``init_examples``, the data's digest and the caller's ``fingerprint``;
  ``private``: owner-only checkpoints (:func:`fit`'s ``private_checkpoints``)."""
  if not checkpoint_dir:
    return None
  return Checkpointer(checkpoint_dir, max_to_keep=max_to_keep, restart=restart,
                      restart_hint=restart_hint, private=private, fingerprint={
      **{name: np.asarray(jax.random.key_data(k)).tolist() for name, k in keys.items()},
      "batch_size": batch_size, "init_examples": init_examples,
      "data_sha256": data_digest(data.pool, data.labelled_index, data.labels),
      **(fingerprint or {})})


def _restore(ckpt: Checkpointer | None, state: PyTree, num_steps: int,
             log: Callable[[str], None] | None) -> tuple[PyTree, int]:
  """``(state, step)``: the newest checkpoint of ``ckpt``, or ``state`` at step 0; a
  checkpoint past ``num_steps`` is refused."""
  if ckpt is None:
    return state, 0
  state, step = ckpt.restore_or(state)
  if step > num_steps:
    raise ValueError(f"num_steps: {num_steps} is below the checkpoint's step {step}; "
                     "give at least that many, or restart")
  if step and log:
    log(f"resumed from checkpoint at step {step}")
  return state, step


def _train(student, data, arrays, key, state, ckpt, num_steps, batch_size, segment_steps, log,
           check=None) -> FitResult:
  """:func:`fit` from ``state`` (or the newest checkpoint of ``ckpt``); ``arrays``:
  :func:`_start`'s."""
  state, step = _restore(ckpt, state, num_steps, log)
  if step:
    judge(check, ckpt.restore_history(step))

  def segment(state, start, n):
    return _segment(student, batch_size, n, state, key, jnp.asarray(start), *arrays)

  def record(state, step, metrics):
    return {"eval_accuracy": accuracy(student, state, data.eval_images, data.eval_labels),
            **{k: float(v) for k, v in metrics.items()}}

  def after(step, n, metrics, entry):
    if log:
      log(" ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}"
                   for k, v in entry.items()))
    _check_metric(check, entry)
    if check is not None and check.step <= step:
      first = step - n < max(check.step, 1)  # the first record at or after check.step
      if first or check.late_max_value is not None:
        _judge_entry(check, entry, late=not first)

  out = run_segments(segment, state, start=step, total=num_steps, segment_steps=segment_steps,
                     ckpt=ckpt, record=record, after_segment=after)
  history = out.history
  acc = (history[-1]["eval_accuracy"] if history else  # nothing left to train: restored
         accuracy(student, out.state, data.eval_images, data.eval_labels))
  return FitResult(out.state, acc, history, out.resumed_from, out.seconds)
