"""The release script (``experiments/release_epsilon.py``) spends from no budget: its
results are private as a whole, so its report marks every line, whoever calls it, and its
help text calls nothing publishable."""

from __future__ import annotations

import pathlib

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
