"""The KD-GAN's discriminator ablation (``experiments/ablate_kd_gan.py``): why joint KD+GAN
(λ < 1) does no better than KD-only (λ = 1) at ``num_public`` public inputs (Gao et al.,
Table 1, n = 1,000), and which of D's settings would change that.

``run(config, workdir)`` trains (or restores) the teacher as the KD-GAN stage does
(:func:`pate_jax.stages.kd_gan.setup`: ``<workdir>/teacher``, the streams
``kd_gan_teacher``, ``kd_gan_data`` and ``kd_gan_train``), then, for every variant of
``config.variants`` (``(name, {base key: value})``, keys of :data:`OVERRIDES`), two
fits vmapped over the seeds with the same run keys, so that the seeds pair:

* KD-only: λ = 1 with the variant's student-side settings (:data:`STUDENT_SIDE`) and the
  base's discriminator settings. A λ = 1 student never meets D (its steps are skipped), so
  one fit serves every variant with the same student side (``kd_only_fits``);
* joint: the variant's λ (``config.lam`` unless overridden) and all its settings. With
  ``num_unlabelled = U > 0`` (not in the paper) the student's samples, for D and for the
  adversarial term, are drawn on ``U`` further training images that the teacher never
  labels (the ``U`` rows after the public ones in the ``kd_gan_data`` permutation), while
  the teacher's samples and the KD term stay on the public inputs
  (:func:`pate_jax.kd_gan.fit`'s ``unlabelled_x``).

Per variant: the accuracies per seed and their means, the paired gain joint − KD-only per
seed, its mean and standard error (sample sd / √n), D's mean loss and accuracy over the
first and the last of ``num_segments`` segments (chance: 2 ln 2 and 1/2) and per segment,
rounds, train seconds, and how far each student is from the teacher on the public inputs
(what D sees) and on the held-out set: mean total variation ``½ Σ|p_T − p_S|`` and argmax
agreement. ``1/2 + TV/2`` is the accuracy of the best D that sees one-hot samples of the
two distributions. Checkpoints: ``<workdir>/checkpoints/<fit>``. Writes ``results.json``
(a measurement of the private data: :data:`pate_jax.experiment.MEASUREMENT`).

``plan(config)`` is ``--dry_run``; ``report(results)`` prints the table.
"""

from __future__ import annotations

import copy
import math
import pathlib
import re
import time
from typing import Any

import numpy as np

from pate_jax import _checks, experiment, kd_gan
from pate_jax.stages import kd_gan as kd_gan_stage

__all__ = ["run", "plan", "report", "variants", "OVERRIDES", "STUDENT_SIDE"]

STUDENT_SIDE = ("epochs", "tau", "clip", "learning_rate", "batch_size", "k_s", "student_model",
                "student_kwargs")
"""Base keys that change a λ = 1 (KD-only) student."""

OVERRIDES = ("lam", "k_d", "disc_learning_rate", "disc_hidden", "gumbel_temperature",
             "conditional", "num_unlabelled") + STUDENT_SIDE
"""Base keys a variant may set: D's and λ, then the student side."""


def _value(v: Any) -> Any:
  return v.to_dict() if hasattr(v, "to_dict") else v


