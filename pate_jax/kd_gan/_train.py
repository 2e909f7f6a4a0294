"""The teacher–student–discriminator loop (Gao et al., Algorithm 1), vmapped over seeds.

A frozen teacher enters only through its log-probabilities on the public inputs,
``teacher_log_probs [N, C]``, computed once (a frozen network answers the same in
every epoch): a teacher network's ``log_softmax`` (as published) or the log of a
released, projected PATE soft label (the sound variant; then the student's whole
view of the private data is that released array).

One *round* of Algorithm 1 is ``k_d`` discriminator steps, then ``k_s`` student
steps. Every step draws a Poisson batch (each of the ``N`` public inputs with
probability ``q = B/N``, the sampling the published accounting assumes), padded to a
fixed capacity with a mask, and:

  discriminator  minimises mean ``-log D(x, y_T) - log(1 - D(x, y_S))`` with Gumbel-
                 softmax samples ``y_T`` of the teacher's and ``y_S`` of the (frozen)
                 student's distribution;
  student        minimises ``λ · Σ dp_losses(KL_τ) / B + (1 - λ) · Σ -log D(x, y_S) / B``
                 (Eq. 7; Eq. 5's clip + noise inside ``dp_losses``).

``λ = 1`` is KD-only: the discriminator steps are skipped (they could not change
the student). Randomness: a run's key has two streams, ``fold_in(key, 0)`` for the
initialisation (the student from its ``fold_in(., 0)``, the discriminator from its
``fold_in(., 1)``) and ``fold_in(key, 1)`` for the rounds; round ``r`` uses
``fold_in(fold_in(key, 1), r)``; its discriminator
step ``j`` ``fold_in(fold_in(., 0), j)``, student step ``j`` ``fold_in(fold_in(., 1), j)``;
inside a step, sub-stream 0 is the batch, 1 the teacher's Gumbel noise, 2 the
student's, 3 Eq. 5's noise — so removing Eq. 5's noise changes no other draw —
and 4 the unlabelled batch (below).

Unlabelled inputs (``fit(..., unlabelled_x=U)``, not in the paper; the discriminator's
ablation, :mod:`pate_jax.stages.kd_gan_ablation`): the student's samples ``y_S`` — in
D's step and in the adversarial term — are drawn on a Poisson batch of ``U`` (rate
``B/|U|``), inputs the teacher never labels, instead of on the public batch; the
teacher's samples and the KD term stay on the public inputs. Without ``U`` every draw
and every sum is the published loop's.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from pate_jax import _checks as v
from pate_jax import models, students
from pate_jax.checkpoint import Checkpointer, run_segments
from pate_jax.io import data_digest
from pate_jax.kd_gan import _losses as L

_BATCH, _GUMBEL_T, _GUMBEL_S, _NOISE, _UNLABELLED = range(5)
# A run key's two streams: no initialisation key is ever a round's.
_INIT_STREAM, _ROUNDS_STREAM = range(2)


class KDGAN(NamedTuple):
  """Static hyperparameters and networks of one KD-GAN (hashable: a jit static argument)."""
  student: nn.Module
  discriminator: L.Discriminator
  num_classes: int
  lam: float                 # λ: weight of the KD loss (1 - λ: adversarial)
  tau: float                 # τ: distillation temperature
  clip: float                # C: norm bound of the batch's KD-loss vector
  noise_multiplier: float    # σ: Eq. 5's noise is N(0, σ²C²); 0 = none
  batch_size: int            # B: expected batch size (q = B / N)
  gumbel_temperature: float  # temperature of the Gumbel-softmax samples
  k_d: int                   # discriminator steps per round
  k_s: int                   # student steps per round
  learning_rate: float       # Adam, student
  disc_learning_rate: float  # Adam, discriminator
  b1: float                  # Adam β₁ of both
  per_example_clip: bool = False  # clip each |ℓ_i| ≤ C instead of ||ℓ||₂ ≤ C
  # The precision of its float32 matrix products (students.MATMUL_PRECISIONS; None: the
  # backend's own, TF32 on NVIDIA GPUs since Ampere): float32 on every backend by default.
  matmul_precision: str | None = "float32"


def make_kd_gan(num_classes: int, *, lam: float, tau: float, clip: float,
                noise_multiplier: float, batch_size: int, gumbel_temperature: float = 0.5,
                k_d: int = 1, k_s: int = 1, learning_rate: float = 1e-3,
                disc_learning_rate: float = 1e-3, b1: float = 0.5,
                student_model: str = "mlp", student_kwargs: Mapping[str, Any] | None = None,
                disc_hidden: Sequence[int] = (256,), conditional: bool = True,
                per_example_clip: bool = False, matmul_precision: str | None = "float32"
                ) -> KDGAN:
  """A validated :class:`KDGAN`; the student is the registered model ``student_model``.
  ``matmul_precision``: its networks' matrix products, "float32" on every backend unless
  given ("default": the backend's own).

  Raises:
    ValueError: naming the argument: ``lam`` outside [0, 1], ``tau``, ``clip``,
      ``gumbel_temperature`` or a learning rate ``≤ 0``, ``noise_multiplier < 0``,
      ``batch_size``, ``k_d`` (≥ 0) or ``k_s`` (≥ 1) not integers in range, or
      ``matmul_precision`` not a precision's name.
  """
  lam_value = float(v.scalar(lam, "lam"))
  if not 0.0 <= lam_value <= 1.0:
    raise ValueError(f"lam must lie in [0, 1]; got {lam_value}")
  tau = float(v.positive(tau, "tau"))
  clip = float(v.positive(clip, "clip"))
  sigma = float(v.scalar(noise_multiplier, "noise_multiplier"))
  if sigma < 0:
    raise ValueError(f"noise_multiplier must be >= 0; got {sigma}")
  student = models.get_model(student_model, num_classes, **dict(student_kwargs or {}))
  return KDGAN(student=student,
               discriminator=L.Discriminator(tuple(int(w) for w in disc_hidden),
                                             v.boolean(conditional, "conditional")),
               num_classes=v.positive_int(num_classes, "num_classes", minimum=2),
               lam=lam_value, tau=tau, clip=clip, noise_multiplier=sigma,
               batch_size=v.positive_int(batch_size, "batch_size"),
               gumbel_temperature=float(v.positive(gumbel_temperature, "gumbel_temperature")),
               k_d=v.positive_int(k_d, "k_d", minimum=0), k_s=v.positive_int(k_s, "k_s"),
               learning_rate=float(v.positive(learning_rate, "learning_rate")),
               disc_learning_rate=float(v.positive(disc_learning_rate, "disc_learning_rate")),
               b1=float(v.scalar(b1, "b1")), per_example_clip=bool(per_example_clip),
               matmul_precision=students.checked_matmul_precision(matmul_precision,
                                                                  "matmul_precision"))


def _tx(gan: KDGAN, lr: float) -> optax.GradientTransformation:
  return optax.adam(lr, b1=gan.b1)


def _at_precision(fn: Callable) -> Callable:
  """``fn(gan, ...)``, its products traced at ``gan.matmul_precision``
  (:func:`pate_jax.students.matmul_precision`): every function that applies the networks."""
  @functools.wraps(fn)
  def wrapped(gan, *args, **kwargs):
    with students.matmul_precision(gan):
      return fn(gan, *args, **kwargs)
  return wrapped


def init(gan: KDGAN, key: jax.Array, sample_x: jax.Array) -> dict:
  """Train state (a dict): student and discriminator parameters and Adam states."""
  return _init(_networks(gan), key, sample_x)


def init_runs(gan: KDGAN, keys: jax.Array, sample_x: jax.Array) -> dict:
  """:func:`init` for every key of ``keys [S]``: the state stacked over runs."""
  return _init_runs(_networks(gan), keys, sample_x)


def _networks(gan: KDGAN) -> KDGAN:
  """``gan`` with what the initialisation does not read set to fixed values (Adam's initial
  state does not depend on its rates): KD-GANs of the same networks share its program."""
  return gan._replace(lam=1.0, tau=1.0, clip=1.0, noise_multiplier=0.0, batch_size=1,
                      gumbel_temperature=1.0, k_d=0, k_s=1, learning_rate=1.0,
                      disc_learning_rate=1.0, b1=0.9, per_example_clip=False)


@functools.partial(jax.jit, static_argnums=0)
@_at_precision
def _init(gan: KDGAN, key: jax.Array, sample_x: jax.Array) -> dict:
  x = sample_x[:2]
  key = jax.random.fold_in(key, _INIT_STREAM)
  sp = gan.student.init(jax.random.fold_in(key, 0), x)["params"]
  y = jnp.zeros((x.shape[0], gan.num_classes), jnp.float32)
  dp = gan.discriminator.init(jax.random.fold_in(key, 1), y, x)["params"]
  return {"student": sp, "student_opt": _tx(gan, gan.learning_rate).init(sp),
          "disc": dp, "disc_opt": _tx(gan, gan.disc_learning_rate).init(dp)}


@functools.partial(jax.jit, static_argnums=0)
def _init_runs(gan: KDGAN, keys: jax.Array, sample_x: jax.Array) -> dict:
  return jax.vmap(lambda k: _init(gan, k, sample_x))(keys)


def batch_capacity(num_public: int, batch_size: int) -> int:
  """Rows of a padded Poisson batch: ``B + 6·sd + 1`` (``sd = √(B(1-q))``), at most ``N``."""
  q = batch_size / num_public
  return min(num_public, int(math.ceil(batch_size + 6 * math.sqrt(batch_size * (1 - q)))) + 1)


def poisson_batch(key: jax.Array, num_public: int, q: float, capacity: int
                  ) -> tuple[jax.Array, jax.Array]:
  """Each of ``num_public`` rows with probability ``q``: ``(rows [capacity], mask)``.

  Rows beyond ``capacity`` (probability < 1e-9 at the default capacity) are dropped.
  """
  chosen = jax.random.bernoulli(key, q, (num_public,))
  (rows,) = jnp.nonzero(chosen, size=capacity, fill_value=0)
  mask = jnp.arange(capacity) < jnp.sum(chosen)
  return rows, mask


def _batch(gan, key, x_all, tl_all):
  n = x_all.shape[0]
  rows, mask = poisson_batch(jax.random.fold_in(key, _BATCH), n, gan.batch_size / n,
                             batch_capacity(n, gan.batch_size))
  return x_all[rows], tl_all[rows], mask


def _unlabelled_batch(gan, key, u_all):
  """A Poisson batch of the unlabelled inputs ``u_all`` (rate ``B/|U|``): ``(x, mask)``."""
  n = u_all.shape[0]
  rows, mask = poisson_batch(jax.random.fold_in(key, _UNLABELLED), n, gan.batch_size / n,
                             batch_capacity(n, gan.batch_size))
  return u_all[rows], mask


@_at_precision
def discriminator_step(gan: KDGAN, state: dict, key: jax.Array, x_all: jax.Array,
                       tl_all: jax.Array, u_all: jax.Array | None = None
                       ) -> tuple[dict, jax.Array]:
  """One discriminator step (Algorithm 1, lines 3-6).

  Returns the state and ``(loss, accuracy)`` on the batch before the update: accuracy is
  the mean of "teacher sample called real" and "student sample called fake" (0.5 is
  chance; the loss at chance is ``2 log 2``). ``u_all``: the student's samples are drawn
  on a batch of these unlabelled inputs (module docstring).
  """
  x, tl, mask = _batch(gan, key, x_all, tl_all)
  x_s, mask_s = (x, mask) if u_all is None else _unlabelled_batch(gan, key, u_all)
  s_logp = jax.lax.stop_gradient(jax.nn.log_softmax(gan.student.apply(
      {"params": state["student"]}, x_s)))
  y_t = L.gumbel_softmax(jax.random.fold_in(key, _GUMBEL_T), tl, gan.gumbel_temperature)
  y_s = L.gumbel_softmax(jax.random.fold_in(key, _GUMBEL_S), s_logp, gan.gumbel_temperature)

  def loss_fn(dp):
    d_t = gan.discriminator.apply({"params": dp}, y_t, x)
    d_s = gan.discriminator.apply({"params": dp}, y_s, x_s)
    if u_all is None:  # one batch: the published loop's sums, unchanged
      loss = jnp.sum(jnp.where(mask, L.discriminator_loss(d_t, d_s), 0.0)) / gan.batch_size
      right = 0.5 * ((d_t > 0).astype(jnp.float32) + (d_s < 0).astype(jnp.float32))
      return loss, jnp.sum(jnp.where(mask, right, 0.0)) / jnp.maximum(jnp.sum(mask), 1)
    loss = (jnp.sum(jnp.where(mask, jax.nn.softplus(-d_t), 0.0))
            + jnp.sum(jnp.where(mask_s, jax.nn.softplus(d_s), 0.0))) / gan.batch_size
    mean = lambda hit, m: jnp.sum(jnp.where(m, hit, 0.0)) / jnp.maximum(jnp.sum(m), 1)
    return loss, 0.5 * (mean(d_t > 0, mask) + mean(d_s < 0, mask_s))

  (loss, accuracy), grads = jax.value_and_grad(loss_fn, has_aux=True)(state["disc"])
  updates, opt = _tx(gan, gan.disc_learning_rate).update(grads, state["disc_opt"], state["disc"])
  return ({**state, "disc": optax.apply_updates(state["disc"], updates), "disc_opt": opt},
          (loss, accuracy))


@_at_precision
def student_loss(gan: KDGAN, params: Any, disc_params: Any, key: jax.Array, x: jax.Array,
                 tl: jax.Array, mask: jax.Array, noise_multiplier: Any = None,
                 x_unlabelled: jax.Array | None = None, mask_unlabelled: jax.Array | None = None
                 ) -> tuple[jax.Array, dict]:
  """Eq. 7: ``λ · L_KD^dp + (1 - λ) · L_adv`` on a padded batch, and its parts.

  ``noise_multiplier`` (may be traced) overrides ``gan.noise_multiplier``;
  ``x_unlabelled`` / ``mask_unlabelled``: the adversarial term's batch (default: ``x``).
  """
  sigma = gan.noise_multiplier if noise_multiplier is None else noise_multiplier
  logits = gan.student.apply({"params": params}, x)
  kd = L.kd_losses(tl, logits, gan.tau)
  kd_dp = L.dp_losses(jax.random.fold_in(key, _NOISE), kd, gan.clip, sigma,
                      mask, per_example=gan.per_example_clip)
  l_kd = jnp.sum(kd_dp) / gan.batch_size
  total = gan.lam * l_kd
  adv = jnp.zeros(())
  if gan.lam < 1.0:
    x_s, mask_s, logits_s = x, mask, logits
    if x_unlabelled is not None:
      x_s, mask_s = x_unlabelled, mask_unlabelled
      logits_s = gan.student.apply({"params": params}, x_s)
    y_s = L.gumbel_softmax(jax.random.fold_in(key, _GUMBEL_S), jax.nn.log_softmax(logits_s),
                           gan.gumbel_temperature)
    d = gan.discriminator.apply({"params": disc_params}, y_s, x_s)
    adv = jnp.sum(jnp.where(mask_s, L.adversarial_loss(d), 0.0)) / gan.batch_size
    total = total + (1.0 - gan.lam) * adv
  kd_clean = jnp.sum(jnp.where(mask, kd, 0.0)) / jnp.maximum(jnp.sum(mask), 1)
  return total, {"kd": kd_clean, "kd_dp": l_kd, "adv": adv}


def student_step(gan: KDGAN, state: dict, key: jax.Array, x_all: jax.Array,
                 tl_all: jax.Array, noise_multiplier: Any = None,
                 u_all: jax.Array | None = None) -> tuple[dict, dict]:
  """One student step (Algorithm 1, lines 8-14); ``noise_multiplier`` as in
  :func:`student_loss` (the audit runs one compiled step with and without the noise);
  ``u_all`` as in :func:`discriminator_step`."""
  x, tl, mask = _batch(gan, key, x_all, tl_all)
  xu, mask_u = (None, None) if u_all is None or gan.lam == 1.0 else _unlabelled_batch(
      gan, key, u_all)
  grad_fn = jax.grad(student_loss, argnums=1, has_aux=True)
  grads, parts = grad_fn(gan, state["student"], state["disc"], key, x, tl, mask,
                         noise_multiplier, xu, mask_u)
  tx = _tx(gan, gan.learning_rate)
  updates, opt = tx.update(grads, state["student_opt"], state["student"])
  return ({**state, "student": optax.apply_updates(state["student"], updates),
           "student_opt": opt}, parts)


def train_round(gan: KDGAN, state: dict, key: jax.Array, x_all: jax.Array,
                tl_all: jax.Array, noise_multiplier: Any = None,
                u_all: jax.Array | None = None) -> tuple[dict, dict]:
  """``k_d`` discriminator steps then ``k_s`` student steps (none of D's if ``λ = 1``);
  ``u_all``: unlabelled inputs for the student's samples (module docstring)."""
  d_loss, d_accuracy = jnp.zeros(()), jnp.zeros(())
  if gan.lam < 1.0 and gan.k_d:
    d_body = lambda s, j: discriminator_step(
        gan, s, jax.random.fold_in(jax.random.fold_in(key, 0), j), x_all, tl_all, u_all)
    state, (d_losses, d_accuracies) = _repeat(d_body, state, gan.k_d)
    d_loss, d_accuracy = jnp.mean(d_losses), jnp.mean(d_accuracies)
  s_body = lambda s, j: student_step(
      gan, s, jax.random.fold_in(jax.random.fold_in(key, 1), j), x_all, tl_all,
      noise_multiplier, u_all)
  state, parts = _repeat(s_body, state, gan.k_s)
  return state, {**jax.tree.map(jnp.mean, parts), "disc": d_loss, "disc_accuracy": d_accuracy}


def _repeat(body, state, n):
  """``lax.scan(body, state, arange(n))``; one step is called directly (a smaller program)."""
  if n == 1:
    state, out = body(state, jnp.int32(0))
    return state, jax.tree.map(lambda a: a[None], out)
  return jax.lax.scan(body, state, jnp.arange(n))


def _rounds(gan, num_rounds, state, key, start, x_all, tl_all, sigma, u_all=None):
  key = jax.random.fold_in(key, _ROUNDS_STREAM)

  def body(s, i):
    return train_round(gan, s, jax.random.fold_in(key, start + i), x_all, tl_all, sigma,
                       u_all)
  state, metrics = jax.lax.scan(body, state, jnp.arange(num_rounds))
  return state, jax.tree.map(jnp.mean, metrics)


@functools.partial(jax.jit, static_argnums=(0, 1, 2), donate_argnums=3)
def _segment(gan, num_rounds, per_run_targets, state, keys, start, x_all, tl_all, sigma,
             u_all=None):
  fn = lambda s, k, t: _rounds(gan, num_rounds, s, k, start, x_all, t, sigma, u_all)
  return jax.vmap(fn, in_axes=(0, 0, 0 if per_run_targets else None))(state, keys, tl_all)


@functools.partial(jax.jit, static_argnums=0)
@_at_precision
def _accuracy(gan, state, x, y):
  def one(params):
    return jnp.mean(jnp.argmax(gan.student.apply({"params": params}, x), -1) == y)
  return jax.vmap(one)(state["student"])


def accuracy(gan: KDGAN, state: dict, images: Any, labels: Any, chunk: int = 2000) -> np.ndarray:
  """Held-out accuracy of every run's student, ``[S]`` (``state`` stacked over runs)."""
  images, labels = np.asarray(images, np.float32), np.asarray(labels)
  hits = sum(np.asarray(_accuracy(gan, state, jnp.asarray(images[i:i + chunk]),
                                  jnp.asarray(labels[i:i + chunk]))) * len(labels[i:i + chunk])
             for i in range(0, len(labels), chunk))
  return hits / len(labels)


@functools.partial(jax.jit, static_argnums=0)
@_at_precision
def _student_log_probs(gan, state, x):
  return jax.vmap(lambda p: jax.nn.log_softmax(gan.student.apply({"params": p}, x)))(
      state["student"])


def student_log_probs(gan: KDGAN, state: dict, images: Any, chunk: int = 2000) -> np.ndarray:
  """Every run's student ``log_softmax`` on ``images``, ``[S, N, C]`` (``state`` stacked
  over runs): what the discriminator's student samples are drawn from."""
  images = np.asarray(images, np.float32)
  return np.concatenate([np.asarray(_student_log_probs(gan, state, jnp.asarray(
      images[i:i + chunk]))) for i in range(0, images.shape[0], chunk)], axis=1)


class KDGANResult(NamedTuple):
  state: dict                # stacked over runs
  eval_accuracy: np.ndarray  # [S]
  history: list[dict]        # per segment: round, student steps, accuracies, mean losses
  resumed_from: int
  train_seconds: float


def check_teacher(gan: KDGAN, public_x: Any, teacher_log_probs: Any, num_runs: int) -> bool:
  """Validates the teacher's log-probabilities; returns whether they are per run."""
  tl = np.shape(teacher_log_probs)
  if len(tl) not in (2, 3) or tl[-1] != gan.num_classes:
    raise ValueError(f"teacher_log_probs: the teacher has {tl[-1] if tl else None} classes "
                     f"(shape {tl}), the student {gan.num_classes}; they must agree")
  if tl[-2] != np.shape(public_x)[0]:
    raise ValueError(f"teacher_log_probs: {tl[-2]} rows for {np.shape(public_x)[0]} public "
                     "inputs")
  if len(tl) == 3 and tl[0] != num_runs:
    raise ValueError(f"teacher_log_probs: {tl[0]} per-run targets for {num_runs} keys")
  if gan.batch_size > np.shape(public_x)[0]:
    raise ValueError(f"batch_size: {gan.batch_size} exceeds the {np.shape(public_x)[0]} "
                     "public inputs (q = B/N must lie in (0, 1])")
  return len(tl) == 3


def fit(gan: KDGAN, keys: jax.Array, public_x: Any, teacher_log_probs: Any, eval_x: Any,
        eval_y: Any, *, num_rounds: int, segment_rounds: int,
        checkpoint_dir: str | None = None, fingerprint: Mapping[str, Any] | None = None,
        restart: bool = False, restart_hint: str | None = None,
        log: Callable[[str], None] | None = None, unlabelled_x: Any = None,
        private_checkpoints: bool = False) -> KDGANResult:
  """Trains ``S = len(keys)`` students at once (vmap over runs) for ``num_rounds`` rounds.

  Args:
    gan: the hyperparameters and networks (:func:`make_kd_gan`).
    keys: ``[S]`` one key per run (seeds).
    public_x: ``[N, ...]`` public inputs.
    teacher_log_probs: ``[N, C]`` shared by all runs, or ``[S, N, C]`` one per run
      (e.g. the sound variant's releases at several noise levels).
    eval_x, eval_y: held-out images and labels.
    num_rounds: Algorithm 1's rounds (``k_s`` student steps each).
    segment_rounds: rounds per compiled segment (and per evaluation / checkpoint).
    checkpoint_dir: orbax checkpoints after every segment (None: none); a rerun resumes.
    fingerprint: what else determines the run (refused if a checkpoint has another).
    restart: discard ``checkpoint_dir``'s checkpoints.
    restart_hint: how the caller's user asks for ``restart``, named by a refused resume.
    log: one line per segment (default None: silent; the core prints nothing itself).
    unlabelled_x: ``[U, ...]`` inputs the teacher never labels, on which the student's
      samples for D and the adversarial term are drawn (module docstring); None: the
      public batch's (the paper).
    private_checkpoints: owner-only checkpoints (:class:`pate_jax.checkpoint.Checkpointer`'s
      ``private``): students of the teacher's un-noised outputs, or of a research
      measurement; False: orbax's modes.
  """
  num_rounds = v.positive_int(num_rounds, "num_rounds")
  segment_rounds = v.positive_int(segment_rounds, "segment_rounds")
  keys = jnp.asarray(keys)
  per_run = check_teacher(gan, public_x, teacher_log_probs, keys.shape[0])
  x_all = jnp.asarray(np.asarray(public_x, np.float32))
  tl_all = jnp.asarray(np.asarray(teacher_log_probs, np.float32))
  u_all, extra = None, {}
  if unlabelled_x is not None:
    u = np.asarray(unlabelled_x, np.float32)
    if u.shape[1:] != x_all.shape[1:] or u.shape[0] < gan.batch_size:
      raise ValueError(f"unlabelled_x: shape {u.shape}; it needs the public inputs' "
                       f"{x_all.shape[1:]} and at least batch_size = {gan.batch_size} rows")
    u_all, extra = jnp.asarray(u), {"unlabelled_sha256": data_digest(u)}
  state = init_runs(gan, keys, x_all[:2])
  ckpt = None
  if checkpoint_dir:
    run = {
        "keys": np.asarray(jax.random.key_data(keys)).tolist(), "gan": repr(gan),
        # How the keys are used: a checkpoint of the earlier derivation (round r from
        # fold_in(key, r)) does not resume under this one.
        "key_streams": "fold_in(key, 0): init, fold_in(key, 1): rounds",
        "data_sha256": data_digest(np.asarray(public_x, np.float32),
                                   np.asarray(teacher_log_probs, np.float32)),
        **extra, **(fingerprint or {})}
    ckpt = Checkpointer(checkpoint_dir, restart=restart, restart_hint=restart_hint,
                        fingerprint=run, private=private_checkpoints)
  try:
    r = 0
    if ckpt is not None:
      state, r = ckpt.restore_or(state)
      if r > num_rounds:
        raise ValueError(f"num_rounds: {num_rounds} is below the checkpoint's round {r}")
    # σ enters the compiled program as a value: runs that differ only in σ share it.
    static, sigma = gan._replace(noise_multiplier=0.0), jnp.float32(gan.noise_multiplier)

    def segment(state, start, n):
      return _segment(static, n, per_run, state, keys, jnp.asarray(start), x_all, tl_all,
                      sigma, u_all)

    def record(state, r, metrics):
      acc = accuracy(static, state, eval_x, eval_y)
      return {"student_steps": r * gan.k_s, "eval_accuracy_mean": float(acc.mean()),
              "eval_accuracy": acc.tolist(),
              **{k: float(np.mean(m)) for k, m in metrics.items()}}

    def show(r, n, metrics, entry):
      log(f"round {r}/{num_rounds}: accuracy {entry['eval_accuracy_mean']:.4f} (runs "
          f"{len(entry['eval_accuracy'])}) " + " ".join(f"{k}={entry[k]:.4f}" for k in metrics))

    out = run_segments(segment, state, start=r, total=num_rounds, segment_steps=segment_rounds,
                       ckpt=ckpt, record=record, step_key="round",
                       after_segment=show if log else None)
    state, history, resumed_from, seconds = out.state, out.history, out.resumed_from, out.seconds
  finally:
    if ckpt is not None:
      ckpt.close()
  final = (np.asarray(history[-1]["eval_accuracy"]) if history
           else accuracy(static, state, eval_x, eval_y))
  return KDGANResult(state, final, history, resumed_from, seconds)


def teacher_log_probs(student: students.Student, state: Any, images: Any,
                      chunk: int = 2000) -> np.ndarray:
  """``log_softmax`` of a trained network's (evaluation) logits on ``images``, ``[N, C]``
  (one compiled program per network and chunk shape, reused across calls)."""
  images = np.asarray(images, np.float32)
  return np.concatenate([np.asarray(_log_probs(student, state, jnp.asarray(images[i:i + chunk])))
                         for i in range(0, images.shape[0], chunk)])


@functools.partial(jax.jit, static_argnums=0)
def _log_probs(student: students.Student, state: Any, x: jax.Array) -> jax.Array:
  with students.matmul_precision(student):  # as the teacher was trained
    return jax.nn.log_softmax(student.logits(state, x), axis=-1)


def train_teacher(key: jax.Array, train_x: Any, train_y: Any, eval_x: Any, eval_y: Any, *,
                  model: str, model_kwargs: Mapping[str, Any] | None = None, num_steps: int,
                  batch_size: int, learning_rate: float = 1e-3,
                  checkpoint_dir: str | None = None, restart: bool = False,
                  restart_hint: str | None = None, log: Callable[[str], None] | None = None,
                  private_checkpoints: bool = True) -> tuple[students.Student, Any, float]:
  """The published setting's teacher: the registered ``model`` trained with the repo's
  supervised student loop (``pate_jax.students.fit``) on *all* the private training data
  (``checkpoint_dir``, ``restart``, ``restart_hint``, ``private_checkpoints``: ``fit``'s;
  owner-only by default, as a teacher trained without noise on private data is).

  Returns:
    ``(network functions, state, held-out accuracy)``.
  """
  num_classes = int(np.max(train_y)) + 1
  net = students.classifier(model, num_classes, **dict(model_kwargs or {}))
  teacher = students.supervised(net, learning_rate=learning_rate, b1=0.9)
  data = students.make_student_data(train_x, np.arange(len(train_y)), train_y, eval_x, eval_y,
                                    num_classes)
  result = students.fit(teacher, data, key, num_steps=num_steps, batch_size=batch_size,
                        segment_steps=max(1, num_steps // 4), checkpoint_dir=checkpoint_dir,
                        fingerprint={"model": model, "model_kwargs": dict(model_kwargs or {}),
                                     "learning_rate": learning_rate}, restart=restart,
                        restart_hint=restart_hint, log=log,
                        private_checkpoints=private_checkpoints)
  return teacher, result.state, result.eval_accuracy
