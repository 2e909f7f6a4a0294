"""The main job: a complete small PATE run on MNIST (experiments/run_pate.py).

  python experiments/run_pate.py --config configs/pate_mnist.py:cpu --workdir runs/pate_mnist_cpu

Stages, each with the config of its own experiment (overridable as
``--config.teachers.num_steps=...``, ``--config.aggregate.num_queries=...``):
  teachers   configs/mnist_250.py  → <workdir>/teachers/{votes.npz,results.json}
  aggregate  configs/aggregate_mnist.py → <workdir>/aggregate/{labels.npz,results.json}
             with GNMax (σ = 40; ``--config.aggregate.mechanism=lnmax`` for 2017's LNMax):
             its data-dependent ε, released with smooth sensitivity, and data-independent ε
  student    configs/student_pate_g.py, 300 epochs with 2-pixel translations
             → <workdir>/student/{checkpoints,results.json} (``--config.student.num_steps=...``)
  attack     the histogram attack on the run's lowest-consensus labelled queries, with
             fresh noise and with consistent answers → <workdir>/attack/
             (``--config.attack.enabled=False`` skips it); on the host, beside the
             student's training where that runs on an accelerator (where the labels'
             accounting is also compiled ahead, beside the teachers' training)
and ``<workdir>/report.md``, the run's report with its figures.
One root seed (``--config.seed``) drives every stage through pate_jax.rng's named
streams. The main job may fall back to scikit-learn's 8×8 digits when MNIST is
nowhere to be found, and says so loudly.
"""

import pathlib

import ml_collections

from pate_jax.experiment import load_script


def _sibling(name: str):
  return load_script(pathlib.Path(__file__).with_name(name + ".py"))


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.teachers = _sibling("mnist_250").get_config(arg)
  c.teachers.allow_fallback = True
  c.aggregate = _sibling("aggregate_mnist").get_config(arg)
  # GNMax (Papernot et al. 2018), the mechanism whose data-dependent ε has a smooth-
  # sensitivity release; σ = 40 as in 2018's MNIST row (LNMax: --config.aggregate.mechanism=lnmax).
  c.aggregate.mechanism = "gnmax"
  # The budget of the teachers' data: 100 GNMax answers at σ 40 and the release of their
  # private ε cost ε ≈ 1.69 (data-independent, improved conversion) of it.
  c.aggregate.epsilon_max = 2.0
  c.student = _sibling("student_pate_g").get_config(arg)
  # PATE-G for the authors' 300 epochs (27,000 steps of the 9,000-image pool; on the CPU
  # too: 1,179 s of training in the README's main-job run, 1,551 s in RESULTS.md's), with one
  # deviation: the real images shifted by up to 2 pixels (without it the student plateaus
  # near 97.7 %; README, *Students*).
  # --config.student.student.kwargs.translate=0 is the authors' PATE-G.
  c.student.num_steps = 27_000
  c.student.segment_steps = 900
  c.student.student.kwargs.translate = 2
  c.attack = _attack_config()
  # Whether the labels' accounting is compiled ahead on synthetic votes, in a thread beside
  # the teachers' training (pate_jax.stages.aggregate.compile_ahead: the aggregate stage is
  # almost all compilation). None: when the accounting's device is not the teachers' (the
  # host beside an accelerator); on a CPU-only machine they would share the cores.
  c.compile_accounting_ahead = ml_collections.config_dict.placeholder(bool)
  # Whether the student's training is compiled ahead in the same thread, after the
  # accounting, on synthetic data of its shapes (pate_jax.stages.student.compile_ahead).
  # None: when the student trains on an accelerator (compiling is host work).
  c.compile_student_ahead = ml_collections.config_dict.placeholder(bool)
  # Set by the main job (pate_jax.stages.main_job.wire), not here: each stage's seed from
  # --config.seed, the aggregate's noise seed from --config.noise_seed, and the student's
  # labelling from --config.aggregate.*. An override of one of them is refused by name.
  for stage in (c.teachers, c.aggregate, c.student):
    stage.seed = ml_collections.config_dict.placeholder(int)
  c.aggregate.noise_seed = ml_collections.config_dict.placeholder(int)
  del c.student.aggregate
  c.seed = 0
  # None: secret noise (os.urandom, never written). An int: a research noise seed for exact
  # reproduction; the noise is then public and the run's ε a measurement, not a release.
  c.noise_seed = ml_collections.config_dict.placeholder(int)
  return c


def _attack_config() -> ml_collections.ConfigDict:
  """The histogram attack on the run's own votes, against fresh noise and consistent
  answers (pate_jax.attacks.produced_histograms; the attack paper's Section 5)."""
  a = ml_collections.ConfigDict()
  a.enabled = True
  a.num_histograms = 5        # the labelled queries with the fewest votes on their top class
  a.num_queries = 10_000      # repeats of each query (the attack paper's M)
  a.num_seeds = 1             # Monte Carlo repetitions of the attacker
  a.conversion = "improved"   # RDP -> (ε, δ) of the repeats' cost
  # Where the attack runs: "host" (the CPU; its hundred-odd small programs compile there
  # cheaply) or "default" (JAX's default device): pate_jax.experiment.accounting_device.
  a.device = "host"
  # Whether it runs in a thread beside the student's training (it needs the labels, not the
  # student). None: when the two devices differ (the host beside an accelerator), so that
  # the attack adds no wall time; on a CPU-only machine they would share the cores.
  a.beside_student = ml_collections.config_dict.placeholder(bool)
  defense = _sibling("attack_defense").get_config()  # the attack paper's solver options
  a.reconstruction = defense.reconstruction
  a.mle_reconstruction = defense.mle_reconstruction
  a.headline = "paper"
  a.variants = ml_collections.ConfigDict({"paper": {}, "mle": {"method": "mle"}})
  return a
