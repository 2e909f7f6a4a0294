"""A privacy-budget ledger that answers teacher queries only while ε ≤ ε_max.

Functional core: :class:`LedgerState` is a pytree holding the accountant (the
composed privacy cost, :class:`pate_jax.accounting.Accountant`), the ε it gives, the
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

    ε(cost_before_i + worst_i) ≤ ε_max  and  ε(cost_before_i + realised_i) ≤ ε_max,

where ``worst_i`` is its cost if answered (for Confident-GNMax: threshold +
GNMax) and ``realised_i`` what it actually costs. Requiring the worst case keeps
the refusal decision independent of the mechanism's noise, so refusing reveals
nothing about the (unreleased) threshold outcome. The rest of the batch is
refused with status ``REFUSED_BUDGET``. The state is replaced by the cumulative
cost *at the last processed query*, the very value checked against ε_max, so the
ledger never exceeds its budget (not even by rounding) and never records a cost
that was not paid, nor drops one that was.

Data-dependent accounting. With ``data_dependent=True`` the per-query costs
depend on the vote histograms, which are computed from the private data. As in
Papernot et al. 2017 (Section 3.3) and 2018, the resulting ε is itself a
sensitive statistic; the papers report it without the extra noise (calibrated to
its smooth sensitivity) that would make it private, and so does this ledger.
Likewise the *point at which the ledger refuses* depends on the data, so the
guarantee "ε ≤ ε_max" is the papers' data-dependent one, not a DP statement about
the stopping time. Use ``data_dependent=False`` for a budget whose stopping rule
is data-independent (costs λ/σ², λ/(2σ_T²), or the 2017 bound with q = 1);
Confident-GNMax then still depends on the data only through its released
answered/not-answered outcomes.

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
    "ledger_epsilon", "PrivateAggregator", "DEFAULT_ORDERS",
]

# Rényi orders used when none are given: the accountants' default grid.
DEFAULT_ORDERS = np.asarray(acc.DEFAULT_ORDERS, dtype=np.float64)

_ID_SENTINEL = np.uint64(np.iinfo(np.uint64).max)


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


class LedgerState(NamedTuple):
  """Pytree state of the ledger.

  Attributes:
    accountant: the composed cost (:class:`pate_jax.accounting.Accountant`: float64
      ``cost[K]`` at ``orders[K]``; LNMax: summed log-moments at the moment orders).
    epsilon: float64 ``[]`` ε of the accountant at the ledger's δ (as checked against
      ε_max).
    best_order: float64 ``[]`` the order (moment) attaining ``epsilon``.
    num_charged: int32 ``[]`` distinct queries processed (answered or not confident).
    num_answered: int32 ``[]`` distinct queries answered with a label.
    cache: the consistent-answer cache.
  """
  accountant: acc.Accountant
  epsilon: jax.Array
  best_order: jax.Array
  num_charged: jax.Array
  num_answered: jax.Array
  cache: AnswerCache

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


class BatchResult(NamedTuple):
  """Answers to one batch: ``labels[B]`` (int32, -1 unless ANSWERED), ``status[B]``
  (int32 :class:`Status`), ``repeated[B]`` (bool: answered from the record, free)."""
  labels: Any
  status: Any
  repeated: Any


def _id_keys(ids):
  """uint32 ``[B]`` or ``[B, W<=2]`` ids -> uint64 ``[B]`` (big-endian word order)."""
  ids = ids if ids.ndim == 2 else ids[:, None]
  out = jnp.zeros(ids.shape[:1], jnp.uint64)
  for w in range(ids.shape[1]):
    out = (out << jnp.uint64(32)) | ids[:, w].astype(jnp.uint64)
  return out


def _empty_cache(capacity: int) -> AnswerCache:
  return AnswerCache(ids=jnp.full((capacity,), _ID_SENTINEL, jnp.uint64),
                     labels=jnp.full((capacity,), mechanisms.NOT_ANSWERED, jnp.int32),
                     status=jnp.full((capacity,), int(Status.REFUSED_BUDGET), jnp.int32),
                     size=jnp.zeros((), jnp.int32))


# ---------------------------------------------------------------------------
# Functional core.


def init_ledger(cost: Any, *, orders: Any, delta: float, mechanism: str,
                conversion: str = "improved", capacity: int = 0) -> LedgerState:
  """An empty ledger (or one starting from a composed ``cost[K]``).

  Args:
    cost: ``[K]`` composed cost to start from (zeros for a fresh ledger).
    orders: ``[K]`` RDP orders (LNMax: moment orders ``l``).
    delta: δ in (0, 1).
    mechanism: a name in :data:`pate_jax.mechanisms.REGISTRY` (selects the accountant).
    conversion: RDP → (ε, δ) conversion, ``"improved"`` or ``"classic"``.
    capacity: size ``N`` of the consistent-answer cache (0: none, and
      :func:`answer_batch` then only works with ``consistent=False``).
  """
  m = mechanisms.get(mechanism)
  accountant = acc.make_accountant(m.accountant, orders, conversion, cost)
  delta = v.delta(delta)
  capacity = v.positive_int(capacity, "capacity", minimum=0)
  with jax.enable_x64(True):
    accountant = dataclasses.replace(accountant, cost=jnp.asarray(accountant.cost),
                                     orders=jnp.asarray(accountant.orders))
    eps, best = accountant.epsilon(delta)
    return LedgerState(accountant=accountant, epsilon=eps, best_order=best,
                       num_charged=jnp.zeros((), jnp.int32),
                       num_answered=jnp.zeros((), jnp.int32), cache=_empty_cache(capacity))


def ledger_epsilon(state: LedgerState) -> tuple[float, float]:
  """``(ε, best order)`` recorded in ``state``."""
  return float(state.epsilon), float(state.best_order)


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


def _answer_core_impl(state, key, votes, ids, valid, params, delta, epsilon_max, *,
                      mechanism, data_dependent, consistent):
  m = mechanisms.get(mechanism)
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
  worst = m.cost(votes, jnp.ones(b, bool), params, orders, data_dependent)
  realised = m.cost(votes, answered, params, orders, data_dependent)
  worst = jnp.where(fresh[:, None], worst, 0.0)
  realised = jnp.where(fresh[:, None], realised, 0.0)
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
  # The new cost is the cumulative sum at the last processed query: exactly the
  # value whose ε was checked against ε_max.
  new_state = state._replace(
      accountant=dataclasses.replace(
          accountant, cost=jnp.where(n_proc > 0, inclusive[last], accountant.cost)),
      epsilon=jnp.where(any_charged, eps_after[last], state.epsilon),
      best_order=jnp.where(any_charged, best_after[last], state.best_order),
      num_charged=state.num_charged + charged.sum(dtype=jnp.int32),
      num_answered=state.num_answered + (charged & answered).sum(dtype=jnp.int32))

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


_answer_core = light_jit(_answer_core_impl, level=0,
                         static_argnames=("mechanism", "data_dependent", "consistent"))


class _Step(NamedTuple):
  """Checked arguments of the compiled step: dynamic values and static modes."""
  params: dict[str, np.float64]
  delta: np.float64
  epsilon_max: np.float64
  mechanism: str
  data_dependent: bool
  consistent: bool


def _step_args(m: mechanisms.Mechanism, params, delta, epsilon_max, data_dependent,
               consistent) -> _Step:
  return _Step(mechanisms.check_params(m, params), np.float64(v.delta(delta)),
               v.budget(epsilon_max), m.name, v.boolean(data_dependent, "data_dependent"),
               v.boolean(consistent, "consistent"))


def _step(state, key, votes, ids, valid, args: _Step):
  with jax.enable_x64(True):
    return _answer_core(state, key, votes, ids, valid, args.params, args.delta,
                        args.epsilon_max, mechanism=args.mechanism,
                        data_dependent=args.data_dependent, consistent=args.consistent)


def _int32_votes(m: mechanisms.Mechanism, votes: Any, valid: Any = None) -> np.ndarray:
  """Validated int32 host counts; the real rows (``valid``) of an equal-totals mechanism
  must sum to one number of teachers."""
  votes = np.asarray(v.votes(votes)).astype(np.int32)
  if m.equal_totals:
    v.check_equal_totals(votes if valid is None else votes[valid])
  return votes


def answer_batch(state: LedgerState, key: jax.Array, votes: Any, query_ids: Any,
                 valid: Any = None, *, mechanism: str, params: dict[str, Any], orders: Any,
                 delta: float, epsilon_max: float, data_dependent: bool = True,
                 consistent: bool = False, conversion: str | None = None,
                 ) -> tuple[LedgerState, BatchResult]:
  """Answers the longest prefix of a batch that keeps ε ≤ ε_max (see module docstring).

  Args:
    state: the ledger (from :func:`init_ledger` or a previous call).
    key: PRNG key of the aggregator; query ``i`` uses ``fold_in(key, query_ids[i])``.
    votes: int ``[B, C]`` vote histograms.
    query_ids: uint32 ``[B]`` or ``[B, W]`` (``W <= 2``) query ids; keep one width
      per ledger (the record keys ``[id]`` and ``[0, id]`` alike).
    valid: bool ``[B]``, False for padding rows (which must come last).
    mechanism: a name in :data:`pate_jax.mechanisms.REGISTRY`.
    params: the mechanism's parameters, e.g. ``{"sigma": 40.0}``.
    orders: ``[K]`` RDP orders (LNMax: moment orders), those of ``state``.
    delta: δ of the (ε, δ) guarantee.
    epsilon_max: the budget ε_max (``inf`` for none).
    data_dependent: use the data-dependent per-query costs.
    consistent: look ids up in the cache (repeats are free and return the recorded
      answer) and record new ones; needs cache capacity for the new ids, else the
      queries beyond it get ``REFUSED_CAPACITY``. With ``consistent=False`` the cache
      is neither read nor written.
    conversion: RDP → (ε, δ) conversion; ``None`` or that of ``state``.

  Returns:
    ``(new_state, BatchResult)``.
  """
  m = mechanisms.get(mechanism)
  if m.accountant != state.accountant.kind:
    raise ValueError(f"mechanism {mechanism!r} composes in a {m.accountant!r} accountant; got "
                     f"a ledger with a {state.accountant.kind!r} one")
  b = np.shape(votes)[0] if np.ndim(votes) else 0
  valid = np.ones(b, bool) if valid is None else np.asarray(valid, bool)
  if valid.shape != (b,):
    raise ValueError(f"valid must have shape [{b}]; got shape {valid.shape}")
  if np.any(valid[1:] & ~valid[:-1]):
    raise ValueError(f"valid must be a prefix mask (padding rows last); got {valid.tolist()}")
  votes = _int32_votes(m, votes, valid)
  ids = v.query_ids(query_ids, votes.shape[0], max_words=2)
  orders = acc.make_accountant(m.accountant, orders, conversion or "improved").orders
  if orders.shape != state.accountant.orders.shape or not np.array_equal(
      orders, np.asarray(state.accountant.orders)):
    raise ValueError(f"orders must be the ledger's {np.asarray(state.accountant.orders)}; got "
                     f"{orders}")
  if conversion is not None and m.accountant == "rdp" and (
      conversion != state.accountant.conversion):
    raise ValueError(f"conversion must be the ledger's {state.accountant.conversion!r}; got "
                     f"{conversion!r}")
  if consistent and state.cache.ids.shape[0] == 0:
    raise ValueError("consistent=True needs a ledger with an answer cache; got capacity 0 "
                     "(use init_ledger(..., capacity=N))")
  args = _step_args(m, params, delta, epsilon_max, data_dependent, consistent)
  return _step(state, key, votes, ids, valid, args)


# ---------------------------------------------------------------------------
# Stateful wrapper for host code.


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
    **params: the mechanism's parameters (``gamma``, ``sigma``, ``threshold``,
      ``sigma_threshold``).
  """

  def __init__(self, key: jax.Array, mechanism: str, *, epsilon_max: float, delta: float,
               orders: Any = None, max_moment: int = 8, data_dependent: bool = True,
               consistent: bool = False, conversion: str = "improved",
               chunk_size: int = 256, capacity: int = 1024, **params: float | None):
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
    chunk_size = v.positive_int(chunk_size, "chunk_size")
    capacity = v.positive_int(capacity, "capacity")
    self._args = _step_args(m, params, delta, epsilon_max, data_dependent, consistent)
    self.params = {name: float(params[name]) for name in m.param_names}
    self.key = key
    self.mechanism = mechanism
    self._mechanism = m
    self.epsilon_max = float(epsilon_max)
    self.delta = float(delta)
    self.data_dependent = bool(data_dependent)
    self.consistent = bool(consistent)
    self.conversion = conversion
    self.chunk_size = chunk_size
    self._id_words: int | None = None
    self._next_id = 0
    self.state = init_ledger(np.zeros(np.shape(orders)), orders=orders, delta=delta,
                             mechanism=mechanism, conversion=conversion,
                             capacity=capacity if consistent else 0)
    self.orders = np.asarray(self.state.accountant.orders)

  # -- read-outs
  @property
  def epsilon(self) -> float:
    """ε spent so far (at δ), as recorded by the ledger."""
    return float(self.state.epsilon)

  @property
  def best_order(self) -> float:
    return float(self.state.best_order)

  @property
  def num_answered(self) -> int:
    return int(self.state.num_answered)

  @property
  def num_charged(self) -> int:
    return int(self.state.num_charged)

  @property
  def accounting(self) -> str:
    """The accounting in words, e.g. ``"RDP (improved conversion), data-dependent"``."""
    kind = ("2017 moments" if self.state.accountant.kind == "moments"
            else f"RDP ({self.state.accountant.conversion} conversion)")
    return kind + (", data-dependent" if self.data_dependent else ", data-independent")

  def ledger_record(self) -> dict[str, Any]:
    """The ledger as plain arrays (the ``ledger_*`` entries of ``labels.npz``)."""
    return {"ledger_cost": np.asarray(self.state.cost, np.float64),
            "ledger_orders": self.orders, "ledger_epsilon": np.float64(self.epsilon),
            "ledger_delta": np.float64(self.delta), "mechanism": self.mechanism}

  # -- answering
  def _ensure_capacity(self, needed: int) -> None:
    cap = self.state.cache.ids.shape[0]
    if needed <= cap:
      return
    with jax.enable_x64(True):
      pad = _empty_cache(max(needed, 2 * cap) - cap)
      c = self.state.cache
      self.state = self.state._replace(cache=c._replace(
          ids=jnp.concatenate([c.ids, pad.ids]), labels=jnp.concatenate([c.labels, pad.labels]),
          status=jnp.concatenate([c.status, pad.status])))

  def _query_ids(self, b: int, inputs: Any, query_ids: Any) -> np.ndarray:
    """Ids of the next ``b`` queries: hashed inputs or given ids (consistent mode), else
    sequence numbers."""
    if not self.consistent:
      if inputs is not None or query_ids is not None:
        raise ValueError("inputs/query_ids are only used with consistent=True; got one "
                         "without it")
      if self._next_id + b > np.iinfo(np.uint32).max:
        raise ValueError(f"too many queries for 32-bit sequence ids: {self._next_id + b}")
      self._next_id += b
      return np.arange(self._next_id - b, self._next_id, dtype=np.uint32)
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
    """Answers a batch of queries (in order) within the budget.

    Args:
      votes: int ``[B, C]`` teacher vote histograms of the queries.
      inputs: consistent mode: the query inputs ``[B, ...]``, hashed with
        :func:`pate_jax.aggregation.hash_query_ids` to give the query ids.
      query_ids: consistent mode: ids ``[B]`` or ``[B, 2]`` instead of ``inputs``.

    Returns:
      :class:`BatchResult` of numpy arrays ``labels[B]``, ``status[B]``,
      ``repeated[B]``.
    """
    votes = _int32_votes(self._mechanism, votes)
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
        self._ensure_capacity(int(self.state.cache.size) + n)
      # Inputs were validated above for the whole batch.
      self.state, out = _step(self.state, self.key, chunk, chunk_ids, valid, self._args)
      out = jax.device_get(out)
      labels[start:stop] = out.labels[:m]
      status[start:stop] = out.status[:m]
      repeated[start:stop] = out.repeated[:m]
      if np.any(status[start:stop] >= int(Status.REFUSED_BUDGET)):
        break  # The rest of the batch stays refused.
    return BatchResult(labels, status, repeated)
