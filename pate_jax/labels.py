"""Noisy labels: the hand-over from the aggregation stage to the student.

The aggregation stage answers the student's queries (rows of ``votes.npz``, see
:mod:`pate_jax.votes`) from the teachers' budget (:class:`pate_jax.budget.TeachersBudget`,
which keeps the ledger and every answer beside the votes) and writes ``labels.npz`` with
:func:`save_labels`: a copy of the answers to the rows it asked, for the student, which
reads it with :func:`load_labels`. With secret noise the file holds nothing private (with a
research noise seed, recorded in ``noise``, the labels bound the votes beyond any ε): the
released labels and outcomes, the public pool's true labels (for evaluation), the digest of
the votes they were answered on (salted with votes.npz's secret random bytes: not a
function of the votes alone), and the publishable part of the ledger; it cannot spend a
budget (the budget lives with the votes). :func:`check_against` refuses a labels.npz whose
rows are not the budget's record (a file spliced from two runs, or restored from
elsewhere).

``labels.npz`` layout (``N`` queries asked):
  query_index    int64   [N]  row of each query in votes.npz
  dataset_index  int64   [N]  row of each query input in its dataset split
  labels         int32   [N]  noisy label, -1 where not answered
  answered       bool    [N]  a label was released (status == ANSWERED)
  status         int32   [N]  :class:`pate_jax.ledger.Status` of each query
  true_labels    int32   [N]  true labels of the public pool (for evaluation only)
  votes_digest   str          :func:`pate_jax.budget.votes_digest` of the votes answered on
  mechanism      str          the mechanism's name
  epsilon        float64      the budget's data-independent ε (publishable) when written
  epsilon_max, delta float64  the budget and its δ
  noise          str          "secret" or "research:<seed>" (public noise)
  sampler_delta  float64      what the float64 noise samplers add to δ when written
                              (:func:`pate_jax.reporting.sampler_part`; absent from files
                              written before it was recorded: ``None`` when loaded)
"""

from __future__ import annotations

import math
import os
import pathlib
from typing import Any

import numpy as np

from pate_jax import _checks as v
from pate_jax import io
from pate_jax import ledger as ledger_lib

FILENAME = "labels.npz"

_ANSWERED = int(ledger_lib.Status.ANSWERED)
_COLUMNS = ("query_index", "dataset_index", "labels", "answered", "status", "true_labels")
_SCALARS = ("votes_digest", "mechanism", "epsilon", "epsilon_max", "delta", "noise")
KEYS = _COLUMNS + _SCALARS


def _path(path_or_dir: str | os.PathLike) -> pathlib.Path:
  path = pathlib.Path(path_or_dir)
  return path / FILENAME if path.is_dir() or not path.suffix else path


def save_labels(path_or_dir: str | os.PathLike, *, labels: Any, status: Any, true_labels: Any,
                dataset_index: Any, query_index: Any, votes_digest: str, mechanism: str,
                epsilon: float, epsilon_max: float, delta: float,
                noise: str, sampler_delta: float | None = None) -> pathlib.Path:
  """Writes ``labels.npz`` (module docstring) atomically and durably; returns its path.

  Args:
    path_or_dir: the file, or a work directory (then ``<dir>/labels.npz``).
    labels: int ``[N]`` noisy labels (-1 where not answered).
    status: int ``[N]`` :class:`pate_jax.ledger.Status`; ``answered`` is derived.
    true_labels: int ``[N]`` true labels.
    dataset_index: int ``[N]`` row of each query input in its dataset split.
    query_index: int ``[N]`` rows of votes.npz.
    votes_digest, mechanism, epsilon, epsilon_max, delta, noise, sampler_delta: see the
      layout (``sampler_delta`` ``None``: not written).
  """
  labels = np.asarray(labels)
  n = labels.shape[0] if labels.ndim == 1 else -1
  columns = {"labels": labels, "status": np.asarray(status),
             "true_labels": np.asarray(true_labels), "dataset_index": np.asarray(dataset_index),
             "query_index": np.asarray(query_index)}
  for name, col in columns.items():
    if col.shape != (n,):
      raise ValueError(f"{name} must have shape [N] like labels ({labels.shape}); got shape "
                       f"{col.shape}")
  _check_outcomes(labels, columns["status"], columns["status"] == _ANSWERED, "labels")
  arrays = dict(
      query_index=columns["query_index"].astype(np.int64),
      dataset_index=columns["dataset_index"].astype(np.int64),
      labels=labels.astype(np.int32), answered=columns["status"] == _ANSWERED,
      status=columns["status"].astype(np.int32),
      true_labels=columns["true_labels"].astype(np.int32), votes_digest=np.str_(votes_digest),
      mechanism=np.str_(mechanism), epsilon=np.float64(epsilon),
      epsilon_max=np.float64(epsilon_max), delta=np.float64(delta), noise=np.str_(noise))
  if sampler_delta is not None:
    arrays["sampler_delta"] = np.float64(sampler_delta)
  path = _path(path_or_dir)
  path.parent.mkdir(parents=True, exist_ok=True)
  # Labels of research noise (a recorded seed) bound the votes beyond any ε: owner-only.
  # Atomically and durably: a write that fails leaves no half-written copy (whose research
  # labels would outlive the run) beside the file; a run killed outright leaves
  # :func:`temporary_files`, which the aggregate stage removes when it runs again.
  return io.write_file(path, lambda f: np.savez_compressed(f, **arrays),
                       private=noise != "secret")


