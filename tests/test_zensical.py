"""The site built with Zensical, the successor of Material for MkDocs (in maintenance, end of
life announced for 2027), from the same mkdocs.yml: CI builds it here on every run, so the
migration path stays tested.  Every page must read as MkDocs renders it: the same text, the
same linked numbers, the same tables and downloads."""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import synthruns
import yaml
from sitekit import ROOT

from publish.frame import load_run
from publish.numbers import FORMATS
from publish.pages import nav
from publish.site import (
    GENERATORS,
    BuildError,
    _setting,
    build,
    stage_docs,
)

if sys.version_info < (3, 11):  # Zensical needs 3.11; the test extra installs it there
    pytest.importorskip("zensical")

PAGES = [next(iter(entry.values())).replace(".md", ".html") for entry in nav()]
# What must never reach a reader (as tests/test_browser.py checks in Chromium): template
# syntax, Python reprs, markup shown as text.
LEFTOVERS = re.compile(r"\{\{|\}\}|\{%|%\}|object at 0x|Markup\(|Num\(|Text\(|Source\(|\bNone\b|\bnan\b|Undefined|[<>]")


@pytest.fixture(scope="module")
def sites(tmp_path_factory, stored_site) -> dict[str, Path]:
    """The stored runs' site as build() made it with MkDocs, and the same rendered pages
    staged again and built by Zensical for the same address (build() itself with Zensical:
    the last test)."""
    tmp = tmp_path_factory.mktemp("engines")
    report = stored_site.report
    stage_docs(ROOT, report.rendered, report.data.all_runs, tmp / "docs")
    GENERATORS["zensical"](ROOT, tmp / "docs", tmp / "zensical", stored_site.url + "/")
    return {"mkdocs": stored_site.path, "zensical": tmp / "zensical"}


