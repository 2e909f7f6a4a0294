"""Host-side pieces of the KD-GAN stage (pate_jax/stages/kd_gan.py, run by
experiments/train_kd_gan.py): public data, the ε curves, Table 2's look-up, the sound
variant's cached releases and the utility-vs-ε plot."""

from __future__ import annotations

import pathlib
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import data as data_lib
from pate_jax import io
from pate_jax.kd_gan import _privacy as P


def public_data(key: jax.Array, source: str, num_public: int, data_dir: str | None = None
                ) -> dict[str, Any]:
  """MNIST split into the teacher's private data, the public inputs and the held-out set.

  ``source="train"`` (the paper, Sec. 5.1): ``num_public`` rows drawn at random (``key``)
  from the training split the teacher is trained on; held out: the whole test split.
  ``source="pool"``: the repo's student split of the test split (rows of ``votes.npz``):
  ``num_public`` random rows of the 9,000-row pool; held out: its 1,000 evaluation rows.
  ``public_rows`` index the pool (pool) or the training split (train); ``num_test``: the
  test split's size.
  """
  ds = data_lib.load_image_dataset("mnist", data_dir or None)
  train_x, train_y = data_lib.to_float(ds.train_images), ds.train_labels
  if source == "train":
    pool_x, pool_y, eval_x, eval_y = train_x, train_y, data_lib.to_float(ds.test_images), ds.test_labels
  elif source == "pool":
    split = data_lib.student_split("mnist", ds.test_images.shape[0])
    test_x = data_lib.to_float(ds.test_images)
    pool_x, pool_y = test_x[split.pool_index], ds.test_labels[split.pool_index]
    eval_x, eval_y = test_x[split.eval_index], ds.test_labels[split.eval_index]
  else:
    raise ValueError(f"source must be 'train' or 'pool'; got {source!r}")
  if not 0 < num_public <= pool_x.shape[0]:
    raise ValueError(f"num_public must lie in [1, {pool_x.shape[0]}] for source {source!r}; "
                     f"got {num_public}")
  rows = np.sort(np.asarray(jax.random.permutation(key, pool_x.shape[0]))[:num_public])
  return {"train_x": train_x, "train_y": train_y, "public_x": pool_x[rows],
          "public_y": pool_y[rows], "public_rows": rows, "eval_x": eval_x, "eval_y": eval_y,
          "num_test": int(ds.test_images.shape[0])}


def epsilon_curve(history: Sequence[dict], q: float, noise_multiplier: float, delta: float
                  ) -> list[dict]:
  """Per history entry: student steps, the published ε at that point (the paper's
  accounting, and the improved conversion of the same steps beside it), accuracy mean/std
  and the segment's mean losses (``kd``, ``kd_dp``, ``adv``, the discriminator's ``disc``
  and ``disc_accuracy``)."""
  out = []
  for h in history:
    steps = int(h["student_steps"])
    eps, order = P.published_epsilon(q, noise_multiplier, steps, delta)
    improved, _ = P.published_epsilon(q, noise_multiplier, steps, delta, conversion="improved")
    acc = np.asarray(h["eval_accuracy"])
    losses = {k: h[k] for k in ("kd", "kd_dp", "adv", "disc", "disc_accuracy") if k in h}
    out.append({"steps": steps, "epsilon_published": eps, "order": order,
                "epsilon_improved": improved, **losses,
                "accuracy_mean": float(acc.mean()), "accuracy_std": float(acc.std()),
                "accuracy": acc.tolist()})
  return out


def at_epsilon(curve: Sequence[dict], target: float, decimals: int = 2) -> dict | None:
  """The last curve point whose published ε, rounded to ``decimals`` as the paper prints
  it, does not exceed ``target``; None if there is none, or if the curve stops short of
  ``target`` (its last ε below 95 % of it)."""
  below = [c for c in curve if round(c["epsilon_published"], decimals) <= target]
  if not below or curve[-1]["epsilon_published"] < 0.95 * target:
    return None
  return below[-1]


PAPER_TABLE2_MNIST = ((1.93, 0.9852), (8.00, 0.9920))
"""Gao et al., Table 2, MNIST, "Proposed": ``(ε, student accuracy)`` as published."""


