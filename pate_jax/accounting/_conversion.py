"""Conversion of composed Rényi-DP curves to ``(ε, δ)``-DP.

* ``"classic"`` (Mironov 2017, Proposition 3): ``ε = min_λ rdp(λ) + log(1/δ)/(λ-1)``.
* ``"improved"`` (Balle, Barthe, Gaboardi, Hsu, Sato 2020, "Hypothesis testing
  interpretations and Rényi DP", Theorem 21; also Canonne, Kamath, Steinke 2020):
  ``ε = min_λ rdp(λ) + log1p(-1/λ) - log(δ λ)/(λ-1)``.

Both are floored at 0 and return the minimizing order.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax.accounting import _numerics as nm
from pate_jax import _checks as v

CONVERSIONS = ("improved", "classic")
"""The RDP to (ε, δ) conversions, the default first."""

DEFAULT_ORDERS = np.array(
    [1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 12.0,
     14.0, 16.0, 20.0, 24.0, 28.0, 32.0, 40.0, 48.0, 56.0, 64.0, 80.0, 96.0, 128.0, 160.0,
     192.0, 256.0, 384.0, 512.0, 768.0, 1024.0])
"""Default Rényi orders (37): dense near 1 for large budgets, up to 1024 for tiny ones."""


@functools.partial(jax.jit, static_argnames=("conversion",))
def rdp_to_epsilon_core(rdp: jax.Array, orders: jax.Array, delta: jax.Array,
                        conversion: str = "improved") -> tuple[jax.Array, jax.Array]:
  """``(ε, best order)`` over the last axis of ``rdp[..., K]`` (no validation)."""
  log_delta = jnp.log(delta)
  if conversion == "classic":
    eps = rdp - log_delta / (orders - 1.0)
  else:
    eps = rdp + jnp.log1p(-1.0 / orders) - (log_delta + jnp.log(orders)) / (orders - 1.0)
  eps_min, idx = nm.min_and_argmin(eps, axis=-1)
  return jnp.maximum(eps_min, 0.0), orders[idx]


@nm.with_x64
def rdp_to_epsilon(rdp, orders, delta, conversion: str = "improved") -> tuple[jax.Array, jax.Array]:
  """Smallest ``ε`` such that a mechanism with RDP curve ``rdp`` is ``(ε, δ)``-DP.

  Args:
    rdp: ``[K]`` (or ``[..., K]``) RDP values already composed (summed) over the
      mechanisms, at ``orders``; ``+inf`` entries are allowed.
    orders: ``[K]`` Rényi orders ``λ > 1``.
    delta: target ``δ`` in (0, 1).
    conversion: ``"improved"`` (Balle et al. 2020) or ``"classic"`` (Mironov 2017).

  Returns:
    ``(ε, best_order)``: float64 arrays of shape ``rdp.shape[:-1]``; ``ε >= 0``.
  """
  conversion = v.choice(conversion, "conversion", CONVERSIONS)
  orders = v.orders(orders)
  rdp_arr = v.float64_array(rdp)
  if rdp_arr.ndim == 0 or rdp_arr.shape[-1] != orders.shape[0]:
    raise ValueError(f"rdp must have a last axis of length {orders.shape[0]} (one value per "
                     f"order); got shape {rdp_arr.shape}")
  if not v.is_traced(rdp_arr) and v.any_nan(rdp_arr):
    raise ValueError(f"rdp must not contain NaN; got {np.asarray(rdp)}")
  return rdp_to_epsilon_core(rdp_arr, orders, v.delta(delta), conversion=conversion)
