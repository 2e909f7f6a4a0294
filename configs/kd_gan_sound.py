"""KD-GAN: the sound variant next to the published mechanism, on the same public data.

  PATE_JAX_DATA_DIR=../shared/data python experiments/train_kd_gan.py \\
      --config configs/kd_gan_sound.py:cpu --workdir runs/kd_gan_sound \\
      --config.sound.votes_dir=<teachers workdir with votes.npz>

Public data: the repo's student split of the MNIST test split (the 9,000-row pool of
``votes.npz``; held out: its 1,000 evaluation rows). Published mechanism: one teacher
trained on all 60,000 private training images, Eq. 5, ε as published (sound ε: none).
Sound variant: the same student and discriminator trained on the 250 PATE teachers'
averaged probability vectors (``votes.npz``'s integer ``soft_counts``, configs/mnist_250.py;
L2 sensitivity √2/T), each of the n public inputs released once through the Gaussian
mechanism, exactly: the discrete Gaussian on the counts (σ calibrated to ε ∈ {1, 2, 4, 8},
δ = 1e-5, RDP over n releases), projected onto the simplex and cached; Eq. 5's noise is
off (it does nothing anyway). No table 1 here. The four levels are alternative releases,
each with its own independent noise; publishing all four composes (results.json:
sound_all_published.epsilon_if_all_published).

Noise: ``noise_seed`` None (the default): the release's noise is secret (os.urandom,
never written). The release is drawn once into ``<workdir>/sound_release.npz``
(owner-only) and a rerun reads it from there (and the sound fit resumes); it is a budget
on the teachers' private data in the budget registry, refused where the teachers' ledger
or another release already holds one unless ``--config.another_budget=True``.
``--config.noise_seed=0``: a research seed, reproducible, the noise public and ε a
measurement, not a release (no budget).

Variants: "" (accelerator: CNN teacher, all 9,000 pool rows, 10 seeds), cpu (MLP
teacher, 3,000 public rows, 2 seeds; the published curve to ε 8), smoke.
"""

import pathlib

import ml_collections

from pate_jax.experiment import load_script


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = load_script(pathlib.Path(__file__).with_name("kd_gan.py")).get_config(arg)
  c.public = "pool"
  c.table1.public_sizes = ()
  c.num_seeds = 10
  c.curve.num_public = 9_000
  c.curve.max_epsilon = 8.0
  c.sound.enabled = True
  c.sound.votes_dir = ""        # required: the teachers' workdir (votes.npz with probabilities)
  c.sound.epsilons = (1.0, 2.0, 4.0, 8.0)  # alternative releases, independent noise
  c.noise_seed = ml_collections.config_dict.placeholder(int)  # None: secret (see above)
  if arg == "cpu":
    c.num_seeds = 2
    c.curve.num_public = 3_000      # q = 50/3,000: published ε 8 after 6,474 steps
    c.segment_rounds = 500
    c.audit_rounds = 300
  elif arg == "smoke":
    c.curve.num_public = 500
    c.sound.epsilons = (2.0, 8.0)
  return c
