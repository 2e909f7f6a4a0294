"""Vote histograms: the hand-over between teachers and everything downstream.

A vote histogram ``votes[Q, C]`` (int32) counts, for each of ``Q`` query inputs,
how many of the ``T`` teachers predicted each of the ``C`` classes; every row
sums to ``T``. Teachers of any kind (vmapped Flax networks, scikit-learn
forests) reduce their predictions to this array and save it with
:func:`save_votes`; aggregation, accounting, students and attacks read it with
:func:`load_votes`.

``votes.npz`` layout (all arrays):
  votes        int32 [Q, C]  per-class teacher counts on the query inputs
  labels       int32 [Q]     true labels of the query inputs (for evaluation only)
  index        int64 [Q]     row of each query input in the dataset split it came from
  num_pool     int64 []      rows ``[:num_pool]`` are the student's public pool,
                             rows ``[num_pool:]`` its held-out evaluation set
  num_teachers int64 []      T
  dataset      str   []      dataset name
  soft_counts  int32 [K, Q, C]  optional: the teachers' summed class probabilities at each
                             temperature, each teacher's quantized to integers
                             (:func:`soft_counts`, ``soft_count_scale`` per teacher): the
                             exact integer query of the KD-GAN's sound soft labels. Private,
                             as the votes.
  soft_count_scale int64 []  with ``soft_counts``: the scale ``S`` of one teacher's counts
  probabilities float32 [K, Q, C]  optional: the teachers' averaged class probabilities
                             at each temperature (distillation's un-noised targets: private,
                             as the votes), each row of ``soft_counts`` over its sum where
                             those are written
  temperatures float32 [K]   optional: those temperatures
  predictions  uint8 [T, Q]  optional: each teacher's predicted class per query (padding
                             excluded); its histogram equals ``votes``. Written by
                             ``train_teachers.py`` since the ablation (``pate_jax.ablation``)
                             needs teacher subsets; older files without it still load.
  salt         uint8 [16]    random bytes (``os.urandom``) drawn when the file is written
                             (kept when the same votes are written again),
                             mixed into the votes' digest (:func:`pate_jax.budget.
                             votes_digest`), which ``labels.npz`` carries: without the salt,
                             the digest is not a function of the votes an attacker can test
                             guesses against. Older files without it digest unsalted.
  private_data str   []      optional: SHA-256 of the private data the teachers were trained
                             on (an image dataset's whole training split, whatever subset
                             of it they used; the file of a tabular task's training rows),
                             the key of its budget in the budget registry
                             (:class:`pate_jax.budget.BudgetRegistry`): teachers trained
                             again on the same rows meet the budget already spent on them.
                             Private, as the votes. Written by the teachers, tabular and
                             attack stages; for older files the aggregate stage reads the
                             digest their teachers' run recorded, and votes with neither
                             have no registry entry.
  not_releasable str []      optional: why no release may be drawn from these votes with
                             secret noise (their teachers' data was prepared by looking at
                             its private rows, outside any ε: Diabetes' ``"paper"``
                             preparation): :class:`pate_jax.budget.TeachersBudget` refuses
                             a secret-noise budget on them, naming it; research noise (a
                             noise seed, private as a whole) may still measure them.
"""

from __future__ import annotations

import functools
import os
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks, io