def variants(config) -> list[dict]:
  """The variants to run (``config.only``, else all): per variant its ``name``,
  ``overrides``, ``config`` (the base with the overrides) and ``kd_only`` (the name of the
  KD-only fit it shares: ``kd_only`` plus its student-side overrides).

  Raises:
    ValueError: a variant that is not a ``(name, mapping)`` pair, an empty, repeated or
      non-file-name ``name``, an override key outside :data:`OVERRIDES` (naming the key and
      the variant), a name in ``config.only`` that no variant has, a bad ``num_public`` or
      ``num_segments``, or a variant's bad setting (:func:`check_fit`, naming the variant).
  """
  for field in ("num_public", "num_segments"):
    _checks.positive_int(config[field], f"config.{field}")
  if not isinstance(config.only, (tuple, list)):
    raise ValueError(f"config.only must be a tuple of variant names (() for all); got "
                     f"{config.only!r}")
  if not isinstance(config.variants, (tuple, list)):
    raise ValueError(f"config.variants must be a tuple of (name, {{key: value}}) pairs; got "
                     f"{config.variants!r}")
  out, seen = [], set()
  for item in config.variants:
    if (not isinstance(item, (tuple, list)) or len(item) != 2
        or not hasattr(item[1], "items")):
      raise ValueError(f"config.variants: each entry must be (name, {{key: value}}); got "
                       f"{item!r}")
    name, overrides = item[0], dict(_value(item[1]))
    if not isinstance(name, str) or not re.fullmatch(r"[\w.+-]+", name) or name in seen:
      raise ValueError(f"config.variants: name {name!r} must be a unique, non-empty file name")
    seen.add(name)
    for key in overrides:
      if key not in OVERRIDES:
        raise ValueError(f"config.variants: unknown override key {key!r} in variant {name!r}; "
                         f"known: {', '.join(OVERRIDES)}")
    vc = _overridden(config, overrides)
    try:
      check_fit(vc)
    except ValueError as e:
      raise ValueError(f"config.variants: {name!r}: {e}") from None
    student = {k: overrides[k] for k in sorted(overrides) if k in STUDENT_SIDE
               and _value(overrides[k]) != _value(config[k])}
    kd_name = "kd_only" + "".join(
        "_" + re.sub(r"[^\w.+-]", "", f"{k}{_value(v)}") for k, v in student.items())
    out.append({"name": name, "overrides": overrides, "config": vc, "kd_only": kd_name,
                "student_side": student})
  unknown = set(config.only) - seen
  if unknown:
    raise ValueError(f"config.only: no variant named {sorted(unknown)}; variants: {sorted(seen)}")
  return [v for v in out if not config.only or v["name"] in config.only]


def check_fit(config) -> None:
  """One variant's settings (the base with its overrides), refused naming the field before
  any fit: the KD-GAN's (:func:`pate_jax.stages.kd_gan.check_fit`), ``lam`` (in [0, 1]),
  ``tau`` and ``clip`` (finite, > 0), ``batch_size`` (>= 1) and ``num_unlabelled`` (>= 0)."""
  kd_gan_stage.check_fit(config)
  kd_gan_stage.check_lam(config.lam, "config.lam")
  for field in ("tau", "clip"):
    _checks.positive(config[field], f"config.{field}")
  _checks.positive_int(config.batch_size, "config.batch_size")
  _checks.positive_int(config.num_unlabelled, "config.num_unlabelled", minimum=0)


def _overridden(config, overrides: dict):
  """A copy of ``config`` with ``overrides`` set. Given only a variant's student-side
  overrides, it is the shared KD-only fit's config: its D settings are the base's, so
  its checkpoint does not depend on which variant ran it."""
  out = copy.deepcopy(config)
  for key, value in overrides.items():
    out[key] = value
  return out


def _rounds(vc, n: int) -> tuple[int, int]:
  """``(rounds, segment_rounds)`` of a fit of ``vc.epochs`` epochs over ``n`` inputs."""
  rounds = kd_gan_stage.epoch_rounds(vc, n)
  return rounds, math.ceil(rounds / max(1, int(vc.num_segments)))


def _distance(gan: kd_gan.KDGAN, state: dict, x: Any, teacher_lp: np.ndarray) -> dict:
  """Student vs teacher on inputs ``x``: mean total variation and argmax agreement
  (means over inputs and seeds, and per seed)."""
  s = kd_gan.student_log_probs(gan, state, x)  # [S, N, C]
  tv = 0.5 * np.abs(np.exp(s) - np.exp(teacher_lp)[None]).sum(-1).mean(-1)
  agree = (s.argmax(-1) == teacher_lp.argmax(-1)[None]).mean(-1)
  return {"tv_mean": float(tv.mean()), "tv": tv.tolist(),
          "oracle_hard_disc_accuracy": float(0.5 + 0.5 * tv.mean()),
          "agreement_mean": float(agree.mean()), "agreement": agree.tolist()}


def run(config, workdir: str) -> dict:
  """Runs the stage (module docstring); the workdir is locked meanwhile."""
  t0 = time.time()
  workdir = pathlib.Path(workdir)
  todo = variants(config)  # validates the variants before any training
  with experiment.locked_workdir(workdir):
    results = _run(config, workdir, todo)
    results.update({"wall_seconds": time.time() - t0,
                    "results_json": str((workdir / "results.json").resolve())})
    experiment.write_results(workdir, results, config=config, seed=config.seed,
                             disclosure=experiment.MEASUREMENT)
  return results


