"""Tables as data: columns and rows of :class:`~publish.numbers.Num` cells (or text).

A table is rendered to HTML by ``templates/partials/table.html.j2``; because it stays data
until then, the same rows can be offered for download exactly as shown."""

from __future__ import annotations

from dataclasses import dataclass, field

from publish.numbers import Num


@dataclass(frozen=True)
class Text:
    """A non-numeric cell, e.g. "refused", with the reason on hover."""

    text: str
    title: str = ""
    css: str = ""


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