def temporary_files(path_or_dir: str | os.PathLike) -> tuple[pathlib.Path, ...]:
  """The temporary files a :func:`save_labels` of ``path_or_dir`` killed before its rename
  leaves (:func:`pate_jax.io.temporary_files`)."""
  return io.temporary_files(_path(path_or_dir))


def _check_outcomes(labels: np.ndarray, status: np.ndarray, answered: np.ndarray,
                    where: str) -> None:
  """A label ``>= 0`` exactly where the status is ANSWERED (and ``answered`` says so)."""
  if np.any((status == _ANSWERED) != answered) or np.any((labels < 0) == answered):
    raise ValueError(f"{where}: labels, answered and status must agree (a label >= 0 exactly "
                     "where status is ANSWERED)")


def load_labels(path_or_dir: str | os.PathLike, votes_digest: str | None = None
                ) -> dict[str, Any]:
  """Reads a ``labels.npz`` written by :func:`save_labels` into a dict.

  Arrays stay numpy; the scalars become ``str`` / ``float``.

  Args:
    path_or_dir: the file or its directory.
    votes_digest: if given, the digest of the votes the labels must have been answered
      on (:func:`pate_jax.budget.votes_digest`).

  Raises:
    FileNotFoundError: no file (run ``experiments/aggregate.py`` first).
    ValueError: a corrupted file, a missing key, columns of different lengths, labels
      or status that do not agree, or labels answered on other votes (names the file).
  """
  path = _path(path_or_dir)
  if not path.exists():
    raise FileNotFoundError(f"no labels file at {path}; run experiments/aggregate.py with "
                            "this workdir first")
  out = v.npz_arrays(path, KEYS)
  n = out["labels"].shape[0] if out["labels"].ndim == 1 else -1
  for k in _COLUMNS:
    if out[k].shape != (n,) or out[k].dtype.kind not in ("b" if k == "answered" else "iu"):
      raise ValueError(f"{path}: {k} must be an integer column [N] like labels "
                       f"({out['labels'].shape}); got {out[k].dtype} {out[k].shape}")
  _check_outcomes(out["labels"], out["status"], out["answered"], str(path))
  for k in ("votes_digest", "mechanism", "noise"):
    out[k] = str(out[k])
  noise_seed(out, str(path))  # "secret" or "research:<seed>"
  for k in ("epsilon", "epsilon_max", "delta") + (("sampler_delta",) if "sampler_delta" in out
                                                 else ()):
    value = np.asarray(out[k])
    if value.shape != () or value.dtype.kind != "f":
      raise ValueError(f"{path}: {k} must be a float64 scalar; got {value.dtype} {value.shape}")
    out[k] = float(value)
  # NaN fails every comparison here. ε passes ε_max only where nothing was answered: a
  # ledger that spent nothing has its accountant's floor, which a tiny ε_max is below.
  if not (0.0 <= out["epsilon"] < math.inf and 0.0 < out["epsilon_max"]
          and (out["epsilon"] <= out["epsilon_max"] or not out["answered"].any())
          and 0.0 < out["delta"] < 1.0
          and (out.get("sampler_delta") is None or out["sampler_delta"] >= 0.0)):
    raise ValueError(f"{path}: epsilon must be a finite number >= 0 and at most epsilon_max "
                     f"(> 0) where a label was answered, and delta in (0, 1); got epsilon "
                     f"{out['epsilon']}, epsilon_max {out['epsilon_max']}, delta "
                     f"{out['delta']}")
  out.setdefault("sampler_delta", None)
  if votes_digest is not None and out["votes_digest"] != votes_digest:
    raise ValueError(f"{path} was answered on other votes than these (digest "
                     f"{out['votes_digest'][:12]}... vs {votes_digest[:12]}...): labels "
                     "belong to the votes they were paid from")
  return out


def noise_seed(labels: dict[str, Any], where: str = "labels.npz") -> int | None:
  """The research noise seed of loaded ``labels`` (its ``noise``: ``"research:<seed>"``), or
  ``None`` for secret noise; ``ValueError`` naming ``where`` for any other value."""
  if labels["noise"] == "secret":
    return None
  kind, _, seed = labels["noise"].partition(":")
  if kind != "research" or not seed.lstrip("-").isdigit():
    raise ValueError(f"{where}: noise must be 'secret' or 'research:<seed>', got "
                     f"{labels['noise']!r}")
  return int(seed)


def check_against(labels: dict[str, Any], rows: np.ndarray, row_labels: np.ndarray,
                  row_status: np.ndarray, where: str) -> None:
  """Every answered or charged row of ``labels`` (:func:`load_labels`) is in the budget's
  record (``rows``, ``row_labels``, ``row_status``) with the same outcome.

  Raises:
    ValueError: naming ``where``: a row the budget never charged, or another outcome (a
      file spliced from two runs, or from another budget).
  """
  recorded = {int(r): (int(lab), int(st)) for r, lab, st in zip(rows, row_labels, row_status)}
  charged = labels["status"] != int(ledger_lib.Status.REFUSED_BUDGET)
  for r, lab, st in zip(labels["query_index"][charged], labels["labels"][charged],
                        labels["status"][charged]):
    if recorded.get(int(r)) != (int(lab), int(st)):
      raise ValueError(f"{where}: row {int(r)} is not the teachers' budget's answer ("
                       f"{(int(lab), int(st))} vs {recorded.get(int(r))}): the file was not "
                       "written from this budget (spliced or copied); remove it to have it "
                       "written again")
