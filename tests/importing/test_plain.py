"""`agentrepro import --format plain`: CSV and JSONL records of another tool become outcome rows against a frozen
panel, each row traceable to its record, read by `analyze --outcomes` unchanged; a bad record is one line naming
its file and line, exit 2, and nothing is written."""

from __future__ import annotations

import json

import pytest
from helpers import run_cli

from agentrepro.environments import task_panel
from agentrepro.seal import verify_outputs

SEEDS = "10001-10006"


def write_csv(path, rows, header="method,seed,step,task_id,success,reward"):
    path.write_text("\n".join([header, *(",".join(map(str, r)) for r in rows)]) + "\n", encoding="utf-8")
    return path


def imported(tmp_path, *files, out="out"):
    return run_cli(
        "import",
        *files,
        "--format",
        "plain",
        "--env",
        "frozenlake",
        "--seeds",
        SEEDS,
        "--out",
        tmp_path / out,
        "--study",
        "relax-graphgpo",
        cwd=tmp_path,
    )


def test_records_become_rows_traceable_to_their_records_and_analyze_reads_them(tmp_path):
    """Two files (a CSV naming tasks by seed, a JSONL by task_id, one with turns and an episode number): every row
    carries the panel's task hash, its source record is named by file and line, the matrix is partial where a
    method lacks a seed (which the analysis refuses unless told `--partial`, and then pairs on the shared seeds), and `analyze --outcomes` computes the usual tables from
    the rows of a full matrix."""
    panel = task_panel("frozenlake", {}, range(10001, 10007))
    csv_rows = [
        ("graphgpo", s, 150, 10001 + t, int((t + s) % 3 != 0), 1.0 if (t + s) % 3 else 0.0)
        for s in (0, 1)
        for t in range(6)
    ]
    a = write_csv(tmp_path / "graphgpo.csv", csv_rows)
    b = tmp_path / "gigpo.jsonl"
    b.write_text(
        "".join(
            json.dumps(
                {
                    "method": "gigpo",
                    "seed": 0,
                    "step": 150,
                    "task_id": panel[t]["task_id"],
                    "success": t % 2 == 0,
                    "turns": 3,
                    "episode": 0,
                    "extra": "left alone",
                }
            )
            + "\n"
            for t in range(6)
        )
    )
    result = imported(tmp_path, a, b)
    assert result.returncode == 0, result.stderr
    assert "18 episode(s) of 2 method(s) x 2 seed(s) from 2 file(s); partial: no rows for gigpo seed 1" in result.stdout
    out = tmp_path / "out"
    rows = [json.loads(line) for line in (out / "outcomes.jsonl").read_text().splitlines()]
    record = json.loads((out / "import.json").read_text())
    assert verify_outputs(out / "OUTPUTS.sha256") == []
    by_id = {t["task_id"]: t for t in panel}
    assert all(r["task_hash"] == by_id[r["task_id"]]["task_hash"] and r["study"] == "relax-graphgpo" for r in rows)
    files = [(tmp_path / f["path"]) if not f["path"].startswith("/") else f["path"] for f in record["files"]]
    for row, source in zip(rows, record["sources"]):  # each row back to its record
        text = open(files[source["file"]], encoding="utf-8").read().splitlines()[source["line"] - 1]
        if str(files[source["file"]]).endswith(".csv"):
            method, seed, _, task, success, _ = text.split(",")
            assert (method, int(seed), by_id[row["task_id"]]["seed"], int(success)) == (
                row["method"],
                row["seed"],
                int(task),
                row["success"],
            )
        else:
            assert json.loads(text)["task_id"] == row["task_id"] and row["turns"] == 3
    assert record["partial"] == ["gigpo seed 1"] and record["matrix"] == {
        "gigpo": {"0": 6},
        "graphgpo": {"0": 6, "1": 6},
    }
    assert record["absent"] == {"reward (success written)": 6, "turns (0 written)": 12, "tokens (0 written)": 18}
    assert [f["records"] for f in record["files"]] == [12, 6] and len(record["unsealed"]) == 3
    gigpo = [r for r in rows if r["method"] == "gigpo"]
    assert [r["reward"] for r in gigpo] == [float(r["success"]) for r in gigpo]
    refused = run_cli("analyze", "--outcomes", out / "outcomes.jsonl", "--out", tmp_path / "a", cwd=tmp_path)
    assert refused.returncode == 2 and "seed(s) [1] missing for method 'gigpo'" in refused.stderr
    assert "--partial" in refused.stderr and not (tmp_path / "a").exists()
    partial = tmp_path / "partial" / "analysis" / "relax-graphgpo"
    analysed = run_cli("analyze", "--outcomes", out / "outcomes.jsonl", "--out", partial, "--partial", cwd=tmp_path)
    assert analysed.returncode == 0, analysed.stderr
    doc = json.loads((partial / "analysis.json").read_text())
    assert doc["settings"]["partial"] is True
    assert any("no outcomes for gigpo seed 1 at step 150" in note for note in doc["notes"])
    assert "over 1-2 seed(s) (a partial matrix: 1 method-seed pair(s) missing)" in doc["bottom_line"][0]
    pair = [r for r in doc["tables"]["paired"] if {r["method_a"], r["method_b"]} == {"graphgpo", "gigpo"}]
    assert [r["seed"] for r in pair] == ["0", "all"] and pair[-1]["n_pairs"] == 6  # seed 0, the one both have
    seed0 = tmp_path / "seed0" / "outcomes.jsonl"  # the same pair analysed on seed 0's rows alone
    seed0.parent.mkdir()
    seed0.write_text("".join(json.dumps(r) + "\n" for r in rows if r["seed"] == 0), encoding="utf-8")
    alone = run_cli("analyze", "--outcomes", seed0, "--out", tmp_path / "alone", cwd=tmp_path)
    assert alone.returncode == 0, alone.stderr
    again = json.loads((tmp_path / "alone" / "analysis.json").read_text())["tables"]["paired"]
    assert [{k: r[k] for k in ("seed", "delta", "ci_lo", "ci_hi", "p")} for r in again] == [
        {k: r[k] for k in ("seed", "delta", "ci_lo", "ci_hi", "p")} for r in pair
    ]
    means = {r["method"]: r for r in doc["tables"]["methods"]}
    assert (means["graphgpo"]["seeds"], means["gigpo"]["seeds"]) == (2, 1)
    report = run_cli("report", "relax-graphgpo", "--root", tmp_path / "partial", "--no-pdf", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    page = (tmp_path / "partial" / "reports" / "relax-graphgpo" / "report.html").read_text()
    assert "partial method × seed matrix: no outcomes for gigpo seed 1" in page
    c = write_csv(tmp_path / "gigpo-1.csv", [("gigpo", 1, 150, 10001 + t, t % 2, t % 2) for t in range(6)])
    assert imported(tmp_path, a, b, c, out="full").returncode == 0
    full = tmp_path / "full" / "outcomes.jsonl"
    analysis = tmp_path / "root" / "analysis" / "relax-graphgpo"
    analysed = run_cli("analyze", "--outcomes", full, "--out", analysis, cwd=tmp_path)
    assert analysed.returncode == 0, analysed.stderr
    methods = (analysis / "methods.csv").read_text()
    assert "graphgpo" in methods and "gigpo" in methods
    doc = json.loads((analysis / "analysis.json").read_text())
    (summary,) = doc["provenance"]["imported"]
    assert [f["records"] for f in summary["files"]] == [12, 6, 6] and summary["partial"] == []
    assert summary["unsealed"] == record["unsealed"] and summary["record"]["path"].endswith("full/import.json")
    assert "they were imported from 3 file(s) of plain records, not sealed" in doc["bottom_line"][-1]
    report = run_cli("report", "relax-graphgpo", "--root", tmp_path / "root", "--no-pdf", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    page = (tmp_path / "root" / "reports" / "relax-graphgpo" / "report.html").read_text()
    first = page[page.index('<section id="summary">') : page.index('<section id="equivalence">')]
    assert "Imported, not sealed" in first and "no checkpoint: the outcomes cannot be re-derived" in first


@pytest.mark.parametrize(
    "content, said",
    [
        ("graphgpo,0,150,99999,1,1.0", "line 2: task_id: task '99999' is not on the frozen panel (6 tasks"),
        ("graphgpo,0,150,10001,yes,1.0", "line 2: success: expected 0 or 1 (or true / false), got 'yes'"),
        ("graphgpo,-1,150,10001,1,1.0", "line 2: seed: expected a whole number from 0 to 4294967295, got '-1'"),
        ("graphgpo,0,150,10001,1,nan", "line 2: reward: expected a finite number, got 'nan'"),
        ("graphgpo,0,150,10001,1", "line 2: has another number of fields than the header"),
        ("a/b,0,150,10001,1,1.0", "line 2: method: method 'a/b' is not a name the harness can use"),
        ("graphgpo,0,150,,1,1.0", "line 2: missing task_id"),
        ("graphgpo,99999999999999999999,150,10001,1,1.0", "line 2: seed: expected a whole number"),
    ],
)
def test_a_bad_record_is_one_line_naming_its_file_and_line_and_nothing_is_written(tmp_path, content, said):
    path = tmp_path / "r.csv"
    path.write_text("method,seed,step,task_id,success,reward\n" + content + "\n", encoding="utf-8")
    result = imported(tmp_path, path)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "r.csv" in result.stderr and "Traceback" not in result.stderr
    assert said in result.stderr, result.stderr
    assert not (tmp_path / "out").exists()


def test_a_repeated_episode_and_other_files_are_refused(tmp_path):
    """An episode number given twice, a header without a column, a JSONL line that is no object, bytes that are no
    UTF-8, an empty file, and the same file twice: each one line, exit 2, nothing written."""
    header = "method,seed,step,task_id,success,episode\n"
    cases = {
        "twice.csv": (
            header + "m,0,1,10001,1,0\nm,0,1,10001,0,0\n",
            "twice.csv: line 3: repeats episode 0 of m seed 0",
        ),
        "header.csv": (
            "method,seed,task_id,success\nm,0,10001,1\n",
            "header.csv: line 1: the header has no column step",
        ),
        "list.jsonl": (
            '{"method": "m", "seed": 0, "step": 1, "task_id": "10001", "success": 1}\n[1]\n',
            "list.jsonl: line 2: expected a JSON object, got list",
        ),
        "bytes.jsonl": (b"\xff\xfe\n", "bytes.jsonl: line 1: not UTF-8"),
        "empty.jsonl": ("\n", "empty.jsonl: holds no record"),
    }
    for name, (content, said) in cases.items():
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        result = imported(tmp_path, path)
        assert result.returncode == 2 and said in result.stderr and len(result.stderr.strip().splitlines()) == 1, (
            name,
            result.stderr,
        )
    good = write_csv(tmp_path / "good.csv", [("m", 0, 1, 10001, 1, 1.0)])
    twice = imported(tmp_path, good, good)
    assert twice.returncode == 2 and "a records file is given twice" in twice.stderr
    assert not (tmp_path / "out").exists()


def test_the_audit_derives_every_row_again_from_the_records(tmp_path):
    """`audit --import DIR` passes an import as written and says what is not sealed; a row forged and re-sealed, a
    source file edited after the import, and a source file gone each fail, naming the row or the file."""
    from agentrepro.seal import write_outputs_manifest

    path = write_csv(
        tmp_path / "runs.csv", [("m", s, 5, 10001 + t, (s + t) % 2, 0.5) for s in (0, 1) for t in range(6)]
    )
    assert imported(tmp_path, path).returncode == 0
    out = tmp_path / "out"

    def audit():
        return run_cli("audit", "--import", out, cwd=tmp_path)

    honest = audit()
    assert honest.returncode == 0 and "every outcome row follows from its record" in honest.stdout, honest.stdout
    assert "not sealed: no checkpoint" in honest.stdout
    rows = (out / "outcomes.jsonl").read_text().splitlines()
    forged = json.loads(rows[3])
    forged["success"] = 1 - forged["success"]
    (out / "outcomes.jsonl").write_text("\n".join([*rows[:3], json.dumps(forged), *rows[4:]]) + "\n")
    write_outputs_manifest(out)  # a forger re-seals
    caught = audit()
    assert caught.returncode == 1 and "outcomes.jsonl: row 4: success not what the records give" in caught.stdout
    (out / "outcomes.jsonl").write_text("\n".join(rows) + "\n")
    write_outputs_manifest(out)
    text = path.read_text()
    assert "m,0,5,10001,0,0.5" in text
    path.write_text(text.replace("m,0,5,10001,0,0.5", "m,0,5,10001,1,0.5"))
    edited = audit()
    assert edited.returncode == 1 and "runs.csv: changed since it was imported" in edited.stdout, edited.stdout
    path.unlink()
    gone = audit()
    assert gone.returncode == 1 and "runs.csv: missing (imported with sha256" in gone.stdout
    neither = run_cli("audit", "--import", tmp_path, cwd=tmp_path)
    assert neither.returncode == 2 and "not a folder `agentrepro import` wrote" in neither.stderr


def test_a_locks_frozen_panel_gives_the_tasks_and_their_types(frozen, tmp_path):
    """`--panel LOCK`: records matched to the panel a study's lock froze from its data (the demo's four games of
    two task types), the lock named and hashed in the record; the analysis then breaks the results down by type.
    A hand-edited lock, or --panel beside --env, is one line."""
    root, lock = frozen
    lock_file = root / "manifests" / "demo.lock.json"
    rows = [
        (m, s, 10, f"t{t}", int((t + s + (m == "a")) % 2 == 0), 1.0) for m in "ab" for s in (0, 1) for t in range(4)
    ]
    path = write_csv(tmp_path / "runs.csv", rows)
    result = run_cli(
        "import",
        path,
        "--format",
        "plain",
        "--panel",
        lock_file,
        "--out",
        tmp_path / "out",
        "--study",
        "demo-imported",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    record = json.loads((tmp_path / "out" / "import.json").read_text())
    assert record["task_panel"] == lock["task_panel"] and record["env"]["lock"] == str(lock_file)
    written = [json.loads(x) for x in (tmp_path / "out" / "outcomes.jsonl").read_text().splitlines()]
    assert {r["category"] for r in written} == {"pick", "clean"}
    analysis = tmp_path / "analysis"
    assert run_cli("analyze", "--outcomes", tmp_path / "out" / "outcomes.jsonl", "--out", analysis).returncode == 0
    categories = (analysis / "categories.csv").read_text()
    assert "pick" in categories and "clean" in categories
    both = run_cli(
        "import",
        path,
        "--format",
        "plain",
        "--panel",
        lock_file,
        "--env",
        "frozenlake",
        "--out",
        tmp_path / "o2",
        cwd=tmp_path,
    )
    assert both.returncode == 2 and "give either --panel LOCK or --env with --seeds" in both.stderr
    lock_file.write_text(lock_file.read_text().replace('"t0"', '"t9"'))
    edited = run_cli("import", path, "--format", "plain", "--panel", lock_file, "--out", tmp_path / "o3", cwd=tmp_path)
    assert edited.returncode == 2 and "demo.lock.json" in edited.stderr and not (tmp_path / "o3").exists()
