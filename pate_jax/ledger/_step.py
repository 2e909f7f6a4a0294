"""Answering a batch: the compiled step and :func:`answer_batch`.

Owns the jit-compiled ``_answer_core_impl`` (the longest prefix of a padded batch that
keeps ε ≤ ε_max, with the look-up and update of the consistent-answer cache) and the
host checks of its inputs: the votes and their row total, fresh query ids without
consistent answers, the settings a caller asks for. The rules it follows are described
in :mod:`pate_jax.ledger`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks as v
from pate_jax import mechanisms
from pate_jax._compile import light_jit
from pate_jax.ledger._state import (
    _ID_SENTINEL,
    AnswerCache,
    BatchResult,
    LedgerState,
    Status,
    _check_state,
    _id_keys,
    _settings,
)


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


_answer_core = light_jit(_answer_core_impl, level=0, x64=True)  # float64 state and noise


def _step(state, key, votes, ids, valid, num_teachers):
  return _answer_core(state, key, votes, ids, valid, np.int32(num_teachers))


def _checked_votes(state: LedgerState, votes: Any, valid: Any = None) -> tuple[np.ndarray, int]:
  """Validated int32 host counts of a batch and their row total ``T``.

  Every real row (``valid``) sums to one ``T`` (at most :data:`pate_jax._checks.
  MAX_NOISY_TOTAL`, so that counts are exact in the noise arithmetic), and
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
  # Neighbours compared, not np.diff: a difference of uint64 keys wraps, so a decrease
  # would pass as a large step.
  if keys.size and (int(keys[0]) < nxt or np.any(keys[1:] <= keys[:-1])
                    or keys[-1] == _ID_SENTINEL):  # (The largest id would wrap next_id.)
    raise ValueError("query_ids must be fresh without consistent answers (strictly increasing "
                     f"and >= the ledger's next id {nxt}: a reused id reuses its noise); got "
                     f"{ids[valid].tolist()}")


def _check_settings(state: LedgerState, given: dict[str, Any]) -> None:
  """Each given setting (not ``None``) must be the state's (``ValueError`` naming it)."""
  m = mechanisms.get(state.mechanism)
  recorded = _settings(state)
  for name, value in given.items():
    if value is None or (name == "conversion" and m.accountant_kind.conversions == (None,)):
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
