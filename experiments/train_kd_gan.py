"""Gao et al.'s teacher–student–discriminator KD-GAN on MNIST, as published and audited.

  PATE_JAX_DATA_DIR=../shared/data python experiments/train_kd_gan.py \\
      --config configs/kd_gan.py:cpu --workdir runs/kd_gan_cpu          (Table 1, Table 2)
  ... --config configs/kd_gan_sound.py:cpu --workdir runs/kd_gan_sound  (sound variant)

Trains the teacher on all private training data, then Table 1 (KD-only vs joint), the
published mechanism's accuracy-vs-ε curve (ε *as published*; Table 2 read off it) and,
with ``sound.enabled``, the sound variant (PATE soft labels through the Gaussian
mechanism; secret noise unless ``noise_seed`` names a research seed). Writes
``results.json`` and ``utility_vs_epsilon.png``. The stage: :mod:`pate_jax.stages.kd_gan`.
"""

from pate_jax import experiment
from pate_jax.stages import kd_gan as stage

run, plan, report = stage.run, stage.plan, stage.report

if __name__ == "__main__":
  experiment.run_main(run, report=report, plan=plan, quiet_logs=True)