def histogram(predictions: jax.Array, num_classes: int,
              num_teachers: int | None = None) -> jax.Array:
  """Reduces teacher predictions ``[T, Q]`` to vote histograms ``[Q, C]`` (int32).

  ``num_teachers``: count only the first rows (a padded ensemble's real teachers).
  Pure ``jnp``: jit-able, and shards along ``Q`` or ``T`` — on a teacher-sharded
  (even multi-process) array the sum over teachers is a cross-device reduction. A
  prediction outside ``[0, num_classes)`` counts for no class (its row then sums to less
  than ``num_teachers``, which :func:`check_votes` refuses).
  """
  predictions = jnp.asarray(predictions)
  if predictions.ndim != 2:
    raise ValueError(f"predictions must have shape [T, Q], got {predictions.shape}")
  if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)) or (
      num_classes < 1):
    raise ValueError(f"num_classes must be a positive integer, got {num_classes!r}")
  t = predictions.shape[0]
  if num_teachers is None:
    num_teachers = t
  elif _checks.positive_int(num_teachers, "num_teachers", minimum=0) > t:
    raise ValueError(f"num_teachers must be an integer in [0, {t}] (the predictions' "
                     f"teachers), got {num_teachers!r}")
  return _histogram(predictions, int(num_classes), int(num_teachers))


@functools.partial(jax.jit, static_argnums=(1, 2))
def _histogram(predictions: jax.Array, num_classes: int, num_teachers: int) -> jax.Array:
  one_hot = jax.nn.one_hot(predictions, num_classes, dtype=jnp.int32)  # [T, Q, C]
  if num_teachers < predictions.shape[0]:
    real = (jnp.arange(predictions.shape[0]) < num_teachers).astype(jnp.int32)
    one_hot = one_hot * real[:, None, None]
  return one_hot.sum(axis=0)


SOFT_COUNT_SCALE = 2**16
"""``S``: one teacher's probability vector as integers summing to at most ``S``
(:func:`soft_counts`); ``T S < 2^31`` keeps the ensemble's int32 sums exact."""


def soft_counts(probabilities: jax.Array, scale: int = SOFT_COUNT_SCALE) -> jax.Array:
  """Probability vectors ``[..., C]`` as int32 counts: ``⌊S·p⌋`` of ``p`` clipped to
  ``[0, 1]`` (NaN as 0) and divided by its sum where that passes 1, less the excess of
  the counts over ``S`` (float rounding, a few units) taken from the largest entry.

  Whatever floats come in, every output row is non-negative with sum ``<= S``: two such
  rows lie at most ``√2 S`` apart in L2, so the sum over ``T`` teachers moves by at most
  ``√2 S`` when one teacher (one partition of the private data) changes: the sensitivity
  of the sound soft labels' integer query (:mod:`pate_jax.kd_gan`). Each entry is within
  ``1/S`` of ``p`` (plus the excess, at most a few float ulps of ``S``).
  """
  scale = _checks.positive_int(scale, "scale")
  if scale >= 2**31:
    raise ValueError(f"scale must be < 2^31 (int32 counts); got {scale}")
  p = jnp.clip(jnp.nan_to_num(jnp.asarray(probabilities, jnp.float32), nan=0.0), 0.0, 1.0)
  p = p / jnp.maximum(p.sum(axis=-1, keepdims=True), 1.0)
  counts = jnp.clip(jnp.floor(p * jnp.float32(scale)), 0, scale).astype(jnp.int32)
  excess = jnp.maximum(counts.sum(axis=-1, keepdims=True) - scale, 0)
  top = jax.nn.one_hot(jnp.argmax(counts, axis=-1), counts.shape[-1], dtype=jnp.int32)
  counts = jnp.maximum(counts - top * excess, 0)
  # The largest entry holds at least (S − excess)/C, far above the excess of a few units,
  # so no row should still pass S; one that did (a float surprise) counts as a zero row,
  # which is a valid row too: the bound is enforced in integers, whatever the floats did.
  return jnp.where(counts.sum(axis=-1, keepdims=True) <= scale, counts, 0)


def normalized_gap(votes: jax.Array) -> jax.Array:
  """(top count − second count) / T per query: the paper's Figure 3 quantity."""
  votes = jnp.asarray(votes)
  top2 = jax.lax.top_k(votes, 2)[0]
  return (top2[:, 0] - top2[:, 1]) / votes.sum(axis=1)


