"""The aggregate stage: the student's noisy labels from the teachers' budget, and their ε.

``run(config, workdir)`` reads ``votes.npz`` (``config.votes_dir``, else the workdir),
answers ``config.num_queries`` rows of the public pool, chosen by
``config.query_selection`` (:func:`pate_jax.votes.query_rows`: class-balanced, as the 2017
paper selects them, or the first rows), from the teachers'
budget (:class:`pate_jax.budget.TeachersBudget`: one ledger beside votes.npz, shared by
every work directory and rerun; rows answered before come back as recorded, free), draws
the smooth-sensitivity release of the private ε once per ledger state (GNMax,
Confident-GNMax), and writes ``labels.npz``, ``results.json`` (publishable part and a
``private`` part; with a research noise seed, private as a whole) and, last, the private
``privacy.png`` (and its seconds, ``privacy_plot_seconds.json``:
:func:`pate_jax.experiment.draw_private_figures`) into the workdir. Stale outputs of an
earlier run are removed before anything is spent, so a failure never leaves a
results.json that reports less than was spent.

Config fields (``configs/aggregate_mnist.py``): ``mechanism`` and its noise, ``delta``,
``epsilon_max`` (the budget; it must be finite for secret noise), ``orders`` /
``max_moment`` / ``tight_max_moment`` / ``conversion`` / ``data_dependent`` (what is
reported), ``release`` (``order``: ``None`` for the data-independent rule of
:func:`pate_jax.budget.default_release_order`, and either way an order where conditions C5
and C6 of 2018's App. B.4.2 hold for σ and the votes' classes; ``beta``: ``None`` for
0.4/order; ``sigma_ss``), ``noise_seed`` (``None``: secret noise), ``chunk_size``,
``budget_registry`` (``""``: :func:`pate_jax.budget.registry_directory`'s default) and
``another_budget`` (a secret-noise budget registers there on its teachers' private data;
teachers trained again on the same data are refused a second budget unless this is True).
Each row is answered once by the budget, so answers are consistent by construction.
"""

from __future__ import annotations

import math
import os
import pathlib
import tempfile
import time
from typing import Any

from absl import logging
import jax
import numpy as np

from pate_jax import _checks
from pate_jax import accounting as acc
from pate_jax import budget as budget_lib
from pate_jax import experiment
from pate_jax import io
from pate_jax import labels as labels_lib
from pate_jax import mechanisms
from pate_jax import reporting
from pate_jax import rng
from pate_jax import votes as votes_lib
from pate_jax.stages import teachers as teachers_stage

__all__ = ["run", "plan", "report", "make_budget", "release_spec", "fixed_release",
           "has_release", "rdp_orders", "teachers_dir", "compile_ahead"]


def teachers_dir(source: str | os.PathLike) -> pathlib.Path:
  """The directory of a votes.npz given as the file or its directory."""
  path = pathlib.Path(source)
  return path.parent if path.suffix == ".npz" else path


def rdp_orders(config: Any, mechanism: mechanisms.Mechanism) -> np.ndarray | None:
  """The config's Rényi orders for an RDP mechanism (``None``: the default grid; the
  moments accountant uses its own moments)."""
  if config.orders is None or not mechanism.accountant_kind.takes_orders:
    return None
  return np.asarray(config.orders, np.float64)


def fixed_release(release: Any, mechanism: mechanisms.Mechanism, params: dict[str, float],
                  num_queries: int, delta: float, orders: Any, conversion: str,
                  num_classes: int, name: str = "config.release") -> budget_lib.ReleaseSpec:
  """A ``config.release`` block as a :class:`pate_jax.budget.ReleaseSpec`: its order, or
  (``None``) the data-independent rule's for ``num_queries`` answers; its β, or 0.4/order;
  its σ_ss. The order must satisfy conditions C5 and C6 for σ and ``num_classes`` (2018,
  App. B.4.2; the rule chooses only such orders): a config's other order is refused here,
  before anything is answered. Nothing here looks at the votes. ``name``: the block the
  errors name the fields of (``{name}.order``)."""
  order = release.get("order")
  if order is None:
    order = budget_lib.default_release_order(mechanism, params, int(num_queries),
                                             float(delta), orders, conversion,
                                             num_classes=num_classes)
  spec = budget_lib.ReleaseSpec.make(order, release.sigma_ss, release.get("beta"), name=name)
  acc.check_release_order(params["sigma"], num_classes, spec.order, f"{name}.order")
  return spec


