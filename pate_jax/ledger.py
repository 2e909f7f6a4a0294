"""A privacy-budget ledger that answers teacher queries only while ε ≤ ε_max.

Functional core: :class:`LedgerState` is a pytree holding the composed privacy
cost, the counts of distinct queries charged and answered, and (consistent mode)
a sorted record of the query ids already charged with their outcome;
:func:`answer_batch` maps ``(state, key, votes[B, C], query ids[B]) -> (state',
labels[B], status[B])`` in one jit-compiled call. :class:`PrivateAggregator` wraps
it for host code: it holds the key, δ, ε_max, the orders and the mechanism,
pads batches to a fixed chunk size (one compilation per mechanism, class count,
number of orders and record capacity) and grows the id record when needed.

Accounting. GNMax and Confident-GNMax compose Rényi-DP at ``orders``
(Papernot et al. 2018, Theorem 6, Proposition 10) and report
``ε = rdp_to_epsilon(Σ rdp, orders, δ)``; LNMax composes the 2017 moments
accountant's log-moments ``α(l)`` at ``l = 1..max_moment`` and reports
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

import enum
import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax._compile import light_jit
from pate_jax import aggregation as agg
from pate_jax import accounting as acc

__all__ = [
    "Status", "LedgerState", "BatchResult", "MECHANISMS", "init_ledger", "answer_batch",
    "ledger_epsilon", "PrivateAggregator", "DEFAULT_ORDERS",
]

MECHANISMS = ("lnmax", "gnmax", "confident_gnmax")

# Rényi orders used when none are given: the accountants' default grid.
DEFAULT_ORDERS = np.asarray(acc.DEFAULT_ORDERS, dtype=np.float64)

_ID_SENTINEL = np.uint64(np.iinfo(np.uint64).max)


class Status(enum.IntEnum):
  """Outcome of one query."""
  ANSWERED = 0          # A label was released.
  NOT_CONFIDENT = 1     # Confident-GNMax threshold not passed (charged, no label).
  REFUSED_BUDGET = 2    # Not processed: answering could exceed ε_max. Costs nothing.
  REFUSED_CAPACITY = 3  # Not processed: the id record is full (functional API only).


class LedgerState(NamedTuple):
  """Pytree state of the ledger.

  Attributes:
    cost: float64 ``[K]`` composed RDP at the orders (LNMax: summed log-moments
      ``α(l)`` at the moment orders).
    epsilon: float64 ``[]`` ε of ``cost`` at the ledger's δ (as checked against ε_max).
    best_order: float64 ``[]`` the order (moment) attaining ``epsilon``.
    num_charged: int32 ``[]`` distinct queries processed (answered or not confident).
    num_answered: int32 ``[]`` distinct queries answered with a label.
    ids: uint64 ``[N]`` ids of the queries charged in consistent mode, sorted,
      padded with the max value (``N`` is the record's capacity).
    labels: int32 ``[N]`` label of each recorded id (-1 if not answered).
    status: int32 ``[N]`` :class:`Status` of each recorded id.
    size: int32 ``[]`` number of recorded ids.
  """
  cost: jax.Array
  epsilon: jax.Array
  best_order: jax.Array
  num_charged: jax.Array
  num_answered: jax.Array
  ids: jax.Array
  labels: jax.Array
  status: jax.Array
  size: jax.Array


class BatchResult(NamedTuple):
  """Answers to one batch: ``labels[B]`` (int32, -1 unless ANSWERED), ``status[B]``
  (int32 :class:`Status`), ``repeated[B]`` (bool: answered from the record, free)."""
  labels: Any
  status: Any
  repeated: Any


# ---------------------------------------------------------------------------
# Accounting glue (costs from pate_jax.accounting; no new privacy maths here).


def _epsilon(cost, orders, delta, mechanism, improved):
  """ε and best order of a composed cost ``[K]``.

  ``improved`` is a (possibly traced) bool choosing the RDP conversion, so that one
  compiled ledger serves both conversions; LNMax ignores it.
  """
  if mechanism == "lnmax":
    eps, best = acc.moments_to_epsilon(cost, orders, delta)
  else:
    e_i, b_i = acc.rdp_to_epsilon(cost, orders, delta, conversion="improved")
    e_c, b_c = acc.rdp_to_epsilon(cost, orders, delta, conversion="classic")
    eps, best = jnp.where(improved, e_i, e_c), jnp.where(improved, b_i, b_c)
  return jnp.asarray(eps, jnp.float64), jnp.asarray(best, jnp.float64)


def _costs(votes, answered, params, orders, mechanism, data_dependent):
  """Per-query ``(worst, realised)`` costs ``[B, K]`` (float64).

  ``worst`` is the cost of the query if it is answered, ``realised`` its cost given
  the mechanism's actual outcome ``answered``. ``data_dependent`` is a (possibly
  traced) bool; both analyses are computed and one is selected, so one compiled
  ledger serves both (the data-independent costs are nearly free).
  """
  def pick(fn):
    return jnp.where(data_dependent, fn(True), fn(False))

  if mechanism == "lnmax":
    c = pick(lambda dd: acc.lnmax_log_moments(votes, params["gamma"], orders, data_dependent=dd))
    return c, c
  ans = pick(lambda dd: acc.gnmax_rdp(votes, params["sigma"], orders, data_dependent=dd))
  if mechanism == "gnmax":
    return ans, ans
  thr = jnp.where(
      data_dependent,
      acc.confident_threshold_rdp(votes, params["threshold"], params["sigma_threshold"], orders),
      # Sensitivity-1 Gaussian check: λ/(2σ_T²), the GNMax cost at noise √2·σ_T.
      acc.gnmax_rdp(votes, math.sqrt(2.0) * params["sigma_threshold"], orders,
                    data_dependent=False))
  return thr + ans, thr + jnp.where(answered[:, None], ans, 0.0)


def _run_mechanism(key, votes, ids, params, mechanism):
  if mechanism == "lnmax":
    labels = agg._lnmax_core(key, votes, params["gamma"], ids)
    return labels, jnp.ones(labels.shape, bool)
  if mechanism == "gnmax":
    labels = agg._gnmax_core(key, votes, params["sigma"], ids)
    return labels, jnp.ones(labels.shape, bool)
  return agg._confident_gnmax_core(key, votes, params["threshold"],
                                   params["sigma_threshold"], params["sigma"], ids)


def _id_keys(ids):
  """uint32 ``[B]`` or ``[B, W<=2]`` ids -> uint64 ``[B]`` (big-endian word order)."""
  ids = ids if ids.ndim == 2 else ids[:, None]
  out = jnp.zeros(ids.shape[:1], jnp.uint64)
  for w in range(ids.shape[1]):
    out = (out << jnp.uint64(32)) | ids[:, w].astype(jnp.uint64)
  return out


# ---------------------------------------------------------------------------
# Functional core.


def _check_mechanism(mechanism):
  if mechanism not in MECHANISMS:
    raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")


def _check_accounting_args(orders: Any, delta: Any, mechanism: str) -> tuple[np.ndarray, float]:
  orders = np.asarray(orders, dtype=np.float64)
  low = 0.0 if mechanism == "lnmax" else 1.0
  if orders.ndim != 1 or orders.size == 0 or not np.all(np.isfinite(orders) & (orders > low)):
    raise ValueError(f"orders must be a non-empty 1-D array of finite values > {low:g}, got "
                     f"{orders!r}")
  d = np.asarray(delta, dtype=np.float64)
  if d.ndim != 0 or not 0.0 < float(d) < 1.0:
    raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
  return orders, float(d)


@functools.partial(jax.jit, static_argnames=("mechanism", "capacity"))
def _init_core(cost, orders, delta, improved, *, mechanism, capacity):
  eps, best = _epsilon(cost, orders, delta, mechanism, improved)
  return LedgerState(
      cost=cost, epsilon=eps, best_order=best,
      num_charged=jnp.zeros((), jnp.int32), num_answered=jnp.zeros((), jnp.int32),
      ids=jnp.full((capacity,), _ID_SENTINEL, jnp.uint64),
      labels=jnp.full((capacity,), agg.NOT_ANSWERED, jnp.int32),
      status=jnp.full((capacity,), int(Status.REFUSED_BUDGET), jnp.int32),
      size=jnp.zeros((), jnp.int32))


def init_ledger(cost: Any, *, orders: Any, delta: float, mechanism: str,
                conversion: str = "improved", capacity: int = 0) -> LedgerState:
  """An empty ledger (or one starting from a composed ``cost[K]``).

  Args:
    cost: ``[K]`` composed cost to start from (zeros for a fresh ledger).
    orders: ``[K]`` RDP orders (LNMax: moment orders ``l``).
    delta: δ in (0, 1).
    mechanism: one of :data:`MECHANISMS` (selects the accountant).
    conversion: RDP → (ε, δ) conversion, ``"improved"`` or ``"classic"``.
    capacity: size ``N`` of the id record of consistent mode (0: no record, and
      :func:`answer_batch` then only works with ``consistent=False``).
  """
  _check_mechanism(mechanism)
  orders, delta = _check_accounting_args(orders, delta, mechanism)
  cost = np.asarray(cost, dtype=np.float64)
  if cost.shape != orders.shape or np.isnan(cost).any() or (cost < 0).any():
    raise ValueError(f"cost must be a non-negative array of shape {orders.shape} (one value "
                     f"per order), got {cost!r}")
  if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 0:
    raise ValueError(f"capacity must be an integer >= 0, got {capacity!r}")
  with jax.enable_x64(True):
    return _init_core(cost, orders, np.float64(delta), np.bool_(_conversion_flag(conversion)),
                      mechanism=mechanism, capacity=int(capacity))


def ledger_epsilon(state: LedgerState) -> tuple[float, float]:
  """``(ε, best order)`` recorded in ``state``."""
  return float(state.epsilon), float(state.best_order)


def _conversion_flag(conversion: str) -> bool:
  if conversion not in ("improved", "classic"):
    raise ValueError(f"conversion must be 'improved' or 'classic', got {conversion!r}")
  return conversion == "improved"


def _answer_core_impl(state, key, votes, ids, valid, params, orders, delta, epsilon_max,
                 data_dependent, improved, consistent, *, mechanism):
  # Only the mechanism and the shapes are static: one compiled step serves both
  # accountings, both conversions and both consistency modes.
  b = votes.shape[0]
  capacity = state.ids.shape[0]
  arange = jnp.arange(b)
  labels, answered = _run_mechanism(key, votes, ids, params, mechanism)

  if capacity > 0:
    qkey = _id_keys(ids)
    pos = jnp.searchsorted(state.ids, qkey)
    pos_c = jnp.clip(pos, 0, capacity - 1)
    found = consistent & valid & (pos < state.size) & (state.ids[pos_c] == qkey)
    same = (qkey[:, None] == qkey[None, :]) & valid[None, :]
    first = jnp.where(consistent, jnp.argmax(same, axis=1), arange)  # first occurrence
  else:
    found = jnp.zeros(b, bool)
    first = arange
  fresh = valid & ~found & (first == arange)

  worst, realised = _costs(votes, answered, params, orders, mechanism, data_dependent)
  worst = jnp.where(fresh[:, None], worst, 0.0)
  realised = jnp.where(fresh[:, None], realised, 0.0)
  inclusive = state.cost + jnp.cumsum(realised, axis=0)                  # [B, K]
  exclusive = jnp.concatenate([state.cost[None], inclusive[:-1]], axis=0)
  eps_fn = jax.vmap(lambda c: _epsilon(c, orders, delta, mechanism, improved))
  eps_worst, _ = eps_fn(exclusive + worst)
  eps_after, best_after = eps_fn(inclusive)
  ok = (eps_worst <= epsilon_max) & (eps_after <= epsilon_max)  # NaN -> refused
  room = ~consistent | (state.size + jnp.cumsum(fresh) <= capacity)
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
      cost=jnp.where(n_proc > 0, inclusive[last], state.cost),
      epsilon=jnp.where(any_charged, eps_after[last], state.epsilon),
      best_order=jnp.where(any_charged, best_after[last], state.best_order),
      num_charged=state.num_charged + charged.sum(dtype=jnp.int32),
      num_answered=state.num_answered + (charged & answered).sum(dtype=jnp.int32))

  fresh_status = jnp.where(answered, int(Status.ANSWERED),
                           int(Status.NOT_CONFIDENT)).astype(jnp.int32)
  out_status = fresh_status[first]
  out_labels = labels[first]
  if capacity > 0:
    out_status = jnp.where(found, state.status[pos_c], out_status)
    out_labels = jnp.where(found, state.labels[pos_c], out_labels)
  # Why the first unprocessed query stopped the batch.
  first_refused = jnp.argmin(jnp.where(valid, processed, True))
  refusal = jnp.where(stop_capacity[first_refused], int(Status.REFUSED_CAPACITY),
                      int(Status.REFUSED_BUDGET))
  out_status = jnp.where(processed, out_status, refusal).astype(jnp.int32)
  out_labels = jnp.where(out_status == int(Status.ANSWERED), out_labels, agg.NOT_ANSWERED)
  repeated = processed & ~fresh

  if capacity > 0:  # Record the newly charged ids (consistent mode), keeping ids sorted.
    record = charged & consistent
    all_ids = jnp.concatenate([state.ids, jnp.where(record, qkey, _ID_SENTINEL)])
    is_pad = jnp.concatenate([jnp.arange(capacity) >= state.size, ~record])
    order = jnp.lexsort((all_ids, is_pad))[:capacity]
    new_labels = jnp.concatenate([state.labels, jnp.where(answered, labels, -1)])
    new_status = jnp.concatenate([state.status, fresh_status])
    new_state = new_state._replace(
        ids=all_ids[order], labels=new_labels[order], status=new_status[order],
        size=state.size + record.sum(dtype=jnp.int32))
  return new_state, BatchResult(out_labels.astype(jnp.int32), out_status, repeated)


_answer_core = light_jit(_answer_core_impl, level=0, static_argnames=("mechanism",))


def answer_batch(state: LedgerState, key: jax.Array, votes: Any, query_ids: Any,
                 valid: Any = None, *, mechanism: str, params: dict[str, Any], orders: Any,
                 delta: float, epsilon_max: float, data_dependent: bool = True,
                 consistent: bool = False, conversion: str = "improved",
                 ) -> tuple[LedgerState, BatchResult]:
  """Answers the longest prefix of a batch that keeps ε ≤ ε_max (see module docstring).

  Args:
    state: the ledger (from :func:`init_ledger` or a previous call).
    key: PRNG key of the aggregator; query ``i`` uses ``fold_in(key, query_ids[i])``.
    votes: int ``[B, C]`` vote histograms.
    query_ids: uint32 ``[B]`` or ``[B, W]`` (``W <= 2``) query ids; keep one width
      per ledger (the record keys ``[id]`` and ``[0, id]`` alike).
    valid: bool ``[B]``, False for padding rows (which must come last).
    mechanism: ``"lnmax"``, ``"gnmax"`` or ``"confident_gnmax"``.
    params: ``{"gamma"}``, ``{"sigma"}`` or ``{"threshold", "sigma_threshold", "sigma"}``.
    orders: ``[K]`` RDP orders (LNMax: moment orders), matching ``state.cost``.
    delta: δ of the (ε, δ) guarantee.
    epsilon_max: the budget ε_max (``inf`` for none).
    data_dependent: use the data-dependent per-query costs.
    consistent: look ids up in ``state`` (repeats are free and return the
      recorded answer) and record new ones; needs ``state.ids`` capacity for the
      new ids, else the queries beyond it get ``REFUSED_CAPACITY``. With
      ``consistent=False`` the record is neither read nor written.
    conversion: RDP → (ε, δ) conversion.

  Returns:
    ``(new_state, BatchResult)``.
  """
  _check_mechanism(mechanism)
  votes = agg.check_votes(votes).astype(np.int32)  # Validated integer counts.
  ids = agg.check_query_ids(query_ids, votes.shape[0])
  if ids.ndim == 2 and ids.shape[1] > 2:
    raise ValueError(f"query_ids may have at most 2 words, got shape {ids.shape}")
  valid = np.ones(votes.shape[0], bool) if valid is None else np.asarray(valid, bool)
  if valid.shape != (votes.shape[0],):
    raise ValueError(f"valid must have shape [{votes.shape[0]}], got {valid.shape}")
  if np.any(valid[1:] & ~valid[:-1]):
    raise ValueError(f"valid must be a prefix mask (padding rows last), got {valid.tolist()}")
  if mechanism == "confident_gnmax":
    _check_equal_totals(votes[valid])
  orders, delta = _check_accounting_args(orders, delta, mechanism)
  if orders.shape != state.cost.shape:
    raise ValueError(f"orders must match the ledger's {state.cost.shape[0]} orders, got "
                     f"shape {orders.shape}")
  if consistent and state.ids.shape[0] == 0:
    raise ValueError("consistent=True needs a ledger with an id record; got state.ids of "
                     "capacity 0 (use init_ledger(..., capacity=N))")
  dynamic = _dynamic_args(mechanism, params, orders, delta, epsilon_max, data_dependent,
                          conversion, consistent)
  return _step(state, key, votes, ids, valid, dynamic, mechanism)


def _check_equal_totals(votes: np.ndarray) -> None:
  """Confident-GNMax's threshold is a number of teachers: every row must sum to it."""
  totals = votes.sum(axis=1)
  if totals.size and not np.all(totals == totals[0]):
    i = int(np.argmax(totals != totals[0]))
    raise ValueError(f"votes: every row must sum to the number of teachers; row 0 sums to "
                     f"{totals[0]} but row {i} sums to {totals[i]}")


