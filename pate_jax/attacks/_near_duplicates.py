"""The attack against consistent answers with near-duplicate queries (beyond the paper).

The consistent-answer defense (attack paper, Section 5; :func:`pate_jax.aggregation.
hash_query_ids`) keys each query's noise by a hash of the query input's bytes, so an
*exact* repeat gets the cached answer. A near-duplicate -- the same image with one pixel
set to another grey level or moved by 1/255, or with Gaussian noise of std 1/255 -- has
other bytes, hence another query id and fresh noise. The teachers rarely change their
votes for so small a change, so the attacker gets fresh noise on (nearly) the same
histogram and the attack of Section 3 works again.

* :func:`one_pixel_copies`, :func:`pixel_step_copies`, :func:`gaussian_copies`,
  :func:`near_duplicates` -- the near-duplicates of a query (``jax.random``, key first).
* :func:`gnmax_counts` -- GNMax's answer counts for given query ids (the real aggregator).
* :func:`near_duplicate_attack` -- the measurement: exact repeats with fresh noise, exact
  repeats with the defense, near-duplicates with the defense; reconstruction errors against
  the original query's histogram, and how often a near-duplicate's histogram differs.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import aggregation as agg
from pate_jax.attacks import _evaluation as ev
from pate_jax.attacks import _reconstruct as rc
from pate_jax.attacks._columns import Variants
from pate_jax.attacks._plots import _save, _subplots

PIXEL_STEP = 1.0 / 255.0
"""The change of :func:`pixel_step_copies`: one grey level of an 8-bit image."""
GAUSS_STD = 1.0 / 255.0
"""The noise std of :func:`gaussian_copies`."""


def _image(image: Any) -> np.ndarray:
  """``image`` as a float32 host array, checked to be non-empty and in ``[0, 1]``."""
  x = np.asarray(image, np.float32)
  if x.size == 0 or not np.all(np.isfinite(x)) or x.min() < 0 or x.max() > 1:
    raise ValueError(f"image must be a non-empty array of values in [0, 1]; got shape "
                     f"{x.shape}, range [{x.min() if x.size else None}, "
                     f"{x.max() if x.size else None}]")
  return x


def _count(num: Any) -> int:
  if isinstance(num, bool) or not isinstance(num, (int, np.integer)) or num < 1:
    raise ValueError(f"num must be a positive integer, got {num!r}")
  return int(num)


def one_pixel_copies(key: jax.Array, image: Any, num: int, *,
                     levels: int = 255) -> jax.Array:
  """``num`` distinct copies of ``image``, each with exactly one value set to another grey
  level.

  The ``D · levels`` changes ``(value d, level k ≠ round(x_d · levels))`` are drawn without
  replacement (``num <= D · levels``) and value ``d`` of the copy becomes ``k / levels``:
  every copy differs from ``image`` in exactly one value (one pixel of one channel) and
  from every other copy, and stays in ``[0, 1]``.

  Args:
    key: PRNG key.
    image: float ``[...]`` in ``[0, 1]`` (e.g. ``[H, W, C]``; an 8-bit image / 255).
    num: copies, at most ``D · levels`` for ``D = image.size``.
    levels: the grey levels are ``k / levels``, ``k = 0..levels`` (255: 8-bit).

  Returns:
    float32 ``[num, ...]``.
  """
  x = _image(image)
  num = _count(num)
  if isinstance(levels, bool) or not isinstance(levels, (int, np.integer)) or levels < 1:
    raise ValueError(f"levels must be a positive integer, got {levels!r}")
  if num > x.size * levels:
    raise ValueError(f"num must be <= {x.size * levels} (values × other levels), got {num}")
  return _one_pixel(key, x, num, int(levels))


@functools.partial(jax.jit, static_argnums=(2, 3))
def _one_pixel(key: jax.Array, x: jax.Array, num: int, levels: int) -> jax.Array:
  """:func:`one_pixel_copies` of a checked ``x``, one compiled program per shape, ``num``
  and ``levels``."""
  flat = x.reshape(-1)
  change = jax.random.choice(key, flat.size * levels, (num,), replace=False)
  pos, k = change // levels, change % levels
  k = jnp.where(k >= jnp.round(flat[pos] * levels), k + 1, k)  # skip the current level
  out = jnp.broadcast_to(flat, (num, flat.size)).at[jnp.arange(num), pos].set(k / levels)
  return out.reshape((num,) + x.shape)


def pixel_step_copies(key: jax.Array, image: Any, num: int, *,
                      step: float = PIXEL_STEP) -> jax.Array:
  """``num`` copies of ``image``, each with exactly one value changed by ``±step``.

  Copy ``j`` picks one value (one pixel of one channel) uniformly at random and a sign
  ``±1`` with probability 1/2 each; the value moves by ``sign · step``, or by
  ``-sign · step`` when that would leave ``[0, 1]`` (so it always changes, and stays in
  ``[0, 1]``). There are at most ``2 D`` such copies for ``D`` values (about ``D`` on
  MNIST, whose pixels are mostly 0), so copies repeat when ``num`` is large: the
  defense answers a repeat from its cache.

  Args:
    key: PRNG key.
    image: float ``[...]`` in ``[0, 1]``.
    num: copies.
    step: the change, in ``(0, 0.5]``.

  Returns:
    float32 ``[num, ...]``.
  """
  x = _image(image)
  num = _count(num)
  if not 0 < step <= 0.5:
    raise ValueError(f"step must be in (0, 0.5], got {step!r}")
  return _pixel_step(key, x, num, float(step))


@functools.partial(jax.jit, static_argnums=2)
def _pixel_step(key: jax.Array, x: jax.Array, num: int, step: float) -> jax.Array:
  """:func:`pixel_step_copies` of a checked ``x``, one compiled program per shape and
  ``num`` (``step`` is traced, a weakly typed scalar as a Python float is eagerly: any
  step shares the program)."""
  flat = x.reshape(-1)
  k_pos, k_sign = jax.random.split(key)
  pos = jax.random.randint(k_pos, (num,), 0, flat.size)
  sign = jnp.where(jax.random.bernoulli(k_sign, 0.5, (num,)), 1.0, -1.0)
  old = flat[pos]
  moved = old + sign * step
  new = jnp.clip(jnp.where((moved < 0) | (moved > 1), old - sign * step, moved), 0.0, 1.0)
  out = jnp.broadcast_to(flat, (num, flat.size)).at[jnp.arange(num), pos].set(new)
  return out.reshape((num,) + x.shape)


def gaussian_copies(key: jax.Array, image: Any, num: int, *,
                    std: float = GAUSS_STD) -> jax.Array:
  """``num`` copies ``clip(image + N(0, std²) i.i.d., 0, 1)``: float32 ``[num, ...]``."""
  x = jnp.asarray(_image(image))
  num = _count(num)
  if not std > 0:
    raise ValueError(f"std must be > 0, got {std!r}")
  return jnp.clip(x + std * jax.random.normal(key, (num,) + x.shape), 0.0, 1.0)


PERTURBATIONS = {"pixel": one_pixel_copies, "pixel_step": pixel_step_copies,
                 "gauss": gaussian_copies}
"""Near-duplicate makers by name, with their defaults: ``pixel`` one value set to another
8-bit level (distinct copies), ``pixel_step`` one value ±1/255, ``gauss`` N(0, (1/255)²)."""


def near_duplicates(key: jax.Array, images: Any, num: int, kind: str) -> jax.Array:
  """``num`` near-duplicates of each of ``images [B, ...]``: float32 ``[B, num, ...]``.

  Image ``b`` uses ``fold_in(key, b)`` and :data:`PERTURBATIONS` ``[kind]`` with its
  defaults.
  """
  if kind not in PERTURBATIONS:
    raise ValueError(f"kind must be one of {sorted(PERTURBATIONS)}, got {kind!r}")
  return jnp.stack([PERTURBATIONS[kind](jax.random.fold_in(key, b), x, num)
                    for b, x in enumerate(np.asarray(images))])


def gnmax_counts(key: jax.Array, votes: Any, sigma: float, query_ids: Any) -> np.ndarray:
  """Counts ``int64 [C]`` of GNMax's answers (:func:`pate_jax.aggregation.gnmax`) to the
  queries ``votes [Q, C]`` with ids ``query_ids`` (``[Q]`` or ``[Q, W]``)."""
  labels = np.asarray(agg.gnmax(key, votes, sigma, query_ids))
  return np.bincount(labels, minlength=np.shape(votes)[-1])


def _summary(err: Mapping[str, np.ndarray], distinct: np.ndarray) -> dict[str, Any]:
  return {"mean_error": {v: float(e.mean()) for v, e in err.items()},
          "error_std_over_queries": {v: float(e.mean(0).std()) for v, e in err.items()},
          "all_answers_identical_fraction": float((distinct == 1).mean()),
          "mean_distinct_answers": float(distinct.mean())}


def near_duplicate_attack(keys: jax.Array, images: Any, votes: Any,
                          near: Mapping[str, tuple[Any, Any]], *, sigma: float,
                          variants: Variants, num_teachers: float) -> dict[str, Any]:
  """The attacker of Section 3 against GNMax with the consistent-answer defense, with exact
  repeats and with near-duplicates of each query.

  Cases, each ``M`` queries per original query ``b`` and answered by
  :func:`pate_jax.aggregation.gnmax` with the aggregator key ``keys[r]``:

  * ``exact_fresh_noise``: ``M`` exact repeats, no defense (query ids ``(b, j)``: a
    counter, fresh noise per repeat);
  * ``exact_defense``: ``M`` exact repeats, ids :func:`pate_jax.aggregation.hash_query_ids`
    of the repeated input's bytes (the defense: one answer);
  * ``<kind>_defense`` for each ``kind`` of ``near``: the ``M`` near-duplicates, with the
    teachers' votes on each and ids hashed from each near-duplicate's bytes.

  ``q̄ = counts / M`` is reconstructed with each variant and scored against the original
  query's histogram ``votes[b]`` (normalised L1 error).

  Args:
    keys: ``[R]`` aggregator keys (Monte Carlo repetitions of the secret noise).
    images: ``[B, ...]`` original queries, float in ``[0, 1]`` (the teachers' input).
    votes: int ``[B, C]`` the teachers' votes on ``images``.
    near: ``{kind: (copies [B, M, ...], votes [B, M, C])}``, the same ``M`` for all.
    sigma: GNMax's noise std.
    variants: reconstruction variants, headline first.
    num_teachers: ``N`` of the reconstruction.

  Returns:
    ``{"summary": {case: ...}, "histograms": [rows], ...}``: per case the mean error per
    variant, the fraction of (repetition, query) whose ``M`` answers are all identical and
    the mean number of distinct answers; per kind the fraction of near-duplicates whose
    histogram differs from the original's, their mean L1 change in votes, the distinct
    query ids, and the error of the near-duplicates' mean histogram (a floor of the bias).
  """
  x, h = np.asarray(images, np.float32), np.asarray(votes)
  b_num, c = h.shape
  if x.shape[0] != b_num:
    raise ValueError(f"images and votes must have the same queries; got {x.shape[0]} and "
                     f"{b_num}")
  num = {kind: np.shape(nv)[1] for kind, (_, nv) in near.items()}
  m = next(iter(num.values()), None)
  if m is None or set(num.values()) != {m}:
    raise ValueError(f"near must hold at least one kind, all with the same M; got {num}")
  m = int(m)
  # (votes [M, C], ids [M, W]) of query b in each case.
  cases = {
      "exact_fresh_noise": [(np.broadcast_to(h[b], (m, c)), np.stack(
          [np.full(m, b), np.arange(m)], -1).astype(np.uint32)) for b in range(b_num)],
      "exact_defense": [(np.broadcast_to(h[b], (m, c)),
                         agg.hash_query_ids(np.broadcast_to(x[b], (m,) + x.shape[1:])))
                        for b in range(b_num)]}
  stats = {}
  for kind, (copies, near_votes) in near.items():
    copies, near_votes = np.asarray(copies, np.float32), np.asarray(near_votes)
    ids = [agg.hash_query_ids(copies[b]) for b in range(b_num)]
    cases[f"{kind}_defense"] = [(near_votes[b], ids[b]) for b in range(b_num)]
    change = np.abs(near_votes - h[:, None]).sum(-1)                              # [B, M]
    stats[kind] = {
        "histogram_changed_fraction": float((change > 0).mean()),
        "histogram_changed_fraction_by_query": (change > 0).mean(1),
        "mean_l1_change_votes": float(change.mean()),
        "max_l1_change_votes": int(change.max()),
        "mean_histogram_shift_error": float(np.mean(rc.normalized_l1_error(
            h, near_votes.mean(1)))),
        "distinct_query_ids_per_query": [len({r.tobytes() for r in i}) for i in ids],
        "distinct_inputs_per_query": [len({r.tobytes() for r in copies[b]})
                                      for b in range(b_num)]}
  results = {"num_queries": m, "sigma": float(sigma), "num_teachers": float(num_teachers),
             "variants": list(variants), "headline_variant": next(iter(variants)),
             "cases": list(cases), "summary": {}, "near_duplicates": stats}
  rows = [{"votes": h[b]} for b in range(b_num)]
  for case, qs in cases.items():
    counts = np.stack([np.stack([gnmax_counts(k, qv, sigma, qi) for qv, qi in qs])
                       for k in keys])                                            # [R, B, C]
    distinct = (counts > 0).sum(-1)                                               # [R, B]
    q_bar = ev.answer_frequencies(counts, counts.sum(-1))
    err = {v: e.error.astype(np.float64) for v, e in
           ev.evaluate_variants(q_bar, h, sigma, num_teachers, variants).items()}  # [R, B]
    results["summary"][case] = _summary(err, distinct)
    for b, row in enumerate(rows):
      row.update({f"error_{case}/{v}": float(e[:, b].mean()) for v, e in err.items()})
      row[f"distinct_answers_{case}"] = distinct[:, b]
  _, unanimous = ev.baseline_errors(h, num_teachers)
  results["summary"]["guess_all_votes_on_top_class"] = {"mean_error": float(unanimous.mean())}
  for kind, s in stats.items():
    results["summary"][f"{kind}_defense"].update(
        {k: s[k] for k in ("histogram_changed_fraction", "mean_l1_change_votes",
                           "mean_histogram_shift_error")})
    for b, row in enumerate(rows):
      row[f"histogram_changed_fraction_{kind}"] = float(
          s["histogram_changed_fraction_by_query"][b])
  results["histograms"] = rows
  return results


def plot_near_duplicates(path, results: Mapping[str, Any], title_prefix: str = "") -> str:
  """Mean error of each case (bars) per reconstruction variant, one group per variant."""
  cases, variants = results["cases"], results["variants"]
  fig, axes = _subplots(1, 1, figsize=(8, 4), squeeze=False)
  ax, width = axes[0, 0], 0.8 / len(cases)
  for i, case in enumerate(cases):
    ax.bar(np.arange(len(variants)) + (i - (len(cases) - 1) / 2) * width,
           [results["summary"][case]["mean_error"][v] for v in variants], width, label=case)
  ax.axhline(results["summary"]["guess_all_votes_on_top_class"]["mean_error"], color="k",
             ls=":", label="guess: all votes on the top class")
  ax.set_xticks(np.arange(len(variants)), variants)
  ax.set_ylabel("mean normalised L1 error vs the original query's histogram", fontsize=8)
  ax.set_title(f"{title_prefix}{results['num_queries']} queries each, GNMax σ="
               f"{results['sigma']:g}: the defense caches exact repeats only", fontsize=9)
  ax.legend(fontsize=7)
  return _save(fig, path)