def check_release(release: Any, name: str = "config.release") -> None:
  """A ``config.release`` block's ``order`` (``None``: the rule's), ``beta`` (``None``:
  0.4/order) and ``sigma_ss``, refused naming the field (``{name}.sigma_ss``) before the
  votes are read; the order's conditions C5 and C6 need the votes' classes
  (:func:`fixed_release`)."""
  if release.get("order") is not None:
    budget_lib.ReleaseSpec.make(release.order, release.sigma_ss, release.get("beta"),
                                name=name)
    return
  _checks.positive(release.sigma_ss, f"{name}.sigma_ss")
  if release.get("beta") is not None:
    _checks.positive(release.beta, f"{name}.beta")


def release_spec(config: Any, mechanism: mechanisms.Mechanism, params: dict[str, float],
                 num_classes: int) -> budget_lib.ReleaseSpec | None:
  """The release's fixed parameters (:func:`fixed_release`), or ``None`` where there is
  nothing to release: LNMax, or data-independent accounting."""
  if not has_release(config, mechanism):
    return None
  return fixed_release(config.release, mechanism, params, config.num_queries, config.delta,
                       rdp_orders(config, mechanism), config.conversion, num_classes)


def has_release(config: Any, mechanism: mechanisms.Mechanism) -> bool:
  """Whether the config releases the data-dependent ε (an RDP mechanism, data-dependent
  accounting, a ``release`` block not disabled)."""
  release = config.get("release")
  return (release is not None and release.get("enabled", True)
          and mechanism.accountant_kind.releasable and bool(config.data_dependent))


def check_config(config: Any, prefix: str = "config.") -> None:
  """The stage's settings, refused naming the field (``config.delta``, not the library's
  ``delta``) before the work directory is made or the votes are read, and by
  ``--dry_run``: the mechanism and its noise parameters, ``num_queries`` and
  ``chunk_size`` (integers >= 1), the query selection, δ, ``epsilon_max`` (> 0), the
  conversion, the orders, ``max_moment`` (an integer >= 1), ``tight_max_moment`` (an
  integer >= 0; 0: no tight report) and the flags ``data_dependent`` and
  ``privacy_plot`` (booleans), and the release's ``order``, ``beta`` and ``sigma_ss``
  (where there is a release: :func:`has_release`). A ``tight_max_moment`` that is no
  integer failed after the answers were drawn and charged; a fractional ``chunk_size`` was
  truncated; a ``privacy_plot`` of ``"no"`` drew the plot; the dry run accepted each, and a
  run's library refused the others naming its own arguments (the release's as ``release
  order``, after the votes were read). ``prefix``: how the fields are
  named (``config.aggregate.`` in the main job and the student, which check it before
  anything trains or is asked)."""
  mechanism = mechanisms.get(config.mechanism, f"{prefix}mechanism")
  check = {"positive": _checks.positive, "real": _checks.scalar}
  for p in mechanism.params:
    check[p.kind](config[p.name], f"{prefix}{p.name}")
  _checks.positive_int(config.num_queries, f"{prefix}num_queries")
  _checks.positive_int(config.chunk_size, f"{prefix}chunk_size")
  _checks.choice(config.query_selection, f"{prefix}query_selection",
                 votes_lib.QUERY_SELECTIONS)
  _checks.delta(config.delta, f"{prefix}delta")
  _checks.budget(config.epsilon_max, f"{prefix}epsilon_max")
  _checks.choice(config.conversion, f"{prefix}conversion", acc.CONVERSIONS)
  if config.get("orders") is not None:
    _checks.orders(config.orders, f"{prefix}orders")
  _checks.positive_int(config.max_moment, f"{prefix}max_moment")
  if config.get("tight_max_moment") is not None:
    _checks.positive_int(config.tight_max_moment, f"{prefix}tight_max_moment", minimum=0)
  _checks.boolean(config.data_dependent, f"{prefix}data_dependent")
  if "privacy_plot" in config:
    _checks.boolean(config.privacy_plot, f"{prefix}privacy_plot")
  if has_release(config, mechanism):
    check_release(config.release, f"{prefix}release")