def save_votes(path: str | os.PathLike, votes: Any, labels: Any, *, index: Any | None = None,
               num_pool: int | None = None, dataset: str = "", probabilities: Any = None,
               temperatures: Any = None, predictions: Any = None,
               private_data: str | None = None, soft_counts: Any = None,
               soft_count_scale: int = SOFT_COUNT_SCALE,
               not_releasable: str | None = None) -> pathlib.Path:
  """Writes ``votes.npz`` (see module docstring) atomically, durably and owner-only
  (:func:`pate_jax.io.write_private`), after :func:`check_votes`.

  ``soft_counts``: optional ``[K, Q, C]`` teachers' summed :func:`soft_counts` at the
  ``temperatures``, with their ``soft_count_scale``; ``probabilities`` (where not given)
  are then each row of counts over its own sum (``≈ soft_counts / (S T)``, which the
  floors leave up to ``C/S`` short of 1 per teacher: a distillation target sums to 1).

  ``predictions``: optional ``[T, Q]`` per-teacher predicted classes (stored as uint8);
  their histogram must equal ``votes``. ``private_data``: optional SHA-256 (64 hex digits)
  of the teachers' training data (the module docstring). ``not_releasable``: optional,
  why no secret-noise release may be drawn from them (the module docstring).
  """
  votes = np.asarray(votes)
  labels = np.asarray(labels)
  if votes.ndim != 2 or votes.shape[0] != labels.shape[0]:
    raise ValueError(f"votes must be [Q, C] with Q == len(labels); got votes {votes.shape}, "
                     f"labels {labels.shape}")
  q = votes.shape[0]
  arrays = {"votes": votes, "labels": labels,
            "index": np.arange(q) if index is None else np.asarray(index),
            "num_pool": np.int64(q if num_pool is None else num_pool),
            "num_teachers": np.int64(votes.sum(axis=1)[0] if q else 0),
            "dataset": np.str_(dataset)}
  if soft_counts is not None:
    arrays["soft_counts"] = np.asarray(soft_counts)
    arrays["soft_count_scale"] = np.int64(_checks.positive_int(soft_count_scale,
                                                               "soft_count_scale"))
    if probabilities is None:
      counts = arrays["soft_counts"].astype(np.float64)
      probabilities = counts / np.maximum(counts.sum(axis=-1, keepdims=True), 1.0)
  if probabilities is not None:
    arrays["probabilities"] = np.asarray(probabilities, np.float32)
    arrays["temperatures"] = np.asarray(temperatures, np.float32).reshape(-1)
  if predictions is not None:
    arrays["predictions"] = np.asarray(predictions)
  if private_data is not None:
    arrays["private_data"] = np.str_(private_data)
  if not_releasable is not None:
    arrays["not_releasable"] = np.str_(not_releasable)
  path = pathlib.Path(path)
  arrays["salt"] = _salt(path, arrays)
  arrays = check_votes(arrays, str(path))
  # A function of the private data: the owner's only, written atomically and durably
  # (synced, then renamed; a failed write removes its temporary file, and a run killed
  # before the rename leaves one of :func:`temporary_files`, which the teachers stage
  # removes when it runs again). Not compressed: a compressed file's size and writing time
  # follow its contents (the teachers' agreement), and the write is inside the teachers'
  # publishable seconds; stored, both follow the arrays' shapes.
  return io.write_private(path, lambda f: np.savez(f, **arrays))


def temporary_files(path: str | os.PathLike) -> tuple[pathlib.Path, ...]:
  """The temporary files a :func:`save_votes` of ``path`` (a votes.npz, or its directory)
  killed before its rename leaves (:func:`pate_jax.io.temporary_files`): private votes,
  which nothing reads."""
  path = pathlib.Path(path)
  return io.temporary_files(path if path.suffix == ".npz" else path / "votes.npz")


KEYS = ("votes", "labels", "index", "num_pool", "num_teachers", "dataset")
SALT_BYTES = 16


