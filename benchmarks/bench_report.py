"""Benchmark: `agentrepro report` phases on a GraphGPO-sized study and on one with 10x the training rows.

    .venv/bin/python benchmarks/bench_report.py [--repeats 3]

Study (tests/report/report_synthetic.py): 4 methods x 3 seeds x 4 checkpoints x 128 tasks, training and
graph-diagnostic rows every 5 steps of 150 (1x) or every step of 1,500 (10x, "long training"). Phases,
median over repeats (time.perf_counter): validate analysis.json, draw and encode the figures, fill the
HTML template (no figures: the baseline), print the PDF with each engine found (headless Chromium,
WeasyPrint), with its page count (pdfinfo). Ratios are against the template time, against the 1x size
and between the engines, all measured in the same run; absolute seconds depend on the machine (and on how
busy its cores are). `--pages-png DIR` also writes page 1 of each engine's 1x PDF as DIR/<engine>-page1.png
(pdftoppm, 60 dpi). Record results in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "report"))

from report_synthetic import build_analysis

from agentrepro.report import render
from agentrepro.report.load import validate

AUDIT = {"status": "passed", "problems": [], "message": "benchmark"}


def widen_training(analysis: dict, factor: int) -> dict:
    """Repeat every training and diagnostics row `factor` times at new steps (a longer training run)."""
    for name in ("training", "diagnostics"):
        rows = analysis["tables"][name]
        analysis["tables"][name] = [dict(r, step=r["step"] * factor + k) for r in rows for k in range(factor)]
    return analysis


def timed(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def pages(pdf: Path) -> int:
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    return int(re.search(r"^Pages:\s+(\d+)", info, re.M).group(1))


def engines() -> list:
    from agentrepro.errors import Failure
    from agentrepro.report.pdf import choose_engine

    found = []
    for name in ("chromium", "weasyprint"):
        try:
            found.append(choose_engine(name))
        except Failure as exc:
            print(f"{name}: not measured ({exc})", file=sys.stderr)
    return found


def measure(analysis: dict, repeats: int, printers: list, png_dir: Path | None) -> dict:
    text = json.dumps(analysis)
    res = {}
    res["validate"], _ = timed(lambda: validate(json.loads(text), "analysis.json"), repeats)
    res["figures"], figs = timed(lambda: render.build_figures(analysis), repeats)
    ctx = lambda: render.build_context(analysis, figures=[], audit=AUDIT, files={})  # noqa: E731
    res["template"], _ = timed(lambda: render.render_html(ctx()), repeats)
    html = render.render_html(render.build_context(analysis, figures=figs, audit=AUDIT, files={}))
    res["html_bytes"] = len(html.encode())
    from agentrepro.report.pdf import html_to_pdf

    with tempfile.TemporaryDirectory() as d:
        page = Path(d) / "r.html"
        page.write_text(html, encoding="utf-8")
        for engine in printers:
            pdf = Path(d) / f"{engine.name}.pdf"
            res[f"pdf {engine.name}"], _ = timed(lambda: html_to_pdf(page, pdf, engine), repeats)  # noqa: B023
            res[f"{engine.name} pages"], res[f"{engine.name} MB"] = pages(pdf), pdf.stat().st_size / 1e6
            if png_dir:
                png_dir.mkdir(parents=True, exist_ok=True)
                subprocess.run(
                    [
                        "pdftoppm",
                        "-png",
                        "-r",
                        "60",
                        "-f",
                        "1",
                        "-l",
                        "1",
                        "-singlefile",
                        str(pdf),
                        str(png_dir / f"{engine.name}-page1"),
                    ],
                    check=True,
                )
    return res


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-pdf", action="store_true")
    parser.add_argument("--pages-png", type=Path, default=None, help="write page 1 of each engine's 1x PDF here")
    args = parser.parse_args()
    printers = [] if args.no_pdf else engines()
    base = build_analysis()
    sizes = {"1x": base, "10x": widen_training(json.loads(json.dumps(base)), 10)}
    results = {
        name: measure(a, args.repeats, printers, args.pages_png if name == "1x" else None) for name, a in sizes.items()
    }
    phases = ["validate", "figures", "template"] + [f"pdf {e.name}" for e in printers]
    print(f"{'phase':16s} " + " ".join(f"{n + ' s':>10s} {n + ' /tmpl':>10s}" for n in sizes) + f" {'10x/1x':>8s}")
    for ph in phases:
        cells = " ".join(f"{results[n][ph]:10.3f} {results[n][ph] / results[n]['template']:10.1f}" for n in sizes)
        print(f"{ph:16s} {cells} {results['10x'][ph] / results['1x'][ph]:8.2f}")
    for n in sizes:
        print(
            f"{n}: training rows {len(sizes[n]['tables']['training'])}, html {results[n]['html_bytes'] / 1e6:.2f} MB"
            + "".join(
                f", {e.version}: {results[n][e.name + ' pages']} pages, {results[n][e.name + ' MB']:.2f} MB"
                for e in printers
            )
        )
    if len(printers) == 2:
        for n in sizes:
            print(
                f"{n}: WeasyPrint / Chromium print time {results[n]['pdf weasyprint'] / results[n]['pdf chromium']:.2f}"
            )


if __name__ == "__main__":
    main()
