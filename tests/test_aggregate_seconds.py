"""The aggregate stage's publishable seconds (``time_s``, ``written_at``) follow the shapes of
its work, not the votes (README, *What you may publish*: timing is not protected in general,
but a stage whose seconds follow the votes closely reports them privately).

Its accounting runs as compiled programs (the ledger's step: the answers, their costs and
the budget's ε; the smooth-sensitivity release with its best (λ, β) search) whose every loop
has a trip count fixed when it is traced (``scan``, ``fori_loop`` with fixed bounds) and
whose every branch (``cond``) is chosen by the settings, not the votes: so their running time
is that of the same operations on arrays of the same shapes, whatever the votes hold. These
tests read the programs' jaxprs and follow the votes through them (a vote-dependent value is
one computed from the votes or from the answers drawn from them): no ``while`` loop whose
condition reads such a value, no ``cond`` whose branch index is one. They count structure,
not seconds, so a loaded machine cannot make them fail. A solver that stops on convergence
over the votes, or a branch on them, fails them; such seconds would belong in ``private``,
as the main job's attack keeps its own.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pate_jax import accounting as acc
from pate_jax import ledger as ledger_lib
from pate_jax import mechanisms
from pate_jax.ledger import _step

T, C, CHUNK = 250, 10, 16
KEY = jax.random.key(0)
SUBJAXPR_PRIMITIVES = ("pjit", "jit", "closed_call", "core_call", "custom_jvp_call",
                       "custom_vjp_call", "custom_vjp_call_jaxpr", "remat", "checkpoint")


def _inner(jaxpr):
  """A ClosedJaxpr's or a Jaxpr's Jaxpr."""
  return getattr(jaxpr, "jaxpr", jaxpr)


def _is_jaxpr(x):
  return hasattr(_inner(x), "eqns") and hasattr(_inner(x), "invars")


def _tainted(atom, tainted):
  return not isinstance(atom, jax.extend.core.Literal) and atom in tainted


def _follow(jaxpr, tainted_in, findings, where):
  """Follows the vote-dependent invars (``tainted_in[i]``) of ``jaxpr`` through its
  equations; appends to ``findings`` every ``while`` whose condition and every ``cond``
  whose index is vote-dependent; returns which outvars are."""
  jaxpr = _inner(jaxpr)
  tainted = {v for v, t in zip(jaxpr.invars, tainted_in) if t}
  for eqn in jaxpr.eqns:
    ins = [_tainted(a, tainted) for a in eqn.invars]
    name = eqn.primitive.name
    p = eqn.params
    if name == "cond":
      if ins[0]:
        findings.append(f"{where}: cond on a vote-dependent index")
      outs = [ins[0]] * len(eqn.outvars)
      for branch in p["branches"]:
        outs = [a or b for a, b in zip(outs, _follow(branch, ins[1:], findings, where))]
    elif name == "while":
      nc, nb = p["cond_nconsts"], p["body_nconsts"]
      cond_consts, body_consts, carry = ins[:nc], ins[nc:nc + nb], ins[nc + nb:]
      while True:  # the carry's taint after any number of iterations (a fixed point)
        out = _follow(p["body_jaxpr"], body_consts + carry, [], where)
        grown = [a or b for a, b in zip(carry, out)]
        if grown == carry:
          break
        carry = grown
      _follow(p["body_jaxpr"], body_consts + carry, findings, where)
      if any(_follow(p["cond_jaxpr"], cond_consts + carry, findings, where)):
        findings.append(f"{where}: while loop whose condition is vote-dependent")
      outs = carry
    elif name == "scan":
      nc, nk = p["num_consts"], p["num_carry"]
      consts, carry, xs = ins[:nc], ins[nc:nc + nk], ins[nc + nk:]
      while True:
        out = _follow(p["jaxpr"], consts + carry + xs, [], where)
        grown = [a or b for a, b in zip(carry, out[:nk])]
        if grown == carry:
          break
        carry = grown
      outs = _follow(p["jaxpr"], consts + carry + xs, findings, where)
    else:
      subs = [x for x in p.values() if _is_jaxpr(x)]
      if name in SUBJAXPR_PRIMITIVES and len(subs) == 1 and (
          len(_inner(subs[0]).invars) == len(ins)):
        outs = _follow(subs[0], ins, findings, where)
      else:
        for x in p.values():  # any other nesting: everything inside is taken as tainted
          for sub in (x if isinstance(x, (tuple, list)) else (x,)):
            if _is_jaxpr(sub):
              _follow(sub, [any(ins)] * len(_inner(sub).invars), findings, where)
        outs = [any(ins)] * len(eqn.outvars)
    tainted.update(v for v, t in zip(eqn.outvars, outs) if t)
  return [_tainted(v, tainted) for v in jaxpr.outvars]


def vote_dependent_control(fn, *args, tainted, where="program"):
  """The findings of :func:`_follow` on ``fn(*args)``'s jaxpr, the arguments at the
  positions ``tainted`` being vote-dependent."""
  with jax.enable_x64(True):
    closed = jax.make_jaxpr(fn)(*args)
  flat = [jax.tree.leaves(a) for a in args]
  flags = [i in tainted for i, leaves in enumerate(flat) for _ in leaves]
  findings = []
  _follow(closed, flags, findings, where)
  return findings


def _votes(kind, q, seed=0):
  gen = np.random.default_rng(seed)
  if kind == "consensus":
    votes = np.stack([gen.multinomial(T - 240, np.full(C, 1 / C)) for _ in range(q)])
    votes[np.arange(q), gen.integers(0, C, q)] += 240
    return votes.astype(np.int32)
  return np.stack([gen.multinomial(T, np.full(C, 1 / C)) for _ in range(q)]).astype(np.int32)


def test_the_analysis_finds_loops_and_branches_on_the_votes():
  votes, sigma = jnp.asarray(_votes("split", 8), jnp.float32), jnp.float32(40.0)

  def converges(v, s):  # a solver that stops when its iterate settles: iterations follow v
    return jax.lax.while_loop(lambda x: jnp.abs(x[0] - x[1]) > 1e-3,
                              lambda x: (x[1], 0.5 * x[1] + jnp.mean(v) / s), (0 * s, 0 * s + 1))[1]

  def branches(v, s):
    return jax.lax.cond(v.max() > 200, lambda: s, lambda: 2.0 * s)

  def fixed(v, s):  # a fixed trip count, and branches chosen by the settings
    x = jax.lax.fori_loop(0, 7, lambda i, x: 0.5 * x + jnp.mean(v) / s, s)
    n = jax.lax.fori_loop(0, jnp.int32(s), lambda i, x: x + 1, 0)  # bound from σ, traced
    return jax.lax.cond(s > 10, lambda: x, lambda: -x) + n

  def settled_by_sigma(v, s):  # a loop on the settings only, carrying v alongside
    return jax.lax.while_loop(lambda c: c[0] < s, lambda c: (c[0] + 1.0, c[1] + v), (s * 0, v))[1]

  assert vote_dependent_control(converges, votes, sigma, tainted={0}) == [
      "program: while loop whose condition is vote-dependent"]
  assert vote_dependent_control(branches, votes, sigma, tainted={0}) == [
      "program: cond on a vote-dependent index"]
  assert vote_dependent_control(jax.jit(branches), votes, sigma, tainted={0}) == [
      "program: cond on a vote-dependent index"]  # inside a nested jit
  assert vote_dependent_control(fixed, votes, sigma, tainted={0}) == []
  assert vote_dependent_control(settled_by_sigma, votes, sigma, tainted={0}) == []
  assert vote_dependent_control(converges, votes, sigma, tainted={1}) != []  # σ is tainted


MECHANISMS = {
    "gnmax": {"sigma": 40.0},
    "confident_gnmax": {"sigma": 40.0, "threshold": 200.0, "sigma_threshold": 150.0},
    "lnmax": {"gamma": 0.05},
}


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_the_ledger_step_neither_loops_nor_branches_on_the_votes(mechanism):
  # The aggregate stage's answers, their data-independent and data-dependent costs, the
  # budget's check and ε (the best order of each accountant): one step of the ledger, traced
  # as the stage runs it (data-dependent accounting, the budget's settings).
  aggregator = ledger_lib.PrivateAggregator(
      KEY, mechanism, epsilon_max=6.0, delta=1e-5, data_dependent=True, chunk_size=CHUNK,
      **MECHANISMS[mechanism])
  state, votes = aggregator.state, _votes("consensus", CHUNK)
  ids = np.arange(CHUNK, dtype=np.uint32)
  valid = np.ones(CHUNK, bool)
  step = lambda v: _step._answer_core_impl(state, KEY, v, ids, valid, np.int32(T))  # noqa: E731
  assert vote_dependent_control(step, votes, tainted={0}, where=mechanism) == []


def _release(mechanism, order):
  """The smooth-sensitivity release of the private ε (A(d) over every distance, β's search)
  as the budget draws it, a function of the charged rows' votes and of which were
  answered; ``order`` ``None``: tf-privacy's, chosen on the votes."""
  params = dict(MECHANISMS[mechanism])
  sigma = params.pop("sigma")
  return lambda v, a: acc.smooth_sensitivity_release(
      v, sigma=sigma, order=order, betas=None if order is None else np.array([0.02]),
      sigma_ss=10.0, delta=1e-5, answered=a, conversion="improved", num_teachers=T, **params)


@pytest.mark.parametrize("mechanism", ["gnmax", "confident_gnmax"])
def test_the_release_neither_loops_nor_branches_on_the_votes(mechanism):
  # The budget's order is fixed before the votes are read (config.release, or the
  # data-independent rule: pate_jax.budget.default_release_order).
  votes, answered = _votes("split", 24), np.ones(24, bool)
  assert vote_dependent_control(_release(mechanism, 20.0), votes, answered, tainted={0, 1},
                                where=f"{mechanism} release") == []


def test_an_order_chosen_on_the_votes_branches_on_them():
  # tf-privacy's order (the smallest data-dependent ε before the release), which only the
  # private release_epsilon.py's analysis uses: whether A(d) is walked at all depends on
  # the order, so on the votes. The stage's order is fixed (above).
  votes, answered = _votes("split", 24), np.ones(24, bool)
  assert vote_dependent_control(_release("gnmax", None), votes, answered,
                                tainted={0, 1}) == ["program: cond on a vote-dependent index"]


def test_the_data_dependent_reports_neither_loop_nor_branch_on_the_votes():
  # results.json's ε reports and privacy curve: each mechanism's data-dependent cost of the
  # charged rows, composed and converted by its accountant (the moments to 128 of the
  # 2017 report's tight grid included).
  votes, answered = _votes("split", 24), np.ones(24, bool)
  for name, params in MECHANISMS.items():
    mechanism = mechanisms.get(name)
    for max_moment in (8, 128):
      accountant = mechanisms.make_accountant(mechanism, None, "improved", max_moment)

      def epsilon(v, a):
        cost = mechanism.cost(v, a, params, accountant.orders, True)  # noqa: B023
        return accountant.compose(cost).epsilon(1e-5)  # noqa: B023

      assert vote_dependent_control(epsilon, votes, answered, tainted={0, 1},
                                    where=f"{name} report") == []
