"""The HTML page: sections in order, verdicts first, data escaped, figures embedded, nothing external."""

from __future__ import annotations

import re

import pytest
from report_synthetic import HOSTILE

from agentrepro.report import render

PASSED = {"status": "passed", "problems": [], "message": "all good"}


def visible(html: str) -> str:
    """The page's text without its tags (values are wrapped in <data> marks for the audit)."""
    return re.sub(r"<[^>]+>", "", html)


@pytest.fixture(scope="module")
def pages(analysis_template):
    return render.render_report(analysis_template, audit=PASSED, files={"analysis/s/runs.csv": "ab" * 32})


@pytest.fixture(scope="module")
def page(pages):
    html, _, figures = pages
    return html, figures


def test_sections_in_order_with_summary_then_equivalence_and_verdicts_first(page, analysis_template):
    """Every section of docs/design.md §8 is there, in order: the reviewer's summary, the equivalence claims, then the
    verdicts against the paper, before everything else."""
    html, _ = page
    positions = [html.index(f'<section id="{sid}">') for sid, _ in render.SECTIONS]
    assert positions == sorted(positions)
    assert [sid for sid, _ in render.SECTIONS[:3]] == ["summary", "equivalence", "verdicts"]
    assert (
        html.index('<div class="bottom-line"')
        < html.index('<table class="summary-table">')
        < html.index('<table class="equivalence">')
        < html.index('<table class="verdicts">')
        < html.index('<section id="claims">')
    )
    for _, title in render.sections(analysis_template):
        assert f"<h2>{title}</h2>" in html


def test_verdict_rows_in_percent(page, analysis_template):
    """Each verdict row shows the paper value, ours and Δ in percent, the verdict and its reason."""
    html, _ = page
    start = html.index('<table class="verdicts">')
    table = html[start : html.index("</table>", start)]
    for v in analysis_template["tables"]["verdicts"]:
        row = table[table.index(f"<td>{v['method']}</td>") :]
        row = row[: row.index("</tr>")]
        row = visible(row)
        assert f"{100 * v['paper']:.1f}%" in row and f"{100 * v['ours']:.1f}%" in row
        assert f"{abs(100 * v['delta']):.1f}\u00a0pp" in row
        assert v["verdict"].replace("_", " ") in row
    assert {v["verdict"] for v in analysis_template["tables"]["verdicts"]} == {
        "reproduced",
        "not_reproduced",
        "inconclusive",
    }


def test_hostile_text_is_escaped(page):
    """A task category '<script>alert(1)</script>' appears escaped, and the page holds no script element."""
    html, _ = page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script" not in html.lower()
    assert HOSTILE not in html


def test_every_figure_embedded_and_no_external_reference(page):
    """Each figure is a data: PNG in its own <figure>; no src/href leaves the page; a CSP forbids the rest."""
    html, figures = page
    assert {f.key for f in figures} == {
        "forest",
        "paired",
        "categories",
        "learning_curves",
        "training_curves",
        "diagnostics",
        "overhead",
        "convergence",
    }
    for f in figures:
        assert f'<figure id="fig-{f.key}"><img src="data:image/png;base64,' in html
    targets = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert targets and all(t.startswith(("data:image/png;base64,", "#", render.PROVENANCE_PAGE)) for t in targets)
    assert "default-src 'none'" in html
    assert not re.search(r"url\(|@import", html)


def test_appendix_has_commands_attempts_and_audit_and_links_every_hash(pages, analysis_template):
    """The appendix shows every command, the failed-then-retried attempt, the audit result and a summary of the hashes
    and the lock; every hash and the whole lock are on the provenance page it links, not in the printed report."""
    import html as markup
    import json

    html, provenance, _ = pages
    appendix = html[html.index('<section id="appendix">') :]
    prov = analysis_template["provenance"]
    for run in prov["runs"]:
        assert run["command"] in appendix
        for digest in run["outputs"].values():
            assert digest not in appendix and digest in provenance
    assert prov["lock_sha256"] in appendix and "ab" * 32 in provenance and "ab" * 32 not in appendix
    assert f'href="{render.PROVENANCE_PAGE}"' in appendix and "128 tasks in the task panel" in appendix
    lock = provenance[provenance.index('<pre class="lock">') + len('<pre class="lock">') : provenance.index("</pre>")]
    assert json.loads(markup.unescape(lock)) == prov["lock"]
    assert "CUDA out of memory at step 87" in appendix
    assert 'class="attempt-failed"' in appendix
    assert "<strong>passed</strong>: all good" in appendix


