"""Text from a run file or ``data/withdrawn.yaml`` is data, never markup.

The pages are Markdown rendered after Jinja, so HTML escaping alone is not enough: a GPU
named ``H200 [notes](javascript:alert(1))`` would become a live link once Markdown runs.
:func:`data_text` escapes for both: HTML's special characters become entities, and so does
every character Markdown (with this site's extensions: attribute lists, tables, admonitions)
could read as syntax.  An entity is shown by the browser as the character itself and is
never syntax to Markdown, so the text reads exactly as stored, inside a paragraph, a table
cell, a heading, an attribute or a raw HTML block alike.  Line breaks become references
too: data never starts a line of its own (a list item, a heading, a block quote).
"""

from __future__ import annotations

import re
from typing import Any

from markupsafe import Markup

# One pass, character by character, to numeric character references: HTML's own specials
# (& < > " ') and every character Markdown could read as syntax: \ escapes, ` code,
# * emphasis, [ ] links and images, { } attribute lists, | table cells, # headings and
# attribute ids, ~ ^ the strike and insert extensions should one be enabled.  Line breaks
# too: a line break in Markdown can end a table row or start a list, a heading or a code
# block; as "&#10;" it is still a line break inside <pre> and in a tooltip.
_ENTITIES = {ord(c): f"&#{ord(c)};" for c in "\"'\\`*[]{}|#~^\n\r"} | {
    ord("&"): "&amp;",
    ord("<"): "&lt;",
    ord(">"): "&gt;",
}
# An underscore between two letters or digits can neither open nor close emphasis (it is
# part of a word, as in run ids); any other underscore is escaped.
_LOOSE_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
_OTHER_BREAKS = re.compile(r"[\u2028\u2029\x0b\x0c\x85]")
# A character that starts a block when it opens a line (lists, quotes, rules, setext).
_LINE_START = re.compile(r"^(\s*)([-+:=])")
# Terminal control: colour and cursor sequences (ESC [ ... letter; CUTLASS's DSL colours its
# errors) and the other C0 controls, which a page would show as stray "[91m" or nothing.
_TERMINAL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]?|[\x00-\x08\x0e-\x1f\x7f]")


def readable(text: str) -> str:
    """``text`` without terminal control sequences and control characters (tabs and line
    breaks stay)."""
    return _TERMINAL.sub("", text)


def data_text(value: Any) -> Markup:
    """``value`` as inert text for a Markdown page (or any HTML context)."""
    if hasattr(value, "__html__"):  # already markup produced by the site's own helpers
        return Markup(value.__html__())
    text = _OTHER_BREAKS.sub(" ", readable(str(value)))
    # (Each reference starts with '&' and ends with ';', both non-word characters, so an
    # underscore keeps the kind of neighbours it had.)
    text = _LOOSE_UNDERSCORE.sub("&#95;", text.translate(_ENTITIES))
    text = _LINE_START.sub(lambda m: m.group(1) + f"&#{ord(m.group(2))};", text)
    return Markup(text)


def finalize(value: Any) -> Any:
    """Jinja's ``finalize``: every ``{{ ... }}`` of a page goes through :func:`data_text`
    unless it is already markup (a number with its provenance, a claim)."""
    if value is None or hasattr(value, "__html__"):
        return value
    if isinstance(value, (bool, int, float)):
        return value
    return data_text(value)


def plain_label(value: Any) -> str:
    """Text for a place that interprets a little HTML of its own (Plotly hover labels,
    legend and axis names): the characters ``<`` ``>`` ``&`` become entities and Plotly's
    ``%{...}`` template markers are broken, so a label can hold no tag, link or template."""
    text = re.sub(r"[\r\n\u2028\u2029\x0b\x0c\x85]+", " ", readable(str(value)))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("%{", "%\u200b{")


# Keys of a Plotly figure whose strings are the site's own templates (they hold the <br> and
# %{...} markers Plotly is meant to read); every other string is text.
_PLOTLY_TEMPLATES = frozenset({"hovertemplate", "texttemplate"})


def plotly_safe(figure: Any, key: str = "") -> Any:
    """A Plotly figure whose text (trace names, categories, hover and tick text, titles)
    Plotly shows as written: it renders a little HTML (links, bold, line breaks) in all of
    them, and a category or variant name read from a run file must not become a link."""
    if isinstance(figure, dict):
        return {k: plotly_safe(v, k) for k, v in figure.items()}
    if isinstance(figure, list):
        return [plotly_safe(v, key) for v in figure]
    if isinstance(figure, str) and key not in _PLOTLY_TEMPLATES:
        return plain_label(figure)
    return figure
