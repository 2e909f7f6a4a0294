"""Histogram-extraction attack on PATE: the attack paper's evaluation (Section 4, App. E/F).

  python experiments/attack.py --config configs/attack_fixed.py --workdir runs/attack_fixed
  python experiments/attack.py --config configs/attack_budget.py --workdir runs/attack_budget
  python experiments/attack.py --config configs/attack_edge.py --workdir runs/attack_edge
  python experiments/attack.py --config configs/attack_defense.py --workdir runs/attack_defense
  python experiments/attack.py --config configs/attack_adult.py --workdir runs/attack_adult

``config.setting`` selects the experiment (see each config's docstring):
``fixed`` (Figures 5-7), ``budget`` (Figure 4), ``edge`` (Figure 9), ``defense``
(Section 5) and ``adult`` (Section 2, Figure 1, Appendix E, Figure 8). Every
run writes ``results.json`` (per-histogram queries, ε and error) and PNG figures
into ``--workdir``.

Randomness: one root key ``key(config.seed)``; stream ``s`` is
``fold_in(root, s)`` and Monte Carlo repetition ``r`` is ``fold_in(stream, r)``.
"""

from __future__ import annotations

import pathlib

import jax
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from pate_jax import attacks, experiment  # noqa: E402


_STREAM_MC, _STREAM_DEFENDED, _STREAM_LEDGER, _STREAM_TEACHERS, _STREAM_SAMPLE = range(5)
_N = attacks.TABLE1_NUM_TEACHERS
_GROUP_COLORS = {"low": "tab:red", "medium": "tab:orange", "high": "tab:green"}
_GROUPS = {"L": "low", "M": "medium", "H": "high"}


# ----------------------------------------------------------------------------- helpers


def _recon_kwargs(config, variant: str) -> dict:
  kw = dict(config.reconstruction.to_dict())
  kw.update(dict(config.variants[variant].to_dict()))
  return kw


def _variants(config) -> list[str]:
  """Reconstruction variants, the headline one (``config.headline``) first.

  (ConfigDict keys iterate in sorted order, not in the order written.)
  """
  names = list(config.variants.keys())
  head = config.get("headline", "paper")
  if head not in names:
    raise ValueError(f"config.headline {head!r} is not one of the variants {names}")
  return [head] + [n for n in names if n != head]


def _table():
  hists, names = attacks.table1_histograms()
  datasets = np.array([n.split("/")[0] for n in names])
  groups = np.array([_GROUPS[n.split("/")[1][0]] for n in names])
  short = [n.split("/")[1] for n in names]
  return hists, names, datasets, groups, short


def _pearson(x, y) -> dict:
  x, y = np.ravel(x), np.ravel(y)
  r, p = stats.pearsonr(x, y)
  return {"r": float(r), "p_value": float(p), "n": int(x.size)}


def _reconstruct(q_bar, sigma, kwargs):
  rec = attacks.reconstruct_details(q_bar, sigma, _N, **kwargs)
  return rec


def _status_counts(status) -> dict:
  s = np.asarray(status).ravel()
  return {attacks.Stop(k).name: int((s == k).sum()) for k in range(len(attacks.Stop))}


def _savefig(fig, workdir, name) -> str:
  path = pathlib.Path(workdir) / name
  fig.savefig(path, dpi=120, bbox_inches="tight")
  plt.close(fig)
  return str(path)


def _privacy_costs(hists, datasets, sigma, num_queries, config):
  """ε of ``num_queries`` repeats of each histogram: (expected Confident-GNMax, GNMax)."""
  eps_conf = np.zeros(len(hists))
  eps_gnmax = np.zeros(len(hists))
  order_conf = np.zeros(len(hists))
  for ds in np.unique(datasets):
    sel = datasets == ds
    p = config.datasets[ds]
    rdp = attacks.per_query_rdp(hists[sel], sigma=sigma, threshold=p.threshold,
                                sigma_threshold=p.sigma_threshold)
    eps_conf[sel], order_conf[sel] = attacks.queries_epsilon(
        rdp, num_queries, delta=p.delta, conversion=config.conversion)
    rdp = attacks.per_query_rdp(hists[sel], sigma=sigma)
    eps_gnmax[sel], _ = attacks.queries_epsilon(rdp, num_queries, delta=p.delta,
                                                conversion=config.conversion)
  return eps_conf, eps_gnmax, order_conf


# ----------------------------------------------------------------------------- fixed queries


