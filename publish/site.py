"""The build: validate every run, render every page, run MkDocs, then swap the result in.

Nothing in ``site/`` changes until the whole build has succeeded: pages are rendered into a
staging directory, MkDocs builds (strict) into another, and only then is the new site
renamed into place.  A bad run file or a broken page leaves the previous site intact.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import yaml

from contract import studies
from contract.schema import RunFileError
from publish import ledger
from publish.charts import Chart
from publish.check import stray_numbers
from publish.claims import Claim
from publish.export import Citation, citation, strict_json, to_csv, to_json
from publish.frame import Measured
from publish.pages import SiteData, nav, pages, review
from publish.review import claim_history, load_withdrawals
from publish.runs import Run, load_runs, strict_copy
from publish.safe import finalize, plotly_safe
from publish.tables import Table


class BuildError(Exception):
    """The site could not be built; the previous ``site/`` is untouched."""


@dataclass
class BuildReport:
    out: Path
    pages: list[str]
    runs: int
    withdrawn: int
    tables: int
    seconds: float
    contradicted: list[tuple[str, Claim]] = field(default_factory=list)
    missed: list[tuple[str, Claim]] = field(default_factory=list)
    no_data: list[tuple[str, Claim]] = field(default_factory=list)  # targets whose case no run in force measured
    notes: list[str] = field(default_factory=list)  # what pages report (e.g. the fitted row policy)
    # What was built from: the data and the rendered pages, tables and downloads (for a caller
    # that inspects the build, e.g. the tests, without rendering the site a second time).
    data: SiteData | None = field(default=None, repr=False, compare=False)
    rendered: Rendered | None = field(default=None, repr=False, compare=False)

    def lines(self) -> list[str]:
        out = [
            f"built {len(self.pages)} pages and {self.tables} downloadable tables from {self.runs} runs "
            f"({self.withdrawn} withdrawn) into {self.out} in {self.seconds:.1f} s"
        ]
        out += [f"  {p}" for p in self.pages]
        out += self.notes
        for page, c in self.missed:
            out.append(f"target missed on {page}: {c.id}: {_plain(c.text)}")
        for page, c in self.no_data:
            out.append(f"target with no data on {page}: {c.id}: {_plain(c.text)}")
        for page, c in self.contradicted:
            out.append(f"CLAIM CONTRADICTED on {page}: {c.id}: {_plain(c.stated)} [evidence: {_plain(c.evidence)}]")
        return out


def _plain(markup: str) -> str:
    import html
    import re

    return html.unescape(re.sub(r"<[^>]+>", "", str(markup)))


def environment(templates: Path) -> jinja2.Environment:
    # Strings from run files (GPU names, notes, error messages, withdrawal reasons) are data
    # and must not become markup, neither HTML nor the Markdown that runs after Jinja: every
    # expression goes through publish.safe.finalize, which escapes both.  Num and Claim
    # values are pre-rendered Markup and pass unchanged.
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        autoescape=True,
        finalize=finalize,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _walk(value: Any, kind: type) -> list[Any]:
    """Every ``kind`` object in a page context (inside lists, tuples and dicts too)."""
    if isinstance(value, kind):
        return [value]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _walk(v, kind)]
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _walk(v, kind)]
    return []


def _unique(claims: list[tuple[str, Claim]]) -> list[tuple[str, Claim]]:
    seen: dict[tuple[str, str], Claim] = {}
    for page, c in claims:
        seen.setdefault((page, c.id), c)
    return [(page, c) for (page, _), c in seen.items()]


def _context(page: Any, data: SiteData) -> dict[str, Any]:
    """A page's context; a failure the run-file checks did not foresee still ends as a
    "build failed" line naming the page and the runs it read, not as a traceback."""
    return _computed(page, data, "page", page.context)


def _claims(page: Any, data: SiteData) -> list[Claim]:
    """A page's claims alone (:attr:`publish.pages.Page.claims`), failing as :func:`_context` does."""
    return list(_computed(page, data, "page's claims", page.claims))