def make_budget(config: Any, data: dict[str, Any], source: Any,
                workdir: pathlib.Path, prefix: str = "config.") -> budget_lib.TeachersBudget:
  """The budget the config spends: the teachers' (beside votes.npz) with secret noise,
  registered on their private data in ``config.budget_registry``, the work directory's with
  a research noise seed. Secret noise on votes marked ``not_releasable`` (their teachers'
  data prepared by looking at its private rows: Diabetes' ``"paper"`` preparation) is
  refused first (:func:`pate_jax.budget.check_releasable`). ``prefix`` as
  :func:`check_config`'s."""
  noise_seed = rng.check_noise_seed(config.get("noise_seed"), f"{prefix}noise_seed")
  budget_lib.check_releasable(data, noise_seed)  # before any setting is computed
  another = _checks.boolean(config.get("another_budget", False), f"{prefix}another_budget")
  mechanism = mechanisms.get(config.mechanism, f"{prefix}mechanism")
  params = {name: float(config[name]) for name in mechanism.param_names}
  if noise_seed is None and not math.isfinite(float(config.epsilon_max)):
    raise ValueError(f"{prefix}epsilon_max must be finite with secret noise: a release needs "
                     f"a budget (inf is for research runs with {prefix}noise_seed set)")
  teachers = teachers_dir(source)
  budget = budget_lib.TeachersBudget(
      teachers if noise_seed is None else workdir, data,
      rng.noise_key("aggregation", noise_seed), mechanism=mechanism, params=params,
      epsilon_max=config.epsilon_max, delta=config.delta, orders=rdp_orders(config, mechanism),
      max_moment=int(config.max_moment), data_dependent=config.data_dependent,
      conversion=config.conversion,
      chunk_size=int(config.chunk_size),
      release=release_spec(config, mechanism, params, int(data["votes"].shape[-1])),
      research_seed=noise_seed, release_key=rng.noise_key("epsilon_release", noise_seed),
      release_by_rule=config.get("release") is not None and config.release.get("order") is None,
      registry=budget_lib.BudgetRegistry(config.get("budget_registry") or None),
      another_budget=another,
      # votes.npz without the field: the digest its teachers' run recorded, if any.
      private_data=teachers_stage.recorded_data_digest(teachers))
  if noise_seed is None and budget.private_data is None:  # (the settings were validated)
    teachers_stage.warn_without_data_digest(teachers)
  if noise_seed is None and "salt" not in data:
    teachers_stage.warn_unsalted_votes(teachers)
  return budget


