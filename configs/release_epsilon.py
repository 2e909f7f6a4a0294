"""Privately released ε of a Confident-GNMax labelling (experiments/release_epsilon.py).

  python experiments/release_epsilon.py --config configs/release_epsilon.py \\
      --workdir runs/release_mnist --config.votes_dir=runs/pate_mnist_cpu/teachers

Default: the MNIST row of Papernot et al. 2018 (Table 2; tf-privacy
``ICLR2018/generate_table.sh``): the first 640 queries of 250 teachers' votes,
Confident-GNMax with T = 200, σ_1 = 150, σ_2 = 40, δ = 1e-5, classic RDP conversion, on
tf-privacy's list of orders (2, 2.5, ..., 100 and 100 log-spaced orders up to 500). The
release uses an order, β and σ_ss fixed here (the paper's procedure chose them on the
votes; that analysis is reported in the private part only). No budget is spent, so the
run is a research measurement, private as a whole, with secret noise too: a publishable
release is the aggregate stage's (configs/aggregate_mnist.py).
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0                  # root seed (what is not private)
  # None: secret noise (answers and release); an int: a research seed (public noise). Either
  # way the run spends no budget and is a measurement, private as a whole.
  c.noise_seed = ml_collections.config_dict.placeholder(int)
  c.votes_dir = ""            # directory (or file) with votes.npz; "" = --workdir
  c.num_queries = 640         # first N rows of the public pool (paper's MNIST: 640)
  c.threshold = 200.0         # Confident-GNMax threshold T
  c.sigma_threshold = 150.0   # threshold noise σ_1
  c.sigma = 40.0              # GNMax noise σ_2
  c.delta = 1e-5
  c.conversion = "classic"    # RDP -> (ε, δ) as in the paper; or "improved"
  c.orders = "tf_privacy"     # "tf_privacy" (its table script's list) or "default"
  c.joint_orders = True       # also release with (λ, β) chosen jointly over DEFAULT_ORDERS
  c.draws = 1000              # noisy releases drawn to report their spread (private)
  # The release's parameters, fixed before the data is seen. Here the public constants that
  # tf-privacy's table script printed for the paper's own MNIST row (order 18.5, σ_ss ≈ 7.5;
  # chosen on the paper's votes, not ours); beta None = 0.4/order. order None instead: the
  # order where num_queries answers cost the least data-independent ε (6.5 here, which
  # assumes every query answered and so over-charges a labelling that answers few).
  c.release = ml_collections.ConfigDict({
      "order": 18.5,
      "beta": ml_collections.config_dict.placeholder(float),
      "sigma_ss": 7.5})
  if arg not in (None, ""):
    raise ValueError(f"configs/release_epsilon.py: unknown variant {arg!r}; use ''")
  return c
