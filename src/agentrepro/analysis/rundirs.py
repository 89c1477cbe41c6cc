"""What `analyze` reads from a study's run directories (runs/<study>/<method>/seed<k>/, agentrepro.layout).

* `read_run(run_dir, method, seed)`: the outcome files of every eval/step<N>/ and the side logs (metrics,
  timings, graph diagnostics; absent ones as []).
* `run_provenance(run_dir, method, seed, root)`: the run's entry in analysis.json's `provenance.runs`
  (command, resolved-config hash, attempts, status, every sealed output, and the commands of its shared warm start
  and of each evaluation, so that the report's appendix gives every job's command).
* `check_paths(df)`: each outcome row agrees with the directory it was read from (study, method, seed, step).
* `task_seed_check(lock, run_dirs)`: the parity check that the task seeds training drew from (resolved_config.yaml)
  and the evaluation panel's seeds (the lock) are disjoint, or by how many they overlap.
* `overlapping_runs(runs)`: a note when training attempts ran at the same time on the same host (their step and
  wall times then compare across methods only roughly), or None.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import pandas as pd

from agentrepro.analysis.load import read_steps_jsonl
from agentrepro.attempts import newest_attempt, read_provenance
from agentrepro.errors import BadInput
from agentrepro.layout import RUNS, WARMSTARTS, RunFiles, evaluations_on_disk
from agentrepro.reading import load_json, load_yaml, read_text
from agentrepro.runconfig import config_file_sha256
from agentrepro.seal import OUTPUTS, read_outputs_manifest


def read_run(run_dir: Path, method: str, seed: int) -> tuple[list[Path], dict]:
    """(outcome files, {"metrics", "timings", "graph_diagnostics": rows}); BadInput when it has no outcomes."""
    files = [p / RunFiles.OUTCOMES for _, p in evaluations_on_disk(run_dir) if (p / RunFiles.OUTCOMES).is_file()]
    if not files:
        raise BadInput(
            f"seed {seed} of method {method!r} has no outcomes (expected eval/step<N>/{RunFiles.OUTCOMES})",
            path=run_dir,
        )
    side = {}
    for name, file in (
        ("metrics", RunFiles.METRICS),
        ("timings", RunFiles.TIMINGS),
        ("graph_diagnostics", RunFiles.GRAPH_DIAGNOSTICS),
    ):
        path = run_dir / file
        side[name] = read_steps_jsonl(path) if path.is_file() else []
    return files, side


def run_provenance(run_dir: Path, method: str, seed: int, root: Path) -> dict:
    command = run_dir / RunFiles.COMMAND
    config = run_dir / RunFiles.RESOLVED_CONFIG
    outputs = {}
    for seal in sorted(run_dir.rglob(OUTPUTS)):
        prefix = seal.parent.relative_to(root).as_posix()
        outputs.update({f"{prefix}/{rel}": digest for rel, digest in read_outputs_manifest(seal).items()})
    prov = read_provenance(run_dir)
    if not isinstance(prov, dict):
        raise BadInput(f"expected a JSON object, got {type(prov).__name__}", path=run_dir / RunFiles.PROVENANCE)
    return {
        "method": method,
        "seed": seed,
        "path": run_dir.relative_to(root).as_posix(),
        "command": read_text(command).strip() if command.is_file() else None,
        # the hash provenance.json carries and audit checks
        "resolved_config_sha256": config_file_sha256(config) if config.is_file() else None,
        "attempts": prov.get("attempts", []),
        "status": prov.get("status"),
        "outputs": outputs,
        "warmstart_command": _warmstart_command(run_dir),
        "eval_commands": {str(step): _newest_command(path) for step, path in evaluations_on_disk(run_dir)},
    }


def _newest_command(job_dir: Path) -> str | None:
    """The command of the newest attempt a job directory's provenance.json records."""
    command = newest_attempt(read_provenance(job_dir)).get("command")
    return command if isinstance(command, str) else None


def _warmstart_command(run_dir: Path) -> str | None:
    """The command of the shared warm start the run started from (its warmstart.json names the folder), or None."""
    record = run_dir / RunFiles.WARMSTART
    shared = load_json(record).get("shared") if record.is_file() else None
    folder = shared.get("dir") if isinstance(shared, dict) else None
    parts = PurePosixPath(folder).parts if isinstance(folder, str) else ()
    if len(parts) != 4 or parts[:3] != ("..", "..", WARMSTARTS) or parts[3] in ("..", "."):
        return None  # not a warm start of this study's (the audit's warm-start check says why)
    command = run_dir.joinpath(*parts) / RunFiles.COMMAND
    return read_text(command).strip() if command.is_file() else None