def warn_sampler_delta(budget: budget_lib.TeachersBudget, num_asked: int, votes: Any,
                       where: str, num_releases: int) -> None:
  """Warns, before anything is drawn, where a secret-noise budget's float64 samplers would
  add more than its δ (:func:`pate_jax.reporting.sampler_part`) once ``num_asked`` rows are
  asked of it and it has drawn ``num_releases`` releases (the count the run's results then
  report: :meth:`~pate_jax.budget.TeachersBudget.releases_after` for this stage; the
  active learner draws none): the (ε, δ) it publishes is then (ε, more than 2δ), as every
  report of it says. The term grows as ``e^ε_max``: at ε_max 12 one release alone passes a
  δ of 1e-5 (GNMax's 100 answers at σ 40 add 3.9e-6 more). Research noise publishes nothing."""
  if budget.research_seed is not None:
    return
  num_releases = _checks.positive_int(num_releases, "num_releases", minimum=0)
  term = reporting.sampler_part(budget, num_asked, votes, num_releases)["sampler_delta"]
  delta = float(budget.aggregator_kwargs["delta"])
  if not term <= delta:
    logging.warning(
        "%s: at ε_max %g the float64 noise samplers of %d queries and %d release(s) add %.2g "
        "to δ, more than δ = %g itself (the term grows as e^ε_max: "
        "pate_jax.mechanisms.sampler_delta); every (ε, δ) this budget publishes says so. "
        "Lower epsilon_max for a δ near the one asked", where,
        budget.aggregator_kwargs["epsilon_max"], num_asked, num_releases, term, delta)


def run(config: Any, workdir: str | os.PathLike, prefix: str = "config.", *,
        figures: list[experiment.PrivateFigure] | None = None) -> dict[str, Any]:
  """Runs the stage (module docstring); the workdir is locked meanwhile. The accounting
  runs on ``config.accounting_device`` (:func:`pate_jax.experiment.accounting_device`:
  the host by default). ``prefix``: how the fields are named in the errors that refuse
  them (:func:`check_config`; ``config.aggregate.`` in the main job, whose student labels
  with it).
  ``figures``: ``None`` draws the private ``privacy.png`` (``config.privacy_plot``) as the
  stage's last act, once its other files are written; a list receives it instead
  (:class:`pate_jax.experiment.PrivateFigure`), for a caller that writes files of its own
  after this stage (the student) to draw it after them."""
  check_config(config, prefix)
  device = experiment.accounting_device(config.get("accounting_device", "host"),
                                        f"{prefix}accounting_device")
  with (experiment.locked_workdir(workdir), jax.default_device(device),
        experiment.private_figures(figures) as drawn):
    return _run(config, pathlib.Path(workdir), drawn, prefix)


def compile_ahead(config: Any, *, num_teachers: int, num_classes: int, num_rows: int,
                  num_pool: int, prefix: str = "config.") -> float:
  """Runs the stage once on synthetic votes of a run's shapes, in a temporary directory
  removed afterwards, and returns its seconds.

  The stage is almost all compilation (on a 2-core CPU, 9 s the first time and 0.2 s on
  other votes of the same shapes): afterwards every program it compiles for this config
  and these shapes is in the process's caches, and :func:`run` on the real votes only
  computes. For a host that would otherwise wait (the main job calls it while its teachers
  train on an accelerator). The votes are drawn from a fixed seed (70 % of the teachers on
  a random label, the rest at random), from no data; nothing is published or kept, and
  no plot is drawn (matplotlib is not thread-safe). ``prefix`` as :func:`run`'s.
  """
  t0 = time.perf_counter()
  gen = np.random.default_rng(0)
  labels = gen.integers(0, num_classes, num_rows)
  agree = gen.random((num_teachers, num_rows)) < 0.7
  predictions = np.where(agree, labels, gen.integers(0, num_classes, (num_teachers, num_rows)))
  votes = np.stack([(predictions == k).sum(axis=0) for k in range(num_classes)], axis=1)
  with tempfile.TemporaryDirectory(prefix="pate_jax_compile_ahead_") as tmp:
    teachers = pathlib.Path(tmp) / "teachers"
    # Synthetic "private data" keyed in a registry of the temporary directory: the real
    # run's registry path, without a budget anyone else would meet.
    votes_lib.save_votes(teachers / "votes.npz", votes, labels, num_pool=num_pool,
                         dataset="synthetic", private_data=io.data_digest(labels))
    rehearsal = config.copy_and_resolve_references()
    with rehearsal.unlocked():
      rehearsal.votes_dir, rehearsal.privacy_plot = str(teachers), False
      rehearsal.budget_registry = str(pathlib.Path(tmp) / "registry")
    run(rehearsal, pathlib.Path(tmp) / "aggregate", prefix)
  return time.perf_counter() - t0


