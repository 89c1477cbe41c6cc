"""The study report (docs/design.md §8): one self-contained HTML page and a PDF with the same sections.

Everything is rendered from `analysis/<study>/analysis.json` (docs/internals.md, "Analysis → report"):
`load` validates it, `figures` draws (matplotlib, Agg), `render` fills the jinja2 template, `paged` sets
the printed page (paper, running header), `pdf` prints the page with headless Chromium (`browser`) or
WeasyPrint, and `write` writes and seals reports/<study>/ (`agentrepro report STUDY`, cli/report.py).
"""
