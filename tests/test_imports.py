"""The measuring side never depends on the site: no module of ``bench/`` or ``kernels/``
imports ``publish`` (the data contract both sides share is ``contract/``).

The one exception is named here and nowhere else: three commands of ``python -m bench`` read
the stored runs by the site's own rules (``compare``: the Compare page's statistics and the
one verdict; ``withdraw``: the withdrawal file as the build reads it; ``ledger --add``: a run
file validated and checked against copies as the build does), and import ``publish`` inside
those functions only, so that a sweep (``python -m bench run``) loads nothing of the site.
A new import of ``publish`` anywhere else in ``bench/`` or ``kernels/`` fails this test."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from sitekit import ROOT

# (file, function) -> the publish modules that function may import, and why it may.
SITE_COMMANDS = {
    ("bench/cli.py", "_withdrawn"): {"publish.review"},  # bench compare: warn about a withdrawn run
    ("bench/cli.py", "compare"): {"publish.compare", "publish.runs"},  # bench compare
    ("bench/cli.py", "withdraw"): {"publish.check", "publish.review", "publish.runs"},  # bench withdraw
    ("bench/cli.py", "ledger_add"): {"publish.runs"},  # bench ledger --add
}
MEASURING_SIDE = ("bench", "kernels")


def _imported(node: ast.AST) -> list[str]:
    """The modules an import statement loads (``from publish import ledger``: publish.ledger,
    ``from publish.runs import Run``: publish.runs); none for a relative import."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and not node.level and node.module:
        if node.module in ("publish", "contract"):
            return [f"{node.module}.{a.name}" for a in node.names]
        return [node.module]
    return []


def _is_publish(module: str) -> bool:
    return module == "publish" or module.startswith("publish.")


def _publish_imports(path: Path) -> list[tuple[str | None, int, str]]:
    """Every import of publish in a file: (the top-level function it sits in, or None at
    module level; line; module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: list[tuple[str | None, int, str]] = []

    def walk(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            inside = function
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and function is None:
                inside = child.name
            found.extend((function, child.lineno, m) for m in _imported(child) if _is_publish(m))
            if isinstance(child, ast.Call) and _dynamic_publish(child):
                found.append((function, child.lineno, "publish (imported by name)"))
            walk(child, inside)

    walk(tree, None)
    return found


def _dynamic_publish(call: ast.Call) -> bool:
    """``importlib.import_module("publish...")`` or ``__import__("publish...")``."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if name not in ("import_module", "__import__") or not call.args:
        return False
    arg = call.args[0]
    return isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.split(".")[0] == "publish"


def _files() -> list[Path]:
    return sorted(p for top in MEASURING_SIDE for p in (ROOT / top).rglob("*.py"))


def test_the_walk_finds_every_kind_of_import(tmp_path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import publish\nimport publish.frame as f\nfrom publish import ledger\nfrom publish.runs import Run\n"
        "import importlib\n\ndef later():\n    from publish.site import build\n"
        "    importlib.import_module('publish.export')\n"
    )
    found = _publish_imports(probe)
    assert [(fn, line) for fn, line, _ in found][:5] == [(None, 1), (None, 2), (None, 3), (None, 4), ("later", 8)]
    assert {m for _, _, m in found} >= {"publish", "publish.frame", "publish.ledger", "publish.runs", "publish.site"}
    assert ("later", 9, "publish (imported by name)") in found


def test_bench_and_kernels_import_nothing_from_publish() -> None:
    files = _files()
    assert any(p.name == "runfile.py" for p in files) and any(p.parent.name == "kernels" for p in files)
    wrong = []
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        for function, line, module in _publish_imports(path):
            allowed = SITE_COMMANDS.get((rel, function or ""), set())
            if module not in allowed:
                where = f"in {function}()" if function else "at module level"
                wrong.append(f"{rel}:{line}: imports {module} {where}")
    assert wrong == [], "bench/ and kernels/ must not import the site (publish/); share it through contract/:\n" + (
        "\n".join(wrong)
    )


def test_the_exceptions_are_still_needed() -> None:
    """An exception that no longer imports publish is dropped from the list."""
    used = {
        (path.relative_to(ROOT).as_posix(), function)
        for path in _files()
        for function, _, _ in _publish_imports(path)
        if function is not None
    }
    assert set(SITE_COMMANDS) <= used, set(SITE_COMMANDS) - used


def test_a_sweep_loads_nothing_of_the_site() -> None:
    """What ``python -m bench run`` imports (the CLI, the harness, the run writer with its
    ledger) leaves no publish module loaded."""
    code = (
        "import sys\nimport bench.cli, bench.harness, bench.runfile, contract.ledger\n"
        "print(sorted(m for m in sys.modules if m == 'publish' or m.startswith('publish.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
