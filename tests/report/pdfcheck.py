"""What a printed report must show whole, read back with pdftotext (used here and by the default-study test)."""

from __future__ import annotations

import re
import subprocess

from helpers import require_executable

from agentrepro.analysis import format as fmt
from agentrepro.report.figures import interval
from agentrepro.report.render import final_step


def pdf_text(path, *options: str) -> str:
    """pdftotext's text of `path` with no-break spaces as plain spaces (pages end with a form feed)."""
    exe = require_executable("pdftotext", "pdftotext")
    out = subprocess.run([exe, *options, str(path), "-"], capture_output=True, text=True, check=True).stdout
    return out.replace(fmt.NBSP, " ")


def broken_values(pdf, analysis: dict) -> list[str]:
    """What is not whole in the PDF: the title not whole (on one line, or wrapped between words onto the next lines),
    or a row of the verdict or method table whose values and intervals are not each whole on one line of that row
    (pdftotext -layout; a cell may wrap below its first line, a value may not). Empty: all whole."""
    lines = pdf_text(pdf, "-layout").splitlines()
    title = " ".join((analysis.get("title") or analysis["study"]).split())
    runs = (" ".join(" ".join(lines[i : i + n]).split()) for n in (1, 2, 3) for i in range(len(lines)))
    problems = [] if any(title in text for text in runs) else ["title"]
    step = final_step(analysis)
    wilson = {r["method"]: r for r in analysis["tables"]["methods"] if r["step"] == step}

    squeeze = "".join  # pdftotext's layout may drop or widen spaces inside a cell ("1 / 4" → "1/4")

    def blocks(method: str):
        """Each table row that starts with `method`: its line and the lines a wrapped cell continues on (up to the
        next blank line), so a value whose cell wrapped below its row still counts when it is whole on one line."""
        name = re.compile(rf"^\s*{re.escape(method)}(?!\w)")
        for i, line in enumerate(lines):
            if name.search(line):
                end = next((j for j in range(i + 1, len(lines)) if not lines[j].strip()), len(lines))
                yield [squeeze(text.split()) for text in lines[i:end]]

    def row(method: str, values: list[str]) -> None:
        whole = lambda block: all(any(squeeze(v.split()) in text for text in block) for v in values)  # noqa: E731
        if not any(whole(block) for block in blocks(method)):
            problems.append(f"{method}: {values}")

    for v in analysis["tables"]["verdicts"]:
        w = wilson.get(v["method"])
        ours = [fmt.ci(*interval(w))] if w else []
        row(
            v["method"],
            [
                fmt.pct(v["paper"]),
                fmt.pct(v["ours"]),
                *ours,
                fmt.pp(v["delta"]),
                fmt.ci(v["ci90_lo"], v["ci90_hi"]),
                fmt.ci(v["ci95_lo"], v["ci95_hi"]),
            ],
        )
    for r in wilson.values():
        row(
            r["method"],
            [
                f"{fmt.pct(r['mean'])} ± {fmt.pct(r['std'])}",
                f"{fmt.number(r['pooled_successes'])} / {fmt.number(r['pooled_n'])}",
                fmt.pct(r["pooled_rate"]),
                fmt.ci(*interval(r)),
                fmt.ci(r["wilson_lo"], r["wilson_hi"]),
            ],
        )
    return problems
