"""Ablation of the KD-GAN's discriminator at n = 1,000 public inputs (Gao et al., Table 1).

  PATE_JAX_DATA_DIR=../shared/data python experiments/ablate_kd_gan.py \\
      --config configs/kd_gan_ablation.py --workdir runs/kd_gan_ablation
  ... --config configs/kd_gan_ablation.py:smoke --workdir runs/kd_gan_ablation_smoke

Trains the teacher as experiments/train_kd_gan.py does, then per variant (overrides of
configs/kd_gan.py's keys: λ, k_d, D's learning rate and width, the Gumbel temperature,
conditioning, τ, epochs, ...) a KD-only and a joint fit with the same seeds: the paired
gain, D's loss and accuracy in the first and last segment, and how far the students are
from the teacher on the public inputs. Writes ``results.json``. The stage:
:mod:`pate_jax.stages.kd_gan_ablation`.
"""

from pate_jax import experiment
from pate_jax.stages import kd_gan_ablation as stage

run, plan, report = stage.run, stage.plan, stage.report

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan, quiet_logs=True)
