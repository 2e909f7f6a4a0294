"""The consistent-answer defense against near-duplicate queries (beyond the paper).

  python experiments/attack.py --config configs/attack_near_duplicates.py --workdir runs/attack_near_duplicates
  python experiments/attack.py --config configs/attack_near_duplicates.py:cpu --workdir runs/attack_near_duplicates_cpu

The defense of attack_defense.py keys each answer's noise by a hash of the query input's
bytes (pate_jax.aggregation.hash_query_ids), so it caches *exact* repeats; a query changed by
one pixel is a new query. This trains the teachers of configs/mnist_250.py (the same ones
the teachers stage would: same seed, shards and keys; in memory, nothing kept), picks the
main job's targets (the ``num_histograms`` lowest-consensus of the ``num_candidates``
class-balanced pool queries), makes ``num_queries`` near-duplicates of each
(``perturbations``: ``pixel`` sets one random pixel to another random 8-bit grey level,
all copies distinct; ``pixel_step`` moves one random pixel by ±1/255, reflected at 0 and 1
(at most ~2·784 distinct copies: beyond, the defense answers repeats from its cache);
``gauss`` adds N(0, (1/255)²) i.i.d. noise, clipped to [0, 1]), takes the teachers' votes
on every one, and answers them with GNMax(σ) under the defense (query ids hashed from each
near-duplicate's bytes). The attack paper's reconstruction and the MLE are scored against
the original query's histogram, beside exact repeats with fresh noise and with the defense,
with the fraction of near-duplicates whose histogram differs from the original's.
``results.json`` is a private research measurement (the teachers' own vote histograms).
"""

import pathlib

import ml_collections

from pate_jax.experiment import load_script


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.setting = "near_duplicates"
  c.seed = 0
  c.teachers = load_script(pathlib.Path(__file__).with_name("mnist_250.py")).get_config(arg)
  c.sigma = 40.0                 # GNMax σ of the main job's labels (configs/pate_mnist.py)
  c.query_selection = "balanced"  # the labelled pool queries (configs/aggregate_mnist.py)
  c.num_candidates = 100         # ... of which the lowest-consensus ones are attacked
  c.num_histograms = 5
  c.num_queries = 10_000         # near-duplicates (and exact repeats) of each query: M
  c.num_seeds = 3                # Monte Carlo repetitions of the aggregator's secret key
  c.perturbations = ("pixel", "pixel_step", "gauss")  # pate_jax.attacks.PERTURBATIONS
  defense = load_script(pathlib.Path(__file__).with_name("attack_defense.py")).get_config()
  c.reconstruction = defense.reconstruction
  c.mle_reconstruction = defense.mle_reconstruction
  c.headline = "paper"
  c.variants = defense.variants
  if arg == "cpu":
    c.num_queries = 2_000
    c.num_seeds = 1
  elif arg not in (None, ""):
    raise ValueError(f"configs/attack_near_duplicates.py: unknown variant {arg!r}")
  return c
