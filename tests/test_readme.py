"""README.md's Python blocks run as written (a claim about the library is code that works)."""

from __future__ import annotations

import pathlib
import re
import warnings

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_the_readme_has_a_python_block():
  assert BLOCKS


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_a_readme_python_block_runs_without_warnings(block):
  # A float64 truncated to float32 (JAX's UserWarning) would be a wrong number quietly.
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    namespace: dict = {}
    exec(compile(block, str(README), "exec"), namespace)  # pylint: disable=exec-used
  if "eps_private" in namespace:  # the first block: what its comments say
    assert 0 < float(namespace["eps_private"]) <= float(namespace["eps_public"])
    assert float(namespace["slope"]) < 0  # more noise, less ε
    assert namespace["curve"].shape == (64,)