def check_paths(df: pd.DataFrame) -> None:
    """Rows must agree with the directory they were read from (study, method, seed, step)."""
    parts = df["_file"].str.extract(
        rf"{RUNS}/(?P<p_study>[^/]+)/(?P<p_method>[^/]+)/seed(?P<p_seed>\d+)/{RunFiles.EVAL}/"
        rf"step(?P<p_step>\d+)/{re.escape(RunFiles.OUTCOMES)}$"
    )
    for column, p_col, cast in (
        ("study", "p_study", str),
        ("method", "p_method", str),
        ("seed", "p_seed", int),
        ("step", "p_step", int),
    ):
        want = parts[p_col].map(cast)
        bad = df[column].map(cast) != want
        if bad.any():
            row = df[bad].iloc[0]
            raise BadInput(
                f"key {column!r} is {row[column]!r} but the file sits under {column} {want[bad].iloc[0]!r}",
                path=row["_file"],
                where=f"line {row['_line']}",
            )


def _seed_range(first, count) -> range | None:
    return range(first, first + count) if isinstance(first, int) and isinstance(count, int) and count > 0 else None


def _span(seeds) -> str:
    seeds = sorted(seeds)
    return f"{seeds[0]}–{seeds[-1]}" if seeds else "none"


def task_seed_check(lock: dict | None, run_dirs: list[Path]) -> dict:
    """Whether training and evaluation used disjoint task seeds (see the module docstring), as a parity check."""
    check = "training and evaluation task seeds are disjoint"
    panel = [t.get("seed") for t in (lock or {}).get("task_panel") or []]
    evaluated = {s for s in panel if isinstance(s, int)}
    if not evaluated:
        return {
            "check": check,
            "status": "not_run",
            "detail": "the evaluation tasks are not numbered by seed (or there is no lock)",
        }
    drawn, unknown = set(), []
    for run in run_dirs:
        config = load_yaml(run / RunFiles.RESOLVED_CONFIG) if (run / RunFiles.RESOLVED_CONFIG).is_file() else {}
        train = (config or {}).get("train") or {}
        seeds = _seed_range(train.get("train_first_seed"), train.get("train_num_seeds"))
        if ((config or {}).get("backend") or {}).get("name") != "builtin" or seeds is None:
            unknown.append(f"{run.parent.name}/{run.name}")
            continue
        drawn.add((seeds.start, seeds.stop))
        validation = _seed_range(train.get("warmstart_val_first_seed"), train.get("warmstart_val_seeds"))
        if train.get("warmstart") and validation is not None:
            drawn.add((validation.start, validation.stop))
    if unknown:
        return {
            "check": check,
            "status": "not_run",
            "detail": f"the training tasks of {', '.join(unknown)} are drawn by the backend "
            "itself and not recorded as seeds",
        }
    overlap = {s for lo, hi in drawn for s in evaluated if lo <= s < hi}
    ranges = ", ".join(f"{lo}–{hi - 1}" for lo, hi in sorted(drawn))
    detail = (
        f"training (with the warm start's demonstrations and validation) draws from seeds {ranges}; "
        f"the {len(evaluated)} evaluation tasks are seeds {_span(evaluated)}"
    )
    if overlap:
        return {
            "check": check,
            "status": "fail",
            "detail": f"{detail}: {len(overlap)} evaluation seed(s) could also be trained on ({_span(overlap)})",
        }
    return {"check": check, "status": "pass", "detail": f"{detail}: disjoint"}


def overlapping_runs(runs: list[dict]) -> str | None:
    """A note naming the training attempts that overlapped in time on one host (see the module docstring)."""
    spans = [
        (a.get("host"), a["start"], a["end"], f"{r['method']} seed {r['seed']}", a.get("cpus"))
        for r in runs
        for a in r.get("attempts") or []
        if a.get("stage") == "train" and a.get("start") and a.get("end")
    ]
    shared = sorted(
        {
            name
            for host, start, end, name, _ in spans
            for h2, s2, e2, other, _ in spans
            if other != name and h2 == host and start < e2 and s2 < end
        }
    )
    if not shared:
        return None
    cpus = sorted({c for *_, c in spans if isinstance(c, int)})
    return (
        f"{len(shared)} of {len(runs)} runs trained at the same time as another on the same host"
        + (f" ({'/'.join(map(str, cpus))} CPUs)" if cpus else "")
        + f": {', '.join(shared)}. Their step and wall times "
        "depend on what else ran beside them and compare across methods only roughly (each attempt's CPU use is in the appendix)."
    )
