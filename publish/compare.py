"""Comparing two runs case by case, with a significance test over the raw samples.

For every case and variant both runs measured, the change of the median is tested with a
two-sided Mann-Whitney U test (no assumption about the samples' distribution).  A change is
flagged when it is both significant (p < ``alpha``) and larger than ``threshold``; a slower
median is a regression."""

from __future__ import annotations

from dataclasses import dataclass

from scipy.stats import mannwhitneyu

from publish.runs import Run
from publish.stats import Summary, summarize


@dataclass(frozen=True)
class Change:
    case_id: str
    variant: str
    a: Summary
    b: Summary
    p: float
    verdict: str  # "regression", "improvement" or "unchanged"

    @property
    def change(self) -> float:
        return self.b.median / self.a.median - 1


def compare_runs(run_a: Run, run_b: Run, *, threshold: float = 0.05, alpha: float = 0.01) -> list[Change]:
    cases_a = {c["id"]: c for c in run_a.doc["cases"]}
    out = []
    for case_b in run_b.doc["cases"]:
        case_a = cases_a.get(case_b["id"])
        if case_a is None:
            continue
        for name, vb in case_b["variants"].items():
            va = case_a["variants"].get(name)
            if va is None or not va["samples_us"] or not vb["samples_us"]:
                continue
            a, b = summarize(va["samples_us"]), summarize(vb["samples_us"])
            p = float(mannwhitneyu(va["samples_us"], vb["samples_us"], alternative="two-sided").pvalue)
            change = b.median / a.median - 1
            verdict = "unchanged"
            if p < alpha and abs(change) > threshold:
                verdict = "regression" if change > 0 else "improvement"
            out.append(Change(case_b["id"], name, a, b, p, verdict))
    return out


def report(run_a: Run, run_b: Run, changes: list[Change]) -> str:
    """A plain-text report: flagged changes first, then a count of the rest."""
    lines = [f"A: {run_a.run_id} ({run_a.short_commit})", f"B: {run_b.run_id} ({run_b.short_commit})", ""]
    flagged = sorted((c for c in changes if c.verdict != "unchanged"), key=lambda c: -abs(c.change))
    header = f"{'case':<34} {'variant':<22} {'A µs':>10} {'B µs':>10} {'change':>8} {'p':>9}  verdict"
    lines.append(header)
    for c in flagged:
        lines.append(
            f"{c.case_id:<34} {c.variant:<22} {c.a.median:>10.4g} {c.b.median:>10.4g} "
            f"{100 * c.change:>+7.1f}% {c.p:>9.2g}  {c.verdict.upper()}"
        )
    n_reg = sum(c.verdict == "regression" for c in changes)
    n_imp = sum(c.verdict == "improvement" for c in changes)
    lines += [
        "",
        f"{len(changes)} case/variant pairs compared: {n_reg} regressions, {n_imp} improvements, "
        f"{len(changes) - n_reg - n_imp} unchanged (p >= 0.01 or change within 5%)",
    ]
    return "\n".join(lines)
