"""Privacy accounting for PATE as jit-compiled, differentiable JAX (float64, log space).

Public API (per-query costs are arrays ``[Q, ...]``; compose by summing over queries):

* LNMax, 2017 moments accountant (Papernot et al. 2017, Thms 1-3, Lemma 4):
  :func:`lnmax_log_q`, :func:`lnmax_log_moments`, :func:`moments_to_epsilon`,
  :func:`lnmax_moments_epsilon`, :func:`strong_composition_epsilon`.
* GNMax and Confident-GNMax, data-dependent RDP (Papernot et al. 2018, Thm 6,
  Prop. 10, Sec. 4.1): :func:`gnmax_log_q`, :func:`gaussian_rdp_from_log_q`,
  :func:`gnmax_rdp`, :func:`confident_log_pr_answered`,
  :func:`confident_threshold_rdp`, :func:`confident_gnmax_rdp`.
* Sampled Gaussian mechanism (Mironov, Talwar, Zhang 2019): :func:`sampled_gaussian_rdp`.
* RDP to ``(ε, δ)``: :func:`rdp_to_epsilon` (classic or improved conversion).
* :func:`calibrate_noise`: noise scale that spends a target ε.
* Releasing data-dependent ε privately (Papernot et al. 2018, Sec. 4, Apps. B-C):
  :func:`gnmax_local_sensitivity`, :func:`threshold_local_sensitivity`,
  :func:`smooth_sensitivity`, :func:`gnss_rdp` (Thm 23),
  :func:`smooth_sensitivity_release` (a :class:`Release`) and :func:`release_epsilon`
  (the publishable noisy ε; its parameters fixed before the data, and drawn once per
  ledger, by :mod:`pate_jax.budget`). A release is made only at orders where conditions
  C5 and C6 of App. B.4.2 hold: :func:`smooth_sensitivity_conditions`,
  :func:`smooth_sensitivity_condition_margins`, :func:`valid_release_orders`,
  :func:`check_release_order`.
* :class:`Accountant` (a pytree), :func:`rdp_accountant`, :func:`moments_accountant`,
  :func:`make_accountant`, :func:`compose`, :func:`epsilon`: compose per-query costs
  and answer ε, always in float64. What differs between its kinds is an
  :class:`AccountantKind` (:data:`RDP_ACCOUNTANT`, :data:`MOMENTS_ACCOUNTANT`,
  :func:`accountant_kind`).

Every public function validates concrete inputs (``ValueError`` naming the
argument; vote histograms are checked on their device in one fused pass, and integer
votes are converted to float64 inside the compiled core), enables float64 locally
(``jax.enable_x64``), and calls a jitted core;
under ``jit``/``vmap``/``grad`` only shapes are checked, so the functions compose
with JAX transformations (e.g. ``jax.grad`` with respect to ``sigma`` or to votes
treated as reals; concrete votes must be integer counts).

The results are float64 arrays, but JAX truncates float64 to float32 in any
operation run with 64-bit mode off: do not sum per-query costs by hand outside
``with jax.enable_x64(True):``; compose them with an :class:`Accountant`
(``rdp_accountant(orders).compose(costs).epsilon(delta)``), which does it in 64-bit mode.

Inside your own ``jax.jit`` (or ``lax.scan``, ``jax.checkpoint``) traced with 64-bit mode
off, JAX's default, float64 is not available: the program is compiled in 32-bit mode and
cannot hold a float64 value. There every function computes in float32 and returns
float32, gradients included (relative error ~1e-6 to 1e-4 against the float64 result; the
local sensitivities, differences of costs, lose the most). For float64 inside a jit,
trace it with 64-bit mode on (``jax.config.update("jax_enable_x64", True)``, or call and
trace it inside ``with jax.enable_x64(True):``); eager calls and ``vmap`` are float64
either way, and so is ``grad`` of one function of this package. ``grad`` of your own
function combining several (a sum of per-query costs composed by an accountant) adds
their cotangents in 32-bit mode, in float32: 1.5e-5 relative error where terms cancel
(16 GNMax queries, classic conversion); take it under ``jax.enable_x64(True)``.
"""

from __future__ import annotations

from pate_jax.accounting._accountant import KINDS as ACCOUNTANT_KINDS
from pate_jax.accounting._accountant import MOMENTS as MOMENTS_ACCOUNTANT
from pate_jax.accounting._accountant import RDP as RDP_ACCOUNTANT
from pate_jax.accounting._accountant import (
    Accountant,
    AccountantKind,
    accountant_kind,
    compose,
    epsilon,
    make_accountant,
    moments_accountant,
    rdp_accountant,
)
from pate_jax.accounting._calibrate import calibrate_noise
from pate_jax.accounting._conditions import (
    check_release_order,
    smooth_sensitivity_condition_margins,
    smooth_sensitivity_conditions,
    valid_release_orders,
)
from pate_jax.accounting._conversion import CONVERSIONS, DEFAULT_ORDERS, rdp_to_epsilon
from pate_jax.accounting._gnmax import (
    confident_gnmax_rdp,
    confident_log_pr_answered,
    confident_threshold_rdp,
    gaussian_rdp_from_log_q,
    gnmax_log_q,
    gnmax_rdp,
)
from pate_jax.accounting._lnmax import (
    lnmax_log_moments,
    lnmax_log_q,
    lnmax_moments_epsilon,
    moments_to_epsilon,
    strong_composition_epsilon,
)
from pate_jax.accounting._local_sensitivity import (
    gnmax_local_sensitivity,
    threshold_local_sensitivity,
)
from pate_jax.accounting._sampled_gaussian import sampled_gaussian_rdp
from pate_jax.accounting._smooth_sensitivity import (
    RELEASE_GRID,
    Release,
    gnss_rdp,
    on_release_grid,
    release_epsilon,
    smooth_sensitivity,
    smooth_sensitivity_release,
)

__all__ = [
    "ACCOUNTANT_KINDS",
    "Accountant",
    "AccountantKind",
    "MOMENTS_ACCOUNTANT",
    "RDP_ACCOUNTANT",
    "accountant_kind",
    "CONVERSIONS",
    "DEFAULT_ORDERS",
    "RELEASE_GRID",
    "Release",
    "calibrate_noise",
    "check_release_order",
    "compose",
    "confident_gnmax_rdp",
    "confident_log_pr_answered",
    "confident_threshold_rdp",
    "epsilon",
    "gaussian_rdp_from_log_q",
    "gnmax_local_sensitivity",
    "gnmax_log_q",
    "gnmax_rdp",
    "gnss_rdp",
    "lnmax_log_moments",
    "lnmax_log_q",
    "lnmax_moments_epsilon",
    "make_accountant",
    "moments_accountant",
    "moments_to_epsilon",
    "on_release_grid",
    "rdp_accountant",
    "rdp_to_epsilon",
    "release_epsilon",
    "sampled_gaussian_rdp",
    "smooth_sensitivity",
    "smooth_sensitivity_condition_margins",
    "smooth_sensitivity_conditions",
    "smooth_sensitivity_release",
    "strong_composition_epsilon",
    "threshold_local_sensitivity",
    "valid_release_orders",
]
