"""The KD-GAN stage: Gao et al.'s teacher–student–discriminator KD-GAN on MNIST, as
published and audited (``experiments/train_kd_gan.py``).

``run(config, workdir)`` trains the teacher on all private training data
(``<workdir>/teacher``, resumable), then, each vmapped over ``num_seeds`` seeds: Table 1
(KD-only λ = 1 vs joint KD+GAN for each public-set size), the published mechanism's
accuracy-vs-ε curve (ε *as published*, Table 2's rows read off it) and, with
``sound.enabled``, the sound variant (PATE soft labels released through the Gaussian
mechanism at calibrated σ, same student and discriminator, same public data). The sound
curve's points are alternative releases, each valid alone with its own independent noise;
publishing several composes (``sound_all_published``). Their noise is secret
(``rng.noise_key``) unless ``noise_seed`` names a research seed (``noise`` in the results
says which). The release is drawn once, before the teacher is trained, into
``<workdir>/sound_release.npz`` (owner-only), which every rerun reads instead of drawing
again; with secret noise it is a budget of its own on the teachers' private data, in the
budget registry (``budget_registry``): refused where the data has another budget -- the
teachers' ledger, another release -- unless ``another_budget``. Writes ``results.json``
(accuracy, ε published and sound, δ, steps, λ, τ, C, σ, seeds) and
``utility_vs_epsilon.png``; student fits checkpoint under ``<workdir>/checkpoints/<fit>``.

Randomness: the run's root key (``config.seed``) and the KD-GAN's own streams of
:data:`pate_jax.rng.STREAMS`: ``kd_gan_teacher`` (the teacher), ``kd_gan_data`` (which rows
are the public inputs) and ``kd_gan_train`` (seed ``s``'s student run: ``fold_in(k, s)``,
the same for every fit). The sound release's noise: ``rng.noise_key("aggregation",
noise_seed)``.

``plan(config)`` is ``--dry_run``; ``report(results)`` prints the tables and the headline.
"""

from __future__ import annotations

import math
import pathlib
import time
from typing import Any, Callable, NamedTuple

import jax
from absl import logging
import numpy as np

from pate_jax import _checks, experiment, io, kd_gan, models, rng
from pate_jax import data as data_lib
from pate_jax import budget as budget_lib
from pate_jax import votes as votes_lib
from pate_jax.stages import teachers as teachers_stage

__all__ = ["run", "plan", "report", "check_config", "make_gan", "setup", "epoch_rounds",
           "SOUND_RELEASE"]

SOUND_RELEASE = "sound_release.npz"  # the sound variant's release, drawn once (owner-only)


def make_gan(config, lam: float, noise_multiplier: float | None = None) -> kd_gan.KDGAN:
  """The KD-GAN of ``config`` with weight ``lam`` (and Eq. 5's σ, the config's by default)."""
  return kd_gan.make_kd_gan(
      10, lam=lam, tau=config.tau, clip=config.clip,
      noise_multiplier=config.noise_multiplier if noise_multiplier is None else noise_multiplier,
      batch_size=config.batch_size, gumbel_temperature=config.gumbel_temperature,
      k_d=config.k_d, k_s=config.k_s, learning_rate=config.learning_rate,
      disc_learning_rate=config.disc_learning_rate, student_model=config.student_model,
      student_kwargs=config.student_kwargs.to_dict(), disc_hidden=config.disc_hidden,
      conditional=config.conditional, matmul_precision=config.matmul_precision)


def _run_keys(train_key: jax.Array, seeds: Any) -> jax.Array:
  """``[S]`` the student runs' keys: ``fold_in(train_key, seed)`` per entry of ``seeds``."""
  return jax.vmap(lambda i: jax.random.fold_in(train_key, i))(np.asarray(seeds))


def epoch_rounds(config, n: int) -> int:
  """Rounds of ``config.epochs`` epochs over ``n`` public inputs."""
  return math.ceil(config.epochs * n / (config.batch_size * config.k_s))


