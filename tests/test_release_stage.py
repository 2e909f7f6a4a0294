"""The release script (``experiments/release_epsilon.py``) spends from no budget: its
results are private as a whole, so its report marks every line, whoever calls it, and its
help text calls nothing publishable."""

from __future__ import annotations

import pathlib

import pytest

from pate_jax import experiment
from pate_jax.stages import release

REPO = pathlib.Path(__file__).resolve().parent.parent


def _results(noise_public: bool) -> dict:
  fixed = {"epsilon_before": 1.3, "epsilon": 1.7, "noise_std": 0.4, "answered": 360.0,
           "order": 18.5}
  noise = ({"source": "research seed", "public": True, "note": "the noise is public"}
           if noise_public else {"source": "secret (os.urandom, never written)",
                                 "public": False})
  return {"dataset": "mnist", "num_queries": 640, "num_teachers": 250,
          "noise": {"threshold": 200.0, "sigma_threshold": 150.0, "sigma": 40.0},
          "noise_source": noise, "delta": 1e-5, "conversion": "classic",
          "num_answered": 360, "epsilon_released": 2.034,
          "release": {"order": 18.5, "beta": 0.0216, "sigma_ss": 7.5},
          "epsilon_data_independent": 3.558,
          "private": {"fixed": fixed, "draws_mean": 1.7, "draws_std": 0.4,
                      "expected_tf_privacy": {"release": fixed},
                      "joint": {"release": fixed}}}


def test_the_release_report_marks_every_line_private(capsys):
  for public in (False, True):
    release.report(_results(public))
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    assert len(lines) >= 4 and any("released ε 2.034" in ln for ln in lines)
    assert all(ln.startswith(experiment.PRIVATE_MARK) for ln in lines), lines


def test_the_release_scripts_help_calls_nothing_publishable():
  for path in ("experiments/release_epsilon.py", "configs/release_epsilon.py"):
    text = (REPO / path).read_text()
    doc = text.split('"""')[1]
    doc = " ".join(doc.split())
    assert "Publishable:" not in doc and "published release" not in doc, path
    assert "private as a whole" in doc, path


@pytest.mark.parametrize("field, value, match", [
    ("orders", "tf-privacy", r"^config.orders must be one of \('tf_privacy', 'default'\); "
                             r"got 'tf-privacy'$"),
    ("draws", 0, r"^config.draws must be an integer >= 1; got 0$"),
    ("draws", -1, r"^config.draws must be an integer >= 1; got -1$"),
    ("num_queries", 1.5, r"^config.num_queries must be an integer >= 1; got 1.5$"),
    ("threshold", float("nan"), r"^config.threshold must be finite; got nan$"),
    ("sigma_threshold", 0.0, r"^config.sigma_threshold must be > 0; got 0.0$"),
    ("sigma", "x", r"^config.sigma must be a real number; got 'x'$"),
    ("delta", 0.0, r"^config.delta must lie in \(0, 1\); got 0.0$"),
    ("conversion", "tight", r"^config.conversion must be one of .*; got 'tight'$"),
])
def test_the_release_refuses_its_own_fields_before_reading_the_votes(tmp_path, field, value,
                                                                      match):
  """An unknown ``orders`` was read as the default grid and reported under the name
  given; 0 draws reported a NaN spread, -1 failed inside JAX; 1.5 queries were read as
  one; a bad δ, conversion, threshold or threshold noise was refused, naming the
  library's argument, after the mechanism had answered. Refused before the votes are
  read (none exist here), by the run and by --dry_run."""
  c = experiment.load_script(REPO / "configs" / "release_epsilon.py").get_config()
  c.votes_dir, c.noise_seed = str(tmp_path / "teachers"), 0
  with c.ignore_type():
    c[field] = value
  with pytest.raises(ValueError, match=match):
    release.run(c, tmp_path / "release")
  with pytest.raises(ValueError, match=match):
    release.plan(c)
  assert not (tmp_path / "release").exists()


@pytest.mark.parametrize("field, value, match", [
    ("order", 0.5, r"^config\.release\.order must be finite and > 1; found 0.5"),
    ("sigma_ss", -1.0, r"^config\.release\.sigma_ss must be > 0; got -1.0$"),
    ("beta", 0.5, r"^config\.release\.beta must be < 1/\(2·config\.release\.order\) = "),
])
def test_the_release_names_its_release_block_as_dotted_fields(tmp_path, field, value, match):
  """They were named "release order", "release sigma_ss", "release beta", and only once
  the votes were read (none exist here)."""
  c = experiment.load_script(REPO / "configs" / "release_epsilon.py").get_config()
  c.votes_dir, c.noise_seed = str(tmp_path / "teachers"), 0
  with c.release.ignore_type():
    c.release[field] = value
  with pytest.raises(ValueError, match=match):
    release.run(c, tmp_path / "release")
  with pytest.raises(ValueError, match=match):
    release.plan(c)
  assert not (tmp_path / "release").exists()