def _run(config, workdir: pathlib.Path, todo: list[dict]) -> dict:
  n = int(config.num_public)
  s = kd_gan_stage.setup(config, workdir, n)
  d = s.data
  tl = kd_gan.teacher_log_probs(s.teacher, s.teacher_state, d["public_x"])
  tl_eval = kd_gan.teacher_log_probs(s.teacher, s.teacher_state, d["eval_x"])

  pools: dict[int, np.ndarray] = {}

  def unlabelled(u):
    """The ``u`` training rows after the public ones in the public data's permutation."""
    if u and u not in pools:
      du = s.public(n + int(u))
      pools[u] = du["public_x"][~np.isin(du["public_rows"], d["public_rows"])]
    return pools.get(u)

  def fit(gan, name, vc):
    rounds, seg = _rounds(vc, n)
    out = kd_gan.fit(gan, s.keys, d["public_x"], tl, d["eval_x"], d["eval_y"],
                     num_rounds=rounds, segment_rounds=seg,
                     checkpoint_dir=str(workdir / "checkpoints" / name),
                     restart=bool(config.restart), log=None,
                     restart_hint=experiment.restart_hint(), private_checkpoints=True,
                     unlabelled_x=unlabelled(vc.num_unlabelled if gan.lam < 1 else 0))
    distance = {"public": _distance(gan, out.state, d["public_x"], tl),
                "held_out": _distance(gan, out.state, d["eval_x"], tl_eval)}
    print(f"  {experiment.PRIVATE_MARK}{name}: {rounds} rounds, "
          f"{out.eval_accuracy.mean():.2%} held-out "
          f"(seeds {' '.join(f'{a:.2%}' for a in out.eval_accuracy)}); student vs teacher "
          f"TV public {distance['public']['tv_mean']:.4f} held-out "
          f"{distance['held_out']['tv_mean']:.4f} ({out.train_seconds:.0f} s)")
    return out, rounds, distance

  kd_fits: dict[str, dict] = {}
  rows = []
  for v in todo:
    if v["kd_only"] not in kd_fits:
      kc = _overridden(config, v["student_side"])
      out, rounds, distance = fit(kd_gan_stage.make_gan(kc, 1.0), v["kd_only"], kc)
      kd_fits[v["kd_only"]] = {
          "variants": [], "rounds": rounds, "student_side": v["student_side"],
          "accuracy": out.eval_accuracy.tolist(),
          "accuracy_mean": float(out.eval_accuracy.mean()),
          "distance": distance, "train_seconds": out.train_seconds}
    kd = kd_fits[v["kd_only"]]
    kd["variants"].append(v["name"])
    vc = v["config"]
    out, rounds, distance = fit(kd_gan_stage.make_gan(vc, vc.lam), f"joint_{v['name']}", vc)
    rows.append(_row(v, vc, kd, out, rounds, distance))
    r = rows[-1]
    print(f"{experiment.PRIVATE_MARK}{v['name']}: KD-only {r['kd_only']['accuracy_mean']:.2%}, "
          "joint "
          f"{r['joint']['accuracy_mean']:.2%}, gain {r['gain']['mean']:+.2%} ± "
          f"{r['gain']['se']:.2%} SE; D loss {r['disc_first']['loss']:.3f} → "
          f"{r['disc_last']['loss']:.3f}, accuracy {r['disc_first']['accuracy']:.1%} → "
          f"{r['disc_last']['accuracy']:.1%}")
  teacher_public = np.asarray(tl).argmax(-1)
  return {"teacher_accuracy": s.teacher_accuracy,
          "teacher_public": {
              "accuracy": float(np.mean(teacher_public == d["public_y"])),
              "mean_max_prob": float(np.exp(np.asarray(tl).max(-1)).mean()),
              "held_out_mean_max_prob": float(np.exp(np.asarray(tl_eval).max(-1)).mean())},
          "num_public": n, "seeds": s.seeds, "public": config.public,
          "noise_multiplier": config.noise_multiplier, "batch_size": config.batch_size,
          "variants": rows, "kd_only_fits": kd_fits,
          "fits": {"kd_only": len(kd_fits), "joint": len(rows),
                   "total": len(kd_fits) + len(rows)}}


