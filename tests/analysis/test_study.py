"""The `analyze` orchestration over a whole synthetic study tree (function API)."""

import json

import pandas as pd
import pytest
from analysis_synth import make_study

from agentrepro.analysis.study import analyze_study
from agentrepro.errors import BadInput
from agentrepro.seal import verify_outputs

REF = "paper: Toy\nmetric: success_rate\nvalues:\n  graphgpo: {value: 0.8, std: null, seeds: null, source: 'Table 1', checked: true}\n"


def test_study_writes_every_output_sealed(tmp_path):
    """All §3.6 files appear, analysis.json holds the tables/settings/provenance, and the seal verifies."""
    make_study(tmp_path, reference=REF)
    out = analyze_study("toy", root=tmp_path)
    names = {p.name for p in out.iterdir()}
    assert {
        "runs.csv",
        "methods.csv",
        "paired.csv",
        "categories.csv",
        "verdicts.csv",
        "claims.csv",
        "outcomes.parquet",
        "diagnostics.csv",
        "overhead.csv",
        "convergence.csv",
        "training.csv",
        "analysis.json",
        "OUTPUTS.sha256",
    } <= names
    assert verify_outputs(out / "OUTPUTS.sha256") == []
    analysis = json.loads((out / "analysis.json").read_text())
    assert analysis["settings"]["final_step"] == 10 and analysis["settings"]["tolerance_pp"] == 3
    assert analysis["settings"]["reference"]["path"] == "manifests/references/ref.yaml"
    assert set(analysis["tables"]) == {
        "runs",
        "methods",
        "paired",
        "learning",
        "categories",
        "verdicts",
        "claims",
        "families",
        "diagnostics",
        "overhead",
        "convergence",
        "training",
    }
    runs_csv = pd.read_csv(out / "runs.csv")
    assert len(analysis["tables"]["runs"]) == len(runs_csv) == 2 * 2 * 2
    assert analysis["tables"]["verdicts"][0]["method"] == "graphgpo"
    assert analysis["tables"]["claims"][0]["claim"] == "graphgpo > grpo"
    assert analysis["tables"]["diagnostics"][0]["distance_hist"] == {"0": 2, "1": 5}
    assert {r["component"] for r in analysis["tables"]["overhead"]} == {"rollout", "advantage", "update", "step_total"}
    prov = analysis["provenance"]
    assert prov["lock_sha256"] and len(prov["runs"]) == 4 and prov["runs"][0]["attempts"][0]["status"] == "ok"
    assert any(k.endswith("eval/step10/outcomes.jsonl") for k in prov["runs"][0]["outputs"])
    assert analysis["parity"][0]["status"] == "not_run" and analysis["parity"][1]["status"] == "pass"
    assert len(pd.read_parquet(out / "outcomes.parquet")) == 2 * 2 * 2 * 40


def test_same_inputs_give_identical_outputs(tmp_path):
    """Analysing twice gives byte-identical files (no clock, controlled bootstrap)."""
    make_study(tmp_path)
    first = (analyze_study("toy", root=tmp_path) / "OUTPUTS.sha256").read_text()
    second = (analyze_study("toy", root=tmp_path) / "OUTPUTS.sha256").read_text()
    assert first == second


def test_missing_seed_directory_is_an_error_and_writes_nothing(tmp_path):
    """A manifest seed without a run directory stops the analysis before anything is written."""
    make_study(tmp_path)
    import shutil

    shutil.rmtree(tmp_path / "runs" / "toy" / "grpo" / "seed1")
    with pytest.raises(BadInput, match="seed 1 missing for method 'grpo'"):
        analyze_study("toy", root=tmp_path)
    assert not (tmp_path / "analysis").exists()


def test_row_disagreeing_with_its_directory(tmp_path):
    """A row whose method differs from the run directory it sits in is an error naming the line."""
    make_study(tmp_path)
    path = tmp_path / "runs" / "toy" / "grpo" / "seed0" / "eval" / "step5" / "outcomes.jsonl"
    lines = path.read_text().splitlines()
    row = json.loads(lines[3])
    row["method"] = "graphgpo"
    lines[3] = json.dumps(row)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(BadInput, match=r"line 4: key 'method' is 'graphgpo' but the file sits under method 'grpo'"):
        analyze_study("toy", root=tmp_path)


