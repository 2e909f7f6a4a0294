"""``jit`` with a cheaper XLA:CPU compile for small, latency-bound programs."""

from __future__ import annotations

import contextlib
import functools
from typing import Callable

import jax

from pate_jax._checks import default_platform, is_traced


def bucket(n: int, minimum: int = 1) -> int:
  """Next power of two ``>= max(n, minimum)``: the size an array is padded to, so that one
  compiled program serves every size up to it."""
  return max(minimum, 1 << max(int(n) - 1, 0).bit_length())


class light_jit:  # pylint: disable=invalid-name
  """``jax.jit(fun)``, compiled at XLA backend optimisation level ``level`` on CPU.

  The aggregators, the budget ledger and the attack's Monte Carlo sampler are
  small programs whose cost on a CPU is dominated by LLVM optimisation at
  compile time, not by running them. Measured on a 2-core CPU
  (tests/test_ledger.py, two tests): 16 s of CPU with levels 0/1 against 29 s
  at the default, with the same run time of each step.

  The option is applied only where the call runs on a CPU (the default device, decided at
  each call, so importing never initialises a backend: also under
  ``jax.default_device(cpu)`` on a GPU machine) and only for a top-level call: JAX
  accepts ``compiler_options`` on an outermost ``jit`` only, so inside a
  caller's ``jit``/``vmap``/``grad`` the plain jitted function is used. On
  GPU/TPU it is plain ``jax.jit``.

  ``x64=True``: a top-level call traces and runs in 64-bit mode (a program drawing the
  mechanisms' float64 noise, :mod:`pate_jax.mechanisms`); inside a caller's trace the
  caller's mode holds.
  """

  def __init__(self, fun: Callable, *, level: int = 1, x64: bool = False, **jit_kwargs):
    self._x64 = x64
    self._plain = jax.jit(fun, **jit_kwargs)
    self._light = jax.jit(fun, compiler_options={"xla_backend_optimization_level": level},
                          **jit_kwargs)
    functools.update_wrapper(self, fun)

  def __call__(self, *args, **kwargs):
    traced = any(is_traced(x) for x in jax.tree.leaves((args, kwargs)))
    if traced:
      return self._plain(*args, **kwargs)
    with jax.enable_x64(True) if self._x64 else contextlib.nullcontext():
      if default_platform() != "cpu":
        return self._plain(*args, **kwargs)
      return self._light(*args, **kwargs)