def _dynamic_args(mechanism, params, orders, delta, epsilon_max, data_dependent, conversion,
                  consistent) -> tuple:
  """The traced (non-static) arguments of the step, as numpy (cheap to pass to jit)."""
  needed = {"lnmax": ("gamma",), "gnmax": ("sigma",),
            "confident_gnmax": ("threshold", "sigma_threshold", "sigma")}[mechanism]
  if set(params) != set(needed):
    raise ValueError(f"params of {mechanism!r} must be exactly {needed}, got {sorted(params)}")
  for name in needed:
    if name == "threshold":
      agg._check_finite_scalar(params[name], name)
    else:
      agg.check_positive(params[name], name)
  em = np.asarray(epsilon_max, dtype=np.float64)
  if em.ndim != 0 or np.isnan(em) or em <= 0:
    raise ValueError(f"epsilon_max must be a scalar > 0 (inf allowed), got {epsilon_max!r}")
  return ({k: np.float64(v) for k, v in params.items()}, np.asarray(orders, np.float64),
          np.float64(delta), np.float64(em), np.bool_(data_dependent),
          np.bool_(_conversion_flag(conversion)), np.bool_(consistent))


def _step(state, key, votes, ids, valid, dynamic, mechanism):
  with jax.enable_x64(True):
    return _answer_core(state, key, votes, ids, valid, *dynamic, mechanism=mechanism)


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
  every call reuses one compiled function per (mechanism, number of classes,
  record capacity). Once a query is refused, every later query of the batch is
  refused too (the answered set is always a prefix of what was asked).

  Args:
    key: PRNG key; query ``i`` is answered with noise from ``fold_in(key, id_i)``.
    mechanism: ``"lnmax"`` (needs ``gamma``), ``"gnmax"`` (``sigma``) or
      ``"confident_gnmax"`` (``threshold``, ``sigma_threshold``, ``sigma``).
    epsilon_max: budget ε_max > 0 (``inf`` for none).
    delta: δ in (0, 1).
    orders: RDP orders (GNMax mechanisms; default :data:`DEFAULT_ORDERS`).
    max_moment: LNMax moments ``l = 1..max_moment`` (2017 accountant).
    data_dependent: data-dependent per-query costs (see module docstring).
    consistent: consistent answers keyed by query ids / hashed inputs.
    conversion: RDP → (ε, δ) conversion, ``"improved"`` or ``"classic"``.
    chunk_size: padded batch size of the compiled step.
    capacity: initial size of the id record (consistent mode; doubles as needed).
      Allocated, but unused, without consistency, so that both modes share one
      compiled step.
  """

  def __init__(self, key: jax.Array, mechanism: str, *, epsilon_max: float, delta: float,
               gamma: float | None = None, sigma: float | None = None,
               threshold: float | None = None, sigma_threshold: float | None = None,
               orders: Any = None, max_moment: int = 8, data_dependent: bool = True,
               consistent: bool = False, conversion: str = "improved",
               chunk_size: int = 256, capacity: int = 1024):
    _check_mechanism(mechanism)
    given = {"gamma": gamma, "sigma": sigma, "threshold": threshold,
             "sigma_threshold": sigma_threshold}
    needed = {"lnmax": ("gamma",), "gnmax": ("sigma",),
              "confident_gnmax": ("threshold", "sigma_threshold", "sigma")}[mechanism]
    for name, value in given.items():
      if name in needed and value is None:
        raise ValueError(f"{name} is required for mechanism {mechanism!r}, got None")
      if name not in needed and value is not None:
        raise ValueError(f"{name} is not a parameter of mechanism {mechanism!r}, got {value!r}")
    if mechanism == "lnmax":
      if orders is not None:
        raise ValueError("orders are not used by the LNMax moments accountant (it uses "
                         f"l = 1..max_moment); got orders={orders!r}")
      if (isinstance(max_moment, bool) or not isinstance(max_moment, (int, np.integer))
          or max_moment < 1):
        raise ValueError(f"max_moment must be an integer >= 1, got {max_moment!r}")
      orders = np.arange(1, int(max_moment) + 1, dtype=np.float64)
    elif orders is None:
      orders = DEFAULT_ORDERS
    orders, delta = _check_accounting_args(orders, delta, mechanism)
    for name, value in (("chunk_size", chunk_size), ("capacity", capacity)):
      if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    self.params = {name: float(given[name]) for name in needed}
    self._dynamic = _dynamic_args(mechanism, self.params, orders, delta, epsilon_max,
                                  data_dependent, conversion, consistent)
    self.key = key
    self.mechanism = mechanism
    self.epsilon_max = float(epsilon_max)
    self.delta = delta
    self.orders = orders
    self.data_dependent = bool(data_dependent)
    self.consistent = bool(consistent)
    self.conversion = conversion
    self.chunk_size = int(chunk_size)
    self._id_words: int | None = None
    self._next_id = 0
    self.state = init_ledger(np.zeros(orders.shape), orders=orders, delta=delta,
                             mechanism=mechanism, conversion=conversion,
                             capacity=int(capacity))

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

  # -- answering
  def _ensure_capacity(self, needed: int) -> None:
    cap = self.state.ids.shape[0]
    if needed <= cap:
      return
    new_cap = max(needed, 2 * cap)
    pad = new_cap - cap
    with jax.enable_x64(True):
      s = self.state
      self.state = s._replace(
          ids=jnp.concatenate([s.ids, jnp.full((pad,), _ID_SENTINEL, jnp.uint64)]),
          labels=jnp.concatenate([s.labels, jnp.full((pad,), agg.NOT_ANSWERED, jnp.int32)]),
          status=jnp.concatenate([s.status, jnp.full((pad,), int(Status.REFUSED_BUDGET),
                                                      jnp.int32)]))

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
    votes = agg.check_votes(votes)
    b = votes.shape[0]
    if self.mechanism == "confident_gnmax":
      _check_equal_totals(votes)
    if self.consistent:
      if (inputs is None) == (query_ids is None):
        raise ValueError("consistent mode needs exactly one of inputs or query_ids, got "
                         f"inputs={'None' if inputs is None else 'array'}, "
                         f"query_ids={'None' if query_ids is None else 'array'}")
      if inputs is not None:
        if np.shape(inputs)[:1] != (b,):
          raise ValueError(f"inputs must have {b} rows like votes, got shape {np.shape(inputs)}")
        ids = agg.hash_query_ids(inputs)
      else:
        ids = agg.check_query_ids(query_ids, b)
        if ids.ndim == 2 and ids.shape[1] > 2:
          raise ValueError(f"query_ids may have at most 2 words, got shape {ids.shape}")
      words = 1 if ids.ndim == 1 else ids.shape[1]
      if self._id_words is None:
        self._id_words = words
      elif words != self._id_words:
        raise ValueError(f"query_ids must keep the same width across calls: {self._id_words} "
                         f"word(s) before, got {words}")
    else:
      if inputs is not None or query_ids is not None:
        raise ValueError("inputs/query_ids are only used with consistent=True; got one "
                         "without it")
      if self._next_id + b > np.iinfo(np.uint32).max:
        raise ValueError(f"too many queries for 32-bit sequence ids: {self._next_id + b}")
      ids = np.arange(self._next_id, self._next_id + b, dtype=np.uint32)
      self._next_id += b

    labels = np.full(b, agg.NOT_ANSWERED, np.int32)
    status = np.full(b, int(Status.REFUSED_BUDGET), np.int32)
    repeated = np.zeros(b, bool)
    n = self.chunk_size
    for start in range(0, b, n):
      stop = min(start + n, b)
      m = stop - start
      v = np.zeros((n, votes.shape[1]), np.int32)  # Counts (validated): one dtype, one compile.
      v[:m] = votes[start:stop]
      i = np.zeros((n,) + ids.shape[1:], np.uint32)
      i[:m] = ids[start:stop]
      valid = np.arange(n) < m
      if self.consistent:
        self._ensure_capacity(int(self.state.size) + n)
      # Inputs were validated above for the whole batch.
      state, out = _step(self.state, self.key, v, i, valid, self._dynamic, self.mechanism)
      self.state = state
      out = jax.device_get(out)
      labels[start:stop] = out.labels[:m]
      status[start:stop] = out.status[:m]
      repeated[start:stop] = out.repeated[:m]
      if np.any(status[start:stop] >= int(Status.REFUSED_BUDGET)):
        break  # The rest of the batch stays refused.
    return BatchResult(labels, status, repeated)