def _computed(page: Any, data: SiteData, what: str, compute: Callable[[SiteData], Any]) -> Any:
    try:
        return compute(data)
    except Exception as exc:
        runs = ", ".join(r.source for r in data.runs) or "no runs"
        raise BuildError(
            f"{page.output}: the {what} could not be computed from the runs in force ({runs}): "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def history_claims(data: SiteData, current: list[tuple[str, Claim]]) -> Callable[[list[Run]], list[tuple[str, Claim]]]:
    """The claims of the pages on an earlier set of runs, for the review record: a study's
    page reads its own study's runs alone, so its claims are computed once for each set of
    them (a run of another study leaves them as they were) rather than once per run."""
    done: dict[tuple[str, tuple[str, ...]], list[Claim]] = {}

    def evaluate(runs: list[Run]) -> list[tuple[str, Claim]]:
        if len(runs) == len(data.runs):
            return current  # the current set of runs, whose claims are already known
        sub = SiteData(runs, shared_stats=data.stats)
        out: list[tuple[str, Claim]] = []
        for p in pages():
            if p.claims is None:
                continue
            key = (p.output, tuple(r.run_id for r in runs if p.study is None or r.study == p.study))
            if key not in done:
                done[key] = _claims(p, sub)
            out += [(p.output, c) for c in done[key]]
        return _unique(out)

    return evaluate


@dataclass
class Rendered:
    pages: dict[str, str]
    claims: list[tuple[str, Claim]]
    tables: list[tuple[str, Table]]  # (page, table)
    exports: dict[str, str]  # path under the site -> text


def render(root: Path, data: SiteData, site_url: str) -> Rendered:
    env = environment(root / "templates")
    runs_by_id = {r.run_id: r for r in data.all_runs}
    contexts = {p.output: _context(p, data) for p in pages()}
    claims = _unique([(p.output, c) for p in pages() if p.claims is not None for c in _walk(contexts[p.output], Claim)])
    contradicted = [(page, c) for page, c in claims if c.kind == "observation" and not c.holds]
    # The last step of the history is the current set of runs, whose claims are already known.
    history = claim_history(data.runs, history_claims(data, claims))
    contexts["review.md"] = review.context(data, history, contradicted)
    for ctx in contexts.values():  # chart text (names, categories, hovers) is shown as written
        for chart in _walk(ctx, Chart):
            chart.figure = plotly_safe(chart.figure)
    templates = {p.output: p.template for p in pages()} | {"review.md": "review.md.j2"}

    tables: list[tuple[str, Table]] = []
    exports: dict[str, str] = {}
    citations: dict[str, Citation] = {}
    found = [(page, t) for page, ctx in contexts.items() for t in _walk(ctx, Table)]
    # The downloads name the statistics of every measurement they cite, from the same pivoted
    # frame the tables' numbers were read from.
    measured = Measured(data.stats)
    for page, t in found:
        if t.id in citations:
            raise BuildError(f"table id {t.id!r} is used twice ({page}); table ids are permanent anchors")
        runs = [runs_by_id[r] for r in t.run_ids]
        url = f"{site_url}{page.removesuffix('.md')}.html#{t.id}"
        citations[t.id] = cite = citation(t, url, runs)
        exports[f"tables/{t.id}.csv"] = to_csv(t)
        try:
            exports[f"tables/{t.id}.json"] = strict_json(to_json(t, cite, runs, measured))
        except ValueError as exc:
            raise BuildError(f"tables/{t.id}.json ({page}): not strict JSON: {exc}") from exc
        tables.append((page, t))

    env.globals["cite"] = lambda t: citations[t.id]
    rendered = {}
    for page, ctx in contexts.items():
        try:
            text = env.get_template(templates[page]).render(**ctx, page=page)
        except Exception as exc:
            raise BuildError(f"templates/{templates[page]} ({page}): {type(exc).__name__}: {exc}") from exc
        stray = stray_numbers(text)
        if stray:
            listed = "; ".join(f"\u201c{s}\u201d" for s in stray[:5])
            raise BuildError(
                f"{page} (templates/{templates[page]}): {len(stray)} number(s) not produced by a data helper: {listed}"
            )
        rendered[page] = text
    return Rendered(rendered, claims, tables, exports)


def _configured_site_url(root: Path) -> str:
    with open(root / "mkdocs.yml", encoding="utf-8") as f:
        return site_root(str(yaml.load(f, Loader=_Loader).get("site_url") or ""))


def site_root(url: str) -> str:
    """The site's address with exactly one trailing slash: page names are appended to it
    (``https://host/notes`` + ``softmax.html`` must not read ``notessoftmax.html``)."""
    return url.rstrip("/") + "/"


def check_studies(runs: list[Run]) -> None:
    """A run of a study no page declares would be listed on Home and Sources and shown
    nowhere else: the build refuses it, naming the file."""
    known = studies.names()
    for run in runs:
        if run.study not in known:
            raise RunFileError(
                run.source,
                "study",
                f"{run.study!r} has no page: the registry (contract/studies.py) declares {', '.join(known)}; "
                "register the study and declare its page before storing its runs",
            )


class _Loader(yaml.SafeLoader):
    """mkdocs.yml may hold tags like !ENV; reading site_url needs none of them."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def _plotly_js() -> Path:
    path = Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))
    if not path.is_file():
        raise BuildError(f"the plotly package ships no plotly.min.js at {path}")
    return path


def _mkdocs(root: Path, docs: Path, site: Path, site_url: str | None) -> None:
    from mkdocs import config as mkconfig
    from mkdocs.commands import build as mkbuild
    from mkdocs.exceptions import MkDocsException

    warnings: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            warnings.append(record.getMessage().replace(str(docs) + os.sep, ""))

    log = logging.getLogger("mkdocs")
    handler = Collect(logging.WARNING)
    log.addHandler(handler)
    try:
        # The nav follows the registry (publish.pages.nav): mkdocs.yml holds none.
        overrides: dict[str, Any] = {"docs_dir": str(docs), "site_dir": str(site), "strict": True, "nav": nav()}
        if site_url:
            overrides["site_url"] = site_url
        cfg = mkconfig.load_config(str(root / "mkdocs.yml"), **overrides)
        cfg.plugins.on_startup(command="build", dirty=False)
        try:
            mkbuild.build(cfg)
        finally:
            cfg.plugins.on_shutdown()
    except (MkDocsException, SystemExit) as exc:
        detail = "".join(f"\n  {w}" for w in warnings)
        raise BuildError(f"mkdocs build --strict failed: {exc}{detail}") from exc
    finally:
        log.removeHandler(handler)


def _setting(text: str, key: str, value: Any) -> str:
    """mkdocs.yml's text with one top-level setting set to ``value`` (written as JSON, which
    YAML reads as is): the setting's lines, a block included, are dropped and the new line
    appended; every other line, YAML tags included, is kept as written."""
    kept: list[str] = []
    found, inside = 0, False
    for line in text.splitlines():
        if inside and (not line.strip() or line.startswith((" ", "\t", "-", "#"))):
            continue  # the old setting's block
        inside = bool(re.match(rf"{re.escape(key)}\s*:", line))
        found += inside
        if not inside:
            kept.append(line)
    if found > 1:
        raise BuildError(f"mkdocs.yml sets {key} more than once")
    return "\n".join([*kept, f"{key}: {json.dumps(value, ensure_ascii=False)}"]) + "\n"


def _zensical(root: Path, docs: Path, site: Path, site_url: str | None) -> None:
    """Build the staged pages with Zensical, the successor of Material for MkDocs, from the
    same mkdocs.yml (strict: a warning fails the build).  Zensical wants the pages and the
    output beside its configuration, so a copy pointing at them is written next to them."""
    if docs.parent != site.parent:
        raise BuildError("Zensical builds into a folder beside the pages")
    text = (root / "mkdocs.yml").read_text(encoding="utf-8")
    text = _setting(_setting(text, "docs_dir", docs.name), "site_dir", site.name)
    if site_url:
        text = _setting(text, "site_url", site_url)
    text = _setting(text, "nav", nav())  # the nav follows the registry, as for MkDocs
    config = docs.parent / "mkdocs.yml"
    config.write_text(text, encoding="utf-8")
    command = [sys.executable, "-m", "zensical", "build", "--config-file", str(config), "--strict", "--clean"]
    try:
        done = subprocess.run(
            command, cwd=docs.parent, capture_output=True, text=True, env=os.environ | {"NO_COLOR": "1"}, timeout=600
        )
    except subprocess.TimeoutExpired as exc:
        raise BuildError("zensical build took more than 10 minutes") from exc
    if done.returncode != 0 or not (site / "index.html").is_file():
        output = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr).strip()
        if "No module named zensical" in output:
            raise BuildError("Zensical is not installed (pip install -e '.[test]')")
        detail = "\n  ".join(output.splitlines()[-30:])
        raise BuildError(f"zensical build --strict failed (exit {done.returncode}):\n  {detail}")


# The static site generators that can turn the staged pages into HTML: MkDocs with Material
# (the published site) and Zensical (its successor, from the same mkdocs.yml).
GENERATORS = {"mkdocs": _mkdocs, "zensical": _zensical}


def stage_docs(root: Path, result: Rendered, runs: list[Run], docs: Path) -> None:
    """Write what a generator builds from into ``docs``: the rendered pages, the tables'
    downloads, the site's assets with Plotly, and the raw run files (strict JSON)."""
    shutil.copytree(root / "templates" / "assets", docs / "assets")
    shutil.copy(_plotly_js(), docs / "assets" / "plotly.min.js")
    for name, text in result.pages.items():
        (docs / name).write_text(text, encoding="utf-8")
    for name, text in result.exports.items():
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text(text, encoding="utf-8")
    for run in runs:  # the raw files, downloadable beside the pages that cite them
        target = docs / "runs" / run.study / run.path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(strict_copy(run))