def test_provenance_hash_matches_audit_and_extra_runs_are_noted(tmp_path):
    """The resolved-config hash is the one audit checks, and a run outside the manifest is noted, not analysed."""
    from agentrepro.fileio import sha256_json
    from agentrepro.reading import load_yaml

    make_study(tmp_path)
    (tmp_path / "runs" / "toy" / "ppo" / "seed0").mkdir(parents=True)
    analysis = json.loads((analyze_study("toy", root=tmp_path) / "analysis.json").read_text())
    run = analysis["provenance"]["runs"][0]
    config = tmp_path / run["path"] / "resolved_config.yaml"
    assert run["resolved_config_sha256"] == sha256_json(load_yaml(config))
    assert any("ppo/seed0" in n for n in analysis["notes"])
    assert {r["method"] for r in analysis["tables"]["runs"]} == {"grpo", "graphgpo"}


def test_panel_task_never_played_is_an_error(tmp_path):
    """A task of the lock's panel that no run played stops the analysis, naming the lock and the task."""
    make_study(tmp_path)
    lock_path = tmp_path / "manifests" / "toy.lock.json"
    lock = json.loads(lock_path.read_text())
    lock["task_panel"].append({"task_id": "t999", "task_hash": "a" * 64, "seed": 999, "category": "toy"})
    lock_path.write_text(json.dumps(lock))
    with pytest.raises(BadInput, match=r"task\(s\) of the panel in .*toy.lock.json missing: t999"):
        analyze_study("toy", root=tmp_path)


def test_analysis_json_passes_the_report_contract_check(tmp_path):
    """The consumer's validator (agentrepro.report.load) accepts what analyze writes (docs/internals.md contract)."""
    from agentrepro.report.load import load_analysis

    make_study(tmp_path, reference=REF)
    analysis = load_analysis(analyze_study("toy", root=tmp_path) / "analysis.json")
    assert analysis["study"] == "toy" and analysis["tables"]["verdicts"]


def test_study_equivalence_claim_from_the_lock(tmp_path):
    """An equivalence claim declared in the lock's manifest is tested per seed and across seeds; a 30 pp gap is not reproduced,
    and a malformed claim in the lock names the lock file and the claim's index."""
    make_study(
        tmp_path, methods=("grpo", "graphgpo"), n_tasks=120, claims=("graphgpo > grpo", "graphgpo == grpo ± 3pp")
    )
    analysis = json.loads((analyze_study("toy", root=tmp_path) / "analysis.json").read_text())
    rows = [c for c in analysis["tables"]["claims"] if c["kind"] == "equivalence"]
    assert [c["seed"] for c in rows] == ["0", "1", "all"] and {c["n_tasks"] for c in rows} == {120}
    assert rows[-1]["verdict"] == "not_reproduced" and rows[-1]["seeds"] == 2
    bad = tmp_path / "bad"
    make_study(bad, claims=("graphgpo == grpo ± 3 %",))
    with pytest.raises(BadInput, match=r"toy\.lock\.json: analysis\.claims\[0\]: claim 'graphgpo == grpo ± 3 %'"):
        analyze_study("toy", root=bad)


def test_the_analysis_does_not_depend_on_where_the_root_lies(tmp_path, monkeypatch):
    """The same study analysed through an absolute root and through a relative one gives the same analysis.json (the
    audit recomputes a bundle's analysis in another folder and compares)."""
    from agentrepro.analysis.study import study_analysis

    make_study(tmp_path, reference=REF)
    absolute = study_analysis("toy", root=tmp_path).document()
    monkeypatch.chdir(tmp_path)
    relative = study_analysis("toy", root=".").document()
    assert json.dumps(absolute) == json.dumps(relative)