def _salt(path: pathlib.Path, arrays: dict[str, Any]) -> np.ndarray:
  """The salt of ``path``'s votes.npz where it holds the same votes of the same rows (a
  rerun that writes them again: their digest, and the budget and labels keyed by it, stay
  valid), else 16 fresh bytes of ``os.urandom``."""
  try:
    with np.load(path, allow_pickle=False) as f:
      if ("salt" in f.files and np.array_equal(f["votes"], arrays["votes"])
          and np.array_equal(f["index"], arrays["index"])):
        salt = f["salt"]  # checked with the rest by save_votes's check_votes
        if salt.shape == (SALT_BYTES,):
          return salt
  except (OSError, ValueError, KeyError, EOFError):  # none, or unreadable: a fresh salt
    pass
  return np.frombuffer(os.urandom(SALT_BYTES), np.uint8)


def check_votes(arrays: dict[str, Any], where: str) -> dict[str, Any]:
  """Validates the arrays of ``votes.npz`` (``ValueError`` naming ``where`` and the field).

  ``votes`` is a ``[Q, C]`` histogram whose rows all sum to ``num_teachers`` (int32
  counts); ``labels`` are ``Q`` integers in ``[0, C)``; ``index`` is ``Q`` non-negative
  integers; ``0 <= num_pool <= Q``; optional ``probabilities [K, Q, C]`` with
  ``temperatures [K]``; optional ``predictions [T, Q]`` integers in ``[0, C)`` whose
  histogram equals ``votes``. Returns the arrays in the file's dtypes.
  """
  votes = np.asarray(_checks.votes(arrays["votes"], f"{where}: votes", equal_totals=True))
  q, c = votes.shape
  labels = np.asarray(arrays["labels"])
  if labels.dtype.kind == "f" and labels.shape == (q,) and np.all(labels == np.round(labels)):
    labels = labels.astype(np.int64)  # Integral floats (3.0) are labels; 3.7 is refused.
  labels = _checks.labels(labels, q, c, f"{where}: labels")
  index = np.asarray(arrays["index"])
  if index.shape != (q,) or index.dtype.kind not in "iu" or np.any(index < 0):
    raise ValueError(f"{where}: index must be [{q}] non-negative integers (rows of the dataset "
                     f"split); got {index.dtype} {index.shape}, min {index.min(initial=0)}")
  num_pool, num_teachers = (np.asarray(arrays[k]) for k in ("num_pool", "num_teachers"))
  if num_pool.shape != () or num_pool.dtype.kind not in "iu" or not 0 <= num_pool <= q:
    raise ValueError(f"{where}: num_pool must be an integer in [0, Q={q}] (the pool rows "
                     f"of votes); got {num_pool!r}")
  if num_teachers.shape != () or int(num_teachers) != int(votes[0].sum()):
    raise ValueError(f"{where}: num_teachers must be the row total of votes "
                     f"({int(votes[0].sum())}); got {num_teachers!r}")
  out = {"votes": votes.astype(np.int32), "labels": labels, "index": index.astype(np.int64),
         "num_pool": np.int64(num_pool), "num_teachers": np.int64(num_teachers),
         "dataset": np.str_(arrays["dataset"])}
  if "probabilities" in arrays:
    probabilities = np.asarray(arrays["probabilities"], np.float32)
    temperatures = np.asarray(arrays.get("temperatures"), np.float32).reshape(-1)
    if probabilities.shape != (temperatures.size, q, c):
      raise ValueError(f"{where}: probabilities must be [K={temperatures.size}, Q, C] = "
                       f"{(temperatures.size, q, c)}, got {probabilities.shape}")
    out.update(probabilities=probabilities, temperatures=temperatures)
  if "soft_counts" in arrays:
    out.update(_check_soft_counts(arrays, out, where))
  if "predictions" in arrays:
    out["predictions"] = _check_predictions(arrays["predictions"], votes, where)
  if "salt" in arrays:
    salt = np.asarray(arrays["salt"])
    if salt.shape != (SALT_BYTES,) or salt.dtype != np.uint8:
      raise ValueError(f"{where}: salt must be {SALT_BYTES} bytes (uint8); got {salt.dtype} "
                       f"{salt.shape}")
    out["salt"] = salt
  if "private_data" in arrays:
    digest = str(np.asarray(arrays["private_data"]))
    if not _checks.is_sha256(digest):
      raise ValueError(f"{where}: private_data must be a SHA-256 (64 lowercase hex digits); "
                       f"got {len(digest)} characters")
    out["private_data"] = np.str_(digest)
  if "not_releasable" in arrays:
    why = np.asarray(arrays["not_releasable"])
    if why.shape != () or why.dtype.kind != "U" or not str(why).strip():
      raise ValueError(f"{where}: not_releasable must be a non-empty string (why no "
                       f"secret-noise release may be drawn); got {why.dtype} {why.shape}")
    out["not_releasable"] = np.str_(why)
  return out


