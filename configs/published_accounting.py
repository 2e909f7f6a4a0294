"""The papers' printed ε recomputed from their stated parameters
(experiments/published_accounting.py; no data, no variants)."""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  if arg not in (None, ""):
    raise ValueError(f"unknown config variant {arg!r}; this config has none")
  c = ml_collections.ConfigDict()
  row = lambda t, gamma, delta, paper: ml_collections.ConfigDict(
      {"num_queries": t, "gamma": gamma, "delta": delta, "paper_epsilon": paper})
  # PATE 2017 (ICLR), Section 3.1 / Appendix B: T LNMax answers at γ = 0.05, strong
  # composition at the paper's δ (T = 1,000, δ = 1e-6: its SVHN setting, ε ≈ 26; T = 100,
  # δ = 1e-5: its MNIST setting, ε ≈ 5.80); then T = 1,000 at our aggregate runs' δ.
  c.strong_composition = [row(1_000, 0.05, 1e-6, 26.0), row(100, 0.05, 1e-5, 5.80),
                          row(1_000, 0.05, 1e-5, None)]
  # Gao et al., Section 5 and Tables 1-2: B = 50 of N = 10,000 public inputs, σ = 1.1,
  # δ = 1e-5, 20 epochs = 4,000 steps; our kd_gan_cpu table 2 row read at 5,000 steps.
  c.gao = ml_collections.ConfigDict({
      "batch_size": 50, "num_public": 10_000, "noise_multiplier": 1.1, "delta": 1e-5,
      "steps": (4_000, 5_000), "target_epsilons": (1.93, 8.0)})
  return c
