"""Noisy aggregation mechanisms as data: one registry of pure ``answer``/``cost`` pairs.

A :class:`Mechanism` is a NamedTuple of pure functions, like optax's
``GradientTransformation``:

* ``answer(key, votes[Q, C], query_ids, params) -> (labels[Q], answered[Q])``: the
  noisy labels (int32, ``NOT_ANSWERED`` = -1 where not answered); the noise of query
  ``i`` comes from ``fold_in(key, query_ids[i])`` (:func:`query_keys`), so an answer
  depends only on ``(key, id, votes row)``;
* ``cost(votes[Q, C], answered[Q], params, orders[K], data_dependent) -> [Q, K]``:
  float64 per-query privacy cost given each query's outcome, for the accountant of
  kind ``accountant`` (:class:`pate_jax.accounting.Accountant`); the cost of a query
  *if answered* is ``cost(votes, ones, ...)``. ``data_dependent`` is a Python bool
  (static: one accounting per compiled step).

plus its name, its parameters (:class:`Param`: a name, a symbol and a kind that says how
it is validated), its **noise scale** and an optional helper (``baselines`` adds
reference ε values to reports). An ``answer`` draws its noise in float64 through
:func:`_noise_dtype` (traced in 64-bit mode) and names the scale of every noise value it
draws per query beyond one per class in ``extra_noise_params``: :func:`sampler_delta`
charges each.

The noise scale ``s`` is the one convention for "how much noise" across mechanisms: the
scale, in votes, of the noise added to each count of the answer — LNMax's Laplace scale
``b = 1/γ``, GNMax's and Confident-GNMax's ``σ``. ``mechanism.noise_param`` names the
parameter that sets it; :func:`noise_scale` maps parameters to ``s`` and
:func:`params_at` maps ``(s, T)`` to a full parameter dict (Confident-GNMax's threshold
and threshold noise as fractions of ``T``). Ablations, sweeps and plots take ``s`` or the
mechanism's own parameters through these, never by testing a mechanism's name.
Everything that needs a mechanism (:mod:`pate_jax.aggregation`, :mod:`pate_jax.ledger`,
the aggregate stage) looks it up here with :func:`get`: a new mechanism is one new entry
of :data:`REGISTRY` plus its tests. The costs are built on :mod:`pate_jax.accounting`,
which never imports this module: calibrating a noise scale
(:func:`pate_jax.accounting.calibrate_noise`) takes the mechanism object and reads its
``cost``, ``accountant`` and noise convention.

References:
  Papernot et al. 2017, "Semi-supervised Knowledge Transfer for Deep Learning from
  Private Training Data" (ICLR), Section 2.1 and Theorems 1-3 (LNMax).
  Papernot et al. 2018, "Scalable Private Learning with PATE" (ICLR), Section 4.1,
  Theorem 6, Proposition 10 (GNMax, Confident-GNMax).
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pate_jax import _checks as v
from pate_jax._compile import bucket
from pate_jax import accounting as acc

__all__ = [
    "Param", "Mechanism", "REGISTRY", "LNMAX", "GNMAX", "CONFIDENT_GNMAX", "NOT_ANSWERED",
    "get", "names", "register", "check_params", "query_keys", "make_accountant",
    "sampler_delta", "release_sampler_delta", "SAMPLER_CDF_ERROR",
    "epsilon_report", "padded_queries", "MAX_TEACHERS", "noise_scale", "params_at", "describe",
]

# Label of a query that was not answered (Confident-GNMax below its threshold).
NOT_ANSWERED = -1

# Largest number of teachers (row total) a mechanism answers: counts must be exact in
# its noise arithmetic (pate_jax._checks.MAX_NOISY_TOTAL).
MAX_TEACHERS = v.MAX_NOISY_TOTAL

# Noise is drawn, scaled and added to the votes in float64. JAX samples a Gaussian or a
# Laplace variable from a uniform of the float's mantissa bits: in float32 that is one of
# 2**23 values, each of probability 2**-23 and none beyond 5.42 standard deviations, so a
# neighbouring histogram's answer could have probability 0 where the analysis assumes the
# Gaussian's positive tail, and over 100 queries the samplers' distance from the ideal
# noise (about 2**-23 per coordinate) would be far above a δ of 1e-5. In float64 the
# sampler's CDF is within SAMPLER_CDF_ERROR of the ideal one everywhere
# (:func:`sampler_delta` charges it). The answers are the same whether or not the caller
# has 64-bit mode on: every caller traces them under ``jax.enable_x64(True)`` (a trace
# without it is refused: :func:`_noise_dtype`).
_NOISE_DTYPE = jnp.float64

# Largest distance (sup over t) between the CDF of JAX's float64 normal or Laplace sampler
# and the ideal CDF: its 2**52 equiprobable atoms (2**-52) plus ``erf_inv``'s and
# ``log1p``'s rounding, measured at most 8.6e-16 (normal) and 4.2e-15 (Laplace) against
# mpmath at 200 bits on 48,000 points (the tails to 1 - 2**-52 among them), taken with a
# margin of 3.4 over the larger.
SAMPLER_CDF_ERROR = 2.0 ** -46


def sampler_delta(mechanism: Mechanism, params: dict[str, Any], num_queries: Any,
                  num_classes: int, num_teachers: Any, epsilon: Any) -> float:
  """What the float64 noise adds to δ: ``(1 + e^ε) · N · η₁`` for the ``N = num_queries ·
  (num_classes + len(extra_noise_params))`` noise values drawn, ``η₁ = SAMPLER_CDF_ERROR +
  2^-52 · (T/s + 38)`` each (``T`` teachers, ``s`` the smallest noise scale: σ or 1/γ and
  the ``extra_noise_params``, Confident-GNMax's σ_T).

  Couple each drawn value with an ideal one through the same uniform (both are monotone
  in it): they fall on either side of a point ``t`` with probability at most the
  samplers' CDF distance at ``t``, :data:`SAMPLER_CDF_ERROR`. Given the other values of
  its query, a query's outcome changes with one value at one point at most (its class
  overtakes the rest, or its noisy top count passes the threshold); that point is itself
  moved by the float64 rounding of the scores ``n + s·z`` it is compared through, by at
  most ``2^-51 (T + 38 s)`` (38: beyond either sampler's largest ``|z|``), ``2^-51 (T/s +
  38)`` in ``z``, where the noise's density is at most 1/2. Replacing the values one at a
  time, the whole transcript of answers differs from the ideal mechanism's with
  probability ``η ≤ N · η₁``. Where the ideal mechanism is ``(ε, δ)``-DP the sampled one
  is ``(ε, δ + (1 + e^ε) η)``-DP: ``P[R(D) ∈ S] ≤ P[I(D) ∈ S] + η ≤ e^ε P[I(D′) ∈ S] + δ +
  η ≤ e^ε P[R(D′) ∈ S] + δ + (1 + e^ε) η``.

  Give the queries asked (not the realised number charged, which follows the answers
  under Confident-GNMax) and the budget's ``ε_max`` where it is finite (the guarantee of a
  budget that stops at it). Every value is public.
  """
  extra = mechanism.extra_noise_params
  scale = min([float(noise_scale(mechanism, params)), *(float(params[p]) for p in extra)])
  per_value = SAMPLER_CDF_ERROR + 2.0**-52 * (float(num_teachers) / scale + 38.0)
  n = float(num_queries) * (int(num_classes) + len(extra))
  return _delta_of_distance(epsilon, n * per_value)


def _delta_of_distance(epsilon: Any, eta: float) -> float:
  """``(1 + e^ε) η``: what a mechanism within total variation ``η`` of an ``(ε, δ)``-DP one
  adds to δ (:func:`sampler_delta`)."""
  return float((1.0 + math.exp(min(float(epsilon), 700.0))) * eta)


def release_sampler_delta(num_releases: Any, upper: Any, epsilon: Any) -> float:
  """What the float64 noise of ``num_releases`` smooth-sensitivity releases of ε adds to
  δ: ``(1 + e^ε) · R · (upper / RELEASE_GRID + 2) · (SAMPLER_CDF_ERROR + 2^-51)``.

  A release (:func:`pate_jax.accounting.release_epsilon`) publishes the grid cell of the
  exact real ``e + std·z``, clipped to ``[0, upper]``: it changes at most at the
  ``upper / RELEASE_GRID + 2`` cell edges in that range. Coupled through the same uniform
  with the ideal ``z``, the sampler's falls across a given edge with probability at most
  :data:`SAMPLER_CDF_ERROR`, and the product ``std·z``'s rounding (``2^-53 |z|`` in ``z``,
  ``|z| < 8.3``, where the normal's density is at most 0.4) moves it across with at most
  ``2^-51`` more. The δ term follows as in :func:`sampler_delta`. ``upper`` must bound
  every release's clip (the budget's data-independent ε when drawn is at most its ``ε_max``,
  or its ε now); ``inf`` where a release is not clipped. Every value is public.
  """
  releases = int(num_releases)
  if releases == 0:
    return 0.0
  edges = float(upper) / acc.RELEASE_GRID + 2.0
  return _delta_of_distance(epsilon, releases * edges * (SAMPLER_CDF_ERROR + 2.0**-51))


def _noise_dtype():
  """float64, refused where the trace is not in 64-bit mode (it would silently draw float32
  noise)."""
  if jax.dtypes.canonicalize_dtype(jnp.float64) != jnp.float64:
    raise RuntimeError("a mechanism's answers draw float64 noise: trace them under "
                       "jax.enable_x64(True) (as pate_jax.aggregation and the ledger do)")
  return _NOISE_DTYPE


class Param(NamedTuple):
  """A mechanism parameter: ``kind`` is ``"positive"`` (finite, > 0) or ``"real"`` (finite)."""
  name: str
  kind: str
  doc: str
  symbol: str = ""  # How reports and plots write it (``γ``, ``σ``); the name if empty.


class Mechanism(NamedTuple):
  """A noisy aggregator and its privacy cost (see the module docstring)."""
  name: str
  params: tuple[Param, ...]
  accountant: str  # Kind of accountant its costs compose in: "rdp" or "moments".
  answer: Callable[..., tuple[jax.Array, jax.Array]]
  cost: Callable[..., jax.Array]
  # Votes rows must sum to the same number of teachers T. Every built-in mechanism needs
  # it: its cost assumes that one teacher moves one vote between two classes of a row
  # of T votes (a row with a larger total would be charged as if its gap were real).
  equal_totals: bool = True
  baselines: Callable[[int, dict[str, Any], float], dict[str, float]] | None = None
  # The parameter that sets the answer noise, and whether the noise scale in votes is
  # its inverse (LNMax: b = 1/γ) or the parameter itself (σ).
  noise_param: str = "sigma"
  inverse_scale: bool = False
  # ``(scale, num_teachers, threshold_fraction, sigma_threshold_fraction) -> params``
  # for mechanisms with parameters besides the noise; None: ``{noise_param: value}``.
  params_at_scale: Callable[..., dict[str, Any]] | None = None
  # The parameters setting the scale of each noise value drawn per query besides one per
  # class (Confident-GNMax: its threshold check's, σ_T): each is charged to δ by
  # :func:`sampler_delta`.
  extra_noise_params: tuple[str, ...] = ()

  @property
  def param_names(self) -> tuple[str, ...]:
    return tuple(p.name for p in self.params)

  @property
  def accountant_kind(self) -> acc.AccountantKind:
    """The :class:`pate_jax.accounting.AccountantKind` its costs compose in."""
    return acc.accountant_kind(self.accountant, "mechanism.accountant")

  @property
  def noise(self) -> Param:
    """The :class:`Param` that sets the answer noise."""
    return next(p for p in self.params if p.name == self.noise_param)


# ----------------------------------------------------------------------------- noise


def query_keys(key: jax.Array, query_ids: jax.Array) -> jax.Array:
  """Per-query keys ``[Q]``: ``fold_in`` of each id word (``[Q]`` or ``[Q, W]``) in order."""
  ids = query_ids if query_ids.ndim == 2 else query_ids[:, None]

  def one(words):
    k = key
    for w in range(ids.shape[1]):
      k = jax.random.fold_in(k, words[w])
    return k

  return jax.vmap(one)(ids)


# ----------------------------------------------------------------------------- LNMax


def _lnmax_answer(key, votes, query_ids, params):
  """``argmax_j(n_j + Lap(1/γ))`` (2017, Eq. 1)."""
  dtype = _noise_dtype()
  gamma = jnp.asarray(params["gamma"], dtype)
  keys = query_keys(key, query_ids)
  noise = jax.vmap(lambda k: jax.random.laplace(k, votes.shape[1:], dtype))(keys)
  labels = jnp.argmax(votes.astype(dtype) + noise / gamma, axis=-1).astype(jnp.int32)
  return labels, jnp.ones(labels.shape, bool)


def _lnmax_cost(votes, answered, params, orders, data_dependent):
  """Log-moments ``α(l)`` per query (2017, Theorems 1, 3; Lemma 4 when data-dependent)."""
  del answered  # LNMax always answers.
  return acc.lnmax_log_moments(votes, params["gamma"], orders, data_dependent=data_dependent)


def _lnmax_baselines(num_answered, params, delta):
  """The 2017 paper's strong-composition baseline ``4Tγ² + 2γ√(2T ln 1/δ)``."""
  return {"strong_composition": float(
      acc.strong_composition_epsilon(num_answered, params["gamma"], delta))}


