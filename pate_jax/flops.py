"""FLOPs of a JAX function, counted from its jaxpr (the same on every backend).

:func:`jaxpr_flops` traces ``fn`` with :func:`jax.make_jaxpr` (concrete arrays or
:class:`jax.ShapeDtypeStruct` s: nothing is compiled or run) and adds up the
multiply-accumulates of its matrix products and convolutions, two FLOPs each:

* ``dot_general``: ``2 · Π(batch) · Π(lhs free) · Π(rhs free) · Π(contracting)``, i.e.
  ``2 · size(output) · Π(contracting dims)``;
* ``conv_general_dilated``: ``2 · N_out · C_out · Π_d taps_d · C_in/G``, where
  ``N_out``, ``C_out`` are the output's batch and feature sizes, ``C_in/G`` is the size of
  the kernel's input-feature dimension (the input features each output feature reads:
  ``C_in / feature_group_count``; with ``batch_group_count`` the kernel holds all ``C_in``
  and the output batch is ``N / batch_group_count``), and ``taps_d`` counts the (output
  position, kernel position) pairs of spatial dimension ``d`` that read a real input
  element -- not padding, not a hole of ``lhs_dilation``. With ``count_padding=True`` every
  pair counts (``taps_d = out_d · k_d``): the dense ``2 · size(output) · Π(kernel spatial)
  · C_in/G``. The default is XLA's convention (``HloCostAnalysis::GetConvolutionFlops``),
  so a program of convolutions and matrix products gets the number XLA's own cost analysis
  gives on the backends that report one.

Everything else (elementwise ops, reductions, pooling, the optimiser's update) is not
counted: for a convolutional network they are a few per cent of the total, and XLA counts
them (one FLOP per element) where it counts at all.

Sub-jaxprs are followed: ``jit``/``pjit``, ``closed_call``, ``remat``,
``custom_jvp_call``/``custom_vjp_call`` (the primal body, once), ``shard_map`` (the
per-device body times the devices of its manual axes), ``scan`` (the body times
``length``) and ``cond`` (the costliest branch: an upper bound of what runs). A ``while``
loop's trip count is not in its jaxpr, so :func:`jaxpr_flops` raises ``ValueError`` on one
(``lax.fori_loop`` with Python-int bounds is a ``scan`` and is counted). Equations whose
results nothing uses are dead code, dropped by XLA, and not counted.

Reference: the MFU convention of Chowdhery et al., "PaLM" (2022), App. B -- model FLOPs
from the program, not from the hardware counters.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import jax
import jax.extend.core as jex_core
import numpy as np

__all__ = ["jaxpr_flops", "count_flops", "dot_general_flops", "conv_flops", "conv_taps"]


def dot_general_flops(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                      dimension_numbers: Any) -> int:
  """``2 · Π(batch) · Π(lhs free) · Π(rhs free) · Π(contracting)`` of one ``dot_general``
  (``dimension_numbers = ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))``)."""
  (lhs_contract, _), (lhs_batch, rhs_batch) = dimension_numbers
  lhs_free = [d for i, d in enumerate(lhs_shape) if i not in (*lhs_contract, *lhs_batch)]
  rhs_contract = dimension_numbers[0][1]
  rhs_free = [d for i, d in enumerate(rhs_shape) if i not in (*rhs_contract, *rhs_batch)]
  return 2 * (math.prod(lhs_shape[i] for i in lhs_batch) * math.prod(lhs_free)
              * math.prod(rhs_free) * math.prod(lhs_shape[i] for i in lhs_contract))


def conv_taps(out_size: int, kernel_size: int, in_size: int, *, stride: int = 1,
              padding: tuple[int, int] = (0, 0), lhs_dilation: int = 1,
              rhs_dilation: int = 1) -> int:
  """The (output position, kernel position) pairs of one spatial dimension that read a
  real input element: input index ``o·stride + k·rhs_dilation - padding_low`` of the
  ``lhs_dilation``-dilated input must be a multiple of ``lhs_dilation`` and fall on one of
  the ``in_size`` elements."""
  o = np.arange(out_size, dtype=np.int64)[:, None]
  k = np.arange(kernel_size, dtype=np.int64)[None, :]
  at = o * stride + k * rhs_dilation - padding[0]
  real = (at >= 0) & (at % lhs_dilation == 0) & (at // lhs_dilation < in_size)
  return int(real.sum())


def conv_flops(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
               out_shape: Sequence[int], *, dimension_numbers: Any,
               window_strides: Sequence[int], padding: Sequence[tuple[int, int]],
               lhs_dilation: Sequence[int] | None = None,
               rhs_dilation: Sequence[int] | None = None, count_padding: bool = False,
               **unused_params: Any) -> int:
  """``2 · N_out · C_out · Π_d taps_d · C_in/G`` of one ``conv_general_dilated`` (module
  docstring); the keyword arguments are the equation's parameters (``dimension_numbers``
  a ``ConvDimensionNumbers`` of ``(batch, feature, spatial...)`` indices for lhs and out,
  ``(out feature, in feature, spatial...)`` for rhs)."""
  lhs_spec, rhs_spec, out_spec = dimension_numbers
  spatial = len(out_spec) - 2
  lhs_dilation = tuple(lhs_dilation or (1,) * spatial)
  rhs_dilation = tuple(rhs_dilation or (1,) * spatial)
  taps = 1
  for d in range(spatial):
    out_d, k_d = out_shape[out_spec[2 + d]], rhs_shape[rhs_spec[2 + d]]
    taps *= out_d * k_d if count_padding else conv_taps(
        out_d, k_d, lhs_shape[lhs_spec[2 + d]], stride=window_strides[d],
        padding=tuple(padding[d]), lhs_dilation=lhs_dilation[d],
        rhs_dilation=rhs_dilation[d])
  return 2 * (out_shape[out_spec[0]] * out_shape[out_spec[1]] * taps
              * rhs_shape[rhs_spec[1]])


def _closed(jaxpr: Any) -> Any:
  return jaxpr.jaxpr if isinstance(jaxpr, jex_core.ClosedJaxpr) else jaxpr


def _is_jaxpr(x: Any) -> bool:
  return isinstance(x, (jex_core.ClosedJaxpr, jex_core.Jaxpr))


# Primitives with several jaxprs of which one runs: count that one.
_BODY = {"custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr",
         "custom_vjp_call_jaxpr": "fun_jaxpr", "linear_call": "callee"}


def _equation_flops(eqn: Any, count_padding: bool) -> int:
  name, params = eqn.primitive.name, eqn.params
  shapes = [v.aval.shape for v in eqn.invars]
  if name == "dot_general":
    return dot_general_flops(shapes[0], shapes[1], params["dimension_numbers"])
  if name == "conv_general_dilated":
    return conv_flops(shapes[0], shapes[1], eqn.outvars[0].aval.shape,
                      count_padding=count_padding, **params)
  if name == "while":
    raise ValueError("jaxpr_flops: a while loop's trip count is not static (lax.while_loop, "
                     "or lax.fori_loop with traced bounds); count its body separately")
  if name == "scan":
    return int(params["length"]) * count_flops(params["jaxpr"], count_padding=count_padding)
  if name == "cond":
    return max(count_flops(b, count_padding=count_padding) for b in params["branches"])
  if name in _BODY:
    return count_flops(params[_BODY[name]], count_padding=count_padding)
  times = 1
  if name == "shard_map":
    mesh = params["mesh"]
    axes = params.get("manual_axes", params.get("newly_manual_axes", mesh.axis_names))
    times = math.prod(dict(mesh.shape)[a] for a in axes)
  elif name == "xla_pmap":
    times = int(params["axis_size"])
  subs = [j for p in params.values() for j in (p if isinstance(p, (tuple, list)) else (p,))
          if _is_jaxpr(j)]
  return times * sum(count_flops(j, count_padding=count_padding) for j in subs)


def count_flops(jaxpr: Any, *, count_padding: bool = False) -> int:
  """2 × the multiply-accumulates of ``jaxpr``'s ``dot_general`` and
  ``conv_general_dilated`` equations, sub-jaxprs included (module docstring); ``jaxpr`` a
  ``ClosedJaxpr`` or ``Jaxpr``. An exact integer. Equations none of whose outputs is used
  (and that have no effects) are dead code and not counted -- ``jax.grad`` of a sum keeps
  the forward pass in its jaxpr though nothing reads it -- as XLA drops them; a
  sub-jaxpr counts with all its outputs used.

  Raises:
    ValueError: the jaxpr holds a ``while`` loop.
  """
  jaxpr = _closed(jaxpr)
  live = {v for v in jaxpr.outvars if isinstance(v, jex_core.Var)}
  total = 0
  for eqn in reversed(jaxpr.eqns):  # dead code (unused outputs, no effects) is skipped
    if eqn.effects or any(v in live for v in eqn.outvars):
      total += _equation_flops(eqn, count_padding)
      live.update(v for v in eqn.invars if isinstance(v, jex_core.Var))
  return total


def jaxpr_flops(fn: Callable[..., Any], *args: Any, count_padding: bool = False) -> float:
  """FLOPs of ``fn(*args)`` counted from its jaxpr: 2 × the multiply-accumulates of its
  matrix products and convolutions (module docstring). ``args`` may be arrays or
  :class:`jax.ShapeDtypeStruct` pytrees; ``fn`` is traced, never compiled or run.

  Raises:
    ValueError: ``fn`` runs a ``while`` loop (its trip count is not in the jaxpr).
  """
  return float(count_flops(jax.make_jaxpr(fn)(*args), count_padding=count_padding))
