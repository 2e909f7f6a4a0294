"""A privacy-budget ledger that answers teacher queries only while ε ≤ ε_max.

Functional core: :class:`LedgerState` is a pytree holding the accountant (the
composed data-independent privacy cost, :class:`pate_jax.accounting.Accountant`), the
ε it gives, the private data-dependent accountant, the
counts of distinct queries charged and answered, and the consistent-answer cache
(:class:`AnswerCache`: a sorted record of the query ids already charged with their
outcome); :func:`answer_batch` maps ``(state, key, votes[B, C], query ids[B]) ->
(state', labels[B], status[B])`` in one jit-compiled call. The mechanism is looked up
in :mod:`pate_jax.mechanisms` (its ``answer`` and ``cost``); the mechanism, the
accountant's kind and conversion and the mode flags (``data_dependent``,
``consistent``) are static, so each compiled step computes one accounting.
:class:`PrivateAggregator` wraps it for host code: it holds the key, δ, ε_max, the
orders and the mechanism, pads batches to a fixed chunk size (one compilation per
mechanism, mode, class count, number of orders and cache capacity) and grows the
cache when needed.

Accounting. Each mechanism's ``cost`` composes in its accountant: GNMax and
Confident-GNMax in Rényi-DP at ``orders`` (Papernot et al. 2018, Theorem 6,
Proposition 10), ``ε = rdp_to_epsilon(Σ rdp, orders, δ)``; LNMax in the 2017 moments
accountant's log-moments ``α(l)`` at ``l = 1..max_moment``,
``ε = min_l (Σ α(l) + log 1/δ) / l`` (Papernot et al. 2017, Theorems 1-3). For
Confident-GNMax every processed query pays the threshold check and the answered
ones also pay GNMax at σ (the realised cost, as in the 2018 paper's analysis).

Answering a batch. Queries are considered in order; query ``i`` is *processed*
iff every earlier query in the batch was, and

    ε(bound_before_i + worst_i) ≤ ε_max  and  ε(bound_before_i + realised_i) ≤ ε_max,

where the bound is the data-independent cost (λ/σ², λ/(2σ_T²), or the 2017 bound
with q = 1), ``worst_i`` is query ``i``'s bound if answered (for Confident-GNMax:
threshold + GNMax) and ``realised_i`` its bound given the released outcome. The rest
of the batch is refused with status ``REFUSED_BUDGET``. The state is replaced by the
cumulative cost *at the last processed query*, the very value checked against ε_max,
so the ledger never exceeds its budget (not even by rounding) and never records a
cost that was not paid, nor drops one that was.

Refusals are data-independent. Whether a query is processed depends only on the
settings, on how many queries were processed before, and on released outcomes
(Confident-GNMax's answered / not answered), never on the votes themselves: a
refusal decided on the data-dependent cost would tell, for free, whether that cost
exceeds what is left of the budget (one bit of the private votes per refusal). The
worst case (answered) is checked first, so a refusal does not reveal the unreleased
threshold outcome either.

Data-dependent accounting (private). With ``data_dependent=True`` the ledger also
composes the data-dependent per-query costs (Papernot et al. 2017, Section 3; 2018,
Theorem 6) in its ``private_accountant``: ``private_epsilon`` is the papers'
data-dependent ε, a function of the private votes. It never decides anything and may
not be published as it is (it is for the data owner only); publish instead the
data-independent ``epsilon`` or a smooth-sensitivity release of the private one
(:mod:`pate_jax.budget`), whose own cost is charged to the ledger with :func:`charge`
(the ``extra_cost`` of the state). With ``data_dependent=False`` the private
accountant equals the bound.

Budget integrity. The budget belongs to the private data, not to a process or an
object, so every way of spending it twice is closed:

* the state records everything its accounting depends on: the mechanism and its
  parameters, δ, ε_max, the mode flags, the orders and conversion (in its accountant),
  the number of teachers ``T`` (set by the first batch: every row of every later
  batch must sum to it) and, without consistent answers, the next fresh noise id.
  :func:`answer_batch` takes its settings from the state; an argument that disagrees
  with the state is refused (``ValueError`` naming it), as is a state whose cost is
  negative or not finite. Query ids without consistency must be fresh (strictly
  increasing, above every id used before): one noise draw is never used twice.
* :class:`PrivateAggregator` serialises ``answer`` with a lock (threads share one
  budget), refuses ``copy``, ``deepcopy`` and ``pickle`` (a copy would duplicate the
  unspent budget: share the object instead, or persist it), and its ``state`` is
  read-only.
* :func:`ledger_record` / :func:`restore_ledger` turn the state into plain arrays
  and back (validated: a record whose ε does not match its cost is refused), and
  ``PrivateAggregator(..., ledger=record)`` resumes a persisted ledger, refusing one
  whose settings differ from the arguments. The budget of a set of teachers is kept
  with their votes and spent through :mod:`pate_jax.budget`.

* a ledger has a *lineage* (a random id drawn when it is created) and a *generation*
  (how many times it has spent): :meth:`PrivateAggregator.ledger_record` writes both,
  and the aggregators of one process keep, per lineage, the newest generation spent.
  An aggregator resumed from a record older than that, or whose lineage another
  aggregator has spent from since, is refused (:class:`StaleLedgerError`): two
  aggregators built from one record cannot each spend the budget. Across processes the
  budget of a set of teachers lives in one file next to their votes
  (:mod:`pate_jax.budget`).

The functional API cannot stop a caller from keeping an old state and answering from
it again (a pure function has no memory); the guarantee holds for a chain of states
each returned by :func:`answer_batch`. :class:`PrivateAggregator` holds that chain.

Consistent answers (``consistent=True``). The noise of a query comes from
``fold_in(key, query_id)``, with ``query_id`` a stable hash of its input
(:func:`pate_jax.aggregation.hash_query_ids`). A query whose id was already
charged returns its recorded label and status and costs nothing (it is
post-processing of an answer already paid for); the ledger counts distinct
queries. Without consistency every submitted query gets the next sequence
number as its id, so answers still do not depend on how queries are batched.
"""

from pate_jax.ledger._aggregator import PrivateAggregator, StaleLedgerError
from pate_jax.ledger._record import (
    PRIVATE_RECORD_KEYS,
    RECORD_KEYS,
    ledger_record,
    restore_ledger,
)
from pate_jax.ledger._state import (
    DEFAULT_ORDERS,
    AnswerCache,
    BatchResult,
    LedgerState,
    Status,
    charge,
    init_ledger,
    ledger_epsilon,
)
from pate_jax.ledger._step import answer_batch

__all__ = [
    "Status", "AnswerCache", "LedgerState", "BatchResult", "init_ledger", "answer_batch",
    "charge", "ledger_epsilon", "ledger_record", "restore_ledger", "RECORD_KEYS",
    "PrivateAggregator", "StaleLedgerError", "DEFAULT_ORDERS",
]
