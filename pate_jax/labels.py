"""Noisy labels and the privacy ledger that paid for them: the hand-over to the student.

The aggregation stage answers the student's queries (rows of ``votes.npz``, see
:mod:`pate_jax.votes`) through a :class:`pate_jax.ledger.PrivateAggregator` and writes
``labels.npz`` with :func:`save_labels`; the student reads it with :func:`load_labels`.
The file keeps the whole ledger (:func:`pate_jax.ledger.ledger_record`), so that a
rerun resumes the budget the labels were paid from instead of starting a new one
(``PrivateAggregator(..., ledger=load_labels(workdir))``): the budget belongs to the
private data, not to a process.

``labels.npz`` layout (all arrays, ``N`` queries asked):
  query_index    int64   [N]  row of each query in votes.npz
  dataset_index  int64   [N]  row of each query input in its dataset split
  labels         int32   [N]  noisy label, -1 where not answered
  answered       bool    [N]  a label was released (status == ANSWERED)
  status         int32   [N]  :class:`pate_jax.ledger.Status` of each query
  true_labels    int32   [N]  true labels (for evaluation only)
  mechanism, ledger_*         the ledger (:data:`pate_jax.ledger.RECORD_KEYS`): composed
                              cost and orders, ε and δ, ε_max, the mechanism's
                              parameters, mode flags, counters, number of teachers,
                              next fresh id and (consistent mode) the answer record.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

import numpy as np

from pate_jax import _checks as v
from pate_jax import ledger as ledger_lib

FILENAME = "labels.npz"

_ANSWERED = int(ledger_lib.Status.ANSWERED)
_COLUMNS = ("query_index", "dataset_index", "labels", "answered", "status", "true_labels")
KEYS = _COLUMNS + ledger_lib.RECORD_KEYS


def _path(path_or_dir: str | os.PathLike) -> pathlib.Path:
  path = pathlib.Path(path_or_dir)
  return path / FILENAME if path.is_dir() or not path.suffix else path


def save_labels(path_or_dir: str | os.PathLike, *, labels: Any, status: Any, true_labels: Any,
                dataset_index: Any, query_index: Any | None = None,
                **ledger: Any) -> pathlib.Path:
  """Writes ``labels.npz`` (module docstring) atomically; returns its path.

  Args:
    path_or_dir: the file, or a work directory (then ``<dir>/labels.npz``).
    labels: int ``[N]`` noisy labels (-1 where not answered).
    status: int ``[N]`` :class:`pate_jax.ledger.Status`; ``answered`` is derived.
    true_labels: int ``[N]`` true labels.
    dataset_index: int ``[N]`` row of each query input in its dataset split.
    query_index: int ``[N]`` rows of votes.npz (default ``arange(N)``).
    **ledger: exactly the :data:`pate_jax.ledger.RECORD_KEYS`
      (:meth:`pate_jax.ledger.PrivateAggregator.ledger_record` gives them).
  """
  labels = np.asarray(labels)
  n = labels.shape[0] if labels.ndim == 1 else -1
  columns = {"labels": labels, "status": np.asarray(status),
             "true_labels": np.asarray(true_labels), "dataset_index": np.asarray(dataset_index),
             "query_index": np.arange(max(n, 0)) if query_index is None
             else np.asarray(query_index)}
  for name, col in columns.items():
    if col.shape != (n,):
      raise ValueError(f"{name} must have shape [N] like labels ({labels.shape}); got shape "
                       f"{col.shape}")
  _check_outcomes(labels, columns["status"], columns["status"] == _ANSWERED, "labels")
  if set(ledger) != set(ledger_lib.RECORD_KEYS):
    raise ValueError(f"the ledger must be given as the keys {ledger_lib.RECORD_KEYS}; missing "
                     f"{sorted(set(ledger_lib.RECORD_KEYS) - set(ledger))}, unknown "
                     f"{sorted(set(ledger) - set(ledger_lib.RECORD_KEYS))}")
  ledger_lib.restore_ledger(ledger)  # Refuses a record that does not describe a ledger.
  path = _path(path_or_dir)
  path.parent.mkdir(parents=True, exist_ok=True)
  tmp = path.with_name(path.name + ".tmp.npz")
  np.savez_compressed(
      tmp, query_index=columns["query_index"].astype(np.int64),
      dataset_index=columns["dataset_index"].astype(np.int64),
      labels=labels.astype(np.int32), answered=columns["status"] == _ANSWERED,
      status=columns["status"].astype(np.int32),
      true_labels=columns["true_labels"].astype(np.int32), **ledger)
  tmp.replace(path)
  return path


def _check_outcomes(labels: np.ndarray, status: np.ndarray, answered: np.ndarray,
                    where: str) -> None:
  """A label ``>= 0`` exactly where the status is ANSWERED (and ``answered`` says so)."""
  if np.any((status == _ANSWERED) != answered) or np.any((labels < 0) == answered):
    raise ValueError(f"{where}: labels, answered and status must agree (a label >= 0 exactly "
                     "where status is ANSWERED)")


def load_labels(path_or_dir: str | os.PathLike) -> dict[str, Any]:
  """Reads a ``labels.npz`` written by :func:`save_labels` into a dict.

  Arrays stay numpy; ``ledger_epsilon``/``ledger_delta`` become floats and
  ``mechanism`` a str; the other ``ledger_*`` entries stay numpy (a record for
  :func:`pate_jax.ledger.restore_ledger`).

  Raises:
    FileNotFoundError: no file (run ``experiments/aggregate.py`` first).
    ValueError: a corrupted file, a missing key, columns of different lengths, labels
      or status that do not agree, or a ledger that is not valid (names the file).
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
  try:
    ledger_lib.restore_ledger(out)
  except ValueError as e:
    raise ValueError(f"{path}: {e}") from e
  for k in ("ledger_epsilon", "ledger_delta"):
    out[k] = float(out[k])
  out["mechanism"] = str(out["mechanism"])
  return out


def previous_labels(workdir: str | os.PathLike, index: np.ndarray) -> dict[str, Any] | None:
  """The labels.npz of an earlier run in ``workdir`` (:func:`load_labels`; None if none),
  checked against the current votes.npz rows: its ``N`` queries must be the first ``N``
  rows of ``index`` (the dataset rows of the current public pool), in order.

  Raises:
    ValueError: the labels were paid for on other rows (keep that votes.npz, or start a
      new budget in a new workdir).
  """
  workdir = pathlib.Path(workdir)
  if not (workdir / FILENAME).exists():
    return None
  prior = load_labels(workdir)
  m = prior["labels"].shape[0]
  if (m > index.shape[0] or not np.array_equal(prior["query_index"], np.arange(m))
      or not np.array_equal(prior["dataset_index"], index[:m])):
    raise ValueError(f"{workdir / FILENAME} was paid for on other votes.npz rows "
                     "than the current ones; keep its votes.npz, or start a new budget in a "
                     "new workdir")
  return prior