LNMAX = Mechanism(
    name="lnmax",
    params=(Param("gamma", "positive", "inverse Laplace scale (2017 MNIST: 0.05)", "γ"),),
    accountant="moments", answer=_lnmax_answer, cost=_lnmax_cost,
    baselines=_lnmax_baselines, noise_param="gamma", inverse_scale=True)


# ----------------------------------------------------------------------------- GNMax


def _gnmax_answer(key, votes, query_ids, params):
  """``argmax_j(n_j + N(0, σ²))`` (2018, Section 4.1)."""
  dtype = _noise_dtype()
  sigma = jnp.asarray(params["sigma"], dtype)
  keys = query_keys(key, query_ids)
  noise = jax.vmap(lambda k: jax.random.normal(k, votes.shape[1:], dtype))(keys)
  labels = jnp.argmax(votes.astype(dtype) + sigma * noise, axis=-1).astype(jnp.int32)
  return labels, jnp.ones(labels.shape, bool)


def _gnmax_cost(votes, answered, params, orders, data_dependent):
  """RDP per query: ``λ/σ²``, or Theorem 6's data-dependent bound (2018)."""
  del answered  # GNMax always answers.
  return acc.gnmax_rdp(votes, params["sigma"], orders, data_dependent=data_dependent)


GNMAX = Mechanism(
    name="gnmax",
    params=(Param("sigma", "positive", "Gaussian noise standard deviation", "σ"),),
    accountant="rdp", answer=_gnmax_answer, cost=_gnmax_cost)