def _swap(new: Path, out: Path) -> None:
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    if out.exists():
        out.rename(old)
    try:
        new.rename(out)
    except OSError:
        if old.exists():
            old.rename(out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def build(
    root: Path,
    out: Path | None = None,
    *,
    strict: bool = False,
    site_url: str | None = None,
    engine: str = "mkdocs",
) -> BuildReport:
    """Build the site from ``root/data`` into ``out`` (default ``root/site``).

    ``site_url`` overrides mkdocs.yml's: Material's instant navigation only follows links to
    pages listed in sitemap.xml under the address the site is served from (port included),
    so a preview on 127.0.0.1:8000 needs its own.  ``engine`` is the static site generator
    that turns the pages into HTML: MkDocs with Material (the published site) or Zensical
    (the migration path, from the same mkdocs.yml)."""
    if engine not in GENERATORS:
        raise BuildError(f"unknown engine {engine!r}: one of {', '.join(GENERATORS)}")
    t0 = time.monotonic()
    out = out or root / "site"
    data = load_site_data(root)
    runs = data.all_runs
    site_url = site_root(site_url) if site_url else None
    result = render(root, data, site_url or _configured_site_url(root))
    contradicted = [(p, c) for p, c in result.claims if c.kind == "observation" and not c.holds]
    missed = [(p, c) for p, c in result.claims if c.kind == "target" and not c.holds and not c.no_data]
    no_data = [(p, c) for p, c in result.claims if c.kind == "target" and c.no_data]
    if strict and contradicted:
        names = ", ".join(f"{p}:{c.id}" for p, c in contradicted)
        raise BuildError(f"--strict: the data contradict {len(contradicted)} claim(s): {names}")

    (root / ".build").mkdir(exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="staging-", dir=root / ".build"))
    try:
        docs = staging / "docs"
        stage_docs(root, result, runs, docs)
        GENERATORS[engine](root, docs, staging / "site", site_url)
        _swap(staging / "site", out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return BuildReport(
        out,
        sorted(result.pages),
        len(runs),
        len(data.withdrawals),
        len(result.tables),
        time.monotonic() - t0,
        contradicted,
        missed,
        no_data,
        data_notes(data) + [line for p in pages() if p.report is not None for line in p.report(data)],
        data,
        result,
    )


def load_site_data(root: Path) -> SiteData:
    """Everything the pages are built from, checked: every run file against the contract
    (and against copies of another), every run's study against the pages, the run files
    against the ledger, and the withdrawals.  Any failure names the file and the field."""
    data_dir = root / "data"
    runs = load_runs(data_dir)  # a bad file raises RunFileError naming file and field
    check_studies(runs)
    ledger.check(data_dir, runs)
    return SiteData(runs, load_withdrawals(data_dir, runs))


def data_notes(data: SiteData) -> list[str]:
    """What the build report says about the data: runs of another GPU (kept out of every
    result) and older files served as strict JSON."""
    notes = []
    for study, gpu in sorted(data.reference_gpus.items()):
        others = [r for r in data.in_force if r.study == study and r.run_id in data.other_gpu]
        if others:
            listed = "; ".join(f"{r.run_id} ({r.gpu})" for r in others)
            notes.append(f"{study}: results from {gpu}; other GPU, not mixed in: {listed}")
    legacy = [r.source for r in data.all_runs if r.legacy_literals]
    if legacy:
        notes.append(
            f"{len(legacy)} run file(s) of schema 1-2 hold NaN/Infinity in a check; served as strict JSON "
            f'(written as "nan"/"inf"): {", ".join(legacy)}'
        )
    return notes
