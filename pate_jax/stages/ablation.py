"""The ablation stage: mechanism × teacher count × noise scale × seed in one compiled call,
timed against a Python loop over the same cells.

``run(config, workdir)`` reads ``<votes_dir>/votes.npz`` (its ``predictions``: each
teacher's class per query), runs the grid of :func:`pate_jax.ablation.ablation_grid` on
the first ``num_queries`` public-pool rows, then the same grid cell by cell through the
public API (:func:`loop_grid`: pate_jax.aggregation and the mechanisms' accountants;
``loop_max_cells`` evenly spaced cells, extrapolated, when > 0), checks that both give
the same labels and ε, and writes ``results.json`` (a measurement) and ``ablation.png``
(what ``experiments/ablate.py`` documents). The loop baseline lives here, beside the
benchmark that times it, not in the library.
"""

from __future__ import annotations

import os
import pathlib
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks
from pate_jax import ablation
from pate_jax import aggregation
from pate_jax import experiment
from pate_jax import mechanisms as mech_lib
from pate_jax import rng
from pate_jax import votes as votes_lib

__all__ = ["run", "plan", "report", "loop_cell", "loop_histograms", "loop_grid", "grid_cells"]


def check_counts(config: Any) -> None:
  """``num_seeds`` and ``repeats`` (>= 1), ``loop_max_cells`` (>= 0; 0: every cell),
  refused naming the field: 0 seeds failed naming the keys, 0 repeats with "min() arg is
  an empty sequence" once the grid had run."""
  _checks.positive_int(config.num_seeds, "config.num_seeds")
  _checks.positive_int(config.repeats, "config.repeats")
  _checks.positive_int(config.loop_max_cells, "config.loop_max_cells", minimum=0)


def _sequence(x: Any, name: str, what: str) -> tuple:
  """``x`` as a non-empty tuple (a list or tuple of the config), else a ``ValueError``."""
  if not isinstance(x, (tuple, list)) or not x:
    raise ValueError(f"{name} must be a non-empty tuple of {what}; got {x!r}")
  return tuple(x)


def check_config(config: Any) -> None:
  """Every setting of the grid, refused naming the field before the votes are read (and by
  ``--dry_run``): the counts (:func:`check_counts`), ``num_queries`` (>= 1), the
  mechanisms (registered names), the teacher counts (integers >= 1), the noise scales and
  the Confident-GNMax fractions (> 0), δ in (0, 1), ``max_moment`` (>= 1) and the orders
  (``None`` or orders > 1). ``--dry_run`` accepted each; a run was refused by the library
  after making the work directory, naming its own argument (``delta``, not
  ``config.delta``), and read a string of mechanisms letter by letter."""
  check_counts(config)
  _checks.positive_int(config.num_queries, "config.num_queries")
  for m in _sequence(config.mechanisms, "config.mechanisms", "mechanism names"):
    mech_lib.get(m, "config.mechanisms")
  for n in _sequence(config.teacher_counts, "config.teacher_counts", "integers >= 1"):
    _checks.positive_int(n, "config.teacher_counts")
  for scale in _sequence(config.noise_scales, "config.noise_scales", "numbers > 0"):
    _checks.positive(scale, "config.noise_scales")
  _checks.positive(config.threshold_fraction, "config.threshold_fraction")
  _checks.positive(config.sigma_threshold_fraction, "config.sigma_threshold_fraction")
  _checks.delta(config.delta, "config.delta")
  _checks.positive_int(config.max_moment, "config.max_moment")
  if config.orders is not None:
    _checks.orders(config.orders, "config.orders")


