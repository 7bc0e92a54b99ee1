"""Review record: withdrawn runs, claims the data now contradict, and every change of a
claim's status as runs landed."""

from __future__ import annotations

from typing import Any

from publish.pages import SiteData


def context(data: SiteData, history: list[Any], contradicted: list[Any]) -> dict[str, Any]:
    by_id = {r.run_id: r for r in data.all_runs}
    return {
        "withdrawn": [(w, by_id[w.run_id]) for w in sorted(data.withdrawals, key=lambda w: (w.date, w.run_id))],
        "contradicted": contradicted,
        "history": list(reversed(history)),
    }