def _run(config: Any, workdir: pathlib.Path, figures: list[experiment.PrivateFigure],
         prefix: str = "config.") -> dict[str, Any]:
  t0 = time.perf_counter()
  source = config.votes_dir or workdir
  if not config.votes_dir and not (workdir / "votes.npz").exists():
    raise FileNotFoundError(
        f"no votes in {workdir / 'votes.npz'}: name a teachers workdir with "
        "--config.votes_dir=DIR (e.g. runs/pate_mnist_cpu/teachers after the main job), or "
        "run experiments/train_teachers.py into this --workdir first")
  data = votes_lib.load_votes(source)
  n = int(config.num_queries)
  if not 0 < n <= data["num_pool"]:
    raise ValueError(f"{prefix}num_queries must be in [1, num_pool={data['num_pool']}], got "
                     f"{n}")
  rows = votes_lib.query_rows(config.query_selection, data["labels"][:data["num_pool"]], n,
                              data["votes"].shape[1])
  budget = make_budget(config, data, source, workdir, prefix)
  _check_prior(workdir, budget)
  warn_sampler_delta(budget, np.union1d(rows, budget.state()["rows"]).size, data["votes"],
                     f"{prefix}epsilon_max", budget.releases_after(rows))
  experiment.remove_stale(workdir, ("results.json", "privacy.png",  # and privacy.png's seconds
                                    "privacy_plot_seconds.json"))
  for tmp in labels_lib.temporary_files(workdir):  # left by a run killed while writing
    tmp.unlink(missing_ok=True)
  out = budget.answer(rows)
  release = budget.release()
  state = budget.state()
  new_now = int(np.sum(~np.asarray(out.repeated)))  # not answered before, by any run
  results = reporting.aggregate_results(data, rows, out, state, release, budget, config,
                                        num_asked_now=new_now)
  labels_lib.save_labels(workdir, **_labels_file(data, rows, out, state, budget,
                                                 results["ledger"]["sampler_delta"]))
  results["time_s"] = time.perf_counter() - t0
  results["accounting_platform"] = _checks.default_platform()  # where the accounting ran
  experiment.write_results(workdir, results,
                           config=reporting.config_record(config, budget.mechanism),
                           seed=config.seed,
                           disclosure=experiment.noise_disclosure(results["noise_source"]))
  # Drawing the private curve and compressing its PNG take a time that follows the votes:
  # drawn after every file above (and a caller's), whose times would carry its seconds.
  curve = results["private"].get("privacy_curve")
  if config.get("privacy_plot", True) and curve:
    title = (experiment.PRIVATE_TITLE + f"{budget.mechanism.name} {budget.params}, "
             f"{data['num_teachers']} teachers")
    figures.append(experiment.PrivateFigure(
        "privacy_plot", workdir / "privacy.png",
        lambda path: reporting.plot_privacy(curve, title, path)))
  return results


def _check_prior(workdir: pathlib.Path, budget: budget_lib.TeachersBudget) -> None:
  """Checks that an earlier ``labels.npz`` of the workdir, if any, is this budget's:
  answered on these votes, every outcome the budget's record. One that cannot be read at
  all (torn: a crash before its bytes reached the disk) tells nothing and is removed, with
  a warning: it was a copy of the budget's record, which this run writes again."""
  path = workdir / labels_lib.FILENAME
  if not path.exists():
    return
  try:
    prior = labels_lib.load_labels(path, votes_digest=budget.digest)
  except _checks.CorruptFileError as e:
    logging.warning("%s cannot be read (%s): a copy of the budget's record, torn; it is "
                    "written again from the budget, which spends nothing", path,
                    e.__cause__.__class__.__name__)
    path.unlink()
    return
  state = budget.state()
  labels_lib.check_against(prior, state["rows"], state["labels"], state["status"], str(path))