def check_accounting(config, prefix: str = "config.") -> None:
  """The published mechanism's settings, read once the teacher is trained, refused before
  it trains (naming the field): ``noise_multiplier``, ``clip``, ``tau`` and
  ``curve.max_epsilon`` (finite, > 0), ``delta``, and ``batch_size`` (an integer no larger
  than ``curve.num_public`` and every ``table1.public_sizes``: the sampling rate ``B/N``
  must lie in (0, 1]). ``prefix``: how the fields are named (``config.kd_gan.`` in the GPU
  acceptance)."""
  for name in ("noise_multiplier", "clip", "tau"):
    _checks.positive(config[name], f"{prefix}{name}")
  _checks.positive(config.curve.max_epsilon, f"{prefix}curve.max_epsilon")
  _checks.delta(config.delta, f"{prefix}delta")
  b = _checks.positive_int(config.batch_size, f"{prefix}batch_size")
  sizes = {f"{prefix}curve.num_public": [config.curve.num_public],
           f"{prefix}table1.public_sizes": list(config.table1.public_sizes)}
  for name, values in sizes.items():
    for n in values:
      if _checks.positive_int(n, name) < b:
        raise ValueError(f"{name} must be >= {prefix}batch_size = {b} (the sampling rate "
                         f"B/N must lie in (0, 1]); got {n}")


def check_fit(config, prefix: str = "config.") -> None:
  """The settings of one fit (the teacher's and a student's against D), refused naming the
  field: ``epochs``, the learning rates (``learning_rate``, ``disc_learning_rate``,
  ``teacher.learning_rate``) and ``gumbel_temperature`` (finite, > 0), the integers ``k_s``,
  ``num_seeds``, ``teacher.num_steps``, ``teacher.batch_size`` (>= 1) and ``k_d`` (>= 0),
  and the networks: ``student_model`` / ``student_kwargs``, ``teacher.model`` /
  ``teacher.model_kwargs`` (:func:`pate_jax.models.check_kwargs`) and ``disc_hidden``
  (widths >= 1; a width of 0 or -1 passed the dry run and failed as a shape error).
  Shared with the KD-GAN ablation, which checks each variant's settings with it. ``prefix``
  as :func:`check_accounting`'s."""
  _checks.choice(config.student_model, f"{prefix}student_model", models.model_names())
  models.check_kwargs(config.student_model, config.student_kwargs, f"{prefix}student_kwargs")
  _checks.choice(config.teacher.model, f"{prefix}teacher.model", models.model_names())
  models.check_kwargs(config.teacher.model, config.teacher.model_kwargs,
                      f"{prefix}teacher.model_kwargs")
  _checks.int_tuple(config.disc_hidden, f"{prefix}disc_hidden", allow_empty=True)
  for name in ("epochs", "learning_rate", "disc_learning_rate", "gumbel_temperature"):
    _checks.positive(config[name], f"{prefix}{name}")
  _checks.positive(config.teacher.learning_rate, f"{prefix}teacher.learning_rate")
  for name in ("k_s", "num_seeds"):
    _checks.positive_int(config[name], f"{prefix}{name}")
  for name in ("num_steps", "batch_size"):
    _checks.positive_int(config.teacher[name], f"{prefix}teacher.{name}")
  _checks.positive_int(config.k_d, f"{prefix}k_d", minimum=0)


def check_lam(lam: Any, name: str) -> None:
  """A λ weighting the adversarial term against the distillation: in [0, 1]."""
  if not 0.0 <= float(_checks.scalar(lam, name)) <= 1.0:
    raise ValueError(f"{name} must lie in [0, 1]; got {lam!r}")


def check_training(config, prefix: str = "config.") -> None:
  """The training settings, refused before the teacher trains (naming the field; they were
  read only once it was trained): one fit's (:func:`check_fit`), the integers
  ``segment_rounds`` (>= 1) and ``audit_rounds`` (>= 0), and the λ of the curve and of
  Table 1 (in [0, 1]). ``prefix`` as :func:`check_accounting`'s."""
  rng.check_seed(config.seed, f"{prefix}seed")
  check_fit(config, prefix)
  _checks.positive_int(config.segment_rounds, f"{prefix}segment_rounds")
  _checks.positive_int(config.audit_rounds, f"{prefix}audit_rounds", minimum=0)
  check_lam(config.curve.lam, f"{prefix}curve.lam")
  for lam in config.table1.lambdas:
    check_lam(lam, f"{prefix}table1.lambdas")


