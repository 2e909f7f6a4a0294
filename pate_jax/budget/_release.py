"""The parameters of the smooth-sensitivity release, fixed before the data is seen.

Owns :class:`ReleaseSpec` (order λ, β, σ_ss and the release's RDP curve, Theorem 23 of
Papernot et al. 2018) and :func:`default_release_order`, a data-independent rule for λ
that chooses only among the orders where conditions C5 and C6 of App. B.4.2 hold.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np

from pate_jax import _checks as v
from pate_jax import accounting as acc
from pate_jax import mechanisms


# A β of 0.4/λ: the middle of tf-privacy's grid 0.30/λ .. 0.49/λ.
DEFAULT_BETA_TIMES_ORDER = 0.4


class ReleaseSpec(NamedTuple):
  """Parameters of the smooth-sensitivity release, fixed before the data is seen.

  Attributes:
    order: the Rényi order λ > 1 at which the private RDP is released.
    beta: the smoothing β, ``0 < β < 1/(2λ)``.
    sigma_ss: the GNSS noise multiplier σ_ss > 0.
  """
  order: float
  beta: float
  sigma_ss: float

  @classmethod
  def make(cls, order: float, sigma_ss: float, beta: float | None = None, *,
           name: str = "release") -> "ReleaseSpec":
    """Validated parameters; ``beta`` defaults to ``0.4 / order``. ``name``: the block
    the errors name the fields of (``{name}.order``; ``config.release`` in a stage)."""
    order = float(v.orders(order, f"{name}.order").reshape(()))
    sigma_ss = float(v.positive(sigma_ss, f"{name}.sigma_ss"))
    beta = DEFAULT_BETA_TIMES_ORDER / order if beta is None else float(
        v.positive(beta, f"{name}.beta"))
    if not beta * order < 0.5:
      raise ValueError(f"{name}.beta must be < 1/(2·{name}.order) = {0.5 / order:g} "
                       f"(Theorem 23); got {beta!r}")
    return cls(order, beta, sigma_ss)

  def rdp_curve(self, orders: np.ndarray) -> np.ndarray:
    """The release's RDP ``ε_ss(β, σ_ss, α)`` at every order ``α < 1/(2β)`` (Theorem 23),
    ``+inf`` at the others: what one release costs the budget."""
    orders = np.asarray(orders, np.float64)
    valid = orders < 0.5 / self.beta
    out = np.full(orders.shape, np.inf)
    if valid.any():
      with jax.enable_x64(True):
        out[valid] = np.asarray(acc.gnss_rdp(self.beta, self.sigma_ss, orders[valid]))
    return out


def default_release_order(mechanism: mechanisms.Mechanism, params: dict[str, Any],
                          num_queries: int, delta: float, orders: Any = None,
                          conversion: str = "improved", *, num_classes: int) -> float:
  """A data-independent order for the release: among the orders of ``orders`` (default
  :data:`pate_jax.accounting.DEFAULT_ORDERS`) at which conditions C5 and C6 hold for
  ``params["sigma"]`` and ``num_classes`` (2018, App. B.4.2; the release's analysis holds
  only there), the one at which ``num_queries`` answers cost the least data-independent
  ε. A function of the settings only, so it may be chosen before the data is seen.

  Raises:
    ValueError: a mechanism without a smooth-sensitivity release (not RDP), or no order
      of ``orders`` at which both conditions hold (naming ``orders``).
  """
  num_queries = v.positive_int(num_queries, "num_queries")
  if not mechanism.accountant_kind.releasable:
    raise ValueError("mechanism: a smooth-sensitivity release exists for GNMax and "
                     f"Confident-GNMax only; got {mechanism.name!r}")
  # Each parameter under its own name: Confident-GNMax's σ_T was checked as the σ of its
  # √2·σ_T cost ("sigma must be > 0; got -1.41" for a σ_T of -1).
  params = mechanisms.check_params(mechanism, params)
  grid = acc.DEFAULT_ORDERS if orders is None else orders
  valid = acc.valid_release_orders(params["sigma"], num_classes, grid)
  if not valid.size:
    grid = np.asarray(grid, np.float64)
    raise ValueError(f"orders: none of the {grid.size} orders ({grid.min():g} to "
                     f"{grid.max():g}) satisfies conditions C5 and C6 (Papernot et al. 2018, "
                     f"App. B.4.2) with sigma {float(params['sigma']):g} and {num_classes} "
                     "classes; give orders where both hold "
                     "(pate_jax.accounting.valid_release_orders)")
  # Costed on the whole grid and on padded rows (the programs of a ledger's cost check and
  # ε, compiled once); the orders where C5 or C6 fails cost +inf, so they are never chosen.
  grid = np.asarray(grid, np.float64)
  accountant = mechanisms.make_accountant(mechanism, grid, conversion)
  votes, answered = mechanisms.padded_queries(np.zeros((1, num_classes), np.int32),
                                              np.ones(1, bool))
  per_query = np.asarray(mechanism.cost(votes, answered, params, accountant.orders, False))[0]
  cost = np.where(np.isin(grid, valid), num_queries * per_query, np.inf)
  with jax.enable_x64(True):
    _, best = accountant.compose(cost).epsilon(delta)
  return float(best)
