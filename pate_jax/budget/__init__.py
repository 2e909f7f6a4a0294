"""The privacy budget of a set of teachers, kept with their votes.

A budget belongs to the private data -- the teachers' votes -- not to a work directory,
a process or an object. :class:`TeachersBudget` keeps it in one file beside the votes it
was spent on, and every consumer (the aggregate stage, the main job, the active student,
any number of work directories) spends from that one ledger::

  <teachers>/votes.npz           the votes (private)
  <teachers>/ledger.npz          the budget (private): the ledger record, the votes'
                                 digest, every charged row of votes.npz with its released
                                 outcome, the smooth-sensitivity releases of the private
                                 ε, and the SHA-256 of the generation it follows
  <teachers>/ledger.npz.journal  one line per spend: generation and SHA-256 of ledger.npz
  <teachers>/ledger.npz.lock     held (``flock``) while a process reads, spends and writes

Every operation takes the lock, reads the newest ledger.npz and checks it before
spending:

* it was spent on *these* votes (their digest), and it is the newest copy: its
  generation and hash are the journal's last line (a restored older copy, or a copy from
  another directory, is refused; a crash between writing the file and its journal line,
  or part way through that line, is recognised and completed, for the one file whose
  recorded previous generation is the journal's last: a file one generation ahead from
  another directory is refused);
* its recorded cost is the cost of its recorded answers, recomputed from votes.npz and
  the recorded outcomes with the mechanism's own ``cost`` (plus its releases): a forged
  or spliced ledger is refused, naming the file;
* it was spent under the settings asked for (mechanism, noise, δ, ε_max, orders,
  conversion, release parameters); another setting on the same teachers is refused --
  one budget per set of teachers;
* before its first charge, a secret-noise budget registers on the private data its
  teachers were trained on (:class:`BudgetRegistry`, outside every work directory, keyed
  by votes.npz's ``private_data``): teachers trained again on the same data are refused a
  second budget unless it is asked for (``another_budget``), and then every run on the
  data reports how many budgets add up; the registry follows every write of the ledger, so
  that a copy of the teachers' directory behind it, an older copy restored or a ledger
  deleted with its journal is refused on this machine too;
* votes that carry ``not_releasable`` (teachers whose data was prepared by looking at its
  private rows, such as Diabetes' ``"paper"`` preparation) get no secret-noise budget at
  all (:func:`check_releasable`): no ε of them holds for the data.

A row of votes.npz is answered at most once: asking it again returns the recorded
outcome, free (post-processing of an answer already paid for). New rows are answered by a
:class:`pate_jax.ledger.PrivateAggregator` whose refusals depend only on the
data-independent bound (see its module), with noise from the key given -- a secret key
from :func:`pate_jax.rng.noise_key` unless a research seed was named.

The smooth-sensitivity release of the private data-dependent ε (Papernot et al. 2018,
Section 4 and Appendix B: GNSS) is drawn with parameters fixed before the data is seen
(:class:`ReleaseSpec`: order λ, β, σ_ss), once per ledger state: a rerun re-reports the
stored release; a new release is drawn only after new answers. Every release's RDP
(Theorem 23, at every order below ``1/(2β)``, +inf above) is charged to the budget, so
the ledger's data-independent ε bounds everything published: the labels and every
released ε. The first release is paid for when the ledger is created (so that answering
can never leave too little budget to release what it cost); each later one is reserved
with the next new answers, before any of them is answered (none is answered if it does
not fit). The k-th release publishes ``rdp(D) + k·ε_ss(λ) + SS_β(D)·σ_ss·z +
δ-term(λ)``.

What a file may be shown to whom: ledger.npz and the journal are private (for the data
owner only), like votes.npz; what may be published is the publishable part of the
aggregate stage's results (:func:`pate_jax.reporting.aggregate_results`: everything
outside its ``private`` entry) and labels.npz.

A release of the votes drawn outside a ledger (the KD-GAN's sound soft labels) is drawn
once, kept owner-only and registered as a budget of its own on the data
(:func:`draw_once`).

Research mode. With a research noise seed the noise is public (anyone holding the seed
recomputes it), so no budget can be protected: the ledger of a research run lives in its
work directory (``research_ledger.npz``), records the seed, and measures ε; the outputs
say that its ε is a measurement, not a release.
"""

from pate_jax.budget._files import (
    JOURNAL_SUFFIX,
    LEDGER_FILE,
    LOCK_SUFFIX,
    RESEARCH_LEDGER_FILE,
    BudgetError,
    votes_digest,
    refuse_spent_votes,
    written_ledgers,
)
from pate_jax.budget._once import draw_once, release_digest
from pate_jax.budget._registry import REGISTRY_ENV, BudgetRegistry, registry_directory
from pate_jax.budget._release import (
    DEFAULT_BETA_TIMES_ORDER,
    ReleaseSpec,
    default_release_order,
)
from pate_jax.budget._teachers import TeachersBudget, check_releasable


__all__ = [
    "ReleaseSpec", "TeachersBudget", "BudgetError", "votes_digest", "default_release_order",
    "LEDGER_FILE", "RESEARCH_LEDGER_FILE", "JOURNAL_SUFFIX", "BudgetRegistry",
    "registry_directory", "REGISTRY_ENV", "draw_once", "release_digest", "written_ledgers",
    "refuse_spent_votes", "check_releasable",
]
