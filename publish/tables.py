"""Tables as data: columns and rows of :class:`~publish.numbers.Num` cells (or text).

A table is rendered to HTML by ``templates/partials/table.html.j2``; because it stays data
until then, the same rows can be offered for download exactly as shown."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html import unescape

from markupsafe import Markup

from publish.numbers import Num


@dataclass(frozen=True)
class Text:
    """A non-numeric cell, e.g. "refused", with the reason on hover.  ``html``, when set, is
    what the page shows (prose with linked numbers); ``text`` is its plain form for exports."""

    text: str
    title: str = ""
    css: str = ""
    html: Markup | None = None

    @classmethod
    def rich(cls, html: Markup) -> Text:
        plain = re.sub(r"<[^>]+>", "", str(html))
        return cls(" ".join(unescape(plain).split()), html=html)


Cell = Num | Text | str | None


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    help: str = ""
    numeric: bool = True


@dataclass
class Table:
    id: str  # stable anchor: tables keep their id across builds
    title: str
    columns: list[Column]
    rows: list[dict[str, Cell]] = field(default_factory=list)
    note: str = ""

    @property
    def run_ids(self) -> list[str]:
        ids: list[str] = []
        for row in self.rows:
            for cell in row.values():
                if isinstance(cell, Num):
                    for s in cell.sources:
                        if s.run_id not in ids:
                            ids.append(s.run_id)
        return ids