# ----------------------------------------------------------------------------- Confident-GNMax


def _confident_gnmax_answer(key, votes, query_ids, params):
  """Answer with GNMax(σ) iff ``max_j n_j + N(0, σ_T²) >= T`` (2018, Section 4.1).

  The two noises of query ``i`` come from ``split(fold_in(key, query_ids[i]))``.
  """
  dtype = _noise_dtype()
  keys = query_keys(key, query_ids)
  threshold, sigma_threshold, sigma = (jnp.asarray(params[k], dtype)
                                       for k in ("threshold", "sigma_threshold", "sigma"))

  def one(k, row):
    k_threshold, k_answer = jax.random.split(k)
    noisy_max = row.max() + sigma_threshold * jax.random.normal(k_threshold, (), dtype)
    answered = noisy_max >= threshold
    scores = row + sigma * jax.random.normal(k_answer, row.shape, dtype)
    label = jnp.argmax(scores).astype(jnp.int32)
    return jnp.where(answered, label, NOT_ANSWERED), answered

  return jax.vmap(one)(keys, votes.astype(dtype))


def _confident_gnmax_cost(votes, answered, params, orders, data_dependent):
  """Threshold check for every query plus GNMax(σ) for the answered ones (realised cost).

  The check is a sensitivity-1 Gaussian mechanism: ``λ/(2σ_T²)`` (the GNMax cost at
  noise ``√2 σ_T``), or its data-dependent bound.
  """
  if data_dependent:
    check = acc.confident_threshold_rdp(votes, params["threshold"], params["sigma_threshold"],
                                        orders)
  else:
    check = acc.gnmax_rdp(votes, math.sqrt(2.0) * params["sigma_threshold"], orders,
                          data_dependent=False)
  answer = acc.gnmax_rdp(votes, params["sigma"], orders, data_dependent=data_dependent)
  with jax.enable_x64(True):  # Float64 sum.
    return check + jnp.where(jnp.asarray(answered, bool)[:, None], answer, 0.0)


