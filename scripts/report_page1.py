"""Screenshot the first page of a study's report with headless Chromium (agentrepro.report.browser).

    python scripts/report_page1.py reports/frozenlake-cpu/report.html docs/images/report-page1.png

Renders the page at a desktop width and keeps its top (the title, the badges, the bottom line and the start of the
reviewer's summary): what a reviewer reads first. `--height` sets how much of the page is kept (default 1400 px).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from agentrepro.report.browser import Chromium


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="the report.html to show")
    parser.add_argument("png", type=Path, help="where to write the picture")
    parser.add_argument("--width", type=int, default=1200)
    parser.add_argument("--height", type=int, default=1400)
    args = parser.parse_args()
    with Chromium() as browser:
        page = browser.open(args.report)
        problems = page.console_errors() + [u for u in page.requests() if not u.startswith(("file:", "data:"))]
        if problems:
            raise SystemExit(f"{args.report}: the page is not self-contained: {'; '.join(problems)}")
        png = page.screenshot(width=args.width, height=args.height)
    args.png.parent.mkdir(parents=True, exist_ok=True)
    args.png.write_bytes(png)
    print(f"{args.png}: {len(png)} bytes, the top {args.height} px of {args.report} at {args.width} px wide")


if __name__ == "__main__":
    main()
