"""An accountant: a pytree that composes per-query costs and answers ε (dp_accounting's role).

``Accountant`` holds a composed cost curve ``cost[K]`` at ``orders[K]`` in float64, and
as static (pytree meta) data its ``kind`` and RDP ``conversion``:

* ``kind="rdp"``: Rényi-DP at orders ``λ > 1``; ``ε = rdp_to_epsilon(cost, orders, δ,
  conversion)`` (Mironov 2017 "classic", or Balle et al. 2020 "improved").
* ``kind="moments"``: the 2017 moments accountant's log-moments ``α(l)`` at moment
  orders ``l > 0``; ``ε = min_l (α(l) + log 1/δ) / l`` (Papernot et al. 2017, Thm 2).

:func:`compose` adds per-query costs ``[..., K]`` (optionally masked) and
:func:`epsilon` converts; both run with 64-bit mode enabled, so the float64 state never
passes through a float32 operation (the truncation trap of the package docstring) --
except inside a jit traced in 32-bit mode, where everything is float32 (package docstring).
Being a pytree, an accountant is carried through ``jit``/``vmap``/``lax.scan``; its kind
and conversion are static, so a compiled step computes exactly one accounting.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks as v
from pate_jax.accounting import _conversion
from pate_jax.accounting import _lnmax
from pate_jax.accounting import _numerics as nm

KINDS = ("rdp", "moments")


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
  v.choice(kind, "kind", KINDS)
  if kind == "rdp":
    orders = v.orders(orders)
    conversion = v.choice(conversion, "conversion", _conversion.CONVERSIONS)
  else:
    orders, conversion = v.moments(orders), None
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
  max_moment = v.positive_int(max_moment, "max_moment")
  return make_accountant("moments", np.arange(1, max_moment + 1, dtype=np.float64))


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
  if accountant.kind == "moments":
    return _lnmax.moments_to_epsilon_core(cost, orders, delta)
  return _conversion.rdp_to_epsilon_core(cost, orders, delta, conversion=accountant.conversion)