def run_fixed(config, key, workdir) -> dict:
  hists, names, datasets, groups, short = _table()
  sig = np.asarray(config.sigmas, np.float64)
  m = config.num_queries
  variants = _variants(config)
  err = {v: np.zeros((config.num_seeds, sig.size, len(hists))) for v in variants}
  status = {v: [] for v in variants}
  steps = {v: [] for v in variants}
  for r in experiment.progress(range(config.num_seeds), desc="seeds"):
    q_bar = attacks.sample_answers(jax.random.fold_in(jax.random.fold_in(key, _STREAM_MC), r),
                                   hists[None], sig[:, None], m)
    for v in variants:
      rec = _reconstruct(q_bar, sig[:, None], _recon_kwargs(config, v))
      err[v][r] = np.asarray(attacks.normalized_l1_error(hists[None], rec.histogram))
      status[v].append(np.asarray(rec.status))
      steps[v].append(np.asarray(rec.num_steps))

  eps_conf = np.zeros((sig.size, len(hists)))
  eps_gnmax = np.zeros((sig.size, len(hists)))
  order_conf = np.zeros((sig.size, len(hists)))
  for i, s in enumerate(sig):
    eps_conf[i], eps_gnmax[i], order_conf[i] = _privacy_costs(hists, datasets, s, m, config)

  main = variants[0]
  mean_err = err[main].mean(0)                                 # [S, B]
  results = {
      "num_queries": m, "sigmas": sig, "variants": variants, "headline_variant": main,
      "histograms": [], "summary": {}, "correlation": {},
  }
  for b, name in enumerate(names):
    results["histograms"].append({
        "name": name, "dataset": datasets[b], "group": groups[b], "votes": hists[b],
        "num_queries": m,
        "error_mean": {v: err[v][:, :, b].mean(0) for v in variants},   # per σ
        "error_std": {v: err[v][:, :, b].std(0) for v in variants},
        "epsilon_confident_gnmax": eps_conf[:, b], "best_order_confident": order_conf[:, b],
        "epsilon_gnmax": eps_gnmax[:, b],
    })
  for v in variants:
    results["summary"][v] = {
        "mean_error": float(err[v].mean()),
        "mean_error_by_sigma": err[v].mean((0, 2)),
        "mean_error_by_dataset": {ds: float(err[v][:, :, datasets == ds].mean())
                                  for ds in ("mnist", "svhn")},
        "mean_error_by_dataset_group": {
            f"{ds}/{g}": float(err[v][:, :, (datasets == ds) & (groups == g)].mean())
            for ds in ("mnist", "svhn") for g in ("low", "medium", "high")},
        "stop_status": _status_counts(np.stack(status[v])),
        "max_steps": int(np.max(np.stack(steps[v]))),
    }
  for cost_name, eps in (("confident_gnmax", eps_conf), ("gnmax", eps_gnmax)):
    results["correlation"][cost_name] = {
        "per_histogram_and_sigma": _pearson(mean_err, eps),
        "per_histogram_sigma_averaged": _pearson(mean_err.mean(0), eps.mean(0)),
        **{f"{ds}_per_histogram_and_sigma": _pearson(mean_err[:, datasets == ds],
                                                     eps[:, datasets == ds])
           for ds in ("mnist", "svhn")},
    }
  results["epsilon_range_confident_gnmax"] = [float(eps_conf.min()), float(eps_conf.max())]
  results["epsilon_range_gnmax"] = [float(eps_gnmax.min()), float(eps_gnmax.max())]

  # Figures 6 and 7: error bars per histogram and σ, ε as red dots (right axis).
  figures = []
  for ds, fig_name in (("mnist", "fig6_mnist_fixed_queries.png"),
                       ("svhn", "fig7_svhn_fixed_queries.png")):
    sel = np.flatnonzero(datasets == ds)
    fig, ax = plt.subplots(figsize=(12, 4))
    ax2 = ax.twinx()
    width = 0.8 / sig.size
    x = np.arange(sel.size)
    for i, s in enumerate(sig):
      ax.bar(x + (i - (sig.size - 1) / 2) * width, err[main][:, i, sel].mean(0), width,
             yerr=err[main][:, i, sel].std(0), label=f"σ={s:g}", alpha=0.85)
      ax2.plot(x + (i - (sig.size - 1) / 2) * width, eps_conf[i, sel], "o", color="red",
               markersize=3)
    ax.set_xticks(x, [short[b] for b in sel])
    ax.set_ylabel("error rate (normalized L1)")
    ax2.set_ylabel("privacy cost ε (Confident-GNMax)", color="red")
    ax.set_title(f"{ds.upper()}: {m} queries, error per histogram (mean ± std over "
                 f"{config.num_seeds} runs)")
    ax.legend(ncol=sig.size, fontsize=8)
    figures.append(_savefig(fig, workdir, fig_name))
  # Figure 5: error vs cost.
  fig, ax = plt.subplots(figsize=(6, 4.5))
  for ds, marker in (("mnist", "o"), ("svhn", "s")):
    for g in ("low", "medium", "high"):
      sel = (datasets == ds) & (groups == g)
      ax.scatter(mean_err[:, sel].ravel(), eps_conf[:, sel].ravel(), marker=marker,
                 color=_GROUP_COLORS[g], label=f"{ds} {g} consensus", alpha=0.8, s=18)
  r = results["correlation"]["confident_gnmax"]["per_histogram_and_sigma"]["r"]
  ax.set_title(f"error vs privacy cost, Pearson r = {r:.2f} (paper: -0.20)")
  ax.set_xlabel("error rate")
  ax.set_ylabel("privacy cost ε")
  ax.legend(fontsize=7)
  figures.append(_savefig(fig, workdir, "fig5_error_vs_cost.png"))
  results["figures"] = figures
  for v in variants:
    print(f"[{v}] mean error {results['summary'][v]['mean_error']:.4f}; by σ "
          f"{np.round(results['summary'][v]['mean_error_by_sigma'], 4)}; by dataset "
          f"{results['summary'][v]['mean_error_by_dataset']}")
  for k, c in results["correlation"].items():
    print(f"Pearson r(error, ε_{k}) = {c['per_histogram_and_sigma']['r']:.3f} (120 points), "
          f"{c['per_histogram_sigma_averaged']['r']:.3f} (30 σ-averaged)")
  return results


