"""The PDF: the report's own HTML page printed by an HTML engine, so the PDF and the page carry the same content.

Two engines read the same page and its print stylesheet (report.css, `@page` from report/paged.py):
headless Chromium (what a reviewer's browser shows) and WeasyPrint (pure Python over Pango: no browser,
so it also works on cluster login nodes and fresh machines). A page that makes a network request while
printing, or that logs errors in Chromium, is refused: the PDF would then not be the self-contained page.

`choose_engine`: `chromium` (missing → Failure saying how to install it), `weasyprint` (its system
libraries missing → Failure naming them), and `auto`: Chromium when one is found or was named
(`--chromium`, $AGENTREPRO_CHROMIUM: then a missing one is an error), otherwise WeasyPrint. The chosen
`Engine` knows its version, which the report records in its appendix and the CLI says on stderr.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path

from agentrepro.errors import Failure
from agentrepro.fileio import atomic_write_bytes
from agentrepro.report.browser import Chromium, find_chromium

ENGINES = ("auto", "chromium", "weasyprint")
WEASYPRINT_LIBS = "libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0"  # Debian names; also in scripts/system-deps.sh


@dataclass(frozen=True)
class Engine:
    name: str  # "chromium" or "weasyprint"
    version: str  # as recorded: "Chromium 156.0.8078.114", "WeasyPrint 70.0"
    executable: str | None = None  # Chromium's path


def chromium_version(executable: str) -> str:
    """'Chromium 156.0.8078.114' (or 'Google Chrome …'): the product and version that `executable --version` prints."""
    try:
        proc = subprocess.run([executable, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Failure(f"could not ask {executable} for its version: {exc}") from None
    match = re.search(r"^\s*([A-Za-z][^\n]*?\d+(?:\.\d+)+)", proc.stdout, re.MULTILINE)
    if proc.returncode != 0 or match is None:
        raise Failure(
            f"{executable} --version exited {proc.returncode} without a version: {(proc.stdout + proc.stderr)[-300:]!r}"
        )
    return match.group(1)


def weasyprint_engine() -> Engine:
    """WeasyPrint with its version; Failure naming the system libraries when it cannot load them."""
    try:
        import weasyprint  # optional: WeasyPrint needs Pango's system libraries
    except ImportError as exc:
        raise Failure(
            f"WeasyPrint is not installed ({exc}); `pip install weasyprint` (a dependency of agentrepro)"
        ) from None
    except OSError as exc:  # Pango or HarfBuzz missing: WeasyPrint loads them with cffi on import
        raise Failure(
            f"WeasyPrint cannot load its system libraries ({exc}); install {WEASYPRINT_LIBS} "
            "(`make system-deps`, or apt-get as root)"
        ) from None
    return Engine("weasyprint", f"WeasyPrint {weasyprint.__version__}")


def choose_engine(engine: str = "auto", chromium: str | None = None) -> Engine:
    """The engine to print with. `auto` takes WeasyPrint only when no Chromium was named or found."""
    if engine not in ENGINES:
        raise ValueError(f"unknown PDF engine {engine!r}; expected one of {', '.join(ENGINES)}")
    if engine == "weasyprint":
        return weasyprint_engine()
    if engine == "chromium" or chromium or os.environ.get("AGENTREPRO_CHROMIUM"):
        path = find_chromium(chromium)
    else:
        try:
            path = find_chromium(None)
        except Failure:
            return weasyprint_engine()
    return Engine("chromium", chromium_version(path), path)


def html_to_pdf(html_path: str | os.PathLike, pdf_path: str | os.PathLike, engine: Engine | None = None) -> Path:
    """Print `html_path` to `pdf_path` (written atomically) with `engine` (default: `choose_engine()`)."""
    engine = engine or choose_engine()
    pdf = (_print_chromium if engine.name == "chromium" else _print_weasyprint)(Path(html_path), engine)
    if not pdf.startswith(b"%PDF-"):
        raise Failure(f"{engine.version} returned something that is not a PDF while printing {html_path}")
    return atomic_write_bytes(pdf_path, pdf)


def _refuse(html_path: Path, problems: list[str]) -> None:
    if problems:
        raise Failure(f"{html_path}: the page is not self-contained: {'; '.join(problems)[:500]}")


def _print_chromium(html_path: Path, engine: Engine) -> bytes:
    with Chromium(engine.executable) as browser:
        page = browser.open(html_path)
        _refuse(html_path, page.console_errors() + [u for u in page.requests() if not u.startswith(("file:", "data:"))])
        return page.print_pdf()


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _print_weasyprint(html_path: Path, engine: Engine) -> bytes:
    """WeasyPrint may read data: URIs only (the page embeds everything); any other URL is refused, not fetched.

    WeasyPrint logs an error for a resource it could not use (a Failure here, like Chromium's console errors)
    and a warning for HTML or CSS it ignores (a RuntimeWarning, shown on stderr: the PDF may differ from the page).
    """
    import weasyprint  # optional: WeasyPrint needs Pango's system libraries
    from weasyprint.urls import URLFetcher  # optional: as above

    refused: list[str] = []

    class DataOnly(URLFetcher):
        def fetch(self, url, headers=None):
            if not url.startswith("data:"):
                refused.append(url)
                raise ValueError(f"refused {url}: the report must be self-contained")
            return super().fetch(url, headers)

    logger, notes = logging.getLogger("weasyprint"), _Collect()
    logger.addHandler(notes)
    try:
        pdf = weasyprint.HTML(filename=html_path, url_fetcher=DataOnly()).write_pdf()
    finally:
        logger.removeHandler(notes)
    _refuse(html_path, refused + [r.getMessage() for r in notes.records if r.levelno >= logging.ERROR])
    for r in notes.records:
        warnings.warn(f"{engine.version}: {r.getMessage()}", RuntimeWarning, stacklevel=2)
    return pdf