def plan(config: Any) -> dict[str, Any]:
  """``--dry_run``: the votes (and whether they carry per-teacher predictions), the grid's
  size and an estimate of its largest intermediate (one float64 noise draw per cell, query
  and class), without compiling."""
  check_config(config)
  grid = (len(config.mechanisms), len(config.teacher_counts), len(config.noise_scales),
          int(config.num_seeds))
  cells = int(np.prod(grid))
  q = int(config.num_queries)
  out: dict[str, Any] = {"grid": " × ".join(map(str, grid)) + " (mechanisms × teachers × "
                         "scales × seeds)", "cells": cells, "num_queries": q,
                         "loop_cells": int(config.loop_max_cells) or cells,
                         "repeats": int(config.repeats)}
  sizes, data = experiment.votes_plan(config.votes_dir)
  out.update(sizes)
  if data is None:
    return out
  c, t = data["votes"].shape[1], int(data["num_teachers"])
  out["predictions"] = (f"{list(data['predictions'].shape)}" if "predictions" in data
                        else "MISSING: rerun experiments/train_teachers.py")
  out["num_queries_within_pool"] = 0 < q <= data["num_pool"]
  out["teacher_counts_within_ensemble"] = max(config.teacher_counts) <= t
  out["noise_bytes_estimate"] = cells * q * c * 8
  return out


def loop_cell(mechanism: Any, votes: Any, labels: Any, num_teachers: int, scale: float,
              key: jax.Array, *, delta: float, threshold_fraction: float = 0.8,
              sigma_threshold_fraction: float = 0.6, orders: Any = None,
              max_moment: int = 8) -> tuple[float, ...]:
  """One grid cell through the public API, as a user would write it (the loop baseline).

  ``votes``: the histogram of the first ``num_teachers`` teachers
  (:func:`pate_jax.votes.histogram`). Answers with :mod:`pate_jax.aggregation`, composes
  ``mechanism.cost`` with :func:`pate_jax.mechanisms.make_accountant` data-dependently
  and data-independently. Returns the cell's values in :data:`pate_jax.ablation.FIELDS` order.
  """
  m = mech_lib.get(mechanism, "mechanism")
  params = mech_lib.params_at(m, float(scale), float(num_teachers),
                              threshold_fraction=threshold_fraction,
                              sigma_threshold_fraction=sigma_threshold_fraction)
  answers, answered = aggregation.answer(m, key, votes, params)
  answers, answered = np.asarray(answers), np.asarray(answered)
  n = int(answered.sum())
  out = [float(np.sum((answers == np.asarray(labels)) & answered) / np.float64(n)) if n
         else float("nan"), n / answered.shape[0]]
  orders = None if orders is None else np.asarray(orders, np.float64)
  for dd in (True, False):
    empty = mech_lib.make_accountant(m, m.accountant_kind.orders_of(orders, max_moment))
    eps, best = empty.compose(m.cost(votes, answered, params, empty.orders, dd)).epsilon(delta)
    out += [float(eps), float(best)]
  return tuple(out)


def loop_histograms(predictions: Any, teacher_counts: Any, num_classes: int) -> list[jax.Array]:
  """``votes.histogram`` of the first ``n`` teachers for each ``n`` (the loop baseline's)."""
  predictions = jnp.asarray(predictions, jnp.int32)
  return [votes_lib.histogram(predictions[:int(n)], num_classes) for n in teacher_counts]


def loop_grid(predictions: Any, labels: Any, teacher_counts: Any, noise_scales: Any,
              keys: jax.Array, cells: Any, *, num_classes: int, delta: float,
              mechanisms: tuple = ablation.MECHANISMS, **kwargs: Any
              ) -> tuple[np.ndarray, float, float]:
  """The loop baseline over ``cells`` (int ``[K, 4]`` grid indices ``(m, n, s, r)``).

  First answers one cell of each mechanism (its time, mostly the public API's compilation,
  is returned separately), then every cell of ``cells`` with
  :func:`loop_cell` (histograms by :func:`loop_histograms`, each computed once per teacher
  count, inside the timed region). Returns ``(values [K, F], compile_s, loop_s)``.
  """
  counts = [int(n) for n in np.asarray(teacher_counts)]
  scales = [float(s) for s in np.asarray(noise_scales)]
  start = time.perf_counter()
  warm = loop_histograms(predictions, counts[:1], num_classes)[0]
  for name in mechanisms:
    loop_cell(name, warm, labels, counts[0], scales[0], keys[0], delta=delta, **kwargs)
  compile_s = time.perf_counter() - start
  start = time.perf_counter()
  hists = loop_histograms(predictions, counts, num_classes)
  out = np.array([loop_cell(mechanisms[m], hists[n], labels, counts[n], scales[s], keys[r],
                            delta=delta, **kwargs) for m, n, s, r in np.asarray(cells)])
  return out, compile_s, time.perf_counter() - start