def check_soft_counts(counts: Any, num_teachers: int, scale: int, where: str = "") -> np.ndarray:
  """``counts`` (any shape, classes last) checked to be what ``T`` teachers' summed
  :func:`soft_counts` of scale ``S`` can be: integers ``>= 0`` whose rows sum to at most
  ``S T``; a ``ValueError`` beginning with ``where`` otherwise. Returns them as an array."""
  counts = np.asarray(counts)
  if counts.dtype.kind not in "iu":
    raise ValueError(f"{where}soft_counts must be integers (votes.npz's soft_counts); got "
                     f"{counts.dtype} {counts.shape}")
  bound = int(scale) * int(num_teachers)
  # Each count bounded first and rows summed in float64: an integer sum of huge counts
  # wraps (four counts of 2**62 sum to 0 in int64).
  if counts.size and (counts.min() < 0 or counts.max() > bound
                      or counts.sum(axis=-1, dtype=np.float64).max() > bound):
    raise ValueError(f"{where}soft_counts must be >= 0 with rows summing to at most "
                     f"soft_count_scale × num_teachers = {bound}")
  return counts


def _check_soft_counts(arrays: dict[str, Any], out: dict[str, Any],
                       where: str) -> dict[str, Any]:
  """``soft_counts [K, Q, C]`` (beside ``probabilities``) of non-negative integers whose
  rows sum to at most ``S T``, and their scale ``S`` (``soft_count_scale``)."""
  counts = np.asarray(arrays["soft_counts"])
  scale = np.asarray(arrays.get("soft_count_scale", -1))
  if scale.shape != () or scale.dtype.kind not in "iu" or not 0 < int(scale) < 2**31:
    raise ValueError(f"{where}: soft_count_scale must be an integer in [1, 2^31) beside "
                     f"soft_counts; got {scale!r}")
  if "probabilities" not in out or counts.shape != out["probabilities"].shape:
    raise ValueError(f"{where}: soft_counts must be integers of the probabilities' shape "
                     f"[K, Q, C]; got {counts.dtype} {counts.shape}")
  if int(scale) * int(out["num_teachers"]) >= 2**31:  # the int32 counts below stay exact
    raise ValueError(f"{where}: soft_count_scale × num_teachers must be < 2^31 (int32 "
                     f"counts); got {int(scale)} × {int(out['num_teachers'])}")
  check_soft_counts(counts, int(out["num_teachers"]), int(scale), f"{where}: ")
  return {"soft_counts": counts.astype(np.int32), "soft_count_scale": np.int64(scale)}


