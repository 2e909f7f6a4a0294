"""A privacy-budget ledger that answers teacher queries only while ε ≤ ε_max.

Functional core: :class:`LedgerState` is a pytree holding the accountant (the
composed data-independent privacy cost, :class:`pate_jax.accounting.Accountant`), the
ε it gives, the private data-dependent accountant, the
counts of distinct queries charged and answered, and the consistent-answer cache
(:class:`AnswerCache`: a sorted record of the query ids already charged with their
outcome); :func:`answer_batch` maps ``(state, key, votes[B, C], query ids[B]) ->
(state', labels[B], status[B])`` in one jit-compiled call. The mechanism is looked up
in :mod:`pate_jax.mechanisms` (its ``answer`` and ``cost``); the mechanism, the
accountant's kind and conversion and the mode flags (``data_dependent``,
``consistent``) are static, so each compiled step computes one accounting.
:class:`PrivateAggregator` wraps it for host code: it holds the key, δ, ε_max, the
orders and the mechanism, pads batches to a fixed chunk size (one compilation per
mechanism, mode, class count, number of orders and cache capacity) and grows the
cache when needed.

Accounting. Each mechanism's ``cost`` composes in its accountant: GNMax and
Confident-GNMax in Rényi-DP at ``orders`` (Papernot et al. 2018, Theorem 6,
Proposition 10), ``ε = rdp_to_epsilon(Σ rdp, orders, δ)``; LNMax in the 2017 moments
accountant's log-moments ``α(l)`` at ``l = 1..max_moment``,
``ε = min_l (Σ α(l) + log 1/δ) / l`` (Papernot et al. 2017, Theorems 1-3). For
Confident-GNMax every processed query pays the threshold check and the answered
ones also pay GNMax at σ (the realised cost, as in the 2018 paper's analysis).

Answering a batch. Queries are considered in order; query ``i`` is *processed*
iff every earlier query in the batch was, and

    ε(bound_before_i + worst_i) ≤ ε_max  and  ε(bound_before_i + realised_i) ≤ ε_max,

where the bound is the data-independent cost (λ/σ², λ/(2σ_T²), or the 2017 bound
with q = 1), ``worst_i`` is query ``i``'s bound if answered (for Confident-GNMax:
threshold + GNMax) and ``realised_i`` its bound given the released outcome. The rest
of the batch is refused with status ``REFUSED_BUDGET``. The state is replaced by the
cumulative cost *at the last processed query*, the very value checked against ε_max,
so the ledger never exceeds its budget (not even by rounding) and never records a
cost that was not paid, nor drops one that was.

Refusals are data-independent. Whether a query is processed depends only on the
settings, on how many queries were processed before, and on released outcomes
(Confident-GNMax's answered / not answered), never on the votes themselves: a
refusal decided on the data-dependent cost would tell, for free, whether that cost
exceeds what is left of the budget (one bit of the private votes per refusal). The
worst case (answered) is checked first, so a refusal does not reveal the unreleased
threshold outcome either.

Data-dependent accounting (private). With ``data_dependent=True`` the ledger also
composes the data-dependent per-query costs (Papernot et al. 2017, Section 3; 2018,
Theorem 6) in its ``private_accountant``: ``private_epsilon`` is the papers'
data-dependent ε, a function of the private votes. It never decides anything and may
not be published as it is (it is for the data owner only); publish instead the
data-independent ``epsilon`` or a smooth-sensitivity release of the private one
(:mod:`pate_jax.budget`), whose own cost is charged to the ledger with :func:`charge`
(the ``extra_cost`` of the state). With ``data_dependent=False`` the private
accountant equals the bound.

Budget integrity. The budget belongs to the private data, not to a process or an
object, so every way of spending it twice is closed:

* the state records everything its accounting depends on: the mechanism and its
  parameters, δ, ε_max, the mode flags, the orders and conversion (in its accountant),
  the number of teachers ``T`` (set by the first batch: every row of every later
  batch must sum to it) and, without consistent answers, the next fresh noise id.
  :func:`answer_batch` takes its settings from the state; an argument that disagrees
  with the state is refused (``ValueError`` naming it), as is a state whose cost is
  negative or not finite. Query ids without consistency must be fresh (strictly
  increasing, above every id used before): one noise draw is never used twice.
* :class:`PrivateAggregator` serialises ``answer`` with a lock (threads share one
  budget), refuses ``copy``, ``deepcopy`` and ``pickle`` (a copy would duplicate the
  unspent budget: share the object instead, or persist it), and its ``state`` is
  read-only.
* :func:`ledger_record` / :func:`restore_ledger` turn the state into plain arrays
  and back (validated: a record whose ε does not match its cost is refused), and
  ``PrivateAggregator(..., ledger=record)`` resumes a persisted ledger, refusing one
  whose settings differ from the arguments. The budget of a set of teachers is kept
  with their votes and spent through :mod:`pate_jax.budget`.

* a ledger has a *lineage* (a random id drawn when it is created) and a *generation*
  (how many times it has spent): :meth:`PrivateAggregator.ledger_record` writes both,
  and the aggregators of one process keep, per lineage, the newest generation spent.
  An aggregator resumed from a record older than that, or whose lineage another
  aggregator has spent from since, is refused (:class:`StaleLedgerError`): two
  aggregators built from one record cannot each spend the budget. Across processes the
  budget of a set of teachers lives in one file next to their votes
  (:mod:`pate_jax.budget`).

The functional API cannot stop a caller from keeping an old state and answering from
it again (a pure function has no memory); the guarantee holds for a chain of states
each returned by :func:`answer_batch`. :class:`PrivateAggregator` holds that chain.

Consistent answers (``consistent=True``). The noise of a query comes from
``fold_in(key, query_id)``, with ``query_id`` a stable hash of its input
(:func:`pate_jax.aggregation.hash_query_ids`). A query whose id was already
charged returns its recorded label and status and costs nothing (it is
post-processing of an answer already paid for); the ledger counts distinct
queries. Without consistency every submitted query gets the next sequence
number as its id, so answers still do not depend on how queries are batched.
"""

