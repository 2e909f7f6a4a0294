"""Ablation of the KD-GAN's discriminator (Gao et al., Table 1 at n = 1,000 public inputs):
why joint KD+GAN (λ < 1) does no better than KD-only (λ = 1) here.

  PATE_JAX_DATA_DIR=../shared/data python experiments/ablate_kd_gan.py \\
      --config configs/kd_gan_ablation.py --workdir runs/kd_gan_ablation
  ... --config configs/kd_gan_ablation.py:smoke                   (seconds)
  ... --config.only="('paper', 'lam_0')"                          (some variants only)

The base is configs/kd_gan.py:cpu (MLP teacher on all private training images, MLP
student, 4 seeds, 20 epochs of B = 50, σ as configured: Eq. 5's noise does not reach the
gradient). Each variant overrides keys of that base (``lam`` is the joint fit's λ) and is
fitted twice with the same run keys, so that the seeds pair: KD-only (λ = 1, the variant's
student-side settings; one fit shared by every variant with equal student-side settings,
since D cannot touch a λ = 1 student) and joint (the variant's λ).

Variants:
  ""     2-core CPU: the 15 variants below at n = 1,000, 4 seeds (~10 minutes).
  smoke  seconds: tiny nets, 2 seeds, 1 epoch of 200 inputs, 3 variants.
"""

import pathlib

import ml_collections

from pate_jax.experiment import load_script

VARIANTS = (
    ("paper", {}),                                  # λ 0.5, k_d 1, D lr 1e-3, D (256,), Gumbel 0.5
    ("lam_0.9", {"lam": 0.9}),
    ("lam_0.1", {"lam": 0.1}),
    ("lam_0", {"lam": 0.0}),                        # adversarial only: does D learn at all?
    ("k_d_5", {"k_d": 5}),
    ("disc_lr_1e-2", {"disc_learning_rate": 1e-2}),
    ("disc_lr_1e-4", {"disc_learning_rate": 1e-4}),
    ("disc_512x2", {"disc_hidden": (512, 512)}),
    ("gumbel_0.1", {"gumbel_temperature": 0.1}),
    ("gumbel_2", {"gumbel_temperature": 2.0}),
    ("unconditional", {"conditional": False}),
    ("epochs_100", {"epochs": 100}),                # KD-only and joint both 5x longer
    ("tau_1", {"tau": 1.0}),
    # Not the paper's: the student's samples on 10,000 further inputs the teacher never
    # labels, where the student, unlike on the public inputs, still differs from it.
    ("unlabelled_10k", {"num_unlabelled": 10_000}),
    ("unlabelled_10k_uncond", {"num_unlabelled": 10_000, "conditional": False}),
)


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  if arg not in (None, "", "smoke"):
    raise ValueError(f"unknown config variant {arg!r}; use '' or 'smoke'")
  c = load_script(pathlib.Path(__file__).with_name("kd_gan.py")).get_config(
      "smoke" if arg == "smoke" else "cpu")
  for unused in ("curve", "table1", "sound", "audit_rounds", "noise_seed", "segment_rounds",
                 "delta", "budget_registry", "another_budget"):
    del c[unused]  # the base's Table 2 curve, audit and sound release: not run here
  c.num_public = 1_000          # N: the public inputs (Table 1's middle row)
  c.lam = 0.5                   # the joint fit's λ (the base's Table 1 λ)
  c.num_unlabelled = 0          # U > 0: the student's samples (D, adversarial term) on U
                                # further inputs the teacher never labels (not the paper's)
  c.num_segments = 8            # compiled segments per fit: D's loss is read per segment
  c.variants = VARIANTS         # (name, {base key: value}); see the module docstring
  c.only = ()                   # names of the variants to run; () = all
  if arg == "smoke":
    c.num_public = 200
    c.teacher.num_steps = 50
    c.num_segments = 2
    c.variants = (("paper", {}), ("lam_0.9", {"lam": 0.9}), ("tau_1", {"tau": 1.0}))
  return c
