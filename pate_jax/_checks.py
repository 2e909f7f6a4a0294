"""Primitives shared by the boundary validators (accounting, aggregation, attacks).

Values are validated only where they are concrete; under ``jit``/``vmap``/``grad``
the arguments are tracers and only static facts (shapes) can be checked.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np


def is_traced(x: Any) -> bool:
  """True if ``x`` is an abstract value (inside ``jit``/``vmap``/``grad``)."""
  return isinstance(x, jax.core.Tracer)


def first_bad(arr: np.ndarray, bad: np.ndarray) -> tuple[Any, tuple[int, ...]]:
  """The first offending value of ``arr`` where ``bad`` holds, and its index."""
  idx = tuple(int(i) for i in np.argwhere(bad)[0])
  return arr[idx].item(), idx