def grid_cells(shape: tuple[int, ...], max_cells: int = 0) -> np.ndarray:
  """Indices ``[K, 4]`` of every cell of ``shape``, or ``max_cells`` evenly spaced ones."""
  cells = np.stack(np.unravel_index(np.arange(int(np.prod(shape))), shape), axis=1)
  if 0 < max_cells < len(cells):
    cells = cells[np.linspace(0, len(cells) - 1, max_cells).round().astype(int)]
  return cells


def run(config: Any, workdir: str) -> dict[str, Any]:
  """The grid, the loop over its cells, their agreement, ``results.json`` and
  ``ablation.png`` (module docstring), in ``workdir`` (locked meanwhile), which must not be
  the teachers' own: their ``results.json`` would be replaced."""
  if not config.votes_dir:
    raise ValueError("config.votes_dir is empty: name the teachers workdir whose votes.npz "
                     "has per-teacher predictions (the ablation writes into its own workdir)")
  if (pathlib.Path(workdir) / "votes.npz").exists():
    raise ValueError(f"workdir {workdir} holds a votes.npz: the ablation would replace the "
                     "teachers' results.json there; give it a workdir of its own")
  check_config(config)
  with experiment.locked_workdir(workdir):
    return _run(config, workdir)


def _run(config: Any, workdir: str) -> dict[str, Any]:
  data = votes_lib.load_votes(config.votes_dir)
  if "predictions" not in data:
    raise ValueError(f"{config.votes_dir}/votes.npz has no per-teacher predictions "
                     "(written before they were stored): rerun experiments/train_teachers.py "
                     "for that teachers workdir, or name another with --config.votes_dir")
  q = int(config.num_queries)
  if not 0 < q <= data["num_pool"]:
    raise ValueError(f"config.num_queries must be in [1, num_pool={data['num_pool']}], got {q}")
  mechanisms = tuple(mech_lib.get(m, "config.mechanisms") for m in config.mechanisms)
  counts, scales = np.asarray(config.teacher_counts), np.asarray(config.noise_scales, float)
  keys = jax.random.split(rng.stream(rng.root_key(config.seed), "aggregation"),
                          int(config.num_seeds))
  kwargs = {"delta": config.delta, "threshold_fraction": config.threshold_fraction,
            "sigma_threshold_fraction": config.sigma_threshold_fraction,
            "orders": config.orders, "max_moment": config.max_moment}
  inputs = (data["predictions"][:, :q], data["labels"][:q], counts, scales, keys)
  num_classes = data["votes"].shape[1]

  start = time.perf_counter()
  compiled = ablation.ablation_grid(*inputs, num_classes=num_classes, mechanisms=mechanisms,
                                    compile_only=True, **kwargs)
  compile_s = time.perf_counter() - start
  args, _ = ablation.grid_args(*inputs, num_classes=num_classes, mechanisms=mechanisms,
                               **kwargs)
  with jax.enable_x64(True):
    wall, _ = experiment.timed(lambda: compiled(*args), int(config.repeats))
    grid = ablation.as_grid(compiled(*args), q)
  load_grid = os.getloadavg()[0]
  shape = grid.accuracy.shape
  cells = grid_cells(shape, int(config.loop_max_cells))
  loop, loop_compile_s, loop_s = loop_grid(
      *inputs, cells, num_classes=num_classes, mechanisms=mechanisms, **kwargs)
  load_loop = os.getloadavg()[0]
  vec = np.stack([getattr(grid, f)[tuple(cells.T)] for f in ablation.FIELDS], axis=1)
  both = np.isfinite(loop) & np.isfinite(vec)
  if not (np.array_equal(np.isnan(loop), np.isnan(vec))
          and np.allclose(loop[both], vec[both], rtol=1e-12, atol=0)):
    raise AssertionError("the loop baseline differs from the vectorised grid")
  loop_full_s = loop_s * grid.accuracy.size / len(cells)
  vectorised_s = min(wall)
  results = {
      "grid_shape": dict(zip(("mechanism", "teachers", "noise", "seed"), shape)),
      "grid_cells": int(grid.accuracy.size), "num_queries": q,
      "num_teachers_trained": data["num_teachers"],
      "mechanisms": [m.name for m in mechanisms],
      "teacher_counts": counts, "noise_scales": scales,
      "compile_s": compile_s, "vectorised_s": vectorised_s, "vectorised_runs_s": wall,
      "loop_compile_s": loop_compile_s, "loop_cells": len(cells), "loop_measured_s": loop_s,
      "loop_s": loop_full_s, "loop_extrapolated": len(cells) < grid.accuracy.size,
      "speedup": loop_full_s / vectorised_s,
      "speedup_with_compile": (loop_full_s + loop_compile_s) / (vectorised_s + compile_s),
      "loadavg_1min": {"vectorised": load_grid, "loop": load_loop},
      "loop_vs_grid": {"labels_equal": bool(np.array_equal(loop[:, :2], vec[:, :2])),
                       "max_relative_difference": float(np.max(
                           np.abs(loop[both] - vec[both]) / np.maximum(np.abs(vec[both]),
                                                                       1e-300)))},
      "table": ablation.grid_table(grid, mechanisms, counts, scales),
  }
  out = pathlib.Path(workdir)
  out.mkdir(parents=True, exist_ok=True)
  ablation.plot_grid(grid, mechanisms, counts, scales, out / "ablation.png",
                     experiment.PRIVATE_TITLE + f"{data['dataset']}: first {q} queries, "
                     f"{len(keys)} seeds, "
                     f"δ={config.delta:g}")
  experiment.write_results(workdir, results, config=config, seed=config.seed,
                           disclosure=experiment.MEASUREMENT)
  return results


