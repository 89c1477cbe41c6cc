"""What a printed report must show whole, read back with pdftotext (used here and by the default-study test)."""

from __future__ import annotations

import re
import subprocess

from helpers import require_executable

from agentrepro.report import format as fmt
from agentrepro.report.render import final_step


def pdf_text(path, *options: str) -> str:
    """pdftotext's text of `path` with no-break spaces as plain spaces (pages end with a form feed)."""
    exe = require_executable("pdftotext", "pdftotext")
    out = subprocess.run([exe, *options, str(path), "-"], capture_output=True, text=True, check=True).stdout
    return out.replace(fmt.NBSP, " ")


def broken_values(pdf, analysis: dict) -> list[str]:
    """What is not whole in the PDF: the title not on one line, or a row of the verdict or method table whose
    method name, values and intervals are not together on one line (pdftotext -layout). Empty: all whole."""
    lines = pdf_text(pdf, "-layout").splitlines()
    problems = [] if any((analysis.get("title") or analysis["study"]) in line for line in lines) else ["title"]
    step = final_step(analysis)
    wilson = {r["method"]: r for r in analysis["tables"]["methods"] if r["step"] == step}

    def row(method: str, values: list[str]) -> None:
        squeeze = "".join  # pdftotext's layout may drop or widen spaces inside a cell ("1 / 4" → "1/4")
        name = re.compile(rf"(?<!\w){re.escape(method)}(?!\w)")
        if not any(name.search(line) and all(squeeze(v.split()) in squeeze(line.split()) for v in values) for line in lines):
            problems.append(f"{method}: {values}")

    for v in analysis["tables"]["verdicts"]:
        w = wilson.get(v["method"])
        ours = [fmt.ci(w["wilson_lo"], w["wilson_hi"])] if w else []
        row(v["method"], [fmt.pct(v["paper"]), fmt.pct(v["ours"]), *ours, fmt.pp(v["delta"]),
                          fmt.ci(v["ci90_lo"], v["ci90_hi"]), fmt.ci(v["ci95_lo"], v["ci95_hi"])])
    for r in wilson.values():
        row(r["method"], [f"{fmt.pct(r['mean'])} ± {fmt.pct(r['std'])}", f"{fmt.number(r['pooled_successes'])} / {fmt.number(r['pooled_n'])}",
                          fmt.pct(r["pooled_rate"]), fmt.ci(r["wilson_lo"], r["wilson_hi"])])
    return problems