# ----------------------------------------------------------------------------- budget


def _ledger_replay(key, hist, p, config):
  """Asks PrivateAggregator (Confident-GNMax) the same query until it refuses."""
  from pate_jax import ledger
  agg = ledger.PrivateAggregator(
      key, "confident_gnmax", epsilon_max=p.budget, delta=p.delta, threshold=p.threshold,
      sigma_threshold=p.sigma_threshold, sigma=p.sigma, orders=attacks.ATTACK_ORDERS,
      conversion=config.conversion, chunk_size=1024)
  labels = []
  while True:
    out = agg.answer(np.tile(hist, (config.ledger_batch, 1)))
    labels.append(out.labels[out.status == int(ledger.Status.ANSWERED)])
    if np.any(out.status >= int(ledger.Status.REFUSED_BUDGET)):
      break
  labels = np.concatenate(labels)
  return {"num_charged": agg.num_charged, "num_answered": agg.num_answered,
          "epsilon": agg.epsilon, "best_order": agg.best_order,
          "counts": np.bincount(labels, minlength=hist.shape[-1])}


def _frequencies_or_uniform(counts, answered):
  """q̄ from counts; rows with no answer become uniform (the attacker learned nothing)."""
  counts = np.asarray(counts, np.float64)
  answered = np.asarray(answered)
  c = counts.shape[-1]
  q = np.where(answered[..., None] > 0, counts / np.maximum(answered, 1)[..., None], 1.0 / c)
  return q.astype(np.float32)