def _row(v: dict, vc, kd: dict, out: kd_gan.KDGANResult, rounds: int,
         distance: dict) -> dict:
  """One variant's line of the table (module docstring)."""
  kd_acc, joint_acc = np.asarray(kd["accuracy"]), np.asarray(out.eval_accuracy)
  gain = joint_acc - kd_acc
  se = float(gain.std(ddof=1) / math.sqrt(len(gain))) if len(gain) > 1 else float("nan")
  h = out.history
  seg = lambda e: {"rounds": e.get("round"), "loss": e.get("disc", 0.0),
                   "accuracy": e.get("disc_accuracy", 0.0)}
  return {
      "name": v["name"], "overrides": v["overrides"], "lam": float(vc.lam), "rounds": rounds,
      "num_unlabelled": int(vc.num_unlabelled),
      "kd_only_fit": v["kd_only"],
      "kd_only": {"accuracy": kd_acc.tolist(), "accuracy_mean": float(kd_acc.mean())},
      "joint": {"accuracy": joint_acc.tolist(), "accuracy_mean": float(joint_acc.mean())},
      "gain": {"per_seed": gain.tolist(), "mean": float(gain.mean()), "se": se},
      "disc_first": seg(h[0] if h else {}), "disc_last": seg(h[-1] if h else {}),
      "segments": [{"round": e["round"], "accuracy_mean": e["eval_accuracy_mean"],
                    **{k: e[k] for k in ("kd", "adv", "disc", "disc_accuracy") if k in e}}
                   for e in h],
      "distance": {"kd_only": kd["distance"], "joint": distance},
      "train_seconds": {"kd_only": kd["train_seconds"], "joint": out.train_seconds}}


def plan(config) -> dict:
  """``--dry_run``: every variant's overrides, rounds per fit and shared KD-only fit, and
  the number of fits."""
  todo = variants(config)
  n = int(config.num_public)
  out = {"num_public": n, "num_seeds": int(config.num_seeds), "lam": float(config.lam),
         "teacher": f"{config.teacher.model}, {config.teacher.num_steps} steps"}
  kd = {}
  for v in todo:
    rounds, seg = _rounds(v["config"], n)
    kd.setdefault(v["kd_only"], _rounds(_overridden(config, v["student_side"]), n)[0])
    out[f"variant {v['name']}"] = (
        f"{v['overrides'] or 'the base'}: joint λ {float(v['config'].lam):g}, {rounds} "
        f"rounds ({seg} per segment), k_d {v['config'].k_d}; KD-only: {v['kd_only']}")
  for name, rounds in kd.items():
    out[f"fit {name}"] = f"{rounds} rounds (λ = 1)"
  out["fits"] = {"kd_only": len(kd), "joint": len(todo), "total": len(kd) + len(todo)}
  return out


def report(r: dict) -> None:
  """Prints the table of variants, the student–teacher distances, and the paths."""
  print(f"\nKD-GAN discriminator ablation: MNIST, n = {r['num_public']} public inputs, "
        f"seeds {r['seeds']}; teacher {r['teacher_accuracy']:.2%} held-out, "
        f"{r['teacher_public']['accuracy']:.2%} on the public inputs (mean max p "
        f"{r['teacher_public']['mean_max_prob']:.4f})")
  print(f"  {'variant':<22} {'λ':>4} {'rounds':>6} {'KD-only':>8} {'joint':>8} "
        f"{'gain ± SE':>16}  {'D loss first→last':>18} {'D acc first→last':>17}")
  for v in r["variants"]:
    g, f, l = v["gain"], v["disc_first"], v["disc_last"]
    print(f"  {v['name']:<22} {v['lam']:>4g} {v['rounds']:>6} "
          f"{v['kd_only']['accuracy_mean']:>8.2%} {v['joint']['accuracy_mean']:>8.2%} "
          f"{g['mean']:>+8.2%} ± {g['se']:.2%}  {f['loss']:>8.3f} → {l['loss']:<7.3f} "
          f"{f['accuracy']:>7.1%} → {l['accuracy']:<7.1%}")
  print("  student vs teacher (mean TV ½Σ|p_T − p_S|, argmax agreement) on the public "
        "inputs | held out:")
  for name, k in r["kd_only_fits"].items():
    p, h = k["distance"]["public"], k["distance"]["held_out"]
    print(f"    {name:<28} TV {p['tv_mean']:.4f} ({p['agreement_mean']:.2%}) | "
          f"{h['tv_mean']:.4f} ({h['agreement_mean']:.2%})")
  for v in r["variants"]:
    p, h = v["distance"]["joint"]["public"], v["distance"]["joint"]["held_out"]
    print(f"    joint_{v['name']:<22} TV {p['tv_mean']:.4f} ({p['agreement_mean']:.2%}) | "
          f"{h['tv_mean']:.4f} ({h['agreement_mean']:.2%})")
  print(f"  fits: {r['fits']['kd_only']} KD-only + {r['fits']['joint']} joint  "
        f"({r['wall_seconds']:.0f} s)")
  print(f"  results: {r['results_json']}")