def test_audit_problems_are_shown(analysis_template):
    """Audit problems appear on the first screen badge and listed in the appendix."""
    audit = {"status": "problems", "problems": ["runs/x/OUTPUTS.sha256: changed <b>"], "message": "1 problem found"}
    html = render.render_html(render.build_context(analysis_template, figures=[], audit=audit, files={}))
    assert "audit: problems" in html[: html.index('<section id="verdicts">')]
    assert "runs/x/OUTPUTS.sha256: changed &lt;b&gt;" in html


def test_sections_without_data_say_so(analysis):
    """A study with no graph methods, timings or paper values gets explanations instead of empty figures."""
    for name in ("diagnostics", "overhead", "verdicts", "claims"):
        analysis["tables"][name] = []
    analysis["parity"] = []
    html, _, figures = render.render_report(analysis, audit=PASSED, files={})
    assert "No graph diagnostics were recorded" in html and "No timings were recorded" in html
    assert "No reference values were compared" in html and "No claims were declared" in html
    assert "No parity checks were run" in html
    assert {f.key for f in figures}.isdisjoint({"diagnostics", "overhead"})


def test_compact_json_round_trips(analysis_template):
    """The lock printed in the appendix is the lock (valid JSON, same content), one panel entry per line."""
    import json

    lock = analysis_template["provenance"]["lock"]
    text = render.compact_json(lock)
    assert json.loads(text) == lock
    assert len(text.splitlines()) < len(json.dumps(lock, indent=2).splitlines())


def test_learning_curve_table_and_histograms(page, analysis_template):
    """Every checkpoint's mean ± std is tabulated, and the distance histogram is printed in key order."""
    html, _ = page
    section = visible(html[html.index('<section id="learning">') : html.index('<section id="diagnostics">')])
    for r in analysis_template["tables"]["methods"]:
        assert f"{100 * r['mean']:.1f}% ± {100 * r['std']:.1f}%" in section
    assert (
        render.histogram_text({"10": 1, "2": 5, "unreachable": 3}).replace("\u00a0", " ")
        == "2: 5 · 10: 1 · unreachable: 3"
    )
    assert "0:\u00a040 · 1:\u00a0120 · 2:\u00a090 · 3:\u00a030" in html


def test_caveats_follow_claims_before_methods(page):
    """The notes sit right after the claims, so the first screen holds verdicts, claims and caveats."""
    html, _ = page
    assert html.index('<section id="claims">') < html.index("<h3>Caveats</h3>") < html.index('<section id="methods">')


def test_minimal_analysis_renders():
    """An analysis with every table empty, no lock and no title still renders every section, with no figure."""
    from agentrepro.report.load import COLUMNS, validate

    minimal = validate(
        {
            "study": "s",
            "title": None,
            "settings": {"tolerance_pp": 3, "alpha": 0.05},
            "notes": [],
            "parity": [],
            "tables": {name: [] for name in COLUMNS},
            "provenance": {"lock": None, "runs": []},
        },
        "a.json",
    )
    html, _, figures = render.render_report(
        minimal, audit={"status": "error", "problems": [], "message": "the audit could not run: x"}, files={}
    )
    assert figures == []
    for sid, _ in render.SECTIONS:
        assert f'<section id="{sid}">' in html
    assert "No lock" in html and "the audit could not run: x" in html and "final step —" in html


def test_paper_std_and_unchecked_source_are_shown(analysis):
    """A paper value given as mean ± std shows its std; an unchecked source is flagged next to the value."""
    v = analysis["tables"]["verdicts"][0]
    v.update(paper_std=0.021, source="Table 1", checked=False)
    html = render.render_html(render.build_context(analysis, figures=[], audit=PASSED, files={}))
    row = html[html.index(f"<td>{v['method']}</td>") :]
    row = visible(row[: row.index("</tr>")])
    assert f"{100 * v['paper']:.1f}% ± 2.1%" in row and "Table 1" in row and "not checked against its source" in row