def _confident_gnmax_at_scale(scale, num_teachers, threshold_fraction, sigma_threshold_fraction):
  """``σ = s``, ``threshold = f_T · n``, ``σ_T = f_σ · n`` (fractions of the teachers)."""
  return {"threshold": threshold_fraction * num_teachers,
          "sigma_threshold": sigma_threshold_fraction * num_teachers, "sigma": scale}


CONFIDENT_GNMAX = Mechanism(
    name="confident_gnmax",
    params=(Param("threshold", "real", "threshold T on the noisy top count (in votes)", "T"),
            Param("sigma_threshold", "positive", "std σ_T of the threshold noise", "σ_T"),
            Param("sigma", "positive", "std σ of the answer noise", "σ")),
    accountant="rdp", answer=_confident_gnmax_answer, cost=_confident_gnmax_cost,
    params_at_scale=_confident_gnmax_at_scale, extra_noise_params=("sigma_threshold",))


# ----------------------------------------------------------------------------- registry

REGISTRY: dict[str, Mechanism] = {m.name: m for m in (LNMAX, GNMAX, CONFIDENT_GNMAX)}


def register(mechanism: Mechanism) -> Mechanism:
  """Adds ``mechanism`` to :data:`REGISTRY` (a name may be registered once)."""
  if mechanism.name in REGISTRY:
    raise ValueError(f"mechanism must have a new name; got {mechanism.name!r}, already "
                     "registered")
  v.choice(mechanism.accountant, "mechanism.accountant", acc.ACCOUNTANT_KINDS)
  v.choice(mechanism.noise_param, "mechanism.noise_param", mechanism.param_names)
  REGISTRY[mechanism.name] = mechanism
  return mechanism