def table2(curve: Sequence[dict], paper: Sequence[tuple[float, float]] = PAPER_TABLE2_MNIST
           ) -> list[dict]:
  """Table 2's rows read off ``curve`` (:func:`epsilon_curve`): per ``(ε, accuracy)`` of the
  paper, the curve point at that published ε (:func:`at_epsilon`), or a note giving the
  curve's ε range where it has none."""
  return [{"paper_epsilon": e, "paper_accuracy": a, **(at_epsilon(curve, e) or {
               "note": f"no evaluation there: curve ε {curve[0]['epsilon_published']:.2f}"
                       f"–{curve[-1]['epsilon_published']:.2f}"})}
          for e, a in paper]


def steps_for_epsilon(q: float, noise_multiplier: float, target: float, delta: float,
                      max_steps: int = 10**7) -> int:
  """Most steps whose published ε stays ``≤ target`` (bisection on the step count)."""
  lo, hi = 0, max_steps
  while hi - lo > 1:
    mid = (lo + hi) // 2
    if P.published_epsilon(q, noise_multiplier, mid, delta)[0] <= target:
      lo = mid
    else:
      hi = mid
  return lo


SOUND_LEVELS_NOTE = (
    "each point is an alternative release of the same soft labels, valid alone at its "
    "epsilon, with its own independent noise; publishing several composes, and their total "
    "epsilon is sound_all_published.epsilon_if_all_published")
"""What the sound curve's points are (results.json, the report)."""


def sound_targets(key: jax.Array, votes: dict, public_rows: np.ndarray,
                  noise_multipliers: Sequence[float], temperature: float = 1.0) -> np.ndarray:
  """The sound variant's cached answers: per noise level, log of the projected release
  of the ensemble's soft labels on the public rows, ``[E, N, C]``: the teachers' integer
  soft counts (``votes["soft_counts"]``) through the exact discrete Gaussian
  (:func:`pate_jax.kd_gan.release_soft_labels`).

  Level ``e`` is an alternative release
  (:func:`pate_jax.kd_gan.release_soft_label_levels`): query ``i`` is pool row
  ``public_rows[i]`` and its noise is drawn from ``fold_in(fold_in(key, e), row)``,
  whatever else is asked, independent across levels. ``key``: the noise key of the
  release (:func:`pate_jax.rng.noise_key`: secret unless a research seed is named).
  """
  if "soft_counts" not in votes:
    raise ValueError(
        "votes: no soft_counts in votes.npz (the teachers' integer soft labels, which the "
        "exact release needs; files written before them hold float probabilities only): "
        "run experiments/train_teachers.py with distill_temperatures set, in a new workdir")
  temps = [float(t) for t in votes["temperatures"]]
  if float(temperature) not in temps:
    raise ValueError(f"temperature: {temperature} is not among the saved {temps}")
  counts = np.asarray(votes["soft_counts"][temps.index(float(temperature))][public_rows])
  released = P.release_soft_label_levels(key, counts, votes["num_teachers"],
                                         noise_multipliers, public_rows,
                                         votes["soft_count_scale"])
  with np.errstate(divide="ignore"):
    return np.log(np.asarray(P.project_to_simplex(released))).astype(np.float32)


def sound_curve(target_epsilons: Sequence[float], noise_multipliers: Sequence[float],
                num_public: int, num_teachers: int, delta: float, accuracy: Any
                ) -> tuple[list[dict], dict]:
  """The sound variant's curve and what publishing all of it costs.

  Args:
    target_epsilons: ``[E]`` the ε each level was calibrated to.
    noise_multipliers: ``[E]`` the levels' ``σ_e``.
    num_public: ``n``, the public inputs released once per level.
    num_teachers: ``T`` (the noise std is ``σ_e √2/T``).
    delta: ``δ``.
    accuracy: ``[E, S]`` the students' held-out accuracy per level and seed.

  Returns:
    ``(points, all_published)``: per level its own ``(ε, order)`` (an alternative
    release, :data:`SOUND_LEVELS_NOTE`) and accuracies; and the ``(ε, order)`` of
    publishing every level, ``RDP(α) = n Σ_e α/(2σ_e²)``
    (:func:`pate_jax.kd_gan.soft_label_epsilon` of all the ``σ_e``).
  """
  accuracy = np.asarray(accuracy, np.float64)
  levels = len(noise_multipliers)
  if accuracy.ndim != 2 or accuracy.shape[0] != levels or len(target_epsilons) != levels:
    raise ValueError(f"accuracy must be [E={levels}, S] with one target epsilon per level; "
                     f"got shape {accuracy.shape} and {len(target_epsilons)} targets")
  points = []
  for e, s, a in zip(target_epsilons, noise_multipliers, accuracy):
    eps, order = P.soft_label_epsilon(s, num_public, delta)
    points.append({"epsilon": eps, "order": order, "target_epsilon": float(e),
                   "noise_multiplier": float(s),
                   "noise_std": float(s) * P.soft_label_sensitivity(num_teachers),
                   "release": "alternative", "accuracy_mean": float(a.mean()),
                   "accuracy_std": float(a.std()), "accuracy": a.tolist()})
  eps, order = P.soft_label_epsilon(list(noise_multipliers), num_public, delta)
  return points, {"epsilon_if_all_published": eps, "order": order, "levels": len(points),
                  "delta": float(delta), "note": SOUND_LEVELS_NOTE}


