"""Noisy labels and the privacy ledger that paid for them: the hand-over to the student.

The aggregation stage answers the student's queries (rows of ``votes.npz``, see
:mod:`pate_jax.votes`) through a :class:`pate_jax.ledger.PrivateAggregator` and writes
``labels.npz`` with :func:`save_labels`; the student reads it with :func:`load_labels`.

``labels.npz`` layout (all arrays, ``N`` queries asked):
  query_index    int64   [N]  row of each query in votes.npz
  dataset_index  int64   [N]  row of each query input in its dataset split
  labels         int32   [N]  noisy label, -1 where not answered
  answered       bool    [N]  a label was released (status == ANSWERED)
  status         int32   [N]  :class:`pate_jax.ledger.Status` of each query
  true_labels    int32   [N]  true labels (for evaluation only)
  ledger_cost    float64 [K]  composed cost of the ledger (RDP, or log-moments)
  ledger_orders  float64 [K]  its orders (Rényi orders, or moment orders)
  ledger_epsilon float64 []   ε of the ledger at ledger_delta
  ledger_delta   float64 []   δ
  mechanism      str     []   name in :data:`pate_jax.mechanisms.REGISTRY`
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

import numpy as np

FILENAME = "labels.npz"

_ANSWERED = 0  # pate_jax.ledger.Status.ANSWERED (not imported: this module stays light).

KEYS = ("query_index", "dataset_index", "labels", "answered", "status", "true_labels",
        "ledger_cost", "ledger_orders", "ledger_epsilon", "ledger_delta", "mechanism")


def _path(path_or_dir: str | os.PathLike) -> pathlib.Path:
  path = pathlib.Path(path_or_dir)
  return path / FILENAME if path.is_dir() or not path.suffix else path


def save_labels(path_or_dir: str | os.PathLike, *, labels: Any, status: Any, true_labels: Any,
                dataset_index: Any, ledger_cost: Any, ledger_orders: Any, ledger_epsilon: float,
                ledger_delta: float, mechanism: str,
                query_index: Any | None = None) -> pathlib.Path:
  """Writes ``labels.npz`` (module docstring) atomically; returns its path.

  Args:
    path_or_dir: the file, or a work directory (then ``<dir>/labels.npz``).
    labels: int ``[N]`` noisy labels (-1 where not answered).
    status: int ``[N]`` :class:`pate_jax.ledger.Status`; ``answered`` is derived.
    true_labels: int ``[N]`` true labels.
    dataset_index: int ``[N]`` row of each query input in its dataset split.
    ledger_cost, ledger_orders, ledger_epsilon, ledger_delta, mechanism: the ledger
      (:meth:`pate_jax.ledger.PrivateAggregator.ledger_record` gives them).
    query_index: int ``[N]`` rows of votes.npz (default ``arange(N)``).
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
  cost, orders = np.asarray(ledger_cost, np.float64), np.asarray(ledger_orders, np.float64)
  if cost.ndim != 1 or cost.shape != orders.shape:
    raise ValueError(f"ledger_cost must have one value per order {orders.shape}; got shape "
                     f"{cost.shape}")
  path = _path(path_or_dir)
  path.parent.mkdir(parents=True, exist_ok=True)
  tmp = path.with_name(path.name + ".tmp.npz")
  np.savez_compressed(
      tmp, query_index=columns["query_index"].astype(np.int64),
      dataset_index=columns["dataset_index"].astype(np.int64),
      labels=labels.astype(np.int32), answered=columns["status"] == _ANSWERED,
      status=columns["status"].astype(np.int32),
      true_labels=columns["true_labels"].astype(np.int32), ledger_cost=cost,
      ledger_orders=orders, ledger_epsilon=np.float64(ledger_epsilon),
      ledger_delta=np.float64(ledger_delta), mechanism=np.str_(mechanism))
  tmp.replace(path)
  return path


def load_labels(path_or_dir: str | os.PathLike) -> dict[str, Any]:
  """Reads a ``labels.npz`` written by :func:`save_labels` into a dict.

  Arrays stay numpy; ``ledger_epsilon``/``ledger_delta`` become floats and
  ``mechanism`` a str.

  Raises:
    FileNotFoundError: no file (run ``experiments/aggregate.py`` first).
    ValueError: a key of the layout is missing (names the file and the key).
  """
  path = _path(path_or_dir)
  if not path.exists():
    raise FileNotFoundError(f"no labels file at {path}; run experiments/aggregate.py with "
                            "this workdir first")
  with np.load(path, allow_pickle=False) as f:
    out = {k: f[k] for k in f.files}
  missing = [k for k in KEYS if k not in out]
  if missing:
    raise ValueError(f"{path} must hold the keys {KEYS}; missing {missing}")
  for k in ("ledger_epsilon", "ledger_delta"):
    out[k] = float(out[k])
  out["mechanism"] = str(out["mechanism"])
  return out