def names() -> tuple[str, ...]:
  """The registered mechanism names."""
  return tuple(REGISTRY)


def get(name: str | Mechanism, name_of_argument: str = "mechanism") -> Mechanism:
  """The registered mechanism called ``name`` (``ValueError`` naming the choices).

  A registered :class:`Mechanism` is returned as it is, so every function that takes a
  mechanism takes the object (a config's name is looked up once, at the stage).
  """
  if isinstance(name, Mechanism):
    if REGISTRY.get(name.name) is not name:
      raise ValueError(f"{name_of_argument} must be a registered mechanism; got an "
                       f"unregistered {name.name!r} (pate_jax.mechanisms.register)")
    return name
  return REGISTRY[v.choice(name, name_of_argument, REGISTRY)]


def noise_scale(mechanism: Mechanism, params: dict[str, Any]) -> Any:
  """The noise scale ``s`` in votes of ``params``: ``1/γ`` (LNMax) or ``σ``."""
  value = params[mechanism.noise_param]
  return 1.0 / value if mechanism.inverse_scale else value


def params_at(mechanism: Mechanism, scale: Any, num_teachers: Any, *,
              threshold_fraction: Any = 0.8, sigma_threshold_fraction: Any = 0.6
              ) -> dict[str, Any]:
  """The parameters of ``mechanism`` at noise scale ``scale`` with ``num_teachers`` teachers.

  LNMax ``γ = 1/s``; GNMax ``σ = s``; Confident-GNMax ``σ = s``,
  ``threshold = threshold_fraction · n``, ``sigma_threshold = sigma_threshold_fraction · n``.
  Works on traced values (under ``jit``/``vmap``).
  """
  if mechanism.params_at_scale is not None:
    return mechanism.params_at_scale(scale, num_teachers, threshold_fraction,
                                     sigma_threshold_fraction)
  return {mechanism.noise_param: 1.0 / scale if mechanism.inverse_scale else scale}


def describe(mechanism: Mechanism, params: dict[str, Any]) -> str:
  """``"σ=40"``, ``"γ=0.05"``, ``"T=300, σ_T=200, σ=100"``: parameters as reports write them."""
  return ", ".join(f"{p.symbol or p.name}={float(params[p.name]):g}" for p in mechanism.params)