from __future__ import annotations

import dataclasses
import enum
import threading
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks as v
from pate_jax import accounting as acc
from pate_jax import aggregation
from pate_jax import mechanisms
from pate_jax._compile import light_jit

__all__ = [
    "Status", "AnswerCache", "LedgerState", "BatchResult", "init_ledger", "answer_batch",
    "charge", "ledger_epsilon", "ledger_record", "restore_ledger", "RECORD_KEYS",
    "PrivateAggregator", "StaleLedgerError", "DEFAULT_ORDERS",
]

# Rényi orders used when none are given: the accountants' default grid.
DEFAULT_ORDERS = np.asarray(acc.DEFAULT_ORDERS, dtype=np.float64)

_ID_SENTINEL = np.uint64(np.iinfo(np.uint64).max)


class StaleLedgerError(ValueError):
  """A ledger copy that another aggregator has spent from since (or a newer copy has)."""


class Status(enum.IntEnum):
  """Outcome of one query."""
  ANSWERED = 0          # A label was released.
  NOT_CONFIDENT = 1     # Confident-GNMax threshold not passed (charged, no label).
  REFUSED_BUDGET = 2    # Not processed: answering could exceed ε_max. Costs nothing.
  REFUSED_CAPACITY = 3  # Not processed: the id record is full (functional API only).


class AnswerCache(NamedTuple):
  """The consistent-answer cache: queries already charged, keyed by id.

  Attributes:
    ids: uint64 ``[N]`` ids of the charged queries, sorted, padded with the max value
      (``N`` is the capacity; 0 without consistent answers).
    labels: int32 ``[N]`` label of each recorded id (-1 if not answered).
    status: int32 ``[N]`` :class:`Status` of each recorded id.
    size: int32 ``[]`` number of recorded ids.
  """
  ids: jax.Array
  labels: jax.Array
  status: jax.Array
  size: jax.Array


@dataclasses.dataclass(frozen=True)
class LedgerState:
  """Pytree state of the ledger: the spent budget and every setting it depends on.

  Attributes:
    accountant: the composed data-independent cost, the budget's
      (:class:`pate_jax.accounting.Accountant`: float64 ``cost[K]`` at ``orders[K]``,
      with its conversion; LNMax: summed log-moments at the moment orders). It includes
      ``extra_cost``.
    epsilon: float64 ``[]`` ε of the accountant at ``delta`` (as checked against
      ε_max): publishable.
    best_order: float64 ``[]`` the order (moment) attaining ``epsilon``.
    private_accountant: the composed cost of the answers under the ledger's
      accounting (data-dependent when ``data_dependent``): private, for the data owner.
    private_epsilon: float64 ``[]`` its ε at ``delta`` (private).
    private_best_order: float64 ``[]`` the order attaining it (private).
    extra_cost: float64 ``[K]`` charges other than answers (:func:`charge`: the
      smooth-sensitivity releases of the private ε), already in ``accountant``.
    num_charged: int32 ``[]`` distinct queries processed (answered or not confident).
    num_answered: int32 ``[]`` distinct queries answered with a label.
    cache: the consistent-answer cache (capacity 0 without consistent answers).
    delta: float64 ``[]`` δ of the guarantee.
    epsilon_max: float64 ``[]`` the budget ε_max (``inf``: none).
    params: the mechanism's parameters, float64 ``[]`` each.
    num_teachers: int32 ``[]`` the row total ``T`` of every batch (0 before the first).
    next_id: uint64 ``[]`` without consistent answers, the smallest id not used yet.
    mechanism: name in :data:`pate_jax.mechanisms.REGISTRY` (static).
    data_dependent: data-dependent per-query costs (static).
    consistent: consistent answers (static).
  """
  accountant: acc.Accountant
  epsilon: Any
  best_order: Any
  private_accountant: acc.Accountant
  private_epsilon: Any
  private_best_order: Any
  extra_cost: Any
  num_charged: Any
  num_answered: Any
  cache: AnswerCache
  delta: Any
  epsilon_max: Any
  params: dict[str, Any]
  num_teachers: Any
  next_id: Any
  mechanism: str = "gnmax"
  data_dependent: bool = True
  consistent: bool = False

  def _replace(self, **changes) -> "LedgerState":
    return dataclasses.replace(self, **changes)

  @property
  def cost(self) -> jax.Array:
    """float64 ``[K]``: the accountant's composed cost."""
    return self.accountant.cost

  @property
  def ids(self) -> jax.Array:
    return self.cache.ids

  @property
  def size(self) -> jax.Array:
    return self.cache.size


jax.tree_util.register_dataclass(
    LedgerState,
    data_fields=["accountant", "epsilon", "best_order", "private_accountant",
                 "private_epsilon", "private_best_order", "extra_cost", "num_charged",
                 "num_answered", "cache", "delta", "epsilon_max", "params", "num_teachers",
                 "next_id"],
    meta_fields=["mechanism", "data_dependent", "consistent"])


class BatchResult(NamedTuple):
  """Answers to one batch: ``labels[B]`` (int32, -1 unless ANSWERED), ``status[B]``
  (int32 :class:`Status`), ``repeated[B]`` (bool: answered from the record, free)."""
  labels: Any
  status: Any
  repeated: Any


