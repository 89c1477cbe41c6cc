"""The printed page of the report: paper size and running header, as CSS `@page` that both PDF engines read.

The static print rules (margins, fonts, what may not break across pages) live in templates/report.css;
this module writes the part that depends on the study: the paper size and the running header, which names
the study and the lock it was analysed under, so that a loose printed page still says where it came from.
Chromium (131 and later) and WeasyPrint both draw `@page` margin boxes, so the header and the page numbers
are the same in either PDF, and a reviewer's browser prints them too.
"""

from __future__ import annotations

PAPERS = {"a4": "A4", "letter": "letter"}  # --paper value: CSS page size keyword


def css_string(text: str) -> str:
    """`text` as a quoted CSS string; everything but letters, digits and a few marks is a hex escape.

    Safe inside a <style> element too: no quote, backslash, '<' or newline survives unescaped. Each escape is
    six hex digits and a space, which CSS consumes as the escape's end (so a real space after it stays).
    """
    keep = set(" ._-:,()")
    return '"' + "".join(c if c.isascii() and (c.isalnum() or c in keep) else f"\\{ord(c):06x} " for c in text) + '"'


def header_text(study: str, lock_sha256: str | None) -> str:
    """The running header: 'agentrepro · study S · lock 0123456789abcdef' (the first 16 hex digits)."""
    lock = f"lock {lock_sha256[:16]}" if lock_sha256 else "no lock"
    return f"agentrepro · study {study} · {lock}"


def page_css(study: str, lock_sha256: str | None, paper: str = "a4") -> str:
    """The `@page` rule of one report: paper size and running header text (styled in report.css)."""
    if paper not in PAPERS:
        raise ValueError(f"unknown paper {paper!r}; expected one of {', '.join(PAPERS)}")
    return f"@page {{ size: {PAPERS[paper]}; @top-left {{ content: {css_string(header_text(study, lock_sha256))}; }} }}"
