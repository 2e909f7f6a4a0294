"""What the stages report: ε entries, privacy curves, results dicts, headlines and plots.
Part of the harness (beside the stages): the core never imports it.

The aggregate stage (:mod:`pate_jax.stages.aggregate`) reports, in a publishable part and
a ``private`` one (:func:`private_part`), the ε of the charged queries under each
accounting of its mechanism (:func:`epsilon_reports`: ``epsilon`` on moments
1..``max_moment`` = the 2017 code's convention, ``epsilon_tight`` on moments
1..``tight_max_moment``, every entry flagged when its best moment/order is at the end of
its grid, :func:`flag_grid_edges`; :func:`split_epsilon` keeps the data-dependent ones
private), ε vs queries answered (:func:`privacy_curve`, :func:`plot_privacy`, private)
and a readable summary (:func:`aggregate_headline`: private lines say so). The teachers
stage writes a histogram of the normalized vote gap (:func:`plot_gap`) and one summary
line (:func:`teachers_headline`), both private. The main job writes its ``report.md``
with :func:`main_job_markdown` (the attack's record: :func:`attack_summary`). The
reproduction report copies a private figure under a banner that says so
(:func:`stamp_private`).

Plain NumPy and Python on results already computed; nothing here is jitted.
"""

from pate_jax.reporting._aggregate import (
    PRIVATE_NOTE,
    aggregate_headline,
    aggregate_results,
    budgets_note,
    config_record,
    delta_text,
    epsilon_reports,
    flag_grid_edges,
    privacy_curve,
    private_part,
    sampler_part,
    split_epsilon,
)
from pate_jax.reporting._main_job import attack_headline, attack_summary, main_job_markdown
from pate_jax.reporting._plots import plot_gap, plot_history, plot_privacy, stamp_private
from pate_jax.reporting._teachers import teachers_headline, vote_summary