class Article(HTMLParser):
    """A page's article as a reader sees it: its text (no scripts, styles or citation
    blocks, which hold Markdown and BibTeX on purpose), its linked numbers, its tables, and
    everything it loads."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.depth = 0  # inside <article>
        self.hidden = 0  # inside a script, a style or a citation block
        self.stack: list[str] = []
        self.text: list[str] = []
        self.nums: list[tuple[str, str, str]] = []  # (href, title, shown text)
        self.tables: list[str] = []
        self.loads: list[str] = []
        self._num: dict[str, str] | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        url = a.get("src") or (a.get("href") if tag == "link" and a.get("rel") != "canonical" else "")
        if tag in ("script", "img", "iframe", "link") and url:
            self.loads.append(url)
        if tag in ("br", "img", "input", "link", "meta", "hr", "wbr", "source"):
            return
        self.stack.append(tag)
        if tag == "article":
            self.depth += 1
        hide = tag in ("script", "style") or (tag == "details" and "lab-cite" in a.get("class", ""))
        self.hidden += hide
        self.stack[-1] = f"{tag}{'!' if hide else ''}"
        if self.depth and tag == "a" and "num" in a.get("class", "").split():
            self._num = {"href": a.get("href", ""), "title": a.get("title", ""), "text": ""}
        if self.depth and "lab-table" in a.get("class", "").split():
            self.tables.append(a.get("id", ""))

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            top = self.stack.pop()
            self.hidden -= top.endswith("!")
            if top.rstrip("!") == "article":
                self.depth -= 1
            if top.rstrip("!") == tag:
                break
        if tag == "a" and self._num is not None:
            self.nums.append((self._num["href"], self._num["title"], self._num["text"]))
            self._num = None

    def handle_data(self, data: str) -> None:
        if self.depth and not self.hidden:
            self.text.append(data)
            if self._num is not None:
                self._num["text"] += data

    @property
    def visible(self) -> str:
        return " ".join(" ".join(self.text).split())


def article(site: Path, page: str) -> Article:
    return Article((site / page).read_text(encoding="utf-8"))


def test_zensical_builds_every_page_and_download(sites) -> None:
    z, m = sites["zensical"], sites["mkdocs"]
    for page in PAGES:
        html = (z / page).read_text(encoding="utf-8")
        assert '<meta name="generator" content="zensical-' in html, page
        # Material's look, which the site's CSS is written against (mkdocs.yml: theme.variant)
        assert re.search(r'<link rel="stylesheet" href="[./]*assets/stylesheets/classic/main\.', html), page
    files = {p.relative_to(m) for p in m.rglob("*") if p.is_file() and p.parts[len(m.parts)] in ("tables", "runs")}
    assert len(files) > 50
    for rel in sorted(files):  # every table's CSV and JSON, every raw run file: byte for byte
        assert (z / rel).read_bytes() == (m / rel).read_bytes(), rel
    for asset in ("assets/lab.css", "assets/charts.js", "assets/plotly.min.js"):
        assert (z / asset).read_bytes() == (m / asset).read_bytes(), asset


@pytest.mark.parametrize("page", PAGES)
def test_each_page_reads_as_mkdocs_renders_it(sites, page) -> None:
    z, m = article(sites["zensical"], page), article(sites["mkdocs"], page)
    assert len(z.visible) > 1000, f"{page}: the article is nearly empty"
    assert z.visible == m.visible
    assert z.nums == m.nums  # the same numbers, linked to the same runs, with the same hover text
    assert z.tables == m.tables
    found = [z.visible[max(0, x.start() - 40) : x.end() + 40] for x in LEFTOVERS.finditer(z.visible)]
    assert found == [], f"{page}: markup, reprs or template syntax in the visible text"
    outside = [u for u in z.loads if u.startswith(("http:", "https:", "//"))]
    assert outside == [], f"{page} loads from outside the site (it must work offline)"


NAV_LINK = re.compile(r'<a[^>]*class="md-nav__link[^"]*"[^>]*>')


def nav_pages(site: Path, page: str) -> list[str]:
    """The pages the navigation links to, in order."""
    html = (site / page).read_text(encoding="utf-8")
    hrefs = [re.search(r'href="([^"]*)"', a) for a in NAV_LINK.findall(html)]
    return [h.group(1).removeprefix("./") for h in hrefs if h and not h.group(1).startswith("#")]


def test_the_nav_follows_the_registry(sites) -> None:
    for page in ("index.html", "sources.html"):
        assert nav_pages(sites["zensical"], page) == PAGES == nav_pages(sites["mkdocs"], page)


def test_the_numbers_are_the_runs(sites, stored_site) -> None:
    """The softmax page built by Zensical shows the medians of a stored run's cases, from
    the tidy frame, as numbers linked to that run, case and variant (the run whose cases the
    page shows most of)."""
    current = [c.run for c in stored_site.report.data.studies["softmax"].cases.values()]
    latest = max(current, key=lambda r: (current.count(r), r.started))
    df = load_run(latest.path)
    medians = df.query("statistic == 'median' and timer == 'cuda-graph' and variant == 'triton'")
    shown = article(sites["zensical"], "softmax.html").nums
    found = 0
    for case_id, value in zip(medians["case_id"], medians["value"], strict=True):
        texts = {FORMATS[kind](value) for kind in ("us", "us_bare")}
        found += any(
            f"run {latest.run_id} · case {case_id} · variant triton · median of" in title and text in texts
            for _, title, text in shown
        )
    assert found >= 10, f"{found} medians of {latest.run_id} shown on the Zensical softmax page"


def test_a_page_zensical_warns_about_fails_the_build_and_keeps_the_site(tmp_path) -> None:
    root = synthruns.project(tmp_path)
    out = tmp_path / "site"
    build(root, out, engine="zensical")
    before = (out / "index.html").read_bytes()
    with open(root / "templates" / "methodology.md.j2", "a", encoding="utf-8") as f:
        f.write("\n[a page that does not exist](nosuch.md)\n")
    with pytest.raises(BuildError, match=r"zensical build --strict failed(.|\n)*nosuch\.md"):
        build(root, out, engine="zensical")
    assert (out / "index.html").read_bytes() == before
    with pytest.raises(BuildError, match="unknown engine"):
        build(root, out, engine="hugo")


def test_the_zensical_configuration_is_mkdocs_yml_with_the_staged_paths() -> None:
    text = "site_name: X  # a comment\nnav:\n  - Home: index.md\n\n  - Old: old.md\n- Top: top.md\n"
    text += "theme:\n  name: material\ndocs_dir: .build/docs\n"
    text += "markdown_extensions:\n  - pymdownx.emoji:\n      emoji_index: !!python/name:e.f\n"
    out = _setting(_setting(text, "nav", [{"Home": "index.md"}, {"Sources": "sources.md"}]), "docs_dir", "docs")
    assert "old.md" not in out and "top.md" not in out and ".build" not in out
    assert "!!python/name:e.f" in out and "site_name: X  # a comment" in out
    doc = yaml.load(out.replace("!!python/name:e.f", "e.f"), Loader=yaml.SafeLoader)
    assert doc["nav"] == [{"Home": "index.md"}, {"Sources": "sources.md"}] and doc["docs_dir"] == "docs"
    assert doc["theme"] == {"name": "material"} and doc["site_name"] == "X"
    with pytest.raises(BuildError, match="more than once"):
        _setting("nav: []\nnav: []\n", "nav", [])


@pytest.mark.browser
def test_the_zensical_site_in_chromium(sites) -> None:
    """Zensical's Material look (theme.variant: classic) keeps the site's layout: in
    Chromium at 1400 px every page loads without errors or outside requests, every chart is
    drawn and no table is wider than its box."""
    import functools
    import http.server
    import os
    import shutil
    import threading

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(chromium):
        if os.environ.get("LAB_REQUIRE_BROWSER"):
            pytest.fail(f"no Chromium at {chromium}; .ci/run installs Debian's chromium package")
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(sites["zensical"]))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    widths = """() => Array.from(document.querySelectorAll('article table')).map(t => {
      const box = t.closest('.lab-scroll') || t.closest('.md-typeset__scrollwrap') || t.parentElement;
      return {id: t.closest('[id]')?.id || '(table)', width: t.getBoundingClientRect().width, box: box.clientWidth};
    })"""
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
            for name in PAGES:
                context = browser.new_context(viewport={"width": 1400, "height": 900})
                pg = context.new_page()
                problems: list[str] = []
                pg.on("pageerror", lambda e, problems=problems: problems.append(f"page error: {e}"))
                pg.on(
                    "console",
                    lambda m, problems=problems: problems.append(m.text) if m.type == "error" else None,
                )
                pg.on(
                    "request",
                    lambda r, problems=problems: (
                        problems.append(f"outside request: {r.url}") if not r.url.startswith((url, "data:")) else None
                    ),
                )
                pg.goto(f"{url}/{name}")
                pg.wait_for_load_state("networkidle")
                pg.wait_for_function(
                    "document.querySelectorAll('.lab-chart').length"
                    " === document.querySelectorAll('.lab-chart[data-drawn]').length",
                    timeout=15000,
                )
                pg.evaluate("document.querySelectorAll('article details').forEach(d => d.open = true)")
                wide = [t for t in pg.evaluate(widths) if t["width"] > t["box"] + 1]
                assert wide == [], f"{name}: tables wider than their box at 1400 px: {wide}"
                assert problems == [], name
                context.close()
            browser.close()
    finally:
        server.shutdown()
