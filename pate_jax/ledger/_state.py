"""The ledger's state and the operations on it that need no compiled step.

Owns the pytree :class:`LedgerState` (the spent budget and every setting it depends on)
with its consistent-answer cache :class:`AnswerCache`, the outcomes of a query
(:class:`Status`, :class:`BatchResult`), :func:`init_ledger`, :func:`charge`,
:func:`ledger_epsilon`, and the checks of a state and of the settings it records
(``_check_state``, ``_settings``). The accounting and the budget's rules are described in
:mod:`pate_jax.ledger`.
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
from pate_jax import mechanisms


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


def init_ledger(cost: Any = None, *, orders: Any, delta: float,
                mechanism: mechanisms.Mechanism | str,
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
    mechanism: a registered :class:`pate_jax.mechanisms.Mechanism` (or its name; the state
      records the name).
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