def report(r: dict[str, Any]) -> None:
  """Prints the grid's size, both timings and speed-up, and a few rows of the table."""
  shape = " × ".join(f"{v} {k}" for k, v in r["grid_shape"].items())
  print(f"grid: {shape} = {r['grid_cells']} cells, {r['num_queries']} queries each")
  print(f"vectorised: compile {r['compile_s']:.1f} s, run {r['vectorised_s']:.3g} s "
        f"(load {r['loadavg_1min']['vectorised']:.1f})")
  loop = "extrapolated from %d cells" % r["loop_cells"] if r["loop_extrapolated"] else "measured"
  print(f"Python loop: {r['loop_s']:.1f} s ({loop}; compile {r['loop_compile_s']:.1f} s, "
        f"load {r['loadavg_1min']['loop']:.1f}); speed-up {r['speedup']:.0f}× "
        f"({r['speedup_with_compile']:.1f}× counting compilation); loop = grid: labels "
        f"{r['loop_vs_grid']['labels_equal']}, ε to "
        f"{r['loop_vs_grid']['max_relative_difference']:.0e}")
  for row in r["table"]:
    if row["teachers"] == max(r["teacher_counts"]) and row["scale"] in (20.0, 40.0):
      print(f"  {row['mechanism']:>15} n={row['teachers']} s={row['scale']:g}: accuracy "
            f"{row['accuracy']['mean']:.3f}, answered {row['answered']['mean']:.3f}, "
            f"ε {row['epsilon']['mean']:.2f} (data-independent "
            f"{row['epsilon_independent']['mean']:.1f})")