def check_params(mechanism: Mechanism, params: dict[str, Any]) -> dict[str, Any]:
  """Validates a parameter dict (exactly the mechanism's names).

  Returns:
    The values as float64 numpy scalars; traced values (under ``jit``/``vmap``) are
    returned as they are.
  """
  if set(params) != set(mechanism.param_names):
    raise ValueError(f"params of {mechanism.name!r} must be exactly {mechanism.param_names}; "
                     f"got {sorted(params)}")
  check = {"positive": v.positive, "real": v.scalar}
  return {p.name: params[p.name] if v.is_traced(params[p.name])
          else np.float64(check[p.kind](params[p.name], p.name)) for p in mechanism.params}


def make_accountant(mechanism: Mechanism, orders: Any = None, conversion: str = "improved",
                    max_moment: int = 8) -> acc.Accountant:
  """An empty accountant for ``mechanism``'s costs.

  RDP mechanisms use ``orders`` (default :data:`pate_jax.accounting.DEFAULT_ORDERS`) and
  ``conversion``; the moments accountant uses ``orders`` as moment orders, by default
  ``1..max_moment``.
  """
  kind = mechanism.accountant_kind
  orders = kind.default_orders(max_moment) if orders is None else orders
  return acc.make_accountant(kind.name, orders, conversion)


def padded_queries(votes: np.ndarray, answered: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """``votes[N, C]`` and ``answered[N]`` padded to ``bucket(N, minimum=64)`` rows, so that
  one compiled ``Mechanism.cost`` serves every ``N`` up to the bucket: the padding rows hold
  row 0's total in class 0 (valid votes with equal totals) and are not answered. Only the
  first ``N`` rows of the costs are the queries'."""
  num = votes.shape[0]
  size = bucket(num, minimum=64)
  padded = np.zeros((size, votes.shape[1]), votes.dtype)
  padded[:num] = votes
  padded[num:, 0] = votes[0].sum()
  ans = np.zeros(size, bool)
  ans[:num] = answered
  return padded, ans


def epsilon_report(mechanism: Mechanism, params: dict[str, Any], votes: Any, answered: Any,
                   charged: Any, *, delta: float, orders: Any = None,
                   max_moment: int = 8) -> dict[str, dict]:
  """ε of a labelling under every accounting of the mechanism's accountant.

  The charged queries (processed: answered, or not confident) are composed with
  ``mechanism.cost`` given their outcome, data-dependently and data-independently, and
  (RDP) with each conversion. Data-dependent ε values depend on the private votes and
  are reported un-noised, as in both papers (2017, Section 3.3).

  Args:
    mechanism: a registered mechanism.
    params: its parameters.
    votes: int ``[N, C]`` votes of the queries asked.
    answered: bool ``[N]`` queries that got a label.
    charged: bool ``[N]`` queries that were processed.
    delta: δ of the (ε, δ) guarantee.
    orders: Rényi orders (RDP) or moment orders; see :func:`make_accountant`.
    max_moment: largest moment of the default moment orders.

  Returns:
    ``{name: {"epsilon", "best_order" or "best_moment", "delta"}}`` with names
    ``moments_data_{dependent,independent}`` or
    ``rdp_data_{independent,dependent}_{classic,improved}``, plus the mechanism's
    baselines; ``{}`` when nothing was charged.
  """
  charged = np.asarray(charged, bool)
  if not charged.any():
    return {}
  answered = np.asarray(answered, bool)[charged]
  num = answered.size
  # Costed on padded rows: the programs of a ledger's cost check, one per bucket of N.
  votes, padded_answered = padded_queries(np.asarray(votes)[charged], answered)
  delta = float(delta)
  out: dict[str, dict] = {}
  kind = mechanism.accountant_kind
  for dd in (False, True):
    dd_name = "data_dependent" if dd else "data_independent"
    for conversion in kind.conversions:
      empty = make_accountant(mechanism, orders, conversion or "improved", max_moment)
      costs = np.asarray(mechanism.cost(votes, padded_answered, params, empty.orders, dd))[:num]
      eps, best = empty.compose(costs).epsilon(delta)
      name = f"{kind.name}_{dd_name}" + (f"_{conversion}" if conversion else "")
      out[name] = {"epsilon": float(eps), kind.best_key: kind.best_type(best), "delta": delta}
  if mechanism.baselines is not None:
    for name, eps in mechanism.baselines(int(answered.sum()), params, delta).items():
      out[name] = {"epsilon": eps, "delta": delta}
  return out