def _id_keys(ids, xp: Any = jnp):
  """uint32 ``[B]`` or ``[B, W<=2]`` ids -> uint64 ``[B]`` (big-endian word order); ``xp``
  is ``jnp`` (in the compiled step) or ``np`` (host checks)."""
  ids = ids if ids.ndim == 2 else ids[:, None]
  out = xp.zeros(ids.shape[:1], xp.uint64)
  for w in range(ids.shape[1]):
    out = (out << xp.uint64(32)) | ids[:, w].astype(xp.uint64)
  return out


def _empty_cache(capacity: int) -> AnswerCache:
  """An empty cache of numpy arrays (host leaves: no device op per ledger)."""
  return AnswerCache(ids=np.full((capacity,), _ID_SENTINEL, np.uint64),
                     labels=np.full((capacity,), mechanisms.NOT_ANSWERED, np.int32),
                     status=np.full((capacity,), int(Status.REFUSED_BUDGET), np.int32),
                     size=np.int32(0))


# ---------------------------------------------------------------------------
# Functional core.


def init_ledger(cost: Any = None, *, orders: Any, delta: float, mechanism: str,
                params: dict[str, Any], epsilon_max: float, data_dependent: bool = True,
                consistent: bool = False, conversion: str = "improved",
                capacity: int = 0, private_cost: Any = None,
                extra_cost: Any = None) -> LedgerState:
  """An empty ledger (or one starting from composed costs) and its settings.

  Args:
    cost: ``[K]`` composed data-independent cost to start from, ``extra_cost``
      included (``None``: zeros, a fresh ledger).
    private_cost: ``[K]`` composed cost of the answers under the ledger's accounting
      (``None``: zeros).
    extra_cost: ``[K]`` the part of ``cost`` charged by :func:`charge` (``None``: zeros).
    orders: ``[K]`` RDP orders (LNMax: moment orders ``l``).
    delta: δ in (0, 1).
    mechanism: a name in :data:`pate_jax.mechanisms.REGISTRY` (selects the accountant).
    params: the mechanism's parameters, e.g. ``{"sigma": 40.0}``.
    epsilon_max: the budget ε_max > 0 (``inf`` for none).
    data_dependent: data-dependent per-query costs (module docstring).
    consistent: consistent answers (needs ``capacity >= 1``).
    conversion: RDP → (ε, δ) conversion, ``"improved"`` or ``"classic"``.
    capacity: size ``N`` of the consistent-answer cache (0 without consistent answers).
  """
  m = mechanisms.get(mechanism)
  params = mechanisms.check_params(m, params)
  delta = v.delta(delta)
  epsilon_max = v.budget(epsilon_max)
  data_dependent = v.boolean(data_dependent, "data_dependent")
  consistent = v.boolean(consistent, "consistent")
  capacity = v.positive_int(capacity, "capacity", minimum=1 if consistent else 0)
  accountant = _host_accountant(m, orders, conversion, cost)
  private = _host_accountant(m, orders, conversion, private_cost)
  extra = np.zeros_like(accountant.cost) if extra_cost is None else np.asarray(extra_cost,
                                                                               np.float64)
  if extra.shape != accountant.cost.shape:
    raise ValueError(f"extra_cost must have one value per order {accountant.cost.shape}; got "
                     f"shape {extra.shape}")
  eps, best = accountant.epsilon(delta)
  private_eps, private_best = private.epsilon(delta)
  # Host (numpy) leaves: float64 and uint64 stay exact outside 64-bit mode.
  return LedgerState(
      accountant=accountant, epsilon=eps, best_order=best, private_accountant=private,
      private_epsilon=private_eps, private_best_order=private_best, extra_cost=extra,
      num_charged=np.int32(0),
      num_answered=np.int32(0), cache=_empty_cache(capacity if consistent else 0),
      delta=np.float64(delta), epsilon_max=np.float64(epsilon_max),
      params={k: np.float64(p) for k, p in params.items()}, num_teachers=np.int32(0),
      next_id=np.uint64(0), mechanism=m.name, data_dependent=data_dependent,
      consistent=consistent)


def _host_accountant(m: mechanisms.Mechanism, orders: Any, conversion: str,
                     cost: Any) -> acc.Accountant:
  """An accountant with float64 numpy leaves (a cost may be ``+inf`` at some orders: a
  smooth-sensitivity release is RDP only below ``1/(2β)``)."""
  cost = None if cost is None else np.asarray(cost, np.float64)
  accountant = acc.make_accountant(m.accountant, orders, conversion, cost)
  return dataclasses.replace(accountant, cost=np.asarray(accountant.cost, np.float64),
                             orders=np.asarray(accountant.orders, np.float64))


def ledger_epsilon(state: LedgerState) -> tuple[float, float]:
  """``(ε, best order)`` of the data-independent bound recorded in ``state``
  (publishable)."""
  return float(state.epsilon), float(state.best_order)


def charge(state: LedgerState, cost: Any) -> tuple[LedgerState, bool]:
  """Charges a data-independent cost curve ``cost[K]`` (e.g. the RDP of a smooth-
  sensitivity release of the private ε, ``+inf`` at orders where it is not RDP) to the
  budget, if ``ε(bound + cost) <= ε_max``.

  Returns:
    ``(new state, True)``, or ``(state, False)`` where the charge would exceed ε_max
    (nothing is charged).
  """
  state = _check_state(state)
  cost = np.asarray(cost, np.float64)
  if cost.shape != np.shape(state.accountant.cost) or np.any(np.isnan(cost) | (cost < 0)):
    raise ValueError(f"cost must be a non-negative curve of shape "
                     f"{np.shape(state.accountant.cost)} (+inf allowed); got {cost!r}")
  total = np.asarray(state.accountant.cost, np.float64) + cost
  accountant = dataclasses.replace(state.accountant, cost=total)
  eps, best = accountant.epsilon(float(state.delta))
  if not float(eps) <= float(state.epsilon_max):
    return state, False
  return state._replace(accountant=accountant, epsilon=np.float64(eps),
                        best_order=np.float64(best),
                        extra_cost=np.asarray(state.extra_cost, np.float64) + cost), True


