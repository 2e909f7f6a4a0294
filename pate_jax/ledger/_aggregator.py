"""The stateful host object over the functional ledger: :class:`PrivateAggregator`.

Owns what makes one budget one object: the lock that serialises ``answer``, the refusal
to be copied or pickled, the chunked and padded batches (one compilation per setting),
the growing answer cache, resuming a persisted ledger under the same settings, and the
per-process lineage registry that refuses a stale copy (:class:`StaleLedgerError`).
"""

from __future__ import annotations

import threading
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks as v
from pate_jax import aggregation
from pate_jax import mechanisms
from pate_jax.ledger._record import ledger_record, restore_ledger
from pate_jax.ledger._state import (
    BatchResult,
    LedgerState,
    Status,
    _empty_cache,
    _settings,
    charge,
    init_ledger,
)
from pate_jax.ledger._step import _checked_votes, _step


class StaleLedgerError(ValueError):
  """A ledger copy that another aggregator has spent from since (or a newer copy has)."""


# lineage -> the newest generation spent by an aggregator of this process.
_NEWEST: dict[str, int] = {}
# lineage -> the aggregator that spent that generation (its token): what
# PrivateAggregator.discard_since gives back only while no other has spent since.
_SPENDER: dict[str, object] = {}
_NEWEST_LOCK = threading.Lock()


def _new_lineage() -> str:
  import secrets  # pylint: disable=g-import-not-at-top
  return secrets.token_hex(16)


class PrivateAggregator:
  """Answers teacher queries with a noisy aggregator until the budget ε_max is spent.

  Example::

    agg = PrivateAggregator(rng.noise_key("aggregation"), "gnmax", sigma=40.0,
                            epsilon_max=2.0, delta=1e-5)  # a secret key (Args)
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
    key: PRNG key; query ``i`` is answered with noise from ``fold_in(key, id_i)``. It
      must be secret for the answers to be private (:func:`pate_jax.rng.noise_key`, from
      ``os.urandom``): with a key anyone can rebuild, each answer's noise is public.
    mechanism: a registered :class:`pate_jax.mechanisms.Mechanism` (or its name):
      ``LNMAX`` (needs ``gamma``), ``GNMAX`` (``sigma``) or ``CONFIDENT_GNMAX``
      (``threshold``, ``sigma_threshold``, ``sigma``).
    epsilon_max: budget ε_max > 0 (``inf`` for none).
    delta: δ in (0, 1).
    orders: RDP orders (RDP mechanisms; default :data:`pate_jax.accounting.DEFAULT_ORDERS`).
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

  def __init__(self, key: jax.Array, mechanism: mechanisms.Mechanism | str, *, epsilon_max: float, delta: float,
               orders: Any = None, max_moment: int = 8, data_dependent: bool = True,
               consistent: bool = False, conversion: str = "improved",
               chunk_size: int = 256, capacity: int = 1024, ledger: Any = None,
               **params: float | None):
    m = mechanisms.get(mechanism)
    params = {k: p for k, p in params.items() if p is not None}
    for name in m.param_names:
      if name not in params:
        raise ValueError(f"{name} is required for mechanism {m.name!r}; got None")
    for name, value in params.items():
      if name not in m.param_names:
        raise ValueError(f"{name} is not a parameter of mechanism {m.name!r}; got {value!r}")
    kind = m.accountant_kind
    if orders is not None and not kind.takes_orders:
      raise ValueError(f"orders are not used by the {kind.label} accountant of "
                       f"{m.name!r} (it uses l = 1..max_moment); got orders={orders!r}")
    orders = kind.orders_of(orders, max_moment)
    self.chunk_size = v.positive_int(chunk_size, "chunk_size")
    capacity = v.positive_int(capacity, "capacity")
    state = init_ledger(orders=orders, delta=delta, mechanism=m, params=params,
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
    self._token = object()
    self._discarded = False  # set by discard_since: it can never spend again
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
    accountant = self._state.accountant
    kind = accountant.accountant_kind.label + (
        f" ({accountant.conversion} conversion)" if accountant.conversion else "")
    return kind + (", data-independent budget; private data-dependent ε tracked"
                   if self.data_dependent else ", data-independent")

  def ledger_record(self) -> dict[str, Any]:
    """The ledger as plain arrays (:func:`ledger_record`), with its lineage and generation."""
    with self._lock:
      return ledger_record(self._state, lineage=self._lineage, generation=self._generation)

  def _spend(self, new_state: LedgerState) -> None:
    """Replaces the state after a spend; refuses if this aggregator's copy is stale."""
    with _NEWEST_LOCK:
      if self._discarded:
        raise StaleLedgerError(
            "ledger: this aggregator gave its spends back (discard_since): its copy of the "
            "budget is stale; build one from the persisted record")
      if _NEWEST.get(self._lineage, self._generation) != self._generation:
        raise StaleLedgerError(
            f"ledger: another aggregator has spent from this ledger since this one was "
            f"built (generation {_NEWEST[self._lineage]} > {self._generation}): its copy of "
            "the budget is stale")
      self._generation += 1
      _NEWEST[self._lineage] = self._generation
      _SPENDER[self._lineage] = self._token
    self._state = new_state

  def discard_since(self, generation: int) -> None:
    """Gives back this process's record of the spends since ``generation`` (this
    aggregator's :attr:`generation` before them), for a caller whose persisted record
    stayed there (its write failed: a full disk, an interrupt) and who returned nothing
    of them: that record resumes in this process again, as it would in a new one. The
    aggregator is stale afterwards (it cannot spend), and nothing changes where another
    aggregator has spent from the lineage since."""
    generation = int(generation)
    with self._lock, _NEWEST_LOCK:
      if not 0 <= generation <= self._generation:
        raise ValueError(f"generation must be in [0, {self._generation}] (this aggregator's "
                         f"generations); got {generation}")
      if (generation < self._generation and _NEWEST.get(self._lineage) == self._generation
          and _SPENDER.get(self._lineage) is self._token):
        _NEWEST[self._lineage] = generation
        del _SPENDER[self._lineage]
        # Stale for good: another aggregator resumed from the record and spending the
        # lineage's next generation must not let this copy spend on top of its own.
        self._discarded = True

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
                     "resume with the recorded settings, or start another ledger on purpose")
  return restored
