"""Vectorised ablations: mechanism × teacher count × noise scale × seed in one compiled call.

:func:`ablation_grid` takes the teachers' predictions ``[T, Q]`` (``votes.npz``'s
``predictions``), the true labels, and four grid axes, and returns float64 arrays
``[mechanism, teachers, noise, seed]`` of

* ``accuracy``: label accuracy on the answered queries (NaN where none was answered);
* ``answered``: fraction of the ``Q`` queries answered (1 except for Confident-GNMax);
* ``epsilon`` / ``epsilon_order``: data-dependent ε at ``delta`` and the moment (LNMax) or
  Rényi order (GNMax, Confident-GNMax) that achieves it;
* ``epsilon_independent`` / ``epsilon_independent_order``: the data-independent ε.

Axes:

* **teachers** ``n``: the *first* ``n`` of the trained ensemble. The teachers were trained
  on disjoint partitions of the private data, each of ``N / T_total`` examples, so the first
  ``n`` are an ensemble of ``n`` teachers that saw ``n / T_total`` of the data (not ``n``
  teachers each trained on ``N / n`` examples, which would need retraining). Their vote
  histogram ``[Q, C]`` sums every row to ``n``.
* **noise scale** ``s``, mapped per mechanism by :func:`pate_jax.mechanisms.params_at`:
  LNMax Laplace scale ``1/γ = s`` (the 2017 MNIST γ = 0.05 is ``s = 20``);
  GNMax ``σ = s``; Confident-GNMax answer noise ``σ₂ = s`` with threshold
  ``threshold_fraction · n`` and threshold noise ``σ₁ = sigma_threshold_fraction · n``
  (defaults 0.8 and 0.6: the 2018 MNIST setting T = 200, σ₁ = 150 at n = 250).
* **seed** ``r``: one key per seed; the noise of query ``i`` is ``fold_in(keys[r], i)``
  for every mechanism, teacher count and scale (common random numbers), exactly as the
  public aggregators (:mod:`pate_jax.aggregation`) draw it with the default query ids, so a
  cell's labels equal ``aggregation.lnmax(keys[r], votes_n, 1/s)`` etc.

Each mechanism's ``answer`` and ``cost`` come from :data:`pate_jax.mechanisms.REGISTRY`;
costs are composed with the mechanism's accountant (moments 1..``max_moment`` for LNMax,
RDP at ``orders`` with the improved conversion otherwise), so a cell's ε equals what the
public API gives cell by cell (the loop baseline of :mod:`pate_jax.stages.ablation`, which
``experiments/ablate.py`` times against the grid and tests/test_ablation.py compares with
it). The whole grid is one ``jax.jit`` of nested ``vmap``\\ s (the mechanisms are stacked
branches of the same program), run in 64-bit mode (the noise is float64,
:mod:`pate_jax.mechanisms`).

References:
  Papernot et al. 2017 (ICLR), Section 2.1, Figure 2; Papernot et al. 2018 (ICLR),
  Section 4.1, Table 2.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks as v
from pate_jax import io
from pate_jax import mechanisms as mech_lib

__all__ = ["MECHANISMS", "FIELDS", "Grid", "subset_histograms",
           "ablation_grid", "grid_args", "as_grid", "grid_table", "plot_grid"]

# The default mechanism axis.
MECHANISMS = (mech_lib.LNMAX, mech_lib.GNMAX, mech_lib.CONFIDENT_GNMAX)
FIELDS = ("accuracy", "answered", "epsilon", "epsilon_order", "epsilon_independent",
          "epsilon_independent_order")


class Grid(NamedTuple):
  """float64 arrays ``[mechanism, teachers, noise, seed]`` (see the module docstring)."""
  accuracy: Any
  answered: Any
  epsilon: Any
  epsilon_order: Any
  epsilon_independent: Any
  epsilon_independent_order: Any


def subset_histograms(predictions: jax.Array, teacher_counts: jax.Array,
                      num_classes: int) -> jax.Array:
  """Histograms ``[N, Q, C]`` (int32) of the first ``teacher_counts[k]`` teachers.

  A cumulative sum of the one-hot predictions ``[T, Q, C]`` over teachers, read at row
  ``n - 1``: row ``k`` equals ``votes.histogram(predictions, C, teacher_counts[k])``.
  """
  one_hot = jax.nn.one_hot(predictions, num_classes, dtype=jnp.int32)
  return jnp.cumsum(one_hot, axis=0)[teacher_counts - 1]


def _cell(m, votes, n, scale, key, labels, fractions, orders, delta, max_moment):
  """One cell: correct and answered counts, and both ε (with orders) of mechanism ``m``."""
  params = mech_lib.params_at(m, scale, n.astype(scale.dtype), threshold_fraction=fractions[0],
                              sigma_threshold_fraction=fractions[1])
  ids = jnp.arange(votes.shape[0], dtype=jnp.uint32)
  answers, answered = m.answer(key, votes, ids, params)
  # Counts (exact in float64); as_grid divides on the host, as the loop baseline does.
  out = [jnp.sum((answers == labels) & answered), answered.sum()]
  for dd in (True, False):
    empty = mech_lib.make_accountant(m, m.accountant_kind.orders_of(orders, max_moment))
    eps, best = empty.compose(m.cost(votes, answered, params, empty.orders, dd)).epsilon(delta)
    out += [eps, best]
  return jnp.stack([jnp.asarray(x, jnp.float64) for x in out])


def _grid(predictions, labels, teacher_counts, noise_scales, keys, fractions, *, mechanisms,
          num_classes, orders, delta, max_moment):
  hists = subset_histograms(predictions, teacher_counts, num_classes)  # [N, Q, C]
  orders = None if orders is None else np.asarray(orders, np.float64)
  per_mechanism = []
  for m in mechanisms:  # Stacked branches of one program.
    cell = functools.partial(_cell, m, labels=labels, fractions=fractions, orders=orders,
                             delta=delta, max_moment=max_moment)
    over_seeds = jax.vmap(cell, in_axes=(None, None, None, 0))
    over_scales = jax.vmap(over_seeds, in_axes=(None, None, 0, None))
    over_teachers = jax.vmap(over_scales, in_axes=(0, 0, None, None))
    per_mechanism.append(over_teachers(hists, teacher_counts, noise_scales, keys))
  return jnp.moveaxis(jnp.stack(per_mechanism), -1, 0)  # [F, M, N, S, R]


_STATIC = ("mechanisms", "num_classes", "orders", "delta", "max_moment")
_COMPILED = {  # fast_compile: XLA:CPU backend optimisation level 0 (see pate_jax._compile).
    False: jax.jit(_grid, static_argnames=_STATIC),
    True: jax.jit(_grid, static_argnames=_STATIC,
                  compiler_options={"xla_backend_optimization_level": 0}),
}


def _check_grid(predictions, labels, teacher_counts, noise_scales, keys, num_classes,
                mechanisms, threshold_fraction, sigma_threshold_fraction):
  predictions = np.asarray(predictions)
  if predictions.ndim != 2 or predictions.dtype.kind not in "iu" or predictions.size == 0:
    raise ValueError(f"predictions must be a non-empty [T, Q] integer array; got "
                     f"{predictions.dtype} {predictions.shape}")
  t, q = predictions.shape
  num_classes = v.positive_int(num_classes, "num_classes", 2)
  if predictions.min() < 0 or predictions.max() >= num_classes:
    raise ValueError(f"predictions must be classes in [0, num_classes={num_classes}); got "
                     f"range [{predictions.min()}, {predictions.max()}]")
  labels = np.asarray(v.labels(labels, q, num_classes))
  counts = np.asarray(teacher_counts)
  if (counts.ndim != 1 or counts.size == 0 or counts.dtype.kind not in "iu"
      or counts.min() < 1 or counts.max() > min(t, mech_lib.MAX_TEACHERS)):
    raise ValueError(f"teacher_counts must be a non-empty 1-D array of integers in [1, T={t}] "
                     f"(the first n teachers); got {teacher_counts!r}")
  scales = v.positive_vector(noise_scales, "noise_scales", "noise scales")
  if not isinstance(mechanisms, (tuple, list)) or not mechanisms:
    raise ValueError(f"mechanisms must be a non-empty sequence of registered mechanisms "
                     f"{mech_lib.names()}; got {mechanisms!r}")
  mechanisms = tuple(mech_lib.get(m, "mechanisms") for m in mechanisms)
  keys = jnp.asarray(keys)
  if not jnp.issubdtype(keys.dtype, jax.dtypes.prng_key) or keys.ndim != 1 or keys.size == 0:
    raise ValueError(f"keys must be a non-empty 1-D array of typed PRNG keys (one per seed, "
                     f"e.g. jax.random.split(key, R)); got {keys.dtype} {keys.shape}")
  v.positive(threshold_fraction, "threshold_fraction")
  v.positive(sigma_threshold_fraction, "sigma_threshold_fraction")
  return predictions, labels, counts.astype(np.int32), scales, keys, int(num_classes), mechanisms


def ablation_grid(predictions: Any, labels: Any, teacher_counts: Any, noise_scales: Any,
                  keys: jax.Array, *, num_classes: int, delta: float,
                  mechanisms: tuple = MECHANISMS, threshold_fraction: float = 0.8,
                  sigma_threshold_fraction: float = 0.6, orders: Any = None,
                  max_moment: int = 8, fast_compile: bool = False,
                  compile_only: bool = False) -> Grid | Any:
  """The whole ablation grid in one compiled call (see the module docstring).

  Args:
    predictions: int ``[T, Q]`` each teacher's predicted class per query.
    labels: int ``[Q]`` true labels.
    teacher_counts: int ``[N]`` in ``[1, T]``: use the first ``n`` teachers.
    noise_scales: ``[S]`` noise scales ``s > 0`` (:func:`pate_jax.mechanisms.params_at`).
    keys: typed PRNG keys ``[R]``, one per seed.
    num_classes: ``C``.
    delta: δ of the reported (ε, δ).
    mechanisms: registered :class:`pate_jax.mechanisms.Mechanism` objects (or their names;
      default :data:`MECHANISMS`): the leading output axis, in this order.
    threshold_fraction, sigma_threshold_fraction: Confident-GNMax threshold and σ₁ as
      fractions of ``n``.
    orders: RDP orders (default :data:`pate_jax.accounting.DEFAULT_ORDERS`).
    max_moment: LNMax moments ``1..max_moment``.
    fast_compile: compile at XLA backend optimisation level 0 (CPU tests: about half the
      compile time of the default on this grid's program; the grid runs slower).
    compile_only: return the compiled executable (``jax.stages.Compiled``) instead of
      running it; call it as ``compiled(*args)`` with :func:`grid_args`' arguments.

  Returns:
    :class:`Grid` of float64 numpy arrays ``[M, N, S, R]``.
  """
  args, static = grid_args(predictions, labels, teacher_counts, noise_scales, keys,
                           num_classes=num_classes, delta=delta, mechanisms=mechanisms,
                           threshold_fraction=threshold_fraction,
                           sigma_threshold_fraction=sigma_threshold_fraction, orders=orders,
                           max_moment=max_moment)
  fn = _COMPILED[bool(fast_compile)]
  with jax.enable_x64(True):
    if compile_only:
      return fn.lower(*args, **static).compile()
    return as_grid(fn(*args, **static), np.shape(predictions)[1])


def grid_args(predictions, labels, teacher_counts, noise_scales, keys, *, num_classes, delta,
              mechanisms=MECHANISMS, threshold_fraction=0.8, sigma_threshold_fraction=0.6,
              orders=None, max_moment=8) -> tuple[tuple, dict]:
  """Validated ``(positional, static)`` arguments of the compiled grid (:func:`ablation_grid`)."""
  predictions, labels, counts, scales, keys, num_classes, mechanisms = _check_grid(
      predictions, labels, teacher_counts, noise_scales, keys, num_classes, mechanisms,
      threshold_fraction, sigma_threshold_fraction)
  delta = float(v.delta(delta))
  max_moment = v.positive_int(max_moment, "max_moment")
  orders = None if orders is None else tuple(float(o) for o in v.orders(orders))
  with jax.enable_x64(True):
    args = (jnp.asarray(predictions, jnp.int32), jnp.asarray(labels, jnp.int32),
            jnp.asarray(counts), jnp.asarray(scales, jnp.float64), keys,
            jnp.asarray([threshold_fraction, sigma_threshold_fraction], jnp.float64))
  static = {"mechanisms": mechanisms, "num_classes": num_classes, "orders": orders,
            "delta": delta, "max_moment": max_moment}
  return args, static


def as_grid(stacked: Any, num_queries: int) -> Grid:
  """The compiled grid's ``[F, M, N, S, R]`` output (correct and answered counts first) as a
  :class:`Grid` of numpy arrays; accuracy and fraction answered divided here in numpy."""
  stacked = np.asarray(stacked)
  correct, answered = stacked[0], stacked[1]
  with np.errstate(invalid="ignore", divide="ignore"):
    accuracy = np.where(answered > 0, correct / np.maximum(answered, 1), np.nan)
  return Grid(accuracy, answered / num_queries, *(stacked[i] for i in range(2, len(FIELDS))))


def grid_table(grid: Grid, mechanisms: tuple, teacher_counts: Any,
               noise_scales: Any) -> list[dict[str, Any]]:
  """One row per (mechanism, teacher count, scale): each field's mean, min and max over seeds."""
  rows = []
  for m, mechanism in enumerate(mech_lib.get(x, "mechanisms") for x in mechanisms):
    for n, count in enumerate(np.asarray(teacher_counts)):
      for s, scale in enumerate(np.asarray(noise_scales)):
        row = {"mechanism": mechanism.name, "teachers": int(count), "scale": float(scale),
               **mech_lib.params_at(mechanism, float(scale), float(count))}
        for field in FIELDS:
          x = getattr(grid, field)[m, n, s]
          row[field] = {"mean": float(np.mean(x)), "min": float(np.min(x)),
                        "max": float(np.max(x))}
        rows.append(row)
  return rows


def plot_grid(grid: Grid, mechanisms: tuple, teacher_counts: Any, noise_scales: Any,
              path: Any, title: str = "") -> None:
  """Accuracy, fraction answered and data-dependent ε (dashed: data-independent) vs noise
  scale, one column per mechanism, one line per teacher count (mean over seeds, min–max
  band)."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top
  scales = np.asarray(noise_scales, float)
  rows = (("accuracy", "label accuracy (answered)"), ("answered", "fraction answered"),
          ("epsilon", "ε (data-dependent; dashed: independent)"))
  fig = Figure(figsize=(4.2 * len(mechanisms), 9))
  axes = fig.subplots(len(rows), len(mechanisms), squeeze=False, sharex=True)
  colors = matplotlib.colormaps["viridis"](np.linspace(0, 0.9, len(np.asarray(teacher_counts))))
  for m, mechanism in enumerate(mech_lib.get(x, "mechanisms") for x in mechanisms):
    for n, count in enumerate(np.asarray(teacher_counts)):
      for row, (field, label) in enumerate(rows):
        ax = axes[row, m]
        x = getattr(grid, field)[m, n]
        ax.plot(scales, np.mean(x, -1), color=colors[n], label=f"{count} teachers")
        ax.fill_between(scales, np.min(x, -1), np.max(x, -1), color=colors[n], alpha=0.2)
        if field == "epsilon":
          ax.plot(scales, np.mean(grid.epsilon_independent[m, n], -1), "--", color=colors[n],
                  lw=0.8)
          ax.set_yscale("log")
        ax.set_ylabel(label)
        ax.set_xscale("log")
    for ax in axes[:, m]:
      ax.set_xticks(scales, [f"{x:g}" for x in scales], fontsize=7)
      ax.minorticks_off()
    axes[0, m].set_title(mechanism.name)
    noise = mechanism.noise.symbol or mechanism.noise_param
    axes[-1, m].set_xlabel(f"noise scale s ({'1/' if mechanism.inverse_scale else ''}{noise})")
  axes[0, 0].legend(fontsize=7)
  if title:
    fig.suptitle(title)
  fig.tight_layout()
  io.save_figure(fig, path, dpi=110)