# ---------------------------------------------------------------------------
# Persistence: the state as plain arrays (the ledger_* entries of labels.npz).

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
    if np.any(np.isnan(cost) | (cost < 0)):
      raise ValueError(f"{key} must be non-negative (+inf allowed); got {cost}")
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
  for key, value in (("ledger_epsilon", state.epsilon),
                     ("ledger_private_epsilon", state.private_epsilon)):
    recorded = _record_scalar(record, key, "f")
    if not (np.isclose(float(value), recorded, rtol=1e-9, atol=0.0)
            or float(value) == recorded == float("inf")):
      raise ValueError(f"{key} {recorded} is not the ε of its cost ({float(value)}): the "
                       "record is corrupted")
  if _record_scalar(record, "ledger_generation", "iu") < 0:
    raise ValueError("ledger_generation must be >= 0")
  labels = np.asarray(record["ledger_cache_labels"])
  status = np.asarray(record["ledger_cache_status"])
  if (ids.ndim != 1 or ids.dtype.kind not in "iu" or labels.shape != ids.shape
      or status.shape != ids.shape or np.any(np.diff(ids.astype(np.uint64)) <= 0)
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


# ---------------------------------------------------------------------------
# The compiled step.


def _lookup(cache, ids, valid):
  """Consistent mode: ``(found[B], pos[B], first[B])``: in the cache (at ``pos``), and the
  first occurrence of each id in the batch."""
  capacity = cache.ids.shape[0]
  qkey = _id_keys(ids)
  pos = jnp.clip(jnp.searchsorted(cache.ids, qkey), 0, capacity - 1)
  found = valid & (pos < cache.size) & (cache.ids[pos] == qkey)
  same = (qkey[:, None] == qkey[None, :]) & valid[None, :]
  return found, pos, jnp.argmax(same, axis=1)


def _record(cache, ids, record, labels, status):
  """Consistent mode: the cache with the ``record``-ed ids added, kept sorted."""
  capacity = cache.ids.shape[0]
  all_ids = jnp.concatenate([cache.ids, jnp.where(record, _id_keys(ids), _ID_SENTINEL)])
  is_pad = jnp.concatenate([jnp.arange(capacity) >= cache.size, ~record])
  order = jnp.lexsort((all_ids, is_pad))[:capacity]
  return AnswerCache(ids=all_ids[order],
                     labels=jnp.concatenate([cache.labels, labels])[order],
                     status=jnp.concatenate([cache.status, status])[order],
                     size=cache.size + record.sum(dtype=jnp.int32))


def _answer_core_impl(state, key, votes, ids, valid, num_teachers):
  """One padded batch (see :func:`answer_batch`); the settings come from ``state`` (its
  mechanism and mode flags are pytree metadata: static)."""
  m = mechanisms.get(state.mechanism)
  params, delta, epsilon_max = state.params, state.delta, state.epsilon_max
  data_dependent, consistent = state.data_dependent, state.consistent
  b = votes.shape[0]
  arange = jnp.arange(b)
  labels, answered = m.answer(key, votes, ids, params)
  if consistent:
    found, pos, first = _lookup(state.cache, ids, valid)
  else:
    found, first = jnp.zeros(b, bool), arange
  fresh = valid & ~found & (first == arange)

  accountant = state.accountant
  orders = accountant.orders
  # The budget is checked on the data-independent bound only (module docstring).
  worst = m.cost(votes, jnp.ones(b, bool), params, orders, False)
  realised = m.cost(votes, answered, params, orders, False)
  private = m.cost(votes, answered, params, orders, True) if data_dependent else realised
  worst = jnp.where(fresh[:, None], worst, 0.0)
  realised = jnp.where(fresh[:, None], realised, 0.0)
  private = jnp.where(fresh[:, None], private, 0.0)
  inclusive = accountant.cost + jnp.cumsum(realised, axis=0)                 # [B, K]
  exclusive = jnp.concatenate([accountant.cost[None], inclusive[:-1]], axis=0)
  eps_fn = jax.vmap(lambda c: dataclasses.replace(accountant, cost=c).epsilon(delta))
  eps_worst, _ = eps_fn(exclusive + worst)
  eps_after, best_after = eps_fn(inclusive)
  ok = (eps_worst <= epsilon_max) & (eps_after <= epsilon_max)  # NaN -> refused
  room = (state.cache.size + jnp.cumsum(fresh) <= state.cache.ids.shape[0]) if consistent else True
  ok_all = jnp.where(fresh, ok & room, True)
  processed = valid & (jnp.cumprod(ok_all.astype(jnp.int32)) > 0)
  stop_capacity = fresh & ok & ~room

  n_proc = processed.sum()
  last = jnp.maximum(n_proc - 1, 0)
  charged = processed & fresh
  any_charged = charged.any()
  private_cost = state.private_accountant.cost + jnp.sum(
      jnp.where(charged[:, None], private, 0.0), axis=0)
  private_accountant = dataclasses.replace(state.private_accountant, cost=private_cost)
  private_eps, private_best = private_accountant.epsilon(delta)
  # The new cost is the cumulative sum at the last processed query: exactly the
  # value whose ε was checked against ε_max.
  new_state = state._replace(
      accountant=dataclasses.replace(
          accountant, cost=jnp.where(n_proc > 0, inclusive[last], accountant.cost)),
      epsilon=jnp.where(any_charged, eps_after[last], state.epsilon),
      best_order=jnp.where(any_charged, best_after[last], state.best_order),
      private_accountant=private_accountant,
      private_epsilon=jnp.where(any_charged, private_eps, state.private_epsilon),
      private_best_order=jnp.where(any_charged, private_best, state.private_best_order),
      num_charged=state.num_charged + charged.sum(dtype=jnp.int32),
      num_answered=state.num_answered + (charged & answered).sum(dtype=jnp.int32),
      num_teachers=jnp.where(valid.any() & (state.num_teachers == 0), num_teachers,
                             state.num_teachers).astype(jnp.int32))
  if not consistent:  # Ids are fresh and increasing (checked): the next one is above the last.
    last = jnp.max(jnp.where(valid, _id_keys(ids), jnp.uint64(0)))
    new_state = new_state._replace(
        next_id=jnp.where(valid.any(), last + jnp.uint64(1), state.next_id))

  fresh_status = jnp.where(answered, int(Status.ANSWERED),
                           int(Status.NOT_CONFIDENT)).astype(jnp.int32)
  out_status = fresh_status[first]
  out_labels = labels[first]
  if consistent:
    out_status = jnp.where(found, state.cache.status[pos], out_status)
    out_labels = jnp.where(found, state.cache.labels[pos], out_labels)
    new_state = new_state._replace(cache=_record(
        state.cache, ids, charged, jnp.where(answered, labels, mechanisms.NOT_ANSWERED),
        fresh_status))
  # Why the first unprocessed query stopped the batch.
  first_refused = jnp.argmin(jnp.where(valid, processed, True))
  refusal = jnp.where(stop_capacity[first_refused], int(Status.REFUSED_CAPACITY),
                      int(Status.REFUSED_BUDGET))
  out_status = jnp.where(processed, out_status, refusal).astype(jnp.int32)
  out_labels = jnp.where(out_status == int(Status.ANSWERED), out_labels,
                         mechanisms.NOT_ANSWERED)
  repeated = processed & ~fresh
  return new_state, BatchResult(out_labels.astype(jnp.int32), out_status, repeated)


_answer_core = light_jit(_answer_core_impl, level=0)


def _step(state, key, votes, ids, valid, num_teachers):
  with jax.enable_x64(True):
    return _answer_core(state, key, votes, ids, valid, np.int32(num_teachers))


def _checked_votes(state: LedgerState, votes: Any, valid: Any = None) -> tuple[np.ndarray, int]:
  """Validated int32 host counts of a batch and their row total ``T``.

  Every real row (``valid``) sums to one ``T`` (at most :data:`pate_jax._checks.
  MAX_NOISY_TOTAL`, so that counts are exact in the float32 noise arithmetic), and
  ``T`` is the ledger's number of teachers once the ledger has one.
  """
  votes = v.votes(votes, max_total=v.MAX_NOISY_TOTAL)
  votes = np.asarray(votes).astype(np.int32)  # Exact: the totals fit (checked above).
  real = votes if valid is None else votes[valid]
  v.check_equal_totals(real)
  total = int(real[0].sum()) if real.shape[0] else 0
  recorded = int(state.num_teachers)
  if real.shape[0] and recorded and total != recorded:
    raise ValueError(f"votes: every row must sum to the ledger's number of teachers "
                     f"{recorded}; got rows summing to {total}")
  return votes, total


def _check_fresh_ids(state: LedgerState, ids: np.ndarray, valid: np.ndarray) -> None:
  """Without consistent answers, ids must be strictly increasing and unused: one noise
  draw (``fold_in(key, id)``) is never used for two queries."""
  keys = _id_keys(ids, np)[valid]
  nxt = int(np.asarray(state.next_id))
  if keys.size and (int(keys[0]) < nxt or np.any(np.diff(keys) <= 0)
                    or keys[-1] == _ID_SENTINEL):  # (The largest id would wrap next_id.)
    raise ValueError("query_ids must be fresh without consistent answers (strictly increasing "
                     f"and >= the ledger's next id {nxt}: a reused id reuses its noise); got "
                     f"{ids[valid].tolist()}")


def _check_state(state: Any) -> LedgerState:
  """A :class:`LedgerState` whose spent budget is a valid cost (not negative, not NaN)."""
  if not isinstance(state, LedgerState):
    raise ValueError(f"state must be a LedgerState (from init_ledger or answer_batch); got "
                     f"{type(state).__name__}")
  for name, cost in (("accountant", state.cost), ("private_accountant",
                                                   state.private_accountant.cost)):
    cost = np.asarray(cost, np.float64)
    if np.any(np.isnan(cost) | (cost < 0)):
      raise ValueError(f"state: the {name}'s cost must be non-negative (+inf allowed); got "
                       f"{cost}")
  if int(state.num_charged) < 0 or int(state.num_answered) < 0 or int(state.num_teachers) < 0:
    raise ValueError("state: counters must be non-negative; got num_charged "
                     f"{int(state.num_charged)}, num_answered {int(state.num_answered)}, "
                     f"num_teachers {int(state.num_teachers)}")
  return state


def _settings(state: LedgerState) -> dict[str, Any]:
  """The settings a state's budget was spent under, as plain Python values."""
  return {"mechanism": state.mechanism,
          "params": {k: float(p) for k, p in state.params.items()},
          "delta": float(state.delta), "epsilon_max": float(state.epsilon_max),
          "data_dependent": state.data_dependent, "consistent": state.consistent,
          "conversion": state.accountant.conversion,
          "orders": tuple(np.asarray(state.accountant.orders).tolist())}


def _check_settings(state: LedgerState, given: dict[str, Any]) -> None:
  """Each given setting (not ``None``) must be the state's (``ValueError`` naming it)."""
  m = mechanisms.get(state.mechanism)
  recorded = _settings(state)
  for name, value in given.items():
    if value is None or (name == "conversion" and m.accountant != "rdp"):
      continue
    if name == "orders":
      value = tuple(np.asarray(value, np.float64).reshape(-1).tolist())
    elif name in ("data_dependent", "consistent"):
      value = v.boolean(value, name)
    elif name == "params":
      other = mechanisms.get(given.get("mechanism") or state.mechanism)
      value = {k: float(p) for k, p in mechanisms.check_params(other, value).items()}
    elif name in ("delta", "epsilon_max"):
      value = float(v.delta(value) if name == "delta" else v.budget(value))
    elif name == "mechanism":
      if mechanisms.get(value).accountant != m.accountant:
        raise ValueError(f"mechanism {value!r} composes in a "
                         f"{mechanisms.get(value).accountant!r} accountant; got a ledger with a "
                         f"{m.accountant!r} one")
    if value != recorded[name]:
      raise ValueError(f"{name} must be the ledger's {recorded[name]!r}; got {value!r} (the "
                       "state records the settings its budget was spent under)")


def answer_batch(state: LedgerState, key: jax.Array, votes: Any, query_ids: Any,
                 valid: Any = None, *, mechanism: str | None = None,
                 params: dict[str, Any] | None = None, orders: Any = None,
                 delta: float | None = None, epsilon_max: float | None = None,
                 data_dependent: bool | None = None, consistent: bool | None = None,
                 conversion: str | None = None) -> tuple[LedgerState, BatchResult]:
  """Answers the longest prefix of a batch that keeps ε ≤ ε_max (see module docstring).

  The mechanism, its parameters, δ, ε_max, the orders, the conversion and the mode
  flags are the state's (:func:`init_ledger`); the keyword arguments are optional
  checks: each one given must equal the state's, else ``ValueError`` naming it.

  Args:
    state: the ledger (from :func:`init_ledger` or a previous call).
    key: PRNG key of the aggregator; query ``i`` uses ``fold_in(key, query_ids[i])``.
    votes: int ``[B, C]`` vote histograms; every real row sums to the ledger's number
      of teachers ``T`` (set by the first batch), ``T <= 2**24``.
    query_ids: uint32 ``[B]`` or ``[B, W]`` (``W <= 2``) query ids; keep one width
      per ledger (the record keys ``[id]`` and ``[0, id]`` alike). Without consistent
      answers the ids of the real rows must be fresh: strictly increasing and at least
      the state's ``next_id`` (a reused id would reuse its noise draw).
    valid: bool ``[B]``, False for padding rows (which must come last).
    mechanism, params, orders, delta, epsilon_max, data_dependent, consistent,
      conversion: optional; each must be the state's.

  Returns:
    ``(new_state, BatchResult)``. In consistent mode, queries beyond the cache
    capacity get ``REFUSED_CAPACITY``.
  """
  state = _check_state(state)
  _check_settings(state, {"mechanism": mechanism, "params": params, "orders": orders,
                          "delta": delta, "epsilon_max": epsilon_max,
                          "data_dependent": data_dependent, "consistent": consistent,
                          "conversion": conversion})
  b = np.shape(votes)[0] if np.ndim(votes) else 0
  valid = np.ones(b, bool) if valid is None else np.asarray(valid, bool)
  if valid.shape != (b,):
    raise ValueError(f"valid must have shape [{b}]; got shape {valid.shape}")
  if np.any(valid[1:] & ~valid[:-1]):
    raise ValueError(f"valid must be a prefix mask (padding rows last); got {valid.tolist()}")
  votes, total = _checked_votes(state, votes, valid)
  ids = v.query_ids(query_ids, votes.shape[0], max_words=2)
  if not state.consistent:
    _check_fresh_ids(state, ids, valid)
  return _step(state, key, votes, ids, valid, total)


# ---------------------------------------------------------------------------
# Stateful wrapper for host code.

# lineage -> the newest generation spent by an aggregator of this process.
_NEWEST: dict[str, int] = {}
_NEWEST_LOCK = threading.Lock()


def _new_lineage() -> str:
  import secrets  # pylint: disable=g-import-not-at-top
  return secrets.token_hex(16)


class PrivateAggregator:
  """Answers teacher queries with a noisy aggregator until the budget ε_max is spent.

  Example::

    agg = PrivateAggregator(jax.random.key(0), "gnmax", sigma=40.0,
                            epsilon_max=2.0, delta=1e-5)
    out = agg.answer(votes)           # BatchResult of numpy arrays
    agg.epsilon, agg.num_answered

  Batches are cut into chunks of ``chunk_size`` rows, padded to that size, so that
  every call reuses one compiled function per (mechanism, mode, number of classes,
  cache capacity). Once a query is refused, every later query of the batch is
  refused too (the answered set is always a prefix of what was asked).

  One budget, one object. ``answer`` holds a lock, so threads sharing an aggregator
  spend one budget. The aggregator cannot be copied or pickled (``TypeError``): a
  copy would duplicate the unspent budget; share the object, or persist its ledger
  with :meth:`ledger_record` and resume it with ``ledger=``. A record carries its
  lineage and generation: resuming a record that is older than what an aggregator of
  this process has spent from its lineage, or spending from an aggregator whose
  lineage another one has spent from since, raises :class:`StaleLedgerError`. Its
  ``state`` is read-only.

  Publishable: ``epsilon`` (the data-independent bound, including :meth:`charge`-d
  releases), the counters, the settings. Private (for the data owner only):
  ``private_epsilon`` and ``private_best_order``.

  Args:
    key: PRNG key; query ``i`` is answered with noise from ``fold_in(key, id_i)``.
    mechanism: a name in :data:`pate_jax.mechanisms.REGISTRY`: ``"lnmax"`` (needs
      ``gamma``), ``"gnmax"`` (``sigma``) or ``"confident_gnmax"`` (``threshold``,
      ``sigma_threshold``, ``sigma``).
    epsilon_max: budget ε_max > 0 (``inf`` for none).
    delta: δ in (0, 1).
    orders: RDP orders (RDP mechanisms; default :data:`DEFAULT_ORDERS`).
    max_moment: moments-accountant mechanisms (LNMax): moments ``l = 1..max_moment``.
    data_dependent: data-dependent per-query costs (see module docstring).
    consistent: consistent answers keyed by query ids / hashed inputs.
    conversion: RDP → (ε, δ) conversion, ``"improved"`` or ``"classic"``.
    chunk_size: padded batch size of the compiled step.
    capacity: initial size of the answer cache (consistent mode; doubles as needed).
    ledger: a persisted ledger to resume (:meth:`ledger_record`, or the ``ledger_*``
      entries of ``labels.npz``): its spent budget, counters, number of teachers, next
      id and answer record carry over. Its settings (mechanism, parameters, δ, ε_max,
      orders, conversion, mode flags) must equal the other arguments, else
      ``ValueError`` naming the differing ones.
    **params: the mechanism's parameters (``gamma``, ``sigma``, ``threshold``,
      ``sigma_threshold``).
  """

  def __init__(self, key: jax.Array, mechanism: str, *, epsilon_max: float, delta: float,
               orders: Any = None, max_moment: int = 8, data_dependent: bool = True,
               consistent: bool = False, conversion: str = "improved",
               chunk_size: int = 256, capacity: int = 1024, ledger: Any = None,
               **params: float | None):
    m = mechanisms.get(mechanism)
    params = {k: p for k, p in params.items() if p is not None}
    for name in m.param_names:
      if name not in params:
        raise ValueError(f"{name} is required for mechanism {mechanism!r}; got None")
    for name, value in params.items():
      if name not in m.param_names:
        raise ValueError(f"{name} is not a parameter of mechanism {mechanism!r}; got {value!r}")
    if m.accountant == "moments":
      if orders is not None:
        raise ValueError("orders are not used by the moments accountant of "
                         f"{mechanism!r} (it uses l = 1..max_moment); got orders={orders!r}")
      orders = np.arange(1, v.positive_int(max_moment, "max_moment") + 1, dtype=np.float64)
    elif orders is None:
      orders = DEFAULT_ORDERS
    self.chunk_size = v.positive_int(chunk_size, "chunk_size")
    capacity = v.positive_int(capacity, "capacity")
    state = init_ledger(orders=orders, delta=delta, mechanism=mechanism, params=params,
                        epsilon_max=epsilon_max, data_dependent=data_dependent,
                        consistent=consistent, conversion=conversion, capacity=capacity)
    lineage, generation = _new_lineage(), 0
    if ledger is not None:
      state = _resume(state, ledger, capacity)
      lineage = str(ledger["ledger_lineage"]) or lineage
      generation = int(np.asarray(ledger["ledger_generation"]))
    with _NEWEST_LOCK:
      newest = _NEWEST.get(lineage, generation)
      if newest > generation:
        raise StaleLedgerError(
            f"ledger: this record is generation {generation} of its ledger, but generation "
            f"{newest} has been spent since: an old copy cannot spend the budget again")
      _NEWEST[lineage] = generation
    self._lineage, self._generation = lineage, generation
    self._lock = threading.RLock()
    self._state = state
    self._mechanism = m
    self._id_words: int | None = None
    self.key = key
    self.mechanism = m.name
    self.params = {name: float(state.params[name]) for name in m.param_names}
    self.epsilon_max = float(state.epsilon_max)
    self.delta = float(state.delta)
    self.data_dependent = state.data_dependent
    self.consistent = state.consistent
    self.conversion = conversion
    self.orders = np.asarray(state.accountant.orders)

  # -- one budget, one object
  def __copy__(self):
    raise TypeError("a PrivateAggregator cannot be copied: a copy would duplicate the privacy "
                    "budget; share the object (answer() is thread-safe) or persist "
                    "ledger_record() and resume it with ledger=")

  def __deepcopy__(self, memo):
    self.__copy__()

  def __reduce_ex__(self, protocol):  # pickle
    self.__copy__()

  @property
  def state(self) -> LedgerState:
    """The ledger's current state (read-only)."""
    return self._state

  # -- read-outs
  @property
  def epsilon(self) -> float:
    """ε spent so far (at δ): the data-independent bound the budget is spent on (publishable)."""
    return float(self._state.epsilon)

  @property
  def best_order(self) -> float:
    return float(self._state.best_order)

  @property
  def private_epsilon(self) -> float:
    """Private (for the data owner only): ε of the answers under the ledger's accounting
    (data-dependent when ``data_dependent``); a function of the votes."""
    return float(self._state.private_epsilon)

  @property
  def private_best_order(self) -> float:
    """Private: the order attaining :attr:`private_epsilon`."""
    return float(self._state.private_best_order)

  @property
  def lineage(self) -> str:
    return self._lineage

  @property
  def generation(self) -> int:
    return self._generation

  @property
  def num_answered(self) -> int:
    return int(self._state.num_answered)

  @property
  def num_charged(self) -> int:
    return int(self._state.num_charged)

  @property
  def accounting(self) -> str:
    """The accounting in words, e.g. ``"RDP (improved conversion), data-dependent"``."""
    kind = ("2017 moments" if self._state.accountant.kind == "moments"
            else f"RDP ({self._state.accountant.conversion} conversion)")
    return kind + (", data-independent budget; private data-dependent ε tracked"
                   if self.data_dependent else ", data-independent")

  def ledger_record(self) -> dict[str, Any]:
    """The ledger as plain arrays (:func:`ledger_record`), with its lineage and generation."""
    with self._lock:
      return ledger_record(self._state, lineage=self._lineage, generation=self._generation)

  def _spend(self, new_state: LedgerState) -> None:
    """Replaces the state after a spend; refuses if this aggregator's copy is stale."""
    with _NEWEST_LOCK:
      if _NEWEST.get(self._lineage, self._generation) != self._generation:
        raise StaleLedgerError(
            f"ledger: another aggregator has spent from this ledger since this one was "
            f"built (generation {_NEWEST[self._lineage]} > {self._generation}): its copy of "
            "the budget is stale")
      self._generation += 1
      _NEWEST[self._lineage] = self._generation
    self._state = new_state

  def charge(self, cost: Any) -> bool:
    """Charges a data-independent cost curve to the budget (:func:`charge`); returns
    whether it fitted (nothing is charged otherwise)."""
    with self._lock:
      state, ok = charge(self._state, cost)
      if ok:
        self._spend(state)
      return ok

  # -- answering
  def _ensure_capacity(self, needed: int) -> None:
    cap = self._state.cache.ids.shape[0]
    if needed <= cap:
      return
    with jax.enable_x64(True):
      pad = _empty_cache(max(needed, 2 * cap) - cap)
      c = self._state.cache
      self._state = self._state._replace(cache=c._replace(
          ids=jnp.concatenate([c.ids, pad.ids]), labels=jnp.concatenate([c.labels, pad.labels]),
          status=jnp.concatenate([c.status, pad.status])))

  def _query_ids(self, b: int, inputs: Any, query_ids: Any) -> np.ndarray:
    """Ids of the next ``b`` queries: hashed inputs or given ids (consistent mode), else
    the next fresh sequence numbers."""
    if not self.consistent:
      if inputs is not None or query_ids is not None:
        raise ValueError("inputs/query_ids are only used with consistent=True; got one "
                         "without it")
      start = int(np.asarray(self._state.next_id))
      if start + b > np.iinfo(np.uint32).max:
        raise ValueError(f"too many queries for 32-bit sequence ids: {start + b}")
      return np.arange(start, start + b, dtype=np.uint32)
    if (inputs is None) == (query_ids is None):
      raise ValueError("consistent mode needs exactly one of inputs or query_ids; got "
                       f"inputs={'None' if inputs is None else 'array'}, "
                       f"query_ids={'None' if query_ids is None else 'array'}")
    if inputs is not None:
      if np.shape(inputs)[:1] != (b,):
        raise ValueError(f"inputs must have {b} rows like votes; got shape {np.shape(inputs)}")
      ids = aggregation.hash_query_ids(inputs)
    else:
      ids = v.query_ids(query_ids, b, max_words=2)
    words = 1 if ids.ndim == 1 else ids.shape[1]
    if self._id_words is None:
      self._id_words = words
    elif words != self._id_words:
      raise ValueError(f"query_ids must keep the same width across calls: {self._id_words} "
                       f"word(s) before; got {words}")
    return ids

  def answer(self, votes: Any, *, inputs: Any = None, query_ids: Any = None) -> BatchResult:
    """Answers a batch of queries (in order) within the budget; thread-safe.

    Args:
      votes: int ``[B, C]`` teacher vote histograms of the queries; every row sums to
        the same number of teachers in every call.
      inputs: consistent mode: the query inputs ``[B, ...]``, hashed with
        :func:`pate_jax.aggregation.hash_query_ids` to give the query ids.
      query_ids: consistent mode: ids ``[B]`` or ``[B, 2]`` instead of ``inputs``.

    Returns:
      :class:`BatchResult` of numpy arrays ``labels[B]``, ``status[B]``,
      ``repeated[B]``.
    """
    with self._lock:  # Read, answer and write the state as one step.
      votes, total = _checked_votes(self._state, votes)
      b = votes.shape[0]
      ids = self._query_ids(b, inputs, query_ids)
      labels = np.full(b, mechanisms.NOT_ANSWERED, np.int32)
      status = np.full(b, int(Status.REFUSED_BUDGET), np.int32)
      repeated = np.zeros(b, bool)
      n = self.chunk_size
      for start in range(0, b, n):
        stop = min(start + n, b)
        m = stop - start
        chunk = np.zeros((n, votes.shape[1]), np.int32)  # One dtype and shape: one compile.
        chunk[:m] = votes[start:stop]
        chunk_ids = np.zeros((n,) + ids.shape[1:], np.uint32)
        chunk_ids[:m] = ids[start:stop]
        valid = np.arange(n) < m
        if self.consistent:
          self._ensure_capacity(int(self._state.cache.size) + n)
        # Inputs were validated above for the whole batch.
        new_state, out = _step(self._state, self.key, chunk, chunk_ids, valid, total)
        out = jax.device_get(out)
        if np.any(out.status[:m] < int(Status.REFUSED_BUDGET)):  # Something was processed.
          self._spend(new_state)
        labels[start:stop] = out.labels[:m]
        status[start:stop] = out.status[:m]
        repeated[start:stop] = out.repeated[:m]
        if np.any(status[start:stop] >= int(Status.REFUSED_BUDGET)):
          break  # The rest of the batch stays refused.
      return BatchResult(labels, status, repeated)


def _resume(fresh: LedgerState, record: Any, capacity: int) -> LedgerState:
  """The restored ``record`` if its settings are those of ``fresh`` (else ``ValueError``
  naming every differing setting)."""
  restored = restore_ledger(record, capacity)
  asked, recorded = _settings(fresh), _settings(restored)
  differ = {k: (asked[k], recorded[k]) for k in asked if asked[k] != recorded[k]}
  if differ:
    what = "; ".join(f"{k}: {new!r} asked, {old!r} recorded" for k, (new, old) in differ.items())
    raise ValueError(f"ledger: the persisted budget was spent under other settings ({what}); "
                     "resume with the recorded settings, or start a new budget on purpose "
                     "(e.g. a new work directory)")
  return restored