def check_config(config, prefix: str = "config.") -> None:
  """Every setting refused before the teacher trains, naming the field: ``noise_seed``
  (:func:`pate_jax.rng.check_noise_seed`), the published mechanism's
  (:func:`check_accounting`) and the training's (:func:`check_training`). ``prefix`` as
  :func:`check_accounting`'s."""
  rng.check_noise_seed(config.noise_seed, f"{prefix}noise_seed")
  check_accounting(config, prefix)
  check_training(config, prefix)


def run(config, workdir: str, restart_flag: str = experiment.RESTART_FLAG,
        prefix: str = "config.") -> dict:
  """Runs the stage (module docstring); the workdir is locked meanwhile. ``restart_flag``:
  the flag that sets ``config.restart`` for the script that runs it, named in a refused
  resume (``--config.kd_gan.restart`` in the GPU acceptance); ``prefix``: how the fields
  are named in the errors that refuse them (``config.kd_gan.`` there)."""
  t0 = time.time()
  workdir = pathlib.Path(workdir)
  check_config(config, prefix)  # before any training
  noise = rng.noise_record(config.noise_seed)
  with experiment.locked_workdir(workdir):
    results, png = _run(config, workdir, noise, experiment.restart_hint(restart_flag),
                        prefix)
    results.update({"wall_seconds": time.time() - t0, "results_json": str(
        (workdir / "results.json").resolve()), "pngs": [str(png.resolve())]})
    experiment.write_results(workdir, results, config=config, seed=config.seed,
                             disclosure=experiment.MEASUREMENT)
  return results


class Setup(NamedTuple):
  """What every student fit of a KD-GAN run shares (:func:`setup`)."""
  seeds: list[int]
  train_key: jax.Array            # the kd_gan_train stream
  keys: jax.Array                 # [S] the seeds' run keys (the same for every fit)
  public: Callable[[int], dict]   # n -> kd_gan.public_data of n inputs (kd_gan_data)
  data: dict                      # public(num_public)
  teacher: Any                    # the teacher's network functions
  teacher_state: Any
  teacher_accuracy: float         # held-out


def setup(config, workdir: pathlib.Path, num_public: int,
          restart_hint: str = experiment.restart_hint(),
          before_teacher: Callable[[dict], Any] | None = None) -> Setup:
  """The run's keys and streams (module docstring), the public data of ``num_public``
  inputs and the teacher, trained on all private training images under
  ``<workdir>/teacher`` (restored if it is there; trained again with ``config.restart``).
  ``before_teacher(data)`` runs on the public data before the teacher is trained (the
  sound release, which may be refused). Shared with the discriminator's ablation
  (:mod:`pate_jax.stages.kd_gan_ablation`)."""
  root = rng.root_key(config.seed)
  seeds = list(range(config.num_seeds))
  train_key = rng.stream(root, "kd_gan_train")
  keys = _run_keys(train_key, seeds)
  public = lambda n: kd_gan.public_data(rng.stream(root, "kd_gan_data"), config.public, n,
                                        config.data_dir)
  d = public(num_public)
  if before_teacher is not None:
    before_teacher(d)
  t = config.teacher
  teacher, t_state, teacher_acc = kd_gan.train_teacher(
      rng.stream(root, "kd_gan_teacher"), d["train_x"], d["train_y"], d["eval_x"],
      d["eval_y"], model=t.model, model_kwargs=t.model_kwargs.to_dict(),
      num_steps=t.num_steps, batch_size=t.batch_size, learning_rate=t.learning_rate,
      checkpoint_dir=str(pathlib.Path(workdir) / "teacher"), restart=bool(config.restart),
      restart_hint=restart_hint, log=experiment.print_private, private_checkpoints=True)
  print(f"{experiment.PRIVATE_MARK}teacher ({t.model}, all {len(d['train_y'])} private "
        "training images): "
        f"{teacher_acc:.2%} held-out")
  return Setup(seeds, train_key, keys, public, d, teacher, t_state, teacher_acc)