def run_budget(config, key, workdir) -> dict:
  hists, names, datasets, groups, short = _table()
  variants = _variants(config)
  results = {"datasets": {}, "histograms": [], "variants": variants,
             "headline_variant": variants[0], "samplers": list(config.samplers)}
  for ds in ("mnist", "svhn"):
    p = config.datasets[ds]
    sel = np.flatnonzero(datasets == ds)
    h = hists[sel]
    rdp = attacks.per_query_rdp(h, sigma=p.sigma, threshold=p.threshold,
                                sigma_threshold=p.sigma_threshold)
    m = attacks.max_queries_within_budget(rdp, p.budget, delta=p.delta,
                                          conversion=config.conversion,
                                          max_queries=config.max_queries)
    m_classic = attacks.max_queries_within_budget(rdp, p.budget, delta=p.delta,
                                                  conversion="classic",
                                                  max_queries=config.max_queries)
    eps_m, order_m = attacks.queries_epsilon(rdp, m, delta=p.delta, conversion=config.conversion)
    p_answer = stats.norm.sf((p.threshold - h.max(1)) / p.sigma_threshold)
    err = {(smp, v): np.zeros((config.num_seeds, sel.size))
           for smp in config.samplers for v in variants}
    answered = np.zeros((config.num_seeds, sel.size), np.int64)
    status = {k: [] for k in err}
    for r in experiment.progress(range(config.num_seeds), desc=f"{ds} seeds"):
      k = jax.random.fold_in(jax.random.fold_in(key, _STREAM_MC), r)
      k = jax.random.fold_in(k, 0 if ds == "mnist" else 1)
      for smp in config.samplers:
        if smp == "confident":
          counts, n_ans = attacks.answer_counts(k, h, p.sigma, m, threshold=p.threshold,
                                                sigma_threshold=p.sigma_threshold)
          answered[r] = np.asarray(n_ans)
        else:
          counts, n_ans = attacks.answer_counts(k, h, p.sigma, m)
        q_bar = _frequencies_or_uniform(counts, n_ans)
        for v in variants:
          rec = _reconstruct(q_bar, p.sigma, _recon_kwargs(config, v))
          err[(smp, v)][r] = np.asarray(attacks.normalized_l1_error(h, rec.histogram))
          status[(smp, v)].append(np.asarray(rec.status))
    ledger_rows = []
    if config.ledger:
      for j, b in enumerate(experiment.progress(sel, desc=f"{ds} ledger")):
        lk = jax.random.fold_in(jax.random.fold_in(key, _STREAM_LEDGER), int(b))
        row = _ledger_replay(lk, hists[b], p, config)
        q_bar = _frequencies_or_uniform(row["counts"], row["num_answered"])
        rec = _reconstruct(q_bar, p.sigma, _recon_kwargs(config, variants[0]))
        row["error"] = float(attacks.normalized_l1_error(hists[b], rec.histogram))
        ledger_rows.append(row)
    summary = {
        "params": p.to_dict(),
        "mean_error": {f"{smp}/{v}": float(e.mean()) for (smp, v), e in err.items()},
        "mean_error_by_group": {
            f"{smp}/{v}": {g: float(e[:, groups[sel] == g].mean())
                           for g in ("low", "medium", "high")}
            for (smp, v), e in err.items()},
        "stop_status": {f"{smp}/{v}": _status_counts(np.stack(s)) for (smp, v), s in
                        status.items()},
        "queries_allowed": m, "queries_allowed_classic_conversion": m_classic,
        "mean_queries_allowed": float(m.mean()),
    }
    if ledger_rows:
      summary["ledger_mean_error"] = float(np.mean([r["error"] for r in ledger_rows]))
    results["datasets"][ds] = summary
    for j, b in enumerate(sel):
      row = {"name": names[b], "dataset": ds, "group": groups[b], "votes": hists[b],
             "queries_allowed": int(m[j]), "queries_allowed_classic": int(m_classic[j]),
             "epsilon_at_queries": float(eps_m[j]), "best_order": float(order_m[j]),
             "pr_answered": float(p_answer[j]),
             "mean_answered": float(answered[:, j].mean()) if "confident" in config.samplers
             else None,
             "error_mean": {f"{smp}/{v}": float(e[:, j].mean()) for (smp, v), e in err.items()},
             "error_std": {f"{smp}/{v}": float(e[:, j].std()) for (smp, v), e in err.items()}}
      if ledger_rows:
        lr = ledger_rows[j]
        row["ledger"] = {k2: lr[k2] for k2 in ("num_charged", "num_answered", "epsilon",
                                               "best_order", "error")}
      results["histograms"].append(row)
    for key_name, e in err.items():
      print(f"{ds} [{key_name[0]}/{key_name[1]}] mean error {e.mean():.4f} "
            f"(paper: {0.11 if ds == 'mnist' else 0.05}); queries {m.min()}..{m.max()}")
    if ledger_rows:
      print(f"{ds} ledger replay: charged {[r['num_charged'] for r in ledger_rows]}, mean "
            f"error {summary['ledger_mean_error']:.4f}")

  results["figures"] = [_plot_budget(results, config, workdir)]
  return results


def _plot_budget(results, config, workdir) -> str:
  """Figure 4: error per histogram (one row per reconstruction variant)."""
  variants = results["variants"]
  fig, axes = plt.subplots(len(variants), 2, figsize=(14, 3.6 * len(variants)), squeeze=False)
  for row, v in enumerate(variants):
    for ax, ds in zip(axes[row], ("mnist", "svhn")):
      rows = [r for r in results["histograms"] if r["dataset"] == ds]
      x = np.arange(len(rows))
      for i, smp in enumerate(config.samplers):
        key_name = f"{smp}/{v}"
        ax.bar(x + (i - 0.5) * 0.4, [r["error_mean"][key_name] for r in rows], 0.4,
               yerr=[r["error_std"][key_name] for r in rows], label=smp,
               color=[_GROUP_COLORS[r["group"]] for r in rows], alpha=0.45 + 0.45 * i,
               edgecolor="black")
      ax.set_xticks(x, [r["name"].split("/")[1] for r in rows])
      means = ", ".join(f"{smp} {results['datasets'][ds]['mean_error'][f'{smp}/{v}']:.3f}"
                        for smp in config.samplers)
      ax.set_title(f"{ds.upper()} ε≤{config.datasets[ds].budget} [{v}]: mean {means}",
                   fontsize=9)
      ax.set_ylabel("error rate")
      twin = ax.twinx()
      twin.plot(x, [r["queries_allowed"] for r in rows], "k.")
      twin.set_yscale("log")
      twin.set_ylabel("queries allowed (dots)", fontsize=8)
      ax.legend(fontsize=7, loc="upper left")
  fig.tight_layout()
  return _savefig(fig, workdir, "fig4_budget_limited.png")


