"""The aggregate stage's settings are refused naming the field before any work (and by
--dry_run), also where the stage runs inside the student and the main job."""

from __future__ import annotations

import numpy as np
import pytest

from pate_jax import votes as votes_lib
from pate_jax.stages import aggregate
from pate_jax.stages import main_job
from pate_jax.stages import student

import _scripts  # tests/_scripts.py  # pylint: disable=g-bad-import-order

BAD = [
    ("mechanism", "gnmx", r"^config.mechanism must be one of .*; got 'gnmx'$"),
    ("sigma", "x", r"^config.sigma must be a real number; got 'x'$"),
    ("num_queries", 0, r"^config.num_queries must be an integer >= 1; got 0$"),
    ("chunk_size", 1.5, r"^config.chunk_size must be an integer >= 1; got 1.5$"),
    ("query_selection", "random",
     r"^config.query_selection must be one of \('balanced', 'first'\); got 'random'$"),
    ("delta", 0.0, r"^config.delta must lie in \(0, 1\); got 0.0$"),
    ("epsilon_max", -1.0, r"^config.epsilon_max must be a real number > 0 \(inf allowed\); "
                          r"got -1.0$"),
    ("conversion", "tight", r"^config.conversion must be one of .*; got 'tight'$"),
    ("orders", (0.5,), r"^config.orders must be finite and > 1; found 0.5 at \(0,\)$"),
    ("max_moment", 0, r"^config.max_moment must be an integer >= 1; got 0$"),
    ("tight_max_moment", "x", r"^config.tight_max_moment must be an integer >= 0; got 'x'$"),
    ("data_dependent", "yes", r"^config.data_dependent must be a boolean; got 'yes'$"),
    ("privacy_plot", "no", r"^config.privacy_plot must be a boolean; got 'no'$"),
]


def _votes_dir(path):
  r = np.random.default_rng(0)
  votes = np.stack([r.multinomial(20, p) for p in r.dirichlet(np.ones(10), 40)])
  votes_lib.save_votes(path / "votes.npz", votes.astype(np.int32),
                       votes.argmax(1).astype(np.int32), dataset="synthetic")
  return path


@pytest.mark.parametrize("field, value, match", BAD)
def test_a_bad_setting_is_refused_naming_the_field_before_the_votes_are_read(
    tmp_path, monkeypatch, field, value, match):
  """The dry run accepted each; a run made its work directory and read the votes first, and
  then the library refused most naming its own argument (delta, not config.delta), while a
  tight_max_moment that is no integer failed after the answers were drawn and charged, a
  chunk_size of 1.5 was truncated and a privacy_plot of "no" drew the plot."""
  c = _scripts.config("aggregate_mnist", "cpu", votes_dir=str(_votes_dir(tmp_path / "t")),
                      mechanism="gnmax", num_queries=20, noise_seed=0)
  with c.ignore_type():
    c[field] = value

  def load(*args, **kwargs):
    raise AssertionError(f"votes read: {args}")

  monkeypatch.setattr(votes_lib, "load_votes", load)
  _scripts.assert_refused_before_work(aggregate.run, aggregate.plan, c, tmp_path / "w", match)


@pytest.mark.parametrize("field, value, match", [BAD[0], BAD[2], BAD[5]])
def test_the_main_job_and_the_student_name_the_aggregate_block(tmp_path, monkeypatch, field,
                                                               value, match):
  """The main job read the block only in its aggregate stage (or its compilation ahead),
  once it had started, and its dry run accepted it; the student read the votes first."""
  def load(*args, **kwargs):
    raise AssertionError(f"votes read: {args}")

  monkeypatch.setattr(votes_lib, "load_votes", load)
  nested = match.replace("^config.", "^config.aggregate.")
  job = _scripts.config("pate_mnist", "cpu")
  with job.aggregate.ignore_type():
    job.aggregate[field] = value
  with pytest.raises(ValueError, match=nested):
    main_job.plan(job)
  with pytest.raises(ValueError, match=nested):
    main_job.run(job, str(tmp_path / "job"))
  assert not (tmp_path / "job").exists()
  s = _scripts.config("student_pate_g", "cpu", votes_dir=str(tmp_path / "t"))
  with s.aggregate.ignore_type():
    s.aggregate[field] = value
  _scripts.assert_refused_before_work(student.run, student.plan, s, tmp_path / "s", nested)


RELEASE_BAD = [
    ("order", 0.5, r"^config.release.order must be finite and > 1; found 0.5"),
    ("sigma_ss", 0.0, r"^config.release.sigma_ss must be > 0; got 0.0$"),
    ("beta", -1.0, r"^config.release.beta must be > 0; got -1.0$"),
]


@pytest.mark.parametrize("field, value, match", RELEASE_BAD)
def test_the_release_block_is_refused_as_dotted_fields_before_the_votes_are_read(
    tmp_path, monkeypatch, field, value, match):
  """They were named "release order", "release sigma_ss", "release beta", and only once the
  votes were read and the budget was opened."""
  c = _scripts.config("aggregate_mnist", "cpu", votes_dir=str(_votes_dir(tmp_path / "t")),
                      mechanism="gnmax", num_queries=20, noise_seed=0)
  with c.release.ignore_type():
    c.release[field] = value

  def load(*args, **kwargs):
    raise AssertionError(f"votes read: {args}")

  monkeypatch.setattr(votes_lib, "load_votes", load)
  _scripts.assert_refused_before_work(aggregate.run, aggregate.plan, c, tmp_path / "w", match)


@pytest.mark.parametrize("field, value, match", RELEASE_BAD)
def test_the_main_job_names_the_aggregate_release_block(tmp_path, field, value, match):
  """Refused as config.aggregate.release.<field> before the teachers train."""
  nested = match.replace("^config.", "^config.aggregate.")
  job = _scripts.config("pate_mnist", "cpu")
  with job.aggregate.release.ignore_type():
    job.aggregate.release[field] = value
  with pytest.raises(ValueError, match=nested):
    main_job.plan(job)
  with pytest.raises(ValueError, match=nested):
    main_job.run(job, str(tmp_path / "job"))
  assert not (tmp_path / "job").exists()


def test_the_student_of_true_answered_labels_names_the_aggregate_block(tmp_path, monkeypatch):
  """Its labels come from the aggregate stage too (the rows it answered): the block was
  refused by that stage after the votes were read, named config.num_queries."""
  def load(*args, **kwargs):
    raise AssertionError(f"votes read: {args}")

  monkeypatch.setattr(votes_lib, "load_votes", load)
  s = _scripts.config("student_pate_g", "cpu", votes_dir=str(tmp_path / "t"),
                      labels="true_answered")
  s.aggregate.num_queries = 0
  _scripts.assert_refused_before_work(
      student.run, student.plan, s, tmp_path / "s",
      r"^config\.aggregate\.num_queries must be an integer >= 1; got 0$")
