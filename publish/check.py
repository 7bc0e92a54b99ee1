"""Every measured number on a page must come from a data helper.

A measured number is one with a unit of time, bandwidth, rate, frequency, percentage or
speedup.  After rendering, the numbers that ``Num`` produced are removed (they are the
``num``-classed elements); any unit-bearing number left in the page was typed into a
template or into page code by hand, and the build stops with the page and the text.
"""

from __future__ import annotations

import re

NUM_ELEMENT = re.compile(r'<(a|span) class="num[^"]*"[^>]*>.*?</\1>', re.S)
CODE = re.compile(r"<code>.*?</code>|`[^`\n]+`", re.S)  # commands and identifiers, shown as written
TAG = re.compile(r"<[^>]+>")
LINK_TARGET = re.compile(r"\]\([^)]*\)")
MEASURED = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?\s?(?:µs|us\b|ms\b|GB/s|TB/s|TFLOP/s|MHz|%|×(?!\d)|x\b(?!\d))")
# Definitions, not measurements: the confidence level of every interval, the break-even
# speedup, and the two agreement levels of the stability page appear in prose and headers
# that explain how to read the numbers.
DEFINITIONS = frozenset({"95%", "1.00×", "5%", "10%"})


def stray_numbers(markdown: str) -> list[str]:
    """The unit-bearing numbers in ``markdown`` that no data helper produced, in context."""
    text = CODE.sub(" ", NUM_ELEMENT.sub(" ", markdown))
    text = LINK_TARGET.sub("]", TAG.sub(" ", text))
    found = []
    for m in MEASURED.finditer(text):
        if m.group(0).replace(" ", "") in DEFINITIONS:
            continue
        start, end = max(0, m.start() - 40), min(len(text), m.end() + 40)
        found.append(" ".join(text[start:end].split()))
    return found