# ----------------------------------------------------------------------------- edge values


def run_edge(config, key, workdir) -> dict:
  h = attacks.table1_histogram(config.histogram)
  sig = np.asarray(config.sigmas, np.float64)
  variants = _variants(config)
  m = config.num_queries
  err = {v: np.zeros((config.num_seeds, sig.size)) for v in variants}
  status = {v: [] for v in variants}
  for r in experiment.progress(range(config.num_seeds), desc="seeds"):
    q_bar = attacks.sample_answers(jax.random.fold_in(jax.random.fold_in(key, _STREAM_MC), r),
                                   h, sig, m)
    for v in variants:
      rec = _reconstruct(q_bar, sig, _recon_kwargs(config, v))
      err[v][r] = np.asarray(attacks.normalized_l1_error(h, rec.histogram))
      status[v].append(np.asarray(rec.status))
  uniform = float(attacks.normalized_l1_error(h, np.full(h.shape, _N / h.shape[0])))
  unanimous = float(attacks.normalized_l1_error(h, _N * np.eye(h.shape[0])[np.argmax(h)]))
  q_true = np.asarray(attacks.output_distribution(h, sig, "accurate"))
  results = {"histogram": config.histogram, "votes": h, "num_queries": m, "sigmas": sig,
             "error_mean": {v: err[v].mean(0) for v in variants},
             "error_std": {v: err[v].std(0) for v in variants},
             "stop_status": {v: _status_counts(np.stack(status[v])) for v in variants},
             "baseline_uniform_error": uniform, "baseline_unanimous_top_class_error": unanimous,
             "q_top_probability": q_true[:, np.argmax(h)],
             "argmin_sigma": {v: float(sig[np.argmin(err[v].mean(0))]) for v in variants}}
  fig, ax = plt.subplots(figsize=(7, 4))
  for v in variants:
    ax.errorbar(sig, err[v].mean(0), yerr=err[v].std(0), marker="o", capsize=3,
                label=f"attack ({v})")
  ax.axhline(uniform, color="gray", linestyle=":", label="uniform guess N/C")
  ax.axhline(unanimous, color="k", linestyle="--", label="top class only: N votes on it")
  ax.set_xscale("log")
  ax.set_xlabel("σ")
  ax.set_ylabel("error rate")
  ax.set_title(f"{config.histogram} {h.tolist()}: {m} queries")
  ax.legend(fontsize=8)
  results["figures"] = [_savefig(fig, workdir, "fig9_edge_sigma.png")]
  for v in variants:
    print(f"[{v}] error by σ: " + ", ".join(f"{s:g}: {e:.3f}" for s, e in
                                            zip(sig, err[v].mean(0))))
  print(f"baselines: uniform guess {uniform:.3f}; all N votes on the top class {unanimous:.3f}")
  return results


# ----------------------------------------------------------------------------- defense


def _ledger_consistency(key, hist, sigma, m, delta, consistent):
  from pate_jax import ledger
  agg = ledger.PrivateAggregator(key, "gnmax", sigma=sigma, epsilon_max=np.inf, delta=delta,
                                 consistent=consistent, chunk_size=1024, capacity=16)
  kwargs = {"query_ids": np.full((m, 2), 7, np.uint32)} if consistent else {}
  out = agg.answer(np.tile(hist, (m, 1)), **kwargs)
  return {"consistent": consistent, "num_queries": m, "num_charged": agg.num_charged,
          "epsilon": agg.epsilon, "distinct_labels": int(np.unique(out.labels).size),
          "repeated": int(np.sum(out.repeated))}


