"""The teacher axis across devices: the mesh, padding and chunked loops.

:func:`teacher_mesh` is the 1-D device mesh whose axis carries the teachers;
:func:`pad_leading` pads a stacked tree's leading axis to a multiple of the device
count (copies of row 0); :func:`chunked_over_teachers` runs a function of stacked
trees over chunks of teachers one after another, updating the (donated) stacked
state in place. The slicing helpers are shared with the ensemble's planners.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

TEACHER_AXIS = "teachers"
PyTree = Any


def teacher_mesh(devices: list | None = None) -> Mesh:
  """A 1-D mesh whose axis carries the teachers: all devices of all processes by default
  (the local ones when there is one process)."""
  devices = jax.devices() if devices is None else devices
  return Mesh(np.asarray(devices), (TEACHER_AXIS,))


def pad_leading(tree: PyTree, multiple: int) -> tuple[PyTree, int]:
  """Pads each leaf's leading (teacher or query) axis to a multiple by repeating row 0.

  Leaves already padded are left alone. Returns the padded tree and the first
  leaf's original leading size.
  """
  def pad_leaf(a):
    pad = (-a.shape[0]) % multiple
    if pad == 0:
      return a
    xp = np if isinstance(a, np.ndarray) else jnp
    return xp.concatenate([a, xp.repeat(a[:1], pad, axis=0)])
  return jax.tree.map(pad_leaf, tree), jax.tree.leaves(tree)[0].shape[0]


def _probe(tree: PyTree, size: int) -> PyTree:
  """Abstract ``tree`` with its leading axis cut to ``size`` (for memory probes)."""
  return jax.tree.map(lambda a: jax.ShapeDtypeStruct((size, *a.shape[1:]), a.dtype), tree)


def _slice(tree: PyTree, start, size: int) -> PyTree:
  return jax.tree.map(lambda a: jax.lax.dynamic_slice_in_dim(a, start, size), tree)


def _update(tree: PyTree, part: PyTree, start) -> PyTree:
  return jax.tree.map(lambda a, b: jax.lax.dynamic_update_slice_in_dim(a, b, start, 0),
                      tree, part)


def chunked_over_teachers(fn: Callable, chunk: int) -> Callable:
  """``fn(tree, *rest) -> (tree', out)`` vmapped over chunks of ``chunk`` teachers.

  ``fn`` maps a stacked tree (leading teacher axis) to a new tree of the same
  structure and a per-teacher output ``[n]``. With ``chunk`` teachers at a time the
  chunks run one after another in a ``fori_loop`` whose carry is the whole
  stacked tree, updated in place (with a donated input, no second copy of the
  state is ever allocated); a last, smaller chunk takes the remainder.
  """
  def run(tree, *rest):
    n = jax.tree.leaves(tree)[0].shape[0]
    if chunk >= n:
      return fn(tree, *rest)
    out_shape = jax.eval_shape(fn, _slice(tree, 0, chunk), *_slice(rest, 0, chunk))[1]
    out = jnp.zeros((n, *out_shape.shape[1:]), out_shape.dtype)
    def body(i, carry):
      tree, out = carry
      lo = i * chunk
      new, o = fn(_slice(tree, lo, chunk), *_slice(rest, lo, chunk))
      return _update(tree, new, lo), _update(out, o, lo)
    full, rem = divmod(n, chunk)
    tree, out = jax.lax.fori_loop(0, full, body, (tree, out))
    if rem:  # the last, smaller chunk
      lo = full * chunk
      new, o = fn(_slice(tree, lo, rem), *_slice(rest, lo, rem))
      tree, out = _update(tree, new, lo), _update(out, o, lo)
    return tree, out
  return run