def _check_predictions(predictions: Any, votes: np.ndarray, where: str) -> np.ndarray:
  """``predictions [T, Q]`` as uint8, checked against the histogram ``votes [Q, C]``."""
  predictions = np.asarray(predictions)
  q, c = votes.shape
  t = int(votes[0].sum()) if q else predictions.shape[0] if predictions.ndim == 2 else 0
  if (predictions.ndim != 2 or predictions.shape != (t, q) or predictions.dtype.kind not in "iu"
      or c > 256):
    raise ValueError(f"{where}: predictions must be [T={t}, Q={q}] integer classes (uint8, "
                     f"C <= 256); got {predictions.dtype} {predictions.shape}")
  if predictions.size and (predictions.min() < 0 or predictions.max() >= c):
    raise ValueError(f"{where}: predictions must be classes in [0, {c}); got range "
                     f"[{predictions.min()}, {predictions.max()}]")
  counts = np.zeros((q, c), np.int64)
  np.add.at(counts, (np.broadcast_to(np.arange(q), predictions.shape), predictions), 1)
  if not np.array_equal(counts, votes):
    bad = int(np.argmax(np.any(counts != votes, axis=1)))
    # The query only: its histograms are the teachers' private votes.
    raise ValueError(f"{where}: the histogram of predictions differs from votes (first at "
                     f"query {bad})")
  return predictions.astype(np.uint8)


def load_votes(path: str | os.PathLike) -> dict[str, Any]:
  """Reads and validates (:func:`check_votes`) a ``votes.npz`` into a dict of arrays.

  Raises:
    FileNotFoundError: no file.
    ValueError: a corrupted file, a missing key or bad contents (names the file).
  """
  path = pathlib.Path(path)
  if path.is_dir():
    path = path / "votes.npz"
  if not path.exists():
    raise FileNotFoundError(f"no votes file at {path}; run experiments/train_teachers.py "
                            "(or experiments/tabular.py) with this workdir first")
  out = check_votes(_checks.npz_arrays(path, KEYS), str(path))
  out["dataset"] = str(out["dataset"])
  for k in ("private_data", "not_releasable"):
    if k in out:
      out[k] = str(out[k])
  for k in ("num_pool", "num_teachers", "soft_count_scale"):
    if k in out:
      out[k] = int(out[k])
  return out


QUERY_SELECTIONS = ("balanced", "first")


def query_rows(selection: str, pool_labels: Any, num_queries: int,
               num_classes: int) -> np.ndarray:
  """The public-pool rows the student asks the teachers to label.

  * ``"balanced"``: a class-balanced subset, as Papernot et al. 2017 (Section 4.2) select
    the MNIST student's labelled inputs: the first row of each class in pool order, then
    the second of each, and so on (``num_queries // C`` rows of each class, the first
    ``num_queries % C`` classes one more, when the pool has them; a class that runs out is
    skipped), so that every prefix answered within a budget is as balanced as it can be.
    It reads the *public* pool's labels, which the paper's selection uses too; nothing
    private.
  * ``"first"``: rows ``0..num_queries-1`` (the pool's order).

  Args:
    selection: one of :data:`QUERY_SELECTIONS`.
    pool_labels: int ``[P]`` labels of the public pool (votes.npz's ``labels[:num_pool]``).
    num_queries: ``1 <= num_queries <= P``.
    num_classes: ``C``.

  Returns:
    int64 ``[num_queries]`` distinct rows.
  """
  _checks.choice(selection, "query_selection", QUERY_SELECTIONS)
  pool_labels = np.asarray(pool_labels)
  n = _checks.positive_int(num_queries, "num_queries")
  if n > pool_labels.shape[0]:
    raise ValueError(f"num_queries must be <= the pool's {pool_labels.shape[0]} rows; got {n}")
  if selection == "first":
    return np.arange(n, dtype=np.int64)
  rows_of = [np.flatnonzero(pool_labels == c) for c in range(num_classes)]
  order = []
  for k in range(max(r.size for r in rows_of)):
    order += [rows_of[c][k] for c in range(num_classes) if k < rows_of[c].size]
    if len(order) >= n:
      break
  order = order[:n]
  return np.asarray(order, np.int64)
