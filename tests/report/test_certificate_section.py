"""The report's "Parity certificate" section (entries from agentrepro.analysis.parity)."""

from __future__ import annotations


def test_report_section_shows_verdicts_tolerance_and_missing_rows(analysis):
    """The report's "Parity certificate" section: one row per entry with its verdict, the mode implemented and the
    largest differences; a not_run entry shows no number; without entries it says nothing is certified."""
    from agentrepro.report import render

    passed = {"status": "passed", "problems": [], "message": "ok"}
    entries = [
        {
            "method": "graphgpo",
            "seed": 0,
            "step": 1,
            "status": "fail",
            "detail": "implements episode statistics over trajectories",
            "tolerance": 1e-4,
            "declared": "rows",
            "implements": "trajectories",
            "max_abs_difference": {"rows": 0.4321, "trajectories": 2e-7},
        },
        {
            "method": "gigpo",
            "seed": 0,
            "step": 50,
            "status": "not_run",
            "detail": "the run wrote no step rows for it",
            "tolerance": 1e-4,
        },
    ]
    html, _, _ = render.render_report({**analysis, "certificate": entries}, audit=passed, files={})
    section = html[html.index('<section id="certificate">') : html.index('<section id="parity">')]
    assert "<h2>Parity certificate</h2>" in section and "0.0001&middot;max(1, |advantage|)" in section
    assert "✘ fail" in section and "0.432" in section and "2e-07" in section and "trajectories" in section
    gigpo = section[section.index("<td>gigpo</td>") :].split("</tr>")[0]
    assert (
        "not run" in gigpo and gigpo.count("<td>—</td>") == 4
    )  # declared, implements, and both differences: none made up
    html, _, _ = render.render_report({**analysis, "certificate": []}, audit=passed, files={})
    assert (
        "the trainers&#39; advantages are not certified" in html or "the trainers' advantages are not certified" in html
    )