def run_defense(config, key, workdir) -> dict:
  hists, names, datasets, groups, short = _table()
  sig = np.asarray(config.sigmas, np.float64)
  m = config.num_queries
  variants = _variants(config)
  shape = (config.num_seeds, sig.size, len(hists))
  err = {(mode, v): np.zeros(shape) for mode in ("fresh_noise", "consistent") for v in variants}
  top_hit = np.zeros(shape, bool)
  for r in experiment.progress(range(config.num_seeds), desc="seeds"):
    k = jax.random.fold_in(jax.random.fold_in(key, _STREAM_MC), r)
    for mode, consistent in (("fresh_noise", False), ("consistent", True)):
      q_bar = attacks.sample_answers(k, hists[None], sig[:, None], m, consistent=consistent)
      if consistent:
        top_hit[r] = np.argmax(np.asarray(q_bar), -1) == np.argmax(hists, -1)[None]
      for v in variants:
        rec = _reconstruct(q_bar, sig[:, None], _recon_kwargs(config, v))
        err[(mode, v)][r] = np.asarray(attacks.normalized_l1_error(hists[None], rec.histogram))
  # What the top class alone reveals: the same reconstruction from a one-hot q̄ on the
  # true top class, and the closed-form guess "all N votes on the top class".
  one_hot = np.eye(hists.shape[1], dtype=np.float32)[np.argmax(hists, -1)]
  err_top = {}
  for v in variants:
    rec = _reconstruct(np.broadcast_to(one_hot, (sig.size,) + one_hot.shape), sig[:, None],
                       _recon_kwargs(config, v))
    err_top[v] = np.asarray(attacks.normalized_l1_error(hists[None], rec.histogram))
  unanimous = np.asarray(attacks.normalized_l1_error(hists, _N * one_hot))
  uniform = np.asarray(attacks.normalized_l1_error(hists, np.full(hists.shape, _N / 10)))
  results = {"num_queries": m, "sigmas": sig, "variants": variants, "histograms": [],
             "summary": {}}
  for (mode, v), e in err.items():
    results["summary"][f"{mode}/{v}"] = {
        "mean_error": float(e.mean()), "mean_error_by_sigma": e.mean((0, 2)),
        "mean_error_by_dataset": {ds: float(e[:, :, datasets == ds].mean())
                                  for ds in ("mnist", "svhn")}}
  for v in variants:
    results["summary"][f"top_class_only/{v}"] = {
        "mean_error": float(err_top[v].mean()), "mean_error_by_sigma": err_top[v].mean(1),
        "mean_error_by_dataset": {ds: float(err_top[v][:, datasets == ds].mean())
                                  for ds in ("mnist", "svhn")}}
  results["summary"]["guess_all_votes_on_top_class"] = {
      "mean_error": float(unanimous.mean()),
      "mean_error_by_dataset": {ds: float(unanimous[datasets == ds].mean())
                                for ds in ("mnist", "svhn")}}
  results["summary"]["guess_uniform"] = {"mean_error": float(uniform.mean())}
  results["summary"]["consistent_answer_is_true_top_fraction"] = float(top_hit.mean())
  for b, name in enumerate(names):
    results["histograms"].append({
        "name": name, "votes": hists[b],
        **{f"error_{mode}/{v}": e[:, :, b].mean(0) for (mode, v), e in err.items()},
        **{f"error_top_class_only/{v}": err_top[v][:, b] for v in variants},
        "error_guess_all_votes_on_top_class": float(unanimous[b])})
  if config.ledger:
    lk = jax.random.fold_in(key, _STREAM_LEDGER)
    h = attacks.table1_histogram("svhn/M3")
    results["ledger_check"] = [
        _ledger_consistency(lk, h, float(sig[0]), m, config.ledger_delta, c)
        for c in (False, True)]
    print("ledger replay:", results["ledger_check"])
  fig, axes = plt.subplots(len(variants), 1, figsize=(13, 3.8 * len(variants)), squeeze=False)
  x = np.arange(len(hists))
  for ax, v in zip(axes[:, 0], variants):
    ax.bar(x - 0.2, err[("fresh_noise", v)].mean((0, 1)), 0.4, label="fresh noise per query")
    ax.bar(x + 0.2, err[("consistent", v)].mean((0, 1)), 0.4,
           label="consistent answers (defense)")
    ax.plot(x, err_top[v].mean(0), "k_", markersize=12, label="top class only (same solver)")
    ax.plot(x, unanimous, "r.", label="guess: all votes on the top class")
    ax.set_xticks(x, [n.replace("mnist/", "M:").replace("svhn/", "S:") for n in names],
                  rotation=90, fontsize=7)
    ax.set_ylabel(f"error (mean over σ ∈ {[float(s) for s in sig]})", fontsize=8)
    ax.set_title(f"{m} repeated queries, reconstruction '{v}': fresh noise vs consistent "
                 "answers", fontsize=9)
    ax.legend(fontsize=7)
  results["figures"] = [_savefig(fig, workdir, "defense_consistent_answers.png")]
  for name, summ in results["summary"].items():
    print(name, summ)
  return results


# ----------------------------------------------------------------------------- Adult


