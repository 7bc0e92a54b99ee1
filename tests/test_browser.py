"""The built site in headless Chromium (Debian's package, driven by Playwright)."""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import synthruns
import synthstudies
from sitekit import served

from publish.pages import pages, study_pages
from publish.site import build

pytestmark = pytest.mark.browser
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Every page of the registry, and the review page built from what they report.
PAGES = [p.output.replace(".md", ".html") for p in pages()] + ["review.html"]
# What must never reach a reader: template syntax, Python reprs, markup shown as text
# (a backtick: Markdown code left unrendered, e.g. inside an HTML block), and terminal colour
# codes from a peer's error message ("[91m").
LEFTOVERS = re.compile(
    r"\{\{|\}\}|\{%|%\}|object at 0x|Markup\(|Num\(|Text\(|Source\(|\bNone\b|\bnan\b|Undefined|[<>`]"
    r"|\x1b|\[\d{1,3}(?:;\d{1,3})*m|&#\d+;|&#x[0-9a-fA-F]+;"  # ... or an escape shown as text
)


@pytest.fixture(scope="module")
def base_url(stored_site) -> str:
    return stored_site.url


@pytest.fixture(scope="module")
def synthetic_url(tmp_path_factory) -> Iterator[str]:
    """A site built from synthetic runs: two grid runs (a fit and a held-out run), two
    dispatch runs (before and after), a softmax run with eager samples and QuACK, and a run
    each of RMSNorm, of the row sum and vector add, of GEMM, of specialization, of
    cross-entropy and of the fused linear cross-entropy."""
    tmp = tmp_path_factory.mktemp("synthetic")
    root = synthruns.project(tmp)
    synthruns.write(root, synthruns.modelled_grid("rowgrid-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z"))
    synthruns.write(
        root, synthruns.modelled_grid("rowgrid-20261202T000000Z-bbbbbbb", "2026-12-02T00:00:00Z", split_cost=1.6)
    )
    synthruns.write(root, synthruns.dispatch_doc("dispatch-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z"))
    synthruns.write(
        root, synthruns.dispatch_doc("dispatch-20261202T000000Z-bbbbbbb", "2026-12-02T00:00:00Z", ours=0.2, quack=True)
    )
    synthruns.write(root, synthruns.softmax_doc("softmax-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z"))
    synthruns.write(root, synthstudies.rmsnorm_doc("rmsnorm-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z"))
    synthruns.write(root, synthstudies.rowsum_add_doc("rowsum_add-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z"))
    synthruns.write(root, synthstudies.matmul_doc("matmul-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z"))
    synthruns.write(
        root, synthstudies.specialization_doc("specialization-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z")
    )
    synthruns.write(
        root, synthstudies.cross_entropy_doc("cross_entropy-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z")
    )
    synthruns.write(
        root,
        synthstudies.linear_cross_entropy_doc("linear_cross_entropy-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z"),
    )
    for study in ("rope", "swiglu", "bias_gelu_dropout"):
        doc = synthstudies.pointwise_doc(study, f"{study}-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z")
        synthruns.write(root, doc)
    site = tmp / "site"
    site.mkdir()
    with served(site) as url:
        build(root, site, site_url=url + "/")
        yield url


@pytest.fixture(scope="module")
def browser():  # type: ignore[no-untyped-def]
    if not os.path.exists(CHROMIUM):
        if os.environ.get("LAB_REQUIRE_BROWSER"):
            pytest.fail(f"no Chromium at {CHROMIUM}; .ci/run installs Debian's chromium package")
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
            ],
        )
        yield b
        b.close()