def test_plain_tables_follow_the_contract(analysis):
    """Overhead and convergence show the contract's required columns, formatted by kind; null says what it means."""
    from agentrepro.analysis import contract

    analysis["tables"]["convergence"][0].update(steps_to_threshold=None, auc=0.4567, wall_s=4000.0)
    html = render.render_html(render.build_context(analysis, figures=[], audit=PASSED, files={}))
    for name in ("overhead", "convergence"):
        section = html[html.index(f'<section id="{name}">') :]
        head = section[section.index("<thead>") : section.index("</thead>")]
        headers = [re.sub(r" \((ms|s|min|h)\)$", "", h) for h in re.findall(r"<th>(.*?)</th>", head)]
        assert headers == [c.header for c in contract.BY_NAME[name].required]
    section = html[html.index('<section id="convergence">') :]
    assert "<th>Wall time (min)</th>" in section  # one unit for the whole column
    body = section[section.index("<tbody>") :]
    first = visible(body[: body.index("</tr>")])
    assert "not reached" in first and "45.7%" in first and "66.7\u00a0min" in first
    assert "35.0\u00a0min" in visible(body[body.index("</tr>") + 5 :])  # 2100 s, in the column's unit


def test_equivalence_claim_rows_shown_with_their_verdicts(page, analysis_template):
    """Each equivalence claim shows its task-clustered row first, then one row per seed, each with verdict and statement;
    the ordering claims stay in the Claims section."""
    html, _ = page
    section = html[html.index('<section id="equivalence">') : html.index('<section id="verdicts">')]
    rows = [c for c in analysis_template["tables"]["claims"] if c.get("kind") == "equivalence"]
    assert [c["seed"] for c in rows][-1] == "all" and len(rows) == 4
    assert section.index("all (task-clustered)") < section.index("<td>0</td>")
    for c in rows:
        assert c["statement"][:60] in visible(section).replace("&gt;", ">")
    assert section.count('<tr class="') == len(rows)
    claims = html[html.index('<section id="claims">') : html.index('<section id="methods">')]
    assert "graphgpo &gt; gigpo" in claims and "±" not in claims.split("<table>")[1]


def test_appendix_shows_each_methods_pinned_image_and_what_its_runs_ran_in(analysis):
    """The images table names the lock's pin per method and the runtime, version and digest its attempts recorded;
    a method whose runs recorded nothing shows no resolved digest."""
    pin = {"runtime": "podman", "ref": "ghcr.io/x/trainer:1", "digest": "sha256:" + "a" * 64}
    analysis["provenance"]["lock"]["manifest"].update(backend={"name": "command"}, image=pin)
    runs = analysis["provenance"]["runs"]
    recorded = runs[0]["method"]
    for r in runs:
        if r["method"] == recorded:
            r["attempts"][-1]["containers"] = [
                {
                    "label": "train",
                    "runtime": "podman",
                    "version": "4.3.1",
                    "requested": pin,
                    "resolved": {"image_id": "sha256:" + "9" * 64, "digests": [pin["digest"]]},
                }
            ]
    html = render.render_html(render.build_context(analysis, figures=[], audit=PASSED, files={}))
    table = html[html.index('id="images"') : html.index('id="runs"')]
    rows = {
        cells[0]: cells
        for cells in ([visible(c) for c in re.findall(r"<td>(.*?)</td>", row)] for row in table.split("<tr>")[2:])
    }
    seeds = sum(1 for r in runs if r["method"] == recorded)
    assert rows[recorded] == [
        recorded,
        f"ghcr.io/x/trainer:1 @ {pin['digest']}",
        "podman 4.3.1",
        pin["digest"],
        str(seeds),
        f"{seeds} of {seeds}",
    ]
    other = next(m for m in rows if m != recorded)
    assert rows[other][2:5] == ["—", "—", "0"]