# Appendix D's search space (n_estimators: log-spaced integers in [10, 300]).
_RF_SPACE = {
    "max_depth": list(range(1, 12)),
    "max_features": ["sqrt", "log2", 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
    "n_estimators": sorted({int(round(x)) for x in np.geomspace(10, 300, 24)}),
    "criterion": ["gini", "entropy"],
    "min_samples_split": [2, 5, 10],
    "bootstrap": [True, False],
}


def _searched_forest(random_state: int, n_iter: int, folds: int):
  """A teacher that picks its forest by randomized search with CV accuracy (Appendix D)."""
  from sklearn.ensemble import RandomForestClassifier
  from sklearn.model_selection import RandomizedSearchCV
  return RandomizedSearchCV(RandomForestClassifier(random_state=random_state, n_jobs=1),
                            _RF_SPACE, n_iter=n_iter, cv=folds, scoring="accuracy",
                            random_state=random_state, n_jobs=1)


def _group_rates(low, minority) -> dict:
  """Figure 1/8 numbers: share of each group with low / high consensus, and precision."""
  low, minority = np.asarray(low, bool), np.asarray(minority, bool)
  tp = int(np.sum(low & minority))
  fp = int(np.sum(low & ~minority))
  return {"precision": tp / max(tp + fp, 1), "recall": tp / max(int(minority.sum()), 1),
          "accuracy": float(np.mean(low == minority)), "num_predicted_minority": tp + fp,
          "minority_low": float(np.mean(low[minority])) if minority.any() else None,
          "minority_high": float(np.mean(~low[minority])) if minority.any() else None,
          "majority_low": float(np.mean(low[~minority])) if (~minority).any() else None,
          "majority_high": float(np.mean(~low[~minority])) if (~minority).any() else None,
          "num_minority": int(minority.sum()), "num_majority": int((~minority).sum())}


def _plot_groups(ax, rates, title):
  x = np.arange(2)
  ax.bar(x - 0.2, [rates["minority_low"], rates["minority_high"]], 0.4, label="Minority (PhD)")
  ax.bar(x + 0.2, [rates["majority_low"], rates["majority_high"]], 0.4, label="Majority")
  ax.set_xticks(x, ["Low consensus", "High consensus"])
  ax.set_ylabel("share of the group")
  ax.set_title(title, fontsize=9)
  ax.legend(fontsize=8)


def run_adult(config, key, workdir) -> dict:
  import functools

  from pate_jax import tabular
  from pate_jax import votes as votes_lib
  from pate_jax.data import adult

  splits = adult.load_adult(config.data_dir or None, splits=("train", "test"),
                            drop_columns=(config.minority_column,))
  train, test = splits["train"], splits["test"]
  if config.teacher == "rf_search":
    estimator = functools.partial(_searched_forest, n_iter=config.search_iterations,
                                  folds=config.search_folds)
  elif config.teacher == "rf":
    estimator = tabular.random_forest(config.n_estimators, max_depth=config.max_depth)
  else:
    raise ValueError(f"config.teacher must be 'rf_search' or 'rf', got {config.teacher!r}")
  ensemble = tabular.fit_teachers(jax.random.fold_in(key, _STREAM_TEACHERS), train.features,
                                  train.labels, config.num_teachers, estimator=estimator,
                                  n_jobs=config.n_jobs, progress=experiment.progress)
  minority_all = np.asarray(test.columns[config.minority_column]) == config.minority_value
  votes_all, _ = tabular.teacher_votes(ensemble, test.features, n_jobs=config.n_jobs)
  # Balanced test set: every minority member and as many random majority members.
  k_sample = jax.random.fold_in(key, _STREAM_SAMPLE)
  minority_idx = np.flatnonzero(minority_all)
  majority_idx = np.asarray(jax.random.choice(
      jax.random.fold_in(k_sample, 0), np.flatnonzero(~minority_all), (minority_idx.size,),
      replace=False))
  idx = np.concatenate([minority_idx, majority_idx])
  votes = votes_all[idx]
  minority = minority_all[idx]
  cons = np.asarray(attacks.consensus(votes))
  low = np.asarray(attacks.classify_low_consensus(votes, config.consensus_threshold))
  teacher_accuracy = float(np.mean(np.argmax(votes_all, -1) == test.labels))
  results = {
      "num_teachers": config.num_teachers, "teacher": config.teacher,
      "plurality_test_accuracy": teacher_accuracy,
      "balanced": _group_rates(low, minority),
      "full_test_set": _group_rates(np.asarray(attacks.classify_low_consensus(
          votes_all, config.consensus_threshold)), minority_all),
      "consensus_mean": {"minority": float(cons[minority].mean()),
                         "majority": float(cons[~minority].mean())},
  }
  # The precision depends on which majority members are drawn: redraw them.
  draws = []
  majority_pool = np.flatnonzero(~minority_all)
  low_all = np.asarray(attacks.classify_low_consensus(votes_all, config.consensus_threshold))
  for d in range(config.num_balanced_draws):
    other = np.asarray(jax.random.choice(jax.random.fold_in(k_sample, 1000 + d), majority_pool,
                                         (minority_idx.size,), replace=False))
    sel = np.concatenate([minority_idx, other])
    draws.append(_group_rates(low_all[sel], minority_all[sel])["precision"])
  results["balanced_precision_over_draws"] = {
      "mean": float(np.mean(draws)), "std": float(np.std(draws)),
      "min": float(np.min(draws)), "max": float(np.max(draws)), "num_draws": len(draws)}
  votes_lib.save_votes(pathlib.Path(workdir) / "votes.npz", votes_all, test.labels,
                       dataset="adult-test-noeducation")
  np.save(pathlib.Path(workdir) / "minority.npy", minority_all)
  print(f"Section 2: precision {results['balanced']['precision']:.3f} on the balanced test set "
        f"(paper ~0.75); over {len(draws)} draws of the majority sample "
        f"{np.mean(draws):.3f} ± {np.std(draws):.3f}; rates {results['balanced']}")

  # Appendix E: 10 low- and 10 high-consensus members, attacked through GNMax answers.
  n = config.num_end_to_end
  low_pool, high_pool = np.flatnonzero(low), np.flatnonzero(~low)
  take = min(n, low_pool.size, high_pool.size)
  chosen = np.concatenate([
      np.asarray(jax.random.choice(jax.random.fold_in(k_sample, 1), low_pool, (take,),
                                   replace=False)),
      np.asarray(jax.random.choice(jax.random.fold_in(k_sample, 2), high_pool, (take,),
                                   replace=False))])
  h = votes[chosen]
  rdp = attacks.per_query_rdp(h, sigma=config.sigma)
  m = attacks.max_queries_within_budget(rdp, config.budget, delta=config.delta,
                                        conversion=config.conversion,
                                        max_queries=config.max_queries)
  eps_m, _ = attacks.queries_epsilon(rdp, m, delta=config.delta, conversion=config.conversion)
  q_bar = attacks.sample_answers(jax.random.fold_in(key, _STREAM_MC), h, config.sigma, m)
  rec = _reconstruct(q_bar, config.sigma, _recon_kwargs(config, _variants(config)[0]))
  h_hat = np.asarray(rec.histogram)
  low_hat = np.asarray(attacks.classify_low_consensus(np.maximum(h_hat, 0.0),
                                                      config.consensus_threshold))
  err = np.asarray(attacks.normalized_l1_error(h, h_hat))
  e2e = {
      "num_individuals": int(chosen.size),
      "agreement_with_true_consensus_class": float(np.mean(low_hat == low[chosen])),
      "rates_from_true_histograms": _group_rates(low[chosen], minority[chosen]),
      "rates_from_reconstructed": _group_rates(low_hat, minority[chosen]),
      "mean_error": float(err.mean()),
      "individuals": [
          {"votes": h[i], "minority": bool(minority[chosen][i]),
           "consensus": float(cons[chosen][i]), "queries_allowed": int(m[i]),
           "epsilon": float(eps_m[i]), "reconstructed": h_hat[i], "error": float(err[i]),
           "low_consensus_true": bool(low[chosen][i]), "low_consensus_attack": bool(low_hat[i]),
           "stop": attacks.Stop(int(rec.status[i])).name}
          for i in range(chosen.size)],
  }
  results["end_to_end"] = e2e
  print(f"Appendix E: agreement {e2e['agreement_with_true_consensus_class']:.2f}, mean error "
        f"{e2e['mean_error']:.4f}, queries {m.min()}..{m.max()}")

  fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
  _plot_groups(axes[0], results["balanced"],
               f"Fig. 1: true histograms, balanced test set (n={idx.size}),\nprecision "
               f"{results['balanced']['precision']:.2f}")
  _plot_groups(axes[1], e2e["rates_from_reconstructed"],
               f"Fig. 8: reconstructed from GNMax answers (σ={config.sigma:g}, ε≤{config.budget}),"
               f"\n{chosen.size} individuals")
  bins = np.linspace(0.5, 1.0, 26)
  axes[2].hist(cons[minority], bins, alpha=0.6, density=True, label="Minority (PhD)")
  axes[2].hist(cons[~minority], bins, alpha=0.6, density=True, label="Majority")
  axes[2].axvline(config.consensus_threshold, color="k", linestyle="--")
  axes[2].set_xlabel("consensus (top votes / teachers)")
  axes[2].legend(fontsize=8)
  results["figures"] = [_savefig(fig, workdir, "fig1_fig8_adult_consensus.png")]
  return results


# ----------------------------------------------------------------------------- main


def run(config, workdir: str) -> dict:
  key = jax.random.key(config.seed)
  pathlib.Path(workdir).mkdir(parents=True, exist_ok=True)
  runners = {"fixed": run_fixed, "budget": run_budget, "edge": run_edge,
             "defense": run_defense, "adult": run_adult}
  if config.setting not in runners:
    raise ValueError(f"config.setting must be one of {sorted(runners)}, got "
                     f"{config.setting!r}")
  results = runners[config.setting](config, key, workdir)
  results["setting"] = config.setting
  path = experiment.write_results(workdir, results, config=config, seed=config.seed)
  print(f"wrote {path}")
  return results


if __name__ == "__main__":
  experiment.run_main(run)
