"""A ledger state as plain arrays and back (the ``ledger_*`` entries of ``labels.npz``).

Owns :data:`RECORD_KEYS` (and the private ones, :data:`PRIVATE_RECORD_KEYS`),
:func:`ledger_record` and :func:`restore_ledger`, which validates every entry of a
record before it is trusted (a record whose ε is not the ε of its cost is refused).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from pate_jax import _checks as v
from pate_jax import mechanisms
from pate_jax.ledger._state import (
    _ID_SENTINEL,
    AnswerCache,
    LedgerState,
    Status,
    init_ledger,
)


RECORD_KEYS = (
    "mechanism", "ledger_param_names", "ledger_params", "ledger_cost", "ledger_orders",
    "ledger_conversion", "ledger_epsilon", "ledger_best_order", "ledger_delta",
    "ledger_epsilon_max", "ledger_data_dependent", "ledger_consistent", "ledger_num_charged",
    "ledger_num_answered", "ledger_num_teachers", "ledger_next_id", "ledger_cache_ids",
    "ledger_cache_labels", "ledger_cache_status", "ledger_extra_cost",
    "ledger_private_cost", "ledger_private_epsilon", "ledger_private_best_order",
    "ledger_lineage", "ledger_generation")
"""Keys of :func:`ledger_record` (and of the ledger part of ``labels.npz``)."""


PRIVATE_RECORD_KEYS = ("ledger_private_cost", "ledger_private_epsilon",
                       "ledger_private_best_order")
"""The record's private entries (functions of the votes): for the data owner only."""


def ledger_record(state: LedgerState, *, lineage: str = "",
                  generation: int = 0) -> dict[str, np.ndarray]:
  """The state as numpy arrays keyed by :data:`RECORD_KEYS` (:func:`restore_ledger` inverts).

  The cache is stored without its padding (its ``size`` recorded entries). ``lineage``
  and ``generation`` identify the copy (:class:`PrivateAggregator` fills them in).
  """
  s = jax.device_get(state)
  size = int(s.cache.size)
  names = mechanisms.get(s.mechanism).param_names
  return {
      "mechanism": np.str_(s.mechanism),
      "ledger_param_names": np.array(names, dtype=np.str_),
      "ledger_params": np.array([s.params[k] for k in names], np.float64),
      "ledger_cost": np.asarray(s.accountant.cost, np.float64),
      "ledger_orders": np.asarray(s.accountant.orders, np.float64),
      "ledger_conversion": np.str_(s.accountant.conversion or ""),
      "ledger_epsilon": np.float64(s.epsilon), "ledger_best_order": np.float64(s.best_order),
      "ledger_delta": np.float64(s.delta), "ledger_epsilon_max": np.float64(s.epsilon_max),
      "ledger_data_dependent": np.bool_(s.data_dependent),
      "ledger_consistent": np.bool_(s.consistent),
      "ledger_num_charged": np.int64(s.num_charged),
      "ledger_num_answered": np.int64(s.num_answered),
      "ledger_num_teachers": np.int64(s.num_teachers),
      "ledger_next_id": np.uint64(s.next_id),
      "ledger_cache_ids": np.asarray(s.cache.ids[:size], np.uint64),
      "ledger_cache_labels": np.asarray(s.cache.labels[:size], np.int32),
      "ledger_cache_status": np.asarray(s.cache.status[:size], np.int32),
      "ledger_extra_cost": np.asarray(s.extra_cost, np.float64),
      "ledger_private_cost": np.asarray(s.private_accountant.cost, np.float64),
      "ledger_private_epsilon": np.float64(s.private_epsilon),
      "ledger_private_best_order": np.float64(s.private_best_order),
      "ledger_lineage": np.str_(lineage),
      "ledger_generation": np.int64(generation),
  }


def _record_scalar(record, key, kind):
  value = np.asarray(record[key])
  if value.shape != () or value.dtype.kind not in kind:
    raise ValueError(f"{key} must be a scalar of kind {kind!r}; got {value!r}")
  return value.item()


