"""The papers' printed ε recomputed from their stated parameters (closed forms, no data).

Every privacy number a paper prints for a data-independent mechanism is a function of the
parameters it states: recomputing it with pate_jax's accountants checks both the
accountant and which accounting the paper used (its δ, its conversion, its orders). This
stage computes, from the parameters in ``config`` (each cited to its paper):

* **PATE 2017, Appendix B of the ICLR version (Section 3.2 of the arXiv one)**: the
  strong-composition baseline ``4Tγ² + 2γ√(2T ln 1/δ)``
  (:func:`pate_jax.accounting.strong_composition_epsilon`) of ``T`` LNMax answers at the
  paper's δ for each printed value (≈ 26 for T = 1,000 at δ = 1e-6; 5.80 for T = 100 at
  δ = 1e-5), and at the run's δ of our aggregate runs;
* **Gao et al., Table 2** (Table 1 prints accuracies only): the DP-SGD ε of the KD loss
  (sampled Gaussian, ``q = B/N``, noise multiplier σ) after the paper's steps, under the
  paper's accounting (tf-privacy's orders and the classic conversion:
  :func:`pate_jax.kd_gan.published_epsilon`) and the improved conversion beside it, and the
  steps that reach its ε = 8 row.

Nothing here reads private data: results.json is publishable as a whole.
"""

from __future__ import annotations

from typing import Any

from pate_jax import accounting as acc
from pate_jax import experiment
from pate_jax import kd_gan

__all__ = ["run", "plan", "report"]


def _strong(rows: Any) -> list[dict[str, Any]]:
  return [{"num_queries": int(r.num_queries), "gamma": float(r.gamma), "delta": float(r.delta),
           "paper_epsilon": r.paper_epsilon,
           "epsilon": float(acc.strong_composition_epsilon(int(r.num_queries), float(r.gamma),
                                                           float(r.delta)))}
          for r in rows]


def _dp_sgd(g: Any) -> dict[str, Any]:
  q = g.batch_size / g.num_public
  out = {"q": q, "noise_multiplier": g.noise_multiplier, "delta": g.delta, "rows": []}
  for steps in g.steps:
    classic, order = kd_gan.published_epsilon(q, g.noise_multiplier, int(steps), g.delta)
    improved, order_i = kd_gan.published_epsilon(q, g.noise_multiplier, int(steps), g.delta,
                                                 conversion="improved")
    out["rows"].append({"steps": int(steps), "epsilon_classic": classic, "order": order,
                        "epsilon_improved": improved, "order_improved": order_i})
  out["steps_for_epsilon"] = [
      {"epsilon": float(e),
       "steps": kd_gan.steps_for_epsilon(q, g.noise_multiplier, float(e), g.delta)}
      for e in g.target_epsilons]
  return out


def run(config: Any, workdir: str) -> dict[str, Any]:
  """Computes the tables of the module docstring and writes ``results.json``."""
  results = {"strong_composition": _strong(config.strong_composition),
             "gao_dp_sgd": _dp_sgd(config.gao)}
  experiment.write_results(workdir, results, config=config, seed=None,
                           disclosure=experiment.NO_PRIVATE_DATA)
  return results


def plan(config: Any) -> dict[str, Any]:
  """``--dry_run``: how many values are computed (closed forms: well under a second)."""
  return {"strong_composition_rows": len(config.strong_composition),
          "gao_steps": list(config.gao.steps), "gao_targets": list(config.gao.target_epsilons)}


def report(results: dict[str, Any]) -> None:
  """One line per recomputed value."""
  for r in results["strong_composition"]:
    paper = "—" if r["paper_epsilon"] is None else f"{r['paper_epsilon']:g}"
    print(f"strong composition: T={r['num_queries']} γ={r['gamma']:g} δ={r['delta']:g}: "
          f"ε {r['epsilon']:.2f} (paper {paper})")
  g = results["gao_dp_sgd"]
  for r in g["rows"]:
    print(f"Gao DP-SGD: q={g['q']:g} σ={g['noise_multiplier']:g} {r['steps']} steps: ε "
          f"{r['epsilon_classic']:.4f} classic (order {r['order']:g}), "
          f"{r['epsilon_improved']:.4f} improved")
  for r in g["steps_for_epsilon"]:
    print(f"Gao DP-SGD: ε {r['epsilon']:g} (classic) after {r['steps']} steps")
