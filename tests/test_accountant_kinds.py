"""An accountant kind is data (pate_jax.accounting.AccountantKind), not a name to test."""

from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest

from pate_jax import accounting as acc
from pate_jax import mechanisms

ROOT = pathlib.Path(__file__).resolve().parent.parent / "pate_jax"
VOTES = np.array([[40, 5, 5], [20, 18, 12], [50, 0, 0]], np.int32)


def test_the_kinds_are_the_accountants_kinds_and_name_their_best_order():
  assert acc.ACCOUNTANT_KINDS == ("rdp", "moments")
  assert acc.accountant_kind("rdp") is acc.RDP_ACCOUNTANT
  assert acc.accountant_kind("moments") is acc.MOMENTS_ACCOUNTANT
  assert (acc.RDP_ACCOUNTANT.best_key, acc.MOMENTS_ACCOUNTANT.best_key) == (
      "best_order", "best_moment")
  assert acc.rdp_accountant().accountant_kind is acc.RDP_ACCOUNTANT
  assert acc.moments_accountant(4).accountant_kind is acc.MOMENTS_ACCOUNTANT
  with pytest.raises(ValueError, match="kind"):
    acc.accountant_kind("zcdp")


@pytest.mark.parametrize("conversion", ["classic", "improved"])
def test_an_rdp_kind_converts_as_rdp_to_epsilon(conversion):
  orders = np.array([2.0, 8.0, 32.0])
  cost = np.array([0.05, 0.3, 1.4])
  want = acc.rdp_to_epsilon(cost, orders, 1e-5, conversion)
  got = acc.make_accountant("rdp", orders, conversion, cost).epsilon(1e-5)
  np.testing.assert_allclose([float(got[0]), float(got[1])], [float(want[0]), float(want[1])],
                             rtol=1e-12)


def test_a_moments_kind_converts_as_the_2017_tail_bound():
  moments = np.arange(1.0, 9.0)
  cost = 0.01 * moments ** 2
  want = acc.moments_to_epsilon(cost, moments, 1e-5)
  got = acc.make_accountant("moments", moments, cost=cost).epsilon(1e-5)
  # By hand: min_l (α(l) + log 1/δ) / l with α(l) = 0.01 l².
  by_hand = min((0.01 * l * l + np.log(1e5)) / l for l in moments)
  np.testing.assert_allclose([float(got[0]), float(want[0])], [by_hand, by_hand], rtol=1e-12)
  assert float(got[1]) == float(want[1]) == 8.0


def test_orders_of_takes_a_runs_renyi_orders_only_where_the_kind_composes_at_them():
  mine = np.array([3.0, 5.0])
  assert acc.RDP_ACCOUNTANT.orders_of(mine, 4) is mine
  np.testing.assert_array_equal(acc.RDP_ACCOUNTANT.orders_of(None, 4), acc.DEFAULT_ORDERS)
  for orders in (None, mine):
    np.testing.assert_array_equal(acc.MOMENTS_ACCOUNTANT.orders_of(orders, 4), [1, 2, 3, 4])
  with pytest.raises(ValueError, match="max_moment"):
    acc.MOMENTS_ACCOUNTANT.orders_of(None, 0)


@pytest.mark.parametrize("name", mechanisms.names())
def test_an_epsilon_report_is_named_and_typed_by_the_mechanisms_kind(name):
  m = mechanisms.get(name)
  params = mechanisms.params_at(m, 10.0, 50)
  ones = np.ones(len(VOTES), bool)
  report = mechanisms.epsilon_report(m, params, VOTES, ones, ones, delta=1e-5)
  kind = m.accountant_kind
  names = {f"{kind.name}_data_{dd}" + (f"_{c}" if c else "")
           for dd in ("dependent", "independent") for c in kind.conversions}
  assert names <= set(report)
  for n in names:
    assert isinstance(report[n][kind.best_key], kind.best_type)


_KIND_HOLDERS = ("accountant", "kind", "name")  # m.accountant, a.kind, kind.name, kind


def _names_a_kind(node: ast.AST) -> bool:
  """A kind's name as a constant, or in a tuple, list or set of constants."""
  if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
    return any(_names_a_kind(e) for e in node.elts)
  return isinstance(node, ast.Constant) and node.value in acc.ACCOUNTANT_KINDS


def _holds_a_kind(node: ast.AST) -> bool:
  return ((isinstance(node, ast.Attribute) and node.attr in _KIND_HOLDERS)
          or (isinstance(node, ast.Name) and node.id in _KIND_HOLDERS))


def _compares_a_kind_name(node: ast.AST) -> bool:
  """``x.accountant == "rdp"``, ``"moments" != y.kind``, ``kind.name in ("rdp",)``,
  ``kind == "moments"`` and the like."""
  if not isinstance(node, ast.Compare):
    return False
  sides = [node.left, *node.comparators]
  return any(_names_a_kind(s) for s in sides) and any(_holds_a_kind(s) for s in sides)


@pytest.mark.parametrize("source, found", [
    ('m.accountant == "rdp"', True), ('"moments" != a.kind', True),
    ('m.accountant in ("rdp",)', True), ('kind == "moments"', True),
    ('m.accountant_kind.name == "rdp"', True), ('m.accountant == other.accountant', False),
    ('m.name == "gnmax"', False), ('x == "rdp"', False)])
def test_the_guard_sees_the_forms_of_a_kind_comparison(source, found):
  assert _compares_a_kind_name(ast.parse(source, mode="eval").body) is found


def test_no_module_branches_on_an_accountant_kinds_name():
  found = [f"{path.relative_to(ROOT.parent)}:{node.lineno}"
           for path in sorted(ROOT.rglob("*.py"))
           for node in ast.walk(ast.parse(path.read_text()))
           if _compares_a_kind_name(node)]
  assert not found, f"read an AccountantKind's fields instead: {found}"
