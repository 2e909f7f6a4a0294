"""An accountant: a pytree that composes per-query costs and answers ε (dp_accounting's role).

``Accountant`` holds a composed cost curve ``cost[K]`` at ``orders[K]`` in float64, and
as static (pytree meta) data its ``kind`` and RDP ``conversion``:

* ``kind="rdp"``: Rényi-DP at orders ``λ > 1``; ``ε = rdp_to_epsilon(cost, orders, δ,
  conversion)`` (Mironov 2017 "classic", or Balle et al. 2020 "improved").
* ``kind="moments"``: the 2017 moments accountant's log-moments ``α(l)`` at moment
  orders ``l > 0``; ``ε = min_l (α(l) + log 1/δ) / l`` (Papernot et al. 2017, Thm 2).

What differs between the kinds is data, an :class:`AccountantKind` (:data:`RDP`,
:data:`MOMENTS`, looked up with :func:`accountant_kind`): code reads its fields (its
conversions, the orders it composes at, how reports name its best order) instead of
testing a kind's name.

:func:`compose` adds per-query costs ``[..., K]`` (optionally masked) and
:func:`epsilon` converts; both run with 64-bit mode enabled, so the float64 state never
passes through a float32 operation (the truncation trap of the package docstring) --
except inside a jit traced in 32-bit mode, where everything is float32 (package docstring).
Being a pytree, an accountant is carried through ``jit``/``vmap``/``lax.scan``; its kind
and conversion are static, so a compiled step computes exactly one accounting.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks as v
from pate_jax.accounting import _conversion
from pate_jax.accounting import _lnmax
from pate_jax.accounting import _numerics as nm



class AccountantKind(NamedTuple):
  """An accountant kind as data (the module docstring).

  Attributes:
    name: ``"rdp"`` or ``"moments"``: :attr:`Accountant.kind`, a mechanism's ``accountant``.
    label: how reports name it (``"RDP"``, ``"2017 moments"``).
    order_word: what one of its orders is called (``"order"``, ``"moment"``); results
      name the best one ``best_<order_word>`` (:attr:`best_key`).
    best_type: the type results store the best order as (``float``; moments ``int``).
    conversions: its (ε, δ) conversions; ``(None,)``: one, without a choice.
    takes_orders: whether it composes at a run's Rényi orders (else at moments
      ``1..max_moment``: :meth:`orders_of`).
    releasable: whether its data-dependent ε can be released with smooth sensitivity
      (Papernot et al. 2018, Sec. 4: only RDP).
    default_orders: ``max_moment -> orders`` when a run names none.
    check: ``(orders, conversion) -> (orders, conversion)``: validated.
    to_epsilon: ``(cost, orders, delta, conversion) -> (ε, best order)``, float64 jnp.
  """
  name: str
  label: str
  order_word: str
  best_type: type
  conversions: tuple[str | None, ...]
  takes_orders: bool
  releasable: bool
  default_orders: Callable[[int], Any]
  check: Callable[[Any, Any], tuple[Any, Any]]
  to_epsilon: Callable[..., tuple[jax.Array, jax.Array]]

  @property
  def best_key(self) -> str:
    """``"best_order"`` or ``"best_moment"``: the results key of the best order."""
    return f"best_{self.order_word}"

  def orders_of(self, orders: Any = None, max_moment: int = 8) -> Any:
    """The orders it composes at in a run configured with Rényi ``orders`` (``None``: the
    default grid) and moments up to ``max_moment``."""
    if self.takes_orders and orders is not None:
      return orders
    return self.default_orders(max_moment)


def _moment_orders(max_moment: int) -> np.ndarray:
  return np.arange(1, v.positive_int(max_moment, "max_moment") + 1, dtype=np.float64)


RDP = AccountantKind(
    name="rdp", label="RDP", order_word="order", best_type=float,
    conversions=("classic", "improved"), takes_orders=True, releasable=True,
    default_orders=lambda max_moment: _conversion.DEFAULT_ORDERS,
    check=lambda orders, conversion: (
        v.orders(orders), v.choice(conversion, "conversion", _conversion.CONVERSIONS)),
    to_epsilon=lambda cost, orders, delta, conversion: _conversion.rdp_to_epsilon_core(
        cost, orders, delta, conversion=conversion))

MOMENTS = AccountantKind(
    name="moments", label="2017 moments", order_word="moment", best_type=int,
    conversions=(None,), takes_orders=False, releasable=False,
    default_orders=_moment_orders,
    check=lambda orders, conversion: (v.moments(orders), None),
    to_epsilon=lambda cost, orders, delta, conversion: _lnmax.moments_to_epsilon_core(
        cost, orders, delta))

KIND_OF: dict[str, AccountantKind] = {k.name: k for k in (RDP, MOMENTS)}
KINDS = tuple(KIND_OF)


def accountant_kind(name: str, name_of_argument: str = "kind") -> AccountantKind:
  """The :class:`AccountantKind` called ``name`` (``ValueError`` naming the choices)."""
  return KIND_OF[v.choice(name, name_of_argument, KIND_OF)]


@dataclasses.dataclass(frozen=True)
class Accountant:
  """Composed privacy cost (a pytree: ``cost`` and ``orders`` are leaves).

  Attributes:
    cost: float64 ``[K]`` composed cost (RDP, or log-moments ``α(l)``).
    orders: float64 ``[K]`` Rényi orders ``λ > 1`` (``kind="rdp"``) or moment orders
      ``l > 0`` (``kind="moments"``).
    kind: ``"rdp"`` or ``"moments"`` (static).
    conversion: RDP → (ε, δ) conversion, ``"improved"`` or ``"classic"``; ``None``
      for the moments accountant (static).
  """
  cost: Any
  orders: Any
  kind: str = "rdp"
  conversion: str | None = "improved"

  def compose(self, costs: Any, mask: Any = None) -> "Accountant":
    """See :func:`compose`."""
    return compose(self, costs, mask)

  def epsilon(self, delta: Any) -> tuple[jax.Array, jax.Array]:
    """See :func:`epsilon`."""
    return epsilon(self, delta)

  @property
  def accountant_kind(self) -> AccountantKind:
    """Its :class:`AccountantKind`."""
    return KIND_OF[self.kind]


jax.tree_util.register_dataclass(Accountant, data_fields=["cost", "orders"],
                                 meta_fields=["kind", "conversion"])


def make_accountant(kind: str, orders: Any, conversion: str | None = "improved",
                    cost: Any = None) -> Accountant:
  """An accountant of ``kind`` at ``orders``, empty or starting from a composed ``cost``.

  Args:
    kind: ``"rdp"`` or ``"moments"``.
    orders: ``[K]`` Rényi orders ``> 1`` (rdp) or moment orders ``> 0`` (moments).
    conversion: ``"improved"`` or ``"classic"`` (rdp; ignored for moments).
    cost: ``[K]`` non-negative composed cost to start from (default zeros), or
      ``[..., K]``: a batch of composed costs, whose :func:`epsilon` is ``[...]``.
  """
  orders, conversion = accountant_kind(kind).check(orders, conversion)
  if cost is None:
    cost = np.zeros(np.shape(orders), np.float64)
  elif not v.is_traced(cost):
    cost = np.asarray(cost, np.float64)
    if cost.shape[-1:] != np.shape(orders) or not np.all(cost >= 0):
      raise ValueError(f"cost must be a non-negative array of shape [..., {np.size(orders)}] "
                       f"(one value per order); got {cost!r}")
  return Accountant(cost, orders, kind, conversion)


def rdp_accountant(orders: Any = _conversion.DEFAULT_ORDERS,
                   conversion: str = "improved") -> Accountant:
  """An empty Rényi-DP accountant (GNMax, Confident-GNMax, sampled Gaussian)."""
  return make_accountant("rdp", orders, conversion)


def moments_accountant(max_moment: int = 8) -> Accountant:
  """An empty 2017 moments accountant at ``l = 1..max_moment`` (LNMax)."""
  return make_accountant("moments", _moment_orders(max_moment))


@nm.with_x64
def compose(accountant: Accountant, costs: Any, mask: Any = None) -> Accountant:
  """Adds per-query costs to the accountant: ``cost + Σ_i mask_i costs[i]``.

  Args:
    accountant: the accountant.
    costs: float ``[K]`` (one event) or ``[Q, K]`` (one row per query).
    mask: optional bool ``[Q]``: only these rows are composed.

  Returns:
    A new accountant (float64 cost, summed in 64-bit mode).
  """
  costs = nm.as_float(costs)
  if costs.shape[-1:] != np.shape(accountant.orders):
    raise ValueError(f"costs must end in one value per order, {np.shape(accountant.orders)}; "
                     f"got shape {costs.shape}")
  if costs.ndim == 1:
    costs = costs[None]
  if mask is not None:
    costs = jnp.where(jnp.asarray(mask, bool)[:, None], costs, 0.0)
  total = nm.as_float(accountant.cost) + costs.reshape(-1, costs.shape[-1]).sum(0)
  return dataclasses.replace(accountant, cost=total)


@nm.with_x64
def epsilon(accountant: Accountant, delta: Any) -> tuple[jax.Array, jax.Array]:
  """``(ε, best order)`` of the composed cost at ``δ`` (float64 scalars)."""
  delta = v.delta(delta)
  cost = nm.as_float(accountant.cost)
  orders = nm.as_float(accountant.orders)
  return accountant.accountant_kind.to_epsilon(cost, orders, delta, accountant.conversion)