def _run(config, workdir: pathlib.Path, noise: dict, restart_hint: str,
         prefix: str = "config.") -> tuple[dict, pathlib.Path]:
  """The results but their wall time and paths, and the plot's path (``prefix`` as
  :func:`run`'s)."""
  release = {}
  s = setup(config, workdir, config.curve.num_public, restart_hint,
            (lambda data: release.update(_sound_release(config, workdir, data, prefix)))
            if config.sound.enabled else None)
  seeds, train_key, keys, public, d = s.seeds, s.train_key, s.keys, s.public, s.data
  teacher, t_state, teacher_acc = s.teacher, s.teacher_state, s.teacher_accuracy

  def fit(gan, name, data, tl, rounds, run_keys=keys):
    return kd_gan.fit(gan, run_keys, data["public_x"], tl, data["eval_x"], data["eval_y"],
                      num_rounds=rounds, segment_rounds=min(config.segment_rounds, rounds),
                      checkpoint_dir=str(workdir / "checkpoints" / name),
                      restart=bool(config.restart), log=experiment.print_private,
                      restart_hint=restart_hint, private_checkpoints=True)

  sigma, b, delta = config.noise_multiplier, config.batch_size, config.delta
  results = {"teacher_accuracy": teacher_acc, "delta": delta, "tau": config.tau,
             "clip": config.clip, "noise_multiplier": sigma, "batch_size": b,
             "seeds": seeds, "public": config.public, "table1": [],
             "epsilon_sound": kd_gan.published_sound_epsilon()}
  c = config.curve  # the published mechanism's accuracy vs (published) ε
  q = b / c.num_public
  tl = kd_gan.teacher_log_probs(teacher, t_state, d["public_x"])
  rounds = max(1, kd_gan.steps_for_epsilon(q, sigma, c.max_epsilon, delta) // config.k_s)
  out_curve = fit(make_gan(config, c.lam), "curve", d, tl, rounds)
  curve = kd_gan.epsilon_curve(out_curve.history, q, sigma, delta)
  results.update({"curve": curve, "lam": c.lam, "steps": rounds * config.k_s,
                  "curve_train_seconds": out_curve.train_seconds})
  results["table2"] = kd_gan.table2(curve)
  results.update({"accuracy": curve[-1]["accuracy_mean"],
                  "epsilon_published": curve[-1]["epsilon_published"]})
  results["table1"] = _table1(config, fit, public, teacher, t_state, out_curve, len(seeds))

  if config.audit_rounds:  # Eq. 5's noise on vs off, same keys: the parameter difference
    results["audit"] = kd_gan.audit_eq5_noise(
        make_gan(config, c.lam), keys, d["public_x"], tl, d["eval_x"], d["eval_y"],
        int(config.audit_rounds))
  sound, all_published = [], None
  if config.sound.enabled:
    results.update(_sound(config, fit, d, train_key, seeds, noise, release))
    sound, all_published = results["sound"], results["sound_all_published"]
  png = kd_gan.plot_utility_vs_epsilon(
      workdir / "utility_vs_epsilon.png", curve, sound,
      experiment.PRIVATE_TITLE +
      f"KD-GAN on MNIST, {config.curve.num_public} public inputs ({config.public}), "
      f"{len(seeds)} seeds",
      None if all_published is None else all_published["epsilon_if_all_published"])
  return results, png


def _table1(config, fit: Callable, public: Callable, teacher, t_state,
            out_curve: kd_gan.KDGANResult, num_seeds: int) -> list[dict]:
  """Table 1: KD-only vs joint for each public-set size, one line printed per row."""
  c, b, sigma, delta = config.curve, config.batch_size, config.noise_multiplier, config.delta
  rows = []
  for n in config.table1.public_sizes:
    dn = public(n)
    tl_n = kd_gan.teacher_log_probs(teacher, t_state, dn["public_x"])
    rounds = epoch_rounds(config, n)
    for lam in config.table1.lambdas:
      # The curve's run is this row's run, continued: read the row off its history.
      same = [h for h in out_curve.history if h["round"] == rounds] if (
          n == c.num_public and lam == c.lam) else []
      out = (kd_gan.KDGANResult(None, np.asarray(same[0]["eval_accuracy"]), [], 0,
                                float("nan")) if same else
             fit(make_gan(config, lam), f"table1_n{n}_lam{lam:g}", dn, tl_n, rounds))
      eps = kd_gan.published_epsilon(b / n, sigma, rounds * config.k_s, delta)[0]
      improved = kd_gan.published_epsilon(b / n, sigma, rounds * config.k_s, delta,
                                          conversion="improved")[0]
      last = same[0] if same else (out.history[-1] if out.history else {})
      rows.append({
          "n": n, "lam": lam, "steps": rounds * config.k_s, "q": b / n,
          "accuracy_mean": float(out.eval_accuracy.mean()),
          "accuracy_std": float(out.eval_accuracy.std()),
          "accuracy": out.eval_accuracy.tolist(), "epsilon_published": eps,
          "epsilon_improved": improved,
          # The last segment's mean discriminator loss and accuracy (0 when λ = 1: no D).
          **{k: last[k] for k in ("disc", "disc_accuracy") if k in last},
          "train_seconds": out.train_seconds})
      print(f"{experiment.PRIVATE_MARK}Table 1 n={n} λ={lam:g}: {out.eval_accuracy.mean():.2%} "
            f"± {out.eval_accuracy.std():.2%} (SD over {num_seeds} seeds), published ε "
            f"{eps:.2f}")
  return rows


def check_sound_votes(config, votes: dict, num_test: int, prefix: str = "config.") -> None:
  """A ``ValueError`` unless the sound variant's public rows are ``votes``' pool rows:
  ``config.public`` is ``"pool"`` (the sound students see public inputs only, never the
  teachers' private training split) and ``votes.npz`` holds the student split of MNIST's
  ``num_test`` test rows, its pool first, so that pool row ``i`` is the votes' row ``i``.
  ``prefix`` as :func:`check_accounting`'s."""
  if config.public != "pool":
    raise ValueError(f"{prefix}public must be 'pool' with {prefix}sound.enabled (got "
                     f"{config.public!r}): the soft labels are the teachers' on votes.npz's "
                     "pool rows, and the sound students may see public inputs only")
  split = data_lib.student_split("mnist", num_test)
  if votes["dataset"] != "mnist" or not np.array_equal(
      votes["index"][:votes["num_pool"]], split.pool_index):
    raise ValueError(f"{prefix}sound.votes_dir: its votes.npz ({votes['dataset']}) is not on "
                     "MNIST's student pool in the split's order; name the votes of the "
                     "MNIST teachers (configs/mnist_250.py)")


def _sound_release(config, workdir: pathlib.Path, d: dict, prefix: str = "config.") -> dict:
  """The sound variant's release: the teachers' soft counts on the public rows through the
  exact discrete Gaussian at each level's calibrated σ, drawn once into
  ``<workdir>/sound_release.npz`` (owner-only) and read from there by every rerun; with
  secret noise a budget of its own on the teachers' private data
  (:func:`pate_jax.budget.draw_once`; ``config.budget_registry``, ``config.another_budget``;
  ``prefix`` as :func:`check_accounting`'s)."""
  votes = votes_lib.load_votes(config.sound.votes_dir)
  check_sound_votes(config, votes, d["num_test"], prefix)
  budget_lib.check_releasable(votes, config.noise_seed)  # (Diabetes' "paper" votes: none)
  n = len(d["public_rows"])
  sigmas = [kd_gan.calibrate_soft_label_noise(e, n, config.delta)
            for e in config.sound.epsilons]
  noise = rng.noise_record(config.noise_seed)
  # What decides the release but its noise (not the σ computed from it, whose last bits
  # may change with a library version).
  settings = {"mechanism": "discrete Gaussian on soft counts",
              "rows": io.data_digest(np.asarray(d["public_rows"])),
              "epsilons": [float(e) for e in config.sound.epsilons],
              "delta": float(config.delta), "temperature": float(config.sound.temperature),
              "noise": noise["source"]}
  draw = lambda: {"targets": kd_gan.sound_targets(  # noqa: E731
      rng.noise_key("aggregation", config.noise_seed), votes, d["public_rows"], sigmas,
      config.sound.temperature), "noise_multipliers": np.asarray(sigmas, np.float64)}
  digest = budget_lib.votes_digest(votes)
  registry = budget_lib.BudgetRegistry(config.get("budget_registry") or None)
  another = _checks.boolean(config.get("another_budget", False), f"{prefix}another_budget")
  key = None  # research noise: no budget
  if not noise["public"]:  # votes.npz without the field: the digest its run recorded
    key = registry.key_of(digest, votes.get("private_data") or
                          teachers_stage.recorded_data_digest(config.sound.votes_dir),
                          config.sound.votes_dir)
    if key is None:  # draw_once refuses a new release unless another_budget
      teachers_stage.warn_without_data_digest(config.sound.votes_dir)
  # The teachers' directory, or their votes file (named as load_votes reads it).
  source = pathlib.Path(config.sound.votes_dir)
  stored = budget_lib.draw_once(
      workdir / SOUND_RELEASE, draw, votes_digest=digest, settings=settings,
      secret=not noise["public"], registry=registry, private_data=key,
      another_budget=another,
      teachers=source if source.is_dir() else source.parent)
  # The σ the release was drawn with (a library's update may move today's calibration in
  # its last bits; the release and its ε are the stored σ's).
  drawn_with = [float(x) for x in stored["noise_multipliers"]]
  if not np.allclose(drawn_with, sigmas, rtol=1e-6, atol=0):
    logging.warning("the stored release was drawn at σ %s; calibrated now: %s; its ε are "
                    "those of the stored σ", drawn_with, sigmas)
  sigmas = drawn_with
  return {"targets": stored["targets"], "sigmas": sigmas,
          "num_teachers": votes["num_teachers"],
          "budgets_on_private_data": None if key is None else len(registry.budgets(key))}


def _sound(config, fit: Callable, d: dict, train_key: jax.Array, seeds: list[int],
           noise: dict, release: dict) -> dict:
  """The sound variant: PATE soft labels through the Gaussian mechanism (``release``:
  :func:`_sound_release`'s), one student per noise level and seed (every level with the
  seeds' keys of the other fits)."""
  n = len(d["public_rows"])
  sigmas, targets = release["sigmas"], release["targets"]
  run_keys = _run_keys(train_key, np.tile(np.arange(len(seeds)), len(sigmas)))
  rounds = epoch_rounds(config, n)
  out = fit(make_gan(config, config.curve.lam, 0.0), "sound", d,
            np.repeat(targets, len(seeds), 0), rounds, run_keys)
  sound, all_published = kd_gan.sound_curve(
      config.sound.epsilons, sigmas, n, release["num_teachers"], config.delta,
      out.eval_accuracy.reshape(len(sigmas), len(seeds)))
  return {"sound": sound, "sound_all_published": all_published, "noise": noise,
          "sound_runs": len(sigmas) * len(seeds), "sound_steps": rounds * config.k_s,
          "num_teachers": release["num_teachers"], "sound_num_public": n,
          # Budgets on the teachers' data in the registry, this release's included (their
          # ε add up); None: research noise, or votes with no digest of their data.
          "budgets_on_private_data": release["budgets_on_private_data"],
          "sound_train_seconds": out.train_seconds}


def plan(config, prefix: str = "config.") -> dict:
  """``--dry_run``: the public sets, seeds, teacher schedule and every student fit's rounds
  (Table 1), the curve's ε target, and the sound variant's votes (or that they are missing).
  The curve's step count is found at run time (a bisection on ε), not here. ``prefix`` as
  :func:`check_accounting`'s."""
  check_config(config, prefix)
  b = int(config.batch_size)
  t, c = config.teacher, config.curve
  rows = [{"n": n, "lambdas": tuple(config.table1.lambdas), "rounds": epoch_rounds(config, n),
           "q": b / n}
          for n in config.table1.public_sizes]
  out = {"public": config.public, "num_seeds": int(config.num_seeds),
         "teacher": f"{t.model}, {t.num_steps} steps of batch {t.batch_size}",
         "batch_size": b, "noise_multiplier": config.noise_multiplier, "delta": config.delta,
         "curve": {"num_public": c.num_public, "lam": c.lam, "max_epsilon": c.max_epsilon,
                   "q": b / c.num_public},
         "table1_fits": sum(len(r["lambdas"]) for r in rows),
         "segment_rounds": int(config.segment_rounds), "audit_rounds": int(config.audit_rounds)}
  for r in rows:
    out[f"table1_n{r['n']}"] = f"{r['rounds']} rounds × λ {r['lambdas']} (q = {r['q']:g})"
  if config.sound.enabled:
    out["sound"], votes = experiment.votes_plan(config.sound.votes_dir,
                                                f"{prefix}sound.votes_dir")
    if votes is not None and "soft_counts" not in votes:
      out["sound"]["votes"] = ("MISSING soft_counts: votes.npz holds no soft_counts; the "
                               "release needs the teachers' integer soft counts (train the "
                               "teachers again, with distill_temperatures)")
    elif votes is not None:
      try:  # the teachers' votes cover the whole test split: pool, then evaluation rows
        check_sound_votes(config, votes, len(votes["index"]), prefix)
      except ValueError as e:
        out["sound"]["votes"] = f"REFUSED: {e}"
    out["sound_levels"] = (f"ε {tuple(config.sound.epsilons)}: alternative releases, "
                           "independent noise (publishing all composes)")
    out["sound_noise"] = rng.noise_record(config.noise_seed)["source"]
  return out


def report(r: dict) -> None:
  """Prints the teacher, Table 1 and 2, the headline, the audit, the sound variant, paths."""
  print("\nKD-GAN (Gao et al.) on MNIST, δ = {:g}, seeds {}".format(r["delta"], r["seeds"]))
  print(f"  teacher {r['teacher_accuracy']:.2%}")
  for row in r["table1"]:
    print(f"  Table 1  n={row['n']:>6} λ={row['lam']:<4g} {row['accuracy_mean']:.2%} "
          f"± {row['accuracy_std']:.2%} SD  (published ε {row['epsilon_published']:.2f})")
  for row in r["table2"]:
    got = (f"{row['accuracy_mean']:.2%} at published ε {row['epsilon_published']:.2f}"
           if "accuracy_mean" in row else row["note"])
    print(f"  Table 2  paper {row['paper_accuracy']:.2%} at ε {row['paper_epsilon']}: {got}")
  print(f"  headline: {r['accuracy']:.2%} after {r['steps']} steps, ε {r['epsilon_published']:.2f} "
        f"as published; sound ε: none (∞) — {r['epsilon_sound']['reason'][:70]}...")
  if "audit" in r:
    a = r["audit"]
    print(f"  audit: {a['rounds']} rounds × {a['runs']} seeds with vs without Eq. 5 noise "
          f"(σ {a['noise_multiplier']}): max |Δθ| = {a['max_abs_param_difference']:g}")
  for s in r.get("sound", []):
    print(f"  sound variant (an alternative release): {s['accuracy_mean']:.2%} ± "
          f"{s['accuracy_std']:.2%} SD at ε {s['epsilon']:.2f} (σ {s['noise_multiplier']:.1f}, "
          f"noise std {s['noise_std']:.3f})")
  if "sound_all_published" in r:
    a, noise = r["sound_all_published"], r["noise"]
    print(f"  sound: each level alone is its ε, with independent noise; publishing all "
          f"{a['levels']} composes to ε {a['epsilon_if_all_published']:.2f}; noise: "
          + (f"PUBLIC (research noise_seed {noise['noise_seed']}): ε is a measurement, "
             "not a release" if noise["public"] else noise["source"]))
  print(f"  results: {r['results_json']}\n  plots:   {', '.join(r['pngs'])}  "
        f"({r['wall_seconds']:.0f} s)")