def restore_ledger(record: Any, capacity: int = 0) -> LedgerState:
  """The :class:`LedgerState` of a :func:`ledger_record` (e.g. read from ``labels.npz``).

  Every entry is validated (``ValueError`` naming the key): a missing key, a
  negative or non-finite cost, inconsistent counters or cache, or a recorded ε that
  is not the ε of the recorded cost (a tampered or corrupted record) is refused.

  Args:
    record: mapping with the :data:`RECORD_KEYS`.
    capacity: smallest capacity of the restored cache (consistent mode; at least its
      recorded size).
  """
  missing = [k for k in RECORD_KEYS if k not in record]
  if missing:
    raise ValueError(f"the ledger record must hold the keys {RECORD_KEYS}; missing {missing}")
  names = [str(n) for n in np.asarray(record["ledger_param_names"]).reshape(-1)]
  values = np.asarray(record["ledger_params"], np.float64).reshape(-1)
  if len(names) != len(values):
    raise ValueError(f"ledger_params must have one value per name {names}; got {values}")
  conversion = str(record["ledger_conversion"]) or "improved"
  consistent = _record_scalar(record, "ledger_consistent", "b")
  ids = np.asarray(record["ledger_cache_ids"])
  size = ids.shape[0] if ids.ndim == 1 else -1
  capacity = max(v.positive_int(capacity, "capacity", minimum=0), size, 1 if consistent else 0)
  costs = {}
  for key in ("ledger_cost", "ledger_private_cost", "ledger_extra_cost"):
    cost = np.asarray(record[key], np.float64)
    if cost.shape != np.shape(record["ledger_orders"]) or cost.ndim != 1:
      raise ValueError(f"{key} must have one value per order of ledger_orders "
                       f"{np.shape(record['ledger_orders'])}; got shape {cost.shape}")
    if np.any(np.isnan(cost) | (cost < 0)):  # a data-dependent cost's values are not shown
      got = "" if key in PRIVATE_RECORD_KEYS else f"; got {cost}"
      raise ValueError(f"{key} must be non-negative (+inf allowed){got}")
    costs[key] = cost
  if np.any(costs["ledger_extra_cost"] > costs["ledger_cost"]):
    raise ValueError("ledger_extra_cost must be part of ledger_cost; got "
                     f"{costs['ledger_extra_cost']} > {costs['ledger_cost']}")
  cost = costs["ledger_cost"]
  state = init_ledger(
      cost, orders=record["ledger_orders"], delta=_record_scalar(record, "ledger_delta", "f"),
      mechanism=str(record["mechanism"]), params=dict(zip(names, values)),
      epsilon_max=_record_scalar(record, "ledger_epsilon_max", "f"),
      data_dependent=_record_scalar(record, "ledger_data_dependent", "b"),
      consistent=consistent, conversion=conversion, capacity=capacity,
      private_cost=costs["ledger_private_cost"], extra_cost=costs["ledger_extra_cost"])
  counts = {k: _record_scalar(record, f"ledger_{k}", "iu")
            for k in ("num_charged", "num_answered", "num_teachers", "next_id")}
  if not 0 <= counts["num_answered"] <= counts["num_charged"] < 2**31:
    raise ValueError("ledger_num_answered and ledger_num_charged must satisfy 0 <= answered "
                     f"<= charged < 2**31; got {counts}")
  if not 0 <= counts["num_teachers"] <= v.MAX_NOISY_TOTAL or not 0 <= counts["next_id"] < 2**64:
    raise ValueError(f"ledger_num_teachers and ledger_next_id must be in range; got {counts}")
  if not consistent and counts["next_id"] < counts["num_charged"]:
    # Each charged query used its own id below next_id: a smaller next_id would hand an id
    # (its noise draw fold_in(key, id)) to a second query.
    raise ValueError("ledger_next_id must be >= ledger_num_charged without consistent "
                     f"answers (every charged query used an id below it); got {counts}")
  for key, value in (("ledger_epsilon", state.epsilon),
                     ("ledger_private_epsilon", state.private_epsilon)):
    recorded = _record_scalar(record, key, "f")
    if not (np.isclose(float(value), recorded, rtol=1e-9, atol=0.0)
            or float(value) == recorded == float("inf")):
      if key in PRIVATE_RECORD_KEYS:  # a data-dependent ε: its values are not shown
        raise ValueError(f"{key} is not the ε of its cost: the record is corrupted")
      raise ValueError(f"{key} {recorded} is not the ε of its cost ({float(value)}): the "
                       "record is corrupted")
  if _record_scalar(record, "ledger_generation", "iu") < 0:
    raise ValueError("ledger_generation must be >= 0")
  labels = np.asarray(record["ledger_cache_labels"])
  status = np.asarray(record["ledger_cache_status"])
  if (ids.ndim != 1 or ids.dtype.kind not in "iu" or labels.shape != ids.shape
      or status.shape != ids.shape or labels.dtype.kind not in "iu"
      or status.dtype.kind not in "iu"
      # A negative id would wrap to a large uint64 key; a label outside int32 would wrap.
      or (ids.size and ids.min() < 0) or np.any(labels != labels.astype(np.int32))
      # (neighbours compared: uint64 differences wrap)
      or np.any(ids.astype(np.uint64)[1:] <= ids.astype(np.uint64)[:-1])
      or (consistent and size != counts["num_charged"]) or (not consistent and size)
      or not np.all(np.isin(status, [int(Status.ANSWERED), int(Status.NOT_CONFIDENT)]))
      or np.any((labels < 0) != (status != int(Status.ANSWERED)))):
    raise ValueError("ledger_cache_ids, ledger_cache_labels and ledger_cache_status must be "
                     "one sorted record of the charged ids (consistent mode) with their "
                     f"outcomes; got ids {ids}, labels {labels}, status {status}")
  pad = state.cache.ids.shape[0] - size
  cache = AnswerCache(
      ids=np.concatenate([ids.astype(np.uint64), np.full(pad, _ID_SENTINEL)]),
      labels=np.concatenate([labels, np.full(pad, mechanisms.NOT_ANSWERED)]).astype(np.int32),
      status=np.concatenate([status, np.full(pad, int(Status.REFUSED_BUDGET))]).astype(np.int32),
      size=np.int32(size))
  return state._replace(cache=cache, num_charged=np.int32(counts["num_charged"]),
                        num_answered=np.int32(counts["num_answered"]),
                        num_teachers=np.int32(counts["num_teachers"]),
                        next_id=np.uint64(counts["next_id"]))
