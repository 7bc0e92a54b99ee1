"""The build: validate every run, render every page, run MkDocs, then swap the result in.

Nothing in ``site/`` changes until the whole build has succeeded: pages are rendered into a
staging directory, MkDocs builds (strict) into another, and only then is the new site
renamed into place.  A bad run file or a broken page leaves the previous site intact.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from publish.claims import Claim
from publish.pages import SiteData, pages
from publish.runs import load_runs


class BuildError(Exception):
    """The site could not be built; the previous ``site/`` is untouched."""


@dataclass
class BuildReport:
    out: Path
    pages: list[str]
    runs: int
    seconds: float
    contradicted: list[tuple[str, Claim]] = field(default_factory=list)
    missed: list[tuple[str, Claim]] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"built {len(self.pages)} pages from {self.runs} runs into {self.out} in {self.seconds:.1f} s"]
        out += [f"  {p}" for p in self.pages]
        for page, c in self.missed:
            out.append(f"target missed on {page}: {c.id}: {_plain(c.text)}")
        for page, c in self.contradicted:
            out.append(f"CLAIM CONTRADICTED on {page}: {c.id}: {_plain(c.text)}")
        return out


def _plain(markup: str) -> str:
    import re

    return re.sub(r"<[^>]+>", "", str(markup)).replace("&amp;", "&")


def environment(templates: Path) -> jinja2.Environment:
    # Autoescape: strings from run files (GPU names, notes, error messages) are data, and
    # must not become markup.  Num and Claim values are pre-rendered Markup.
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _claims(context: dict[str, Any]) -> list[Claim]:
    found = []
    for value in context.values():
        if isinstance(value, list):
            found += [v for v in value if isinstance(v, Claim)]
    return found


def render(root: Path, data: SiteData) -> tuple[dict[str, str], list[tuple[str, Claim]]]:
    env = environment(root / "templates")
    rendered, claims = {}, []
    for page in pages():
        context = page.context(data)
        try:
            rendered[page.output] = env.get_template(page.template).render(**context)
        except jinja2.TemplateError as exc:
            raise BuildError(f"templates/{page.template}: {exc}") from exc
        claims += [(page.output, c) for c in _claims(context)]
    return rendered, claims


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
        overrides: dict[str, Any] = {"docs_dir": str(docs), "site_dir": str(site), "strict": True}
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


def build(root: Path, out: Path | None = None, *, strict: bool = False, site_url: str | None = None) -> BuildReport:
    """Build the site from ``root/data`` into ``out`` (default ``root/site``).

    ``site_url`` overrides mkdocs.yml's: Material's instant navigation only follows links to
    pages listed in sitemap.xml under the address the site is served from (port included),
    so a preview on 127.0.0.1:8000 needs its own."""
    t0 = time.monotonic()
    out = out or root / "site"
    runs = load_runs(root / "data")  # a bad file raises RunFileError naming file and field
    data = SiteData(runs)
    rendered, claims = render(root, data)
    contradicted = [(p, c) for p, c in claims if c.kind == "observation" and not c.holds]
    missed = [(p, c) for p, c in claims if c.kind == "target" and not c.holds]
    if strict and contradicted:
        names = ", ".join(f"{p}:{c.id}" for p, c in contradicted)
        raise BuildError(f"--strict: the data contradict {len(contradicted)} claim(s): {names}")

    (root / ".build").mkdir(exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="staging-", dir=root / ".build"))
    try:
        docs = staging / "docs"
        shutil.copytree(root / "templates" / "assets", docs / "assets")
        shutil.copy(_plotly_js(), docs / "assets" / "plotly.min.js")
        for name, text in rendered.items():
            (docs / name).write_text(text, encoding="utf-8")
        for run in runs:  # the raw files, downloadable beside the pages that cite them
            target = docs / "runs" / run.study / run.path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(run.path, target)
        _mkdocs(root, docs, staging / "site", site_url)
        _swap(staging / "site", out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return BuildReport(out, sorted(rendered), len(runs), time.monotonic() - t0, contradicted, missed)