@pytest.fixture
def page(browser, base_url):  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.problems = []  # type: ignore[attr-defined]
    pg.on("console", lambda m: pg.problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    pg.on("pageerror", lambda e: pg.problems.append(f"page error: {e}"))
    pg.on("requestfailed", lambda r: pg.problems.append(f"request failed: {r.url}"))
    pg.on(
        "request",
        lambda r: (
            pg.problems.append(f"outside request: {r.url}")
            if not r.url.startswith(base_url) and not r.url.startswith("data:")
            else None
        ),
    )
    yield pg
    context.close()


def charts_drawn(pg) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    pg.wait_for_function(
        "document.querySelectorAll('.lab-chart').length === document.querySelectorAll('.lab-chart[data-drawn]').length",
        timeout=15000,
    )
    drawn = pg.locator(".lab-chart[data-drawn] svg.main-svg").count()
    return drawn, pg.locator(".lab-chart").count()


@pytest.mark.parametrize("name", PAGES)
def test_page_loads_without_errors(page, base_url, name) -> None:
    page.goto(f"{base_url}/{name}")
    page.wait_for_load_state("networkidle")
    assert page.locator("h1").count() == 1
    charts_drawn(page)
    assert page.problems == []


def test_every_chart_draws(page, base_url) -> None:
    page.goto(f"{base_url}/softmax.html")
    drawn, total = charts_drawn(page)
    assert total >= 4 and drawn >= total
    assert page.locator(".lab-chart .scatterlayer .point").count() > 50  # markers, not an empty frame
    assert page.problems == []


def test_charts_draw_after_instant_navigation(page, base_url) -> None:
    page.goto(f"{base_url}/index.html")
    page.evaluate("window.__sameDocument = true")
    page.locator("nav.md-nav a", has_text="Softmax").first.click()
    page.wait_for_url("**/softmax.html")
    # Instant navigation changes the URL before it swaps the content in: wait for the new
    # page's charts to exist before checking that they were drawn.
    page.wait_for_selector("#softmax-fwd-bw-cold")
    drawn, total = charts_drawn(page)
    assert total >= 4 and drawn >= total
    assert page.evaluate("window.__sameDocument === true"), "navigation reloaded the page instead of swapping it"
    assert page.problems == []


@pytest.mark.parametrize("name", ["softmax.html", "matmul.html"])
def test_charts_draw_when_the_site_is_opened_from_disk(browser, stored_site, name) -> None:
    # The README offers site/ as plain files; opened as file://, Material's document$ never
    # fires, and charts that waited for it stayed empty boxes.
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    problems: list[str] = []
    pg.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    pg.goto((stored_site.path / name).resolve().as_uri())
    drawn, total = charts_drawn(pg)
    assert total >= 4 and drawn >= total
    assert problems == []
    context.close()


def test_numbers_in_tables_carry_provenance(page, base_url) -> None:
    page.goto(f"{base_url}/softmax.html")
    charts_drawn(page)  # layout settled: a click lands where it aims
    assert page.locator(".lab-table td a.num").count() > 200
    cells = page.locator("#softmax-losses td a.num")  # a measured time: its case, variant and statistic
    title = cells.first.get_attribute("title")
    assert title and "run softmax-" in title and "case " in title and "median of" in title
    run_id = cells.first.get_attribute("data-run")
    cells.first.click()
    page.wait_for_url(f"**/sources.html#run-{run_id}")
    page.wait_for_selector(f"[id='run-{run_id}']")  # instant navigation swaps the content in after the URL
    assert page.locator(f"a[href$='runs/softmax/{run_id}.json']").count() == 1  # the raw file
    assert page.problems == []


def test_dark_theme_redraws_charts(page, base_url) -> None:
    page.goto(f"{base_url}/softmax.html")
    charts_drawn(page)
    before = page.evaluate("document.body.getAttribute('data-md-color-scheme')")
    page.locator("label.md-header__button[for^='__palette']").first.click()
    page.wait_for_function(f"document.body.getAttribute('data-md-color-scheme') !== '{before}'")
    charts_drawn(page)
    assert page.problems == []


def test_phone_width_does_not_overflow(browser, base_url) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    pg = context.new_page()
    pg.goto(f"{base_url}/softmax.html")
    charts_drawn(pg)
    overflow = pg.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, f"page is {overflow}px wider than the screen"
    context.close()


def test_search_works_offline(page, base_url) -> None:
    page.goto(f"{base_url}/index.html")
    page.locator("input.md-search__input").click()
    page.keyboard.type("Liger", delay=30)  # Material listens to key events, not to fill()
    page.wait_for_selector(".md-search-result__item", timeout=15000)
    assert page.locator(".md-search-result__item").count() > 0
    assert page.problems == []


def test_csv_download_equals_the_rows_shown_and_the_json(page, base_url) -> None:
    page.goto(f"{base_url}/softmax.html#softmax-fwd-bf16")  # the link opens the table's section
    charts_drawn(page)
    table = page.locator("#softmax-fwd-bf16")
    assert table.is_visible()
    shown = [[td.inner_text().strip() for td in tr.locator("td").all()] for tr in table.locator("tbody tr").all()]
    header = [th.inner_text().strip() for th in table.locator("thead th").all()]
    with page.expect_download() as info:
        table.locator("a.lab-csv").click()
    rows = list(csv.reader(io.StringIO(Path(info.value.path()).read_text())))
    assert rows[0][:-1] == header and rows[0][-1] == "run_ids"
    assert [r[:-1] for r in rows[1:]] == shown
    doc = page.request.get(f"{base_url}/tables/softmax-fwd-bf16.json").json()
    assert [[row["cells"][c["key"]]["text"] for c in doc["columns"]] for row in doc["rows"]] == shown
    assert [r[-1].split() for r in rows[1:]] == [row["run_ids"] for row in doc["rows"]]


def test_cite_block_names_real_runs(page, base_url) -> None:
    page.goto(f"{base_url}/softmax.html#softmax-fwd-bf16")
    block = page.locator("#softmax-fwd-bf16 details.lab-cite")
    block.locator("summary").click()
    footnote = block.locator("code.lab-cite-md").inner_text()
    bibtex = block.locator("code.lab-cite-bib").inner_text()
    run_ids = re.findall(r"softmax-\d{8}T\d{6}Z-[0-9a-f]{7}(?:-quick)?", footnote)
    assert run_ids and set(run_ids) == set(re.findall(r"softmax-\d{8}T\d{6}Z-[0-9a-f]{7}(?:-quick)?", bibtex))
    assert "NVIDIA H200" in footnote and "commit" in footnote and "@misc{" in bibtex
    sources = page.request.get(f"{base_url}/sources.html").text()
    for run_id in run_ids:
        assert f'id="run-{run_id}"' in sources


def test_every_link_resolves(page, base_url) -> None:
    seen: dict[str, str] = {}

    def fetch(url: str) -> str:
        if url not in seen:
            response = page.request.get(url)
            assert response.ok, f"{url}: HTTP {response.status}"
            seen[url] = response.text()
        return seen[url]

    for name in PAGES:
        page.goto(f"{base_url}/{name}")
        hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
        for href in set(hrefs):
            if not href.startswith(base_url):
                continue
            target, _, anchor = href.partition("#")
            body = fetch(target)
            if anchor and target.endswith(".html"):
                assert f'id="{anchor}"' in body, f"{name}: {href} has no #{anchor}"


def visible_leftovers(pg) -> list[str]:  # type: ignore[no-untyped-def]
    """Pieces of the article's visible text that are markup, reprs or template syntax (with
    every collapsed section opened, as a reader may; the citation blocks hold Markdown and
    BibTeX on purpose)."""
    pg.evaluate("document.querySelectorAll('article details:not(.lab-cite)').forEach(d => d.open = true)")
    text = pg.locator("article").inner_text()
    return [text[max(0, m.start() - 40) : m.end() + 40] for m in LEFTOVERS.finditer(text)]


@pytest.mark.parametrize("name", PAGES)
def test_visible_text_is_clean(page, base_url, name) -> None:
    page.goto(f"{base_url}/{name}")
    page.wait_for_load_state("networkidle")
    assert visible_leftovers(page) == []


# Every study's page (the registry's), Home and Sources.
SYNTHETIC = [f"{s.study}.html" for s in study_pages()] + ["index.html", "sources.html"]


@pytest.mark.parametrize("name", SYNTHETIC)
def test_new_pages_from_synthetic_runs(browser, synthetic_url, name) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    problems: list[str] = []
    pg.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    pg.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
    pg.goto(f"{synthetic_url}/{name}")
    pg.wait_for_load_state("networkidle")
    drawn, total = charts_drawn(pg)
    assert drawn >= total
    assert visible_leftovers(pg) == []
    assert pg.locator("article a.num").count() > 0  # numbers, linked to their runs
    assert problems == []
    context.close()


def test_heat_maps_draw_and_name_their_run(browser, synthetic_url) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.goto(f"{synthetic_url}/rowgrid.html")
    drawn, total = charts_drawn(pg)
    assert total == 3 and drawn >= total
    assert pg.locator(".lab-chart .heatmaplayer").count() == 3  # heat maps, not empty frames
    spec = pg.locator("#rowgrid-regret").get_attribute("data-figure")
    assert spec and "rowgrid-20261202T000000Z-bbbbbbb" in spec  # every cell's hover names its run
    assert "held-out run" in pg.locator("article").inner_text()
    context.close()


# ----------------------------------------------------------------------------- a page a reader can use

# Every table's width against its box: the table, and the element that would scroll it.
TABLE_WIDTHS = """() => Array.from(document.querySelectorAll('article table')).map(t => {
  const box = t.closest('.lab-scroll') || t.closest('.md-typeset__scrollwrap') || t.parentElement;
  const lab = t.closest('.lab-table');
  return {id: lab ? lab.id : t.closest('[id]')?.id || '(table)', width: t.getBoundingClientRect().width,
          box: box.clientWidth};
})"""


@pytest.mark.parametrize("name", PAGES)
def test_no_column_is_hidden_at_1400px(browser, base_url, name) -> None:
    """At 1400 px every table, collapsed sections opened, fits the box it sits in: no column
    needs a sideways scroll to be seen."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    pg.goto(f"{base_url}/{name}")
    pg.wait_for_load_state("networkidle")
    pg.evaluate("document.querySelectorAll('article details').forEach(d => d.open = true)")
    wide = [t for t in pg.evaluate(TABLE_WIDTHS) if t["width"] > t["box"] + 1]
    assert wide == [], f"{name}: tables wider than their box at 1400 px: {wide}"
    context.close()


def test_softmax_page_puts_the_answer_first_and_details_behind_a_click(browser, base_url) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    pg.goto(f"{base_url}/softmax.html")
    charts_drawn(pg)
    order = pg.evaluate(
        """() => ['softmax-summary', 'softmax-fwd-speedup', 'targets', 'softmax-losses', 'softmax-fwd-bf16']
                 .map(id => document.getElementById(id).getBoundingClientRect().top)"""
    )
    assert order == sorted(order), "summary, key chart, targets, losses, then the details"
    assert not pg.locator("#softmax-fwd-bf16").is_visible()  # inside a section opened on purpose
    # The losses tables list every resolved loss in full (as many as the verdict resolves);
    # the rest of the page, details closed, stays short, and one opened section adds a table.
    losses = pg.evaluate(
        """() => ['softmax-losses', 'softmax-losses-eager'].map(id => document.getElementById(id))
                 .reduce((s, e) => s + e.getBoundingClientRect().height, 0)"""
    )
    closed = pg.evaluate("document.documentElement.scrollHeight")
    pg.locator("details.lab-details:has(#softmax-fwd-bf16) > summary").click()
    assert pg.locator("#softmax-fwd-bf16").is_visible()
    opened = pg.evaluate("document.documentElement.scrollHeight")
    assert closed - losses < 12000, f"the softmax page is {closed} px tall at 1400 px, {losses} of them losses"
    assert opened - closed < 8000, f"one opened section adds {opened - closed} px"
    context.close()


def test_losses_are_visible_on_a_phone(browser, base_url) -> None:
    """At 390 px the summary and the losses stack into cards: every cell, the faster peer and
    the speedup included, lies on the screen without a sideways scroll."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    pg = context.new_page()
    pg.goto(f"{base_url}/softmax.html")
    charts_drawn(pg)
    for table_id in ("softmax-summary", "softmax-losses", "softmax-losses-eager"):
        cells = pg.evaluate(
            f"""() => Array.from(document.querySelectorAll('#{table_id} tbody td')).map(td => {{
                const r = td.getBoundingClientRect();
                return {{label: td.dataset.label, left: r.left, right: r.right, width: r.width}};
            }})"""
        )
        assert cells, table_id
        off = [c for c in cells if c["left"] < 0 or c["right"] > 390 or c["width"] <= 0]
        assert off == [], f"{table_id}: cells off the screen at 390 px: {off[:3]}"
        labels = {c["label"] for c in cells}
        if table_id != "softmax-summary":
            assert {"Faster peer", "Speedup"} <= labels
        scroll = "id => { const s = document.querySelector('#' + id + ' .lab-scroll'); "
        box = pg.evaluate(scroll + "return s.scrollWidth - s.clientWidth; }", table_id)
        assert box <= 1, f"{table_id} scrolls sideways at 390 px"
    context.close()


def test_keyboard_focus_shows_provenance(page, base_url) -> None:
    page.goto(f"{base_url}/softmax.html")
    charts_drawn(page)
    page.locator("#softmax-summary a.lab-anchor").focus()
    for _ in range(12):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.matches('a.num')"):
            break
    assert page.evaluate("document.activeElement.matches('a.num')"), "Tab never reached a number"
    pop = page.locator("#lab-pop")
    assert pop.is_visible()
    text = pop.inner_text()
    title = page.evaluate("document.activeElement.getAttribute('title')")
    assert "run softmax-" in text and text.split("\n")[0] == title.split("\n")[0]
    assert page.evaluate("document.activeElement.getAttribute('aria-describedby')") == "lab-pop"
    page.keyboard.press("Escape")
    assert not pop.is_visible()
    # Cells that explain themselves on hover (a refusal) are reachable the same way.
    refused = page.locator("#softmax-summary td span[title]:not([title=''])").first
    refused.focus()
    assert pop.is_visible() and pop.inner_text().strip()
    assert page.problems == []


def test_a_tap_shows_provenance_before_following_the_number(browser, base_url) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    pg = context.new_page()
    pg.goto(f"{base_url}/softmax.html")
    charts_drawn(pg)
    number = pg.locator("#softmax-losses a.num").first
    number.tap()
    pop = pg.locator("#lab-pop")
    pop.wait_for(state="visible")
    assert pg.url.endswith("/softmax.html") and "run softmax-" in pop.inner_text()
    assert "sources.html#run-" in (pop.locator("a.lab-pop-link").get_attribute("href", timeout=2000) or "")
    number.tap()  # a second tap follows the link
    pg.wait_for_url("**/sources.html#run-*")
    context.close()


def test_charts_mark_missing_values_and_keep_small_ones_readable(page, base_url) -> None:
    """No bar on a log axis; a peer without a time is marked with why (refused, failed check),
    not left blank; latency-bound cases stay readable beside large ones."""
    page.goto(f"{base_url}/softmax.html")
    charts_drawn(page)
    specs = page.eval_on_selector_all(".lab-chart", "els => els.map(e => JSON.parse(e.getAttribute('data-figure')))")
    assert specs
    for spec in specs:
        if spec["layout"].get("yaxis", {}).get("type") == "log":
            assert all(t["type"] != "bar" for t in spec["data"]), spec["layout"]["title"]
    key = page.locator("#softmax-fwd-speedup")
    marks = key.locator("text").all_text_contents()
    assert any(m.strip() in ("refused", "failed check", "error") for m in marks), marks[:20]
    # The latency-bound cases (a few GB/s beside thousands) are drawn on a log axis: every
    # point of the bandwidth chart lies inside the plot, none squashed onto the axis.
    bandwidth = next(s for s in specs if s["layout"]["title"]["text"].startswith("Forward, bf16, cold L2: achieved"))
    assert bandwidth["layout"]["yaxis"]["type"] == "log"
    plot = page.locator("#softmax-fwd-bw-cold .bglayer rect").first.bounding_box()
    points = [p.bounding_box() for p in page.locator("#softmax-fwd-bw-cold .scatterlayer .point").all()]
    assert plot and points and all(b and plot["y"] - 1 <= b["y"] <= plot["y"] + plot["height"] for b in points)


@pytest.mark.parametrize("name", ["softmax.html", "rmsnorm.html", "cross_entropy.html"])
def test_a_missing_marks_label_covers_no_marker(page, base_url, name) -> None:
    """The label over a missing value's cross ("refused", "error") is drawn clear of every
    marker: the data just above it and the other marks stacked in its category."""
    page.goto(f"{base_url}/{name}")
    charts_drawn(page)
    covered = page.evaluate(
        """() => {
          const out = [];
          for (const chart of document.querySelectorAll('.lab-chart')) {
            const labels = [...chart.querySelectorAll('.scatterlayer .textpoint text')]
              .filter(t => t.textContent.trim()).map(t => [t.textContent, t.getBoundingClientRect()]);
            const marks = [...chart.querySelectorAll('.scatterlayer .point')].map(p => p.getBoundingClientRect());
            for (const [text, b] of labels) for (const q of marks) {
              const w = Math.min(b.right, q.right) - Math.max(b.left, q.left);
              const h = Math.min(b.bottom, q.bottom) - Math.max(b.top, q.top);
              if (w > 0 && h > 0 && w * h > 0.25 * q.width * q.height) out.push(chart.id + ': ' + text);
            }
          }
          return out;
        }"""
    )
    assert covered == []