def plot_utility_vs_epsilon(path: str | pathlib.Path, published: Sequence[dict],
                            sound: Sequence[dict], title: str,
                            epsilon_if_all_published: float | None = None) -> pathlib.Path:
  """Student accuracy vs ε: the published mechanism (its *published* ε, which certifies
  nothing for the private data) and the sound variant (a real (ε, δ) guarantee for each
  point, an alternative release; ``epsilon_if_all_published``: the ε of all of them)."""
  from matplotlib.figure import Figure  # pylint: disable=import-outside-toplevel
  fig = Figure(figsize=(6.4, 4.2))
  ax = fig.subplots()
  if published:
    ax.errorbar([c["epsilon_published"] for c in published],
                [100 * c["accuracy_mean"] for c in published],
                yerr=[100 * c["accuracy_std"] for c in published], marker=".", capsize=2,
                label="published mechanism, ε as published (sound ε = ∞)")
  if sound:
    ax.errorbar([s["epsilon"] for s in sound], [100 * s["accuracy_mean"] for s in sound],
                yerr=[100 * s["accuracy_std"] for s in sound], marker="o", capsize=3,
                label="sound variant: PATE soft labels + Gaussian mechanism\n(each point an "
                      "alternative release" + ("" if epsilon_if_all_published is None else
                      f"; all published: ε {epsilon_if_all_published:.2f}") + ")")
  ax.set_xscale("log")
  ax.set_xlabel("ε (δ = 1e-5)")
  ax.set_ylabel("student test accuracy (%)")
  ax.set_title(title, fontsize=9)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8)
  path = pathlib.Path(path)
  fig.tight_layout()
  io.save_figure(fig, path, dpi=120)
  return path


def audit_eq5_noise(gan, keys: jax.Array, public_x: Any, teacher_log_probs: Any, eval_x: Any,
                    eval_y: Any, num_rounds: int) -> dict:
  """The audit at scale: the same runs (same keys, data, batches, Gumbel draws) with Eq. 5's
  noise (``gan.noise_multiplier``) and without it (σ = 0); the largest parameter difference
  of the final students (0 or float rounding: the noise never reaches the update)."""
  from pate_jax.kd_gan import _train  # pylint: disable=import-outside-toplevel
  outs = [_train.fit(g, keys, public_x, teacher_log_probs, eval_x, eval_y,
                     num_rounds=num_rounds, segment_rounds=num_rounds, log=None)
          for g in (gan, gan._replace(noise_multiplier=0.0))]
  pairs = zip(jax.tree.leaves(outs[0].state["student"]), jax.tree.leaves(outs[1].state["student"]))
  return {"rounds": num_rounds, "runs": int(len(keys)), "noise_multiplier": gan.noise_multiplier,
          "max_abs_param_difference": max(float(jnp.max(jnp.abs(a - b))) for a, b in pairs),
          "max_abs_param": max(float(jnp.max(jnp.abs(a)))
                               for a in jax.tree.leaves(outs[0].state["student"])),
          "loss_value_noisy": outs[0].history[-1]["kd_dp"],
          "loss_value_clean": outs[1].history[-1]["kd_dp"],
          "accuracy_noisy": outs[0].eval_accuracy.tolist(),
          "accuracy_clean": outs[1].eval_accuracy.tolist()}
