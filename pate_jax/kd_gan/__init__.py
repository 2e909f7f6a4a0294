"""Private knowledge transfer with a teacher–student–discriminator GAN (Gao et al.), audited.

The paper: ``../shared/papers/gao-private-kd-gan.txt``. Pieces:

* losses (``_losses.py``): Eq. 3's softened KL, Eq. 4-5's clipped and noised loss
  vector, Gumbel-softmax samples and Eq. 6's discriminator / adversarial losses,
  the (optionally input-conditioned) :class:`Discriminator`;
* the loop (``_train.py``): Algorithm 1 (``k_d`` discriminator then ``k_s`` student
  steps per round, Poisson batches with ``q = B/N``), vmapped over seeds, in
  compiled ``lax.scan`` segments with orbax checkpoints; the published setting's
  teacher trained with the repo's supervised loop;
* privacy (``_privacy.py``): the published ε (sampled-Gaussian RDP over the steps),
  what the published loop really certifies (no finite ε for the private records, and
  why), and the sound variant: PATE soft labels (sensitivity √2/T) released once per
  public input through the Gaussian mechanism (exactly: integer soft counts and the
  discrete Gaussian), with RDP accounting and calibration;
  several noise levels are alternative releases with independent noise (publishing
  several composes);
* experiment pieces (``_experiments.py``): public data, the ε curves, Table 2's look-up,
  the sound variant's cached releases, the Eq. 5 audit and the utility-vs-ε plot. The
  stage that runs them from a config: :mod:`pate_jax.stages.kd_gan`.
"""

from pate_jax.kd_gan._losses import (Discriminator, adversarial_loss, clip_by_norm,
                                     discriminator_loss, dp_losses, gumbel_softmax, kd_losses,
                                     soften)
from pate_jax.kd_gan._privacy import (SOUND_REASON, calibrate_soft_label_noise, check_rate,
                                      ensemble_soft_counts, project_to_simplex,
                                      published_epsilon, published_sound_epsilon,
                                      release_soft_label_levels, release_soft_labels,
                                      soft_count_variance, soft_label_epsilon,
                                      soft_label_sensitivity)
from pate_jax.kd_gan._train import (KDGAN, KDGANResult, accuracy, batch_capacity, check_teacher,
                                    discriminator_step, fit, init, init_runs, make_kd_gan, poisson_batch,
                                    student_log_probs, student_loss, student_step,
                                    teacher_log_probs, train_round, train_teacher)
from pate_jax.kd_gan._experiments import (PAPER_TABLE2_MNIST, SOUND_LEVELS_NOTE, at_epsilon,
                                          audit_eq5_noise, epsilon_curve,
                                          plot_utility_vs_epsilon, public_data, sound_curve,
                                          sound_targets, steps_for_epsilon, table2)