def _labels_file(data: dict[str, Any], rows: np.ndarray, out: Any, state: dict[str, Any],
                 budget: budget_lib.TeachersBudget, sampler_delta: float) -> dict[str, Any]:
  """The arguments of :func:`pate_jax.labels.save_labels` for ``rows`` of votes.npz
  (``sampler_delta``: the results' ``ledger.sampler_delta``)."""
  record = state["record"]
  return {"labels": out.labels, "status": out.status, "true_labels": data["labels"][rows],
          "dataset_index": data["index"][rows], "query_index": rows,
          "votes_digest": budget.digest, "mechanism": budget.mechanism.name,
          "epsilon": float(record["ledger_epsilon"]),
          "epsilon_max": float(record["ledger_epsilon_max"]),
          "delta": float(record["ledger_delta"]), "noise": budget.noise,
          "sampler_delta": sampler_delta}


def release_plan(config: Any, num_classes: int | None) -> Any:
  """The release's fixed parameters as ``--dry_run`` shows them (``num_classes``: the
  votes', ``None`` when they are missing: the order's conditions C5/C6 need it)."""
  mechanism = mechanisms.get(config.mechanism, "config.mechanism")
  if not has_release(config, mechanism):
    return "none"
  if num_classes is None:
    return ("not fixed yet: the order must satisfy conditions C5 and C6 for the votes' "
            "number of classes")
  params = {name: float(config[name]) for name in mechanism.param_names}
  plan_ = release_spec(config, mechanism, params, num_classes)._asdict()
  if config.release.get("order") is None:
    plan_["order_from"] = (f"the data-independent rule for config.num_queries = "
                           f"{int(config.num_queries)}; a budget already created keeps the "
                           "order it was created with")
  return plan_


def plan(config: Any) -> dict[str, Any]:
  """``--dry_run``: the mechanism, its noise and its source, the queries asked and the
  votes they come from (or that the votes are missing), the release's fixed parameters,
  and the temporary memory of the compiled answer of one ledger chunk."""
  check_config(config)
  mechanism = mechanisms.get(config.mechanism, "config.mechanism")
  params = {name: config[name] for name in mechanism.param_names}
  n, chunk = int(config.num_queries), int(config.chunk_size)
  sizes, data = experiment.votes_plan(
      config.votes_dir, "config.votes_dir (run() would read <workdir>/votes.npz)")
  out: dict[str, Any] = {"mechanism": mechanism.name, "noise": params,
                         "noise_source": rng.noise_record(config.get("noise_seed")),
                         "accountant": mechanism.accountant, "num_queries": n,
                         "delta": config.delta, "epsilon_max": config.epsilon_max,
                         "release": release_plan(config, None if data is None
                                                 else int(data["votes"].shape[1])),
                         "ledger_chunk_size": chunk, "ledger_chunks": -(-n // chunk)}
  out.update(sizes)
  if data is None:
    return out
  out["num_queries_within_pool"] = 0 < n <= data["num_pool"]
  key = rng.noise_key_spec(config.get("noise_seed"))  # The run's key type; nothing drawn.
  votes = jax.ShapeDtypeStruct((chunk, data["votes"].shape[1]), data["votes"].dtype)
  with jax.enable_x64(True):  # the answers' float64 noise (pate_jax.mechanisms)
    out["answer_temp_bytes_per_chunk"] = experiment.compiled_temp_bytes(
        lambda k, x, q: mechanism.answer(k, x, q, params), key, votes,
        jax.ShapeDtypeStruct((chunk,), np.int32))
  return out


def report(r: dict[str, Any]) -> None:
  """Prints the stage's headline (private lines say so)."""
  print("\n".join(reporting.aggregate_headline(r)))
