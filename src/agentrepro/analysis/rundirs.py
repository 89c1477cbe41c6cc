"""What `analyze` reads from a study's run directories (runs/<study>/<method>/seed<k>/, agentrepro.layout).

* `read_run(run_dir, method, seed)`: the outcome files of every eval/step<N>/ and the side logs (metrics,
  timings, graph diagnostics; absent ones as []).
* `run_provenance(run_dir, method, seed, root)`: the run's entry in analysis.json's `provenance.runs`
  (command, resolved-config hash, attempts, status, every sealed output).
* `check_paths(df)`: each outcome row agrees with the directory it was read from (study, method, seed, step).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from agentrepro.analysis.load import read_steps_jsonl
from agentrepro.attempts import read_provenance
from agentrepro.errors import BadInput
from agentrepro.layout import RUNS, RunFiles, evaluations_on_disk
from agentrepro.reading import read_text
from agentrepro.runconfig import config_file_sha256
from agentrepro.seal import OUTPUTS, read_outputs_manifest


def read_run(run_dir: Path, method: str, seed: int) -> tuple[list[Path], dict]:
    """(outcome files, {"metrics", "timings", "graph_diagnostics": rows}); BadInput when it has no outcomes."""
    files = [p / RunFiles.OUTCOMES for _, p in evaluations_on_disk(run_dir) if (p / RunFiles.OUTCOMES).is_file()]
    if not files:
        raise BadInput(f"seed {seed} of method {method!r} has no outcomes (expected eval/step<N>/{RunFiles.OUTCOMES})", path=run_dir)
    side = {}
    for name, file in (("metrics", RunFiles.METRICS), ("timings", RunFiles.TIMINGS), ("graph_diagnostics", RunFiles.GRAPH_DIAGNOSTICS)):
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
    return {"method": method, "seed": seed, "path": run_dir.relative_to(root).as_posix(),
            "command": read_text(command).strip() if command.is_file() else None,
            # the hash provenance.json carries and audit checks
            "resolved_config_sha256": config_file_sha256(config) if config.is_file() else None,
            "attempts": prov.get("attempts", []), "status": prov.get("status"), "outputs": outputs}


def check_paths(df: pd.DataFrame) -> None:
    """Rows must agree with the directory they were read from (study, method, seed, step)."""
    parts = df["_file"].str.extract(rf"{RUNS}/(?P<p_study>[^/]+)/(?P<p_method>[^/]+)/seed(?P<p_seed>\d+)/{RunFiles.EVAL}/"
                                    rf"step(?P<p_step>\d+)/{re.escape(RunFiles.OUTCOMES)}$")
    for column, p_col, cast in (("study", "p_study", str), ("method", "p_method", str), ("seed", "p_seed", int), ("step", "p_step", int)):
        want = parts[p_col].map(cast)
        bad = df[column].map(cast) != want
        if bad.any():
            row = df[bad].iloc[0]
            raise BadInput(f"key {column!r} is {row[column]!r} but the file sits under {column} {want[bad].iloc[0]!r}",
                           path=row["_file"], where=f"line {row['_line']}")
