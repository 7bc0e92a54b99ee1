"""The eager paths in kernels/ do their integer arithmetic in plain Python.

``triton.cdiv`` and ``triton.next_power_of_2`` are constexpr functions in Triton 3.6: called
from host code each costs about 6 µs (0.3 µs for ``kernels.plans.cdiv`` on the same CPU), and
the GEMM's eager call made up to five such calls (its launch grid, the M bucket, the variant
choice).  Inside ``@triton.jit`` functions they are what Triton expects, and stay."""

from __future__ import annotations

import ast
from pathlib import Path

KERNELS = Path(__file__).resolve().parent.parent / "kernels"
SLOW = {"cdiv", "next_power_of_2"}


def _is_jit(fn: ast.FunctionDef) -> bool:
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if isinstance(target, ast.Attribute) and target.attr in ("jit", "autotune", "heuristics"):
            return True
    return False


def _host_calls(tree: ast.AST) -> list[int]:
    found: list[int] = []

    def visit(node: ast.AST, in_jit: bool) -> None:
        if isinstance(node, ast.FunctionDef):
            in_jit = in_jit or _is_jit(node)
        if (
            not in_jit and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in SLOW and isinstance(node.func.value, ast.Name) and node.func.value.id == "triton"
        ):  # fmt: skip
            found.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child, in_jit)

    visit(tree, False)
    return found


def test_no_host_code_calls_tritons_constexpr_helpers() -> None:
    offenders = {
        p.name: lines for p in sorted(KERNELS.glob("*.py")) if (lines := _host_calls(ast.parse(p.read_text())))
    }
    assert offenders == {}, f"use kernels.plans.cdiv / next_power_of_2 in host code: {offenders}"


def test_the_scan_sees_a_planted_host_call() -> None:
    planted = "import triton\n@triton.jit\ndef k(X: tl.constexpr):\n    n = triton.cdiv(X, 2)\n" \
              "def host(n):\n    return triton.cdiv(n, 128)\n"  # fmt: skip
    assert _host_calls(ast.parse(planted)) == [6]


def test_plain_helpers_match_tritons() -> None:
    import triton

    from kernels.plans import cdiv, next_power_of_2

    for a in (1, 2, 3, 7, 8, 9, 127, 128, 129, 50257, 2**31 + 1):
        assert next_power_of_2(a) == triton.next_power_of_2(a)
        for b in (1, 2, 16, 128, 4096):
            assert cdiv(a, b) == triton.cdiv(a, b)
