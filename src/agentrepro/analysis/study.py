"""The `analyze` orchestration: gather inputs, validate, compute every table, write analysis/<study>/.

* `analyze_study(study, root=".")` reads the lock (or manifest) for settings and the task panel, every run
  under runs/<study>/<method>/seed<k>/ (`study`: a slug or a manifest path, `agentrepro.layout.locate`) (outcomes of
  each eval/step<N>/, metrics, timings, graph diagnostics, provenance, command, resolved config, seals: read by
  analysis/rundirs.py) and writes analysis/<study>/, sealed.
* `analyze_outcomes(paths, out, reference=None, tolerance_pp=, claims=(), alpha=)` does the same for
  outcome files from anywhere (no lock: task sets are checked between methods instead of a panel).

Everything is computed before the first file is written; each file is written atomically; the
directory is sealed last with OUTPUTS.sha256.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from agentrepro import outcomes
from agentrepro.analysis import contract, families
from agentrepro.analysis import tables as T
from agentrepro.analysis.bottom_line import bottom_line
from agentrepro.analysis.claim_text import parse_claim_text
from agentrepro.analysis.claims import claims_table
from agentrepro.analysis.convergence import convergence_table
from agentrepro.analysis.diagnostics import DIAGNOSTICS, TRAINING, per_step_table
from agentrepro.analysis.load import COLUMNS, read_outcomes
from agentrepro.analysis.overhead import overhead_table
from agentrepro.analysis.parity import certificate, parity_checks
from agentrepro.analysis.reference import load_reference
from agentrepro.analysis.rundirs import check_paths, overlapping_runs, read_run, run_provenance, task_seed_check
from agentrepro.analysis.validate import validate_outcomes
from agentrepro.analysis.verdicts import verdicts_table
from agentrepro.backends.sources import study_rows
from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_bytes, sha256_file, sha256_json
from agentrepro.importing.imported import IMPORT_RECORD, read_import_record
from agentrepro.layout import locate
from agentrepro.lockfile import manifest_of, read_lock
from agentrepro.reading import load_yaml
from agentrepro.seal import write_outputs_manifest

ANALYSIS_JSON, OUTCOMES_PARQUET = "analysis.json", "outcomes.parquet"
BOOTSTRAP_SEED = 20260101  # fixed: the bootstrap CI is reproducible from the inputs alone
N_BOOT = 2000


@dataclass
class Settings:
    """What the analysis was told before it ran; `analysis.json` records it. The defaults here are the only ones:
    `analyze --outcomes`, a manifest's `analysis` block and `analyze_outcomes` fall back to them."""

    tolerance_pp: float = 3.0
    alpha: float = 0.05
    final_step: int | None = None
    claims: list[str] = field(default_factory=list)
    reference: dict | None = None  # {"paper", "kind", "metric", "path", "caveats"}: reference_settings
    threshold: float | None = None  # convergence threshold (a fraction); None: 0.9 × best final mean
    n_boot: int = N_BOOT
    bootstrap_seed: int = BOOTSTRAP_SEED
    partial: bool = False  # a method x seed matrix with gaps accepted (`analyze --outcomes --partial`)


@dataclass
class RunInputs:
    """Per-run side files, keyed by (method, seed)."""

    metrics: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    diagnostics: dict = field(default_factory=dict)


def _final_step(df: pd.DataFrame, wanted: int | None, source: str) -> int:
    common = set.intersection(*(set(g["step"].unique().tolist()) for _, g in df.groupby("method")))
    if wanted is not None:
        if wanted not in set(df["step"].unique().tolist()):
            raise BadInput(f"final step {wanted} was not evaluated (steps: {sorted(set(df['step']))})", where=source)
        return int(wanted)
    if not common:
        raise BadInput("no evaluation step is shared by every method, so nothing can be compared", where=source)
    return int(max(common))


def compute(
    df: pd.DataFrame,
    methods: list[str],
    settings: Settings,
    reference: dict | None,
    inputs: RunInputs,
    claim_field: str,
    claim_path: object = None,
) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """Every table of docs/design.md §3.6 from validated outcomes; returns (tables, notes).

    `claim_field` (formatted with the claim's index `i`) and `claim_path` name where the claims were declared."""
    alpha, tolerance, final_step = settings.alpha, settings.tolerance_pp / 100.0, settings.final_step
    if final_step is None:
        raise ValueError("Settings.final_step must be set before compute()")  # _final_step sets it from the outcomes
    notes: list[str] = []
    runs = T.runs_table(df, alpha)
    rng = np.random.default_rng(settings.bootstrap_seed)
    out = {
        "runs": runs,
        "methods": T.methods_table(runs, df, alpha),
        "categories": T.categories_table(df, alpha),
        "paired": T.paired_table(df, methods, alpha, rng=rng, n_boot=settings.n_boot),
    }
    final = df[df["step"] == final_step]
    success = {}
    for method, g in final.groupby("method"):
        per_task = g.groupby(["seed", "task_id"])["success"].mean().unstack("task_id")
        success[method] = per_task.to_numpy(dtype=float)
    if reference is not None:
        out["verdicts"], ref_notes = verdicts_table(runs, success, reference, tolerance, final_step)
        notes += ref_notes
    else:
        out["verdicts"] = contract.empty("verdicts")
        notes.append("No reference values were given, so nothing was compared with the paper.")
    out["learning"] = T.learning_table(df, methods, final_step, alpha, rng=rng, n_boot=settings.n_boot)
    out["claims"] = claims_table(
        settings.claims, out["paired"], final, methods, final_step, alpha, field=claim_field, path=claim_path
    )
    out["paired"] = families.join_claims(out["paired"], out["claims"], final_step)
    out["families"] = families.families_table(out, final_step)
    methods_final = out["methods"][out["methods"]["step"] == final_step]
    if settings.threshold is None:
        settings.threshold = float(0.9 * methods_final["mean"].max())
        notes.append(
            f"Convergence threshold: a success rate of {100 * settings.threshold:.1f}% (90% of the best final mean), "
            "the same for every method."
        )
    out["convergence"] = convergence_table(runs, inputs.metrics, settings.threshold)
    out["overhead"] = overhead_table(inputs.timings)
    out["diagnostics"] = per_step_table(inputs.diagnostics, DIAGNOSTICS)
    out["training"] = per_step_table(inputs.metrics, TRAINING)
    at_final = runs[runs["step"] == final_step]
    gaps = outcomes.matrix_gaps(zip(at_final["method"], at_final["seed"]))
    if gaps:
        notes.append(
            f"Partial method × seed matrix (accepted with --partial): no outcomes for {', '.join(gaps)} at step "
            f"{final_step}. Each method's mean ± std is over its own seeds; each paired comparison uses the seeds "
            "both methods have (n_pairs)."
        )
    single = methods_final[methods_final["seeds"] < 2]
    if len(single):
        notes.append(
            f"{', '.join(single['method'])}: one seed only, so the std over seeds is undefined (shown empty) and "
            "seed-to-seed variation is not measured."
        )
    if (runs["seed"].nunique() > 1) and len(out["paired"]):
        notes.append(
            "Paired `all` rows pool seeds by task: the CI uses a task-clustered SE (t, tasks − 1 df) and a paired "
            f"bootstrap over tasks ({settings.n_boot} replicates, seed {settings.bootstrap_seed}); McNemar is per seed only."
        )
    return out, notes


def _csv_frame(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    for column in frame.columns:
        if frame[column].dtype == object and frame[column].map(lambda v: isinstance(v, (dict, list))).any():
            frame[column] = frame[column].map(
                lambda v: json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v
            )
    return frame


def records(frame: pd.DataFrame) -> list[dict]:
    """JSON-ready row objects (NaN → null, numpy scalars → Python)."""
    return json.loads(frame.to_json(orient="records", double_precision=15)) if len(frame) else []


@dataclass
class Analysis:
    """Everything `analyze` writes, computed and not yet written: `files()` gives each file's bytes."""

    header: dict
    tables: dict[str, pd.DataFrame]
    notes: list[str]
    parity: list[dict]
    provenance: dict
    outcomes: pd.DataFrame
    certificate: list[dict] = field(default_factory=list)  # the parity certificate's entries (analysis/parity.py)
    _document: dict | None = field(default=None, init=False, repr=False)

    def document(self) -> dict:
        """analysis.json's object: header, bottom line, every table as row objects, notes, parity, certificate, provenance."""
        if self._document is None:
            self._document = self._assemble()
        return self._document

    def _assemble(self) -> dict:
        doc = {
            **self.header,
            "tables": {name: records(self.tables[name]) for name in contract.TABLE_NAMES},
            "notes": self.notes,
            "parity": self.parity,
            "certificate": self.certificate,
            "provenance": self.provenance,
        }
        return {
            **self.header,
            "bottom_line": bottom_line(doc),
            **{k: v for k, v in doc.items() if k not in self.header},
        }

    def files(self) -> dict[str, bytes]:
        """{file name: bytes} of every file of analysis/<study>/ but the seal: the CSVs, outcomes.parquet, analysis.json."""
        payloads: dict[str, bytes] = {}
        for table in contract.TABLES:
            contract.check_frame(table.name, self.tables[table.name])
            payloads[table.file] = csv_bytes(self.tables[table.name])
        buffer = io.BytesIO()
        self.outcomes[COLUMNS].to_parquet(buffer, index=False)
        payloads[OUTCOMES_PARQUET] = buffer.getvalue()
        payloads[ANALYSIS_JSON] = (
            json.dumps(self.document(), indent=2, sort_keys=False, ensure_ascii=False, allow_nan=False) + "\n"
        ).encode()
        return payloads


def reference_settings(ref: dict, shown_path: str) -> dict:
    """What analysis.json's settings say of the reference: what it is, its metric, where it is, its caveats."""
    return {
        "paper": ref["paper"],
        "kind": ref["kind"],
        "metric": ref["metric"],
        "path": shown_path,
        "caveats": list(ref.get("caveats") or []),
    }


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """A table as its CSV file holds it (JSON text for object cells such as histograms)."""
    return _csv_frame(frame).to_csv(index=False, lineterminator="\n").encode("utf-8")


def write_analysis(out_dir: Path, analysis: Analysis) -> Path:
    """Write every file of `analysis` atomically, then the OUTPUTS.sha256 seal."""
    out_dir = Path(out_dir)
    for name, data in analysis.files().items():
        atomic_write_bytes(out_dir / name, data)
    write_outputs_manifest(out_dir)
    return out_dir


def _ordered_methods(df: pd.DataFrame, preferred: list[str] | None = None) -> list[str]:
    seen = df["method"].unique().tolist()  # in order of first appearance
    if preferred:
        return [m for m in preferred if m in seen] + [m for m in seen if m not in preferred]
    return seen


def analyze_outcomes(
    paths: list[str | os.PathLike],
    out: str | os.PathLike,
    *,
    reference: str | os.PathLike | None = None,
    tolerance_pp: float = Settings.tolerance_pp,
    claims: list[str] | tuple = (),
    alpha: float = Settings.alpha,
    final_step: int | None = None,
    partial: bool = False,
) -> Path:
    """Analyse outcome files from anywhere into `out` (see the module docstring); `partial` accepts a method x seed
    matrix with gaps (imported runs that do not cover every pair), which the notes and the report list."""
    if tolerance_pp <= 0:
        raise BadInput(f"--tolerance-pp must be positive, got {tolerance_pp}")
    for claim in claims:  # the grammar first: a malformed claim costs no reading
        parse_claim_text(claim, where="--claim")
    df = read_outcomes(list(paths))
    validate_outcomes(df, None, partial=partial)
    methods = _ordered_methods(df)
    ref = load_reference(reference) if reference else None
    settings = Settings(tolerance_pp=float(tolerance_pp), alpha=alpha, claims=list(claims), partial=partial)
    settings.final_step = _final_step(df, final_step, "--outcomes")
    if ref:
        settings.reference = reference_settings(ref, str(reference))
    tables, notes = compute(df, methods, settings, ref, RunInputs(), "--claim")
    notes.insert(
        0,
        "Outcome files were analysed without a lock: task sets were checked between methods, not against a frozen panel.",
    )
    studies = sorted(set(df["study"]))
    header = {
        "study": studies[0] if len(studies) == 1 else "+".join(studies),
        "title": None,
        "settings": asdict(settings),
    }
    provenance = {
        "lock": None,
        "lock_sha256": None,
        "inputs": [{"path": str(p), "sha256": sha256_file(p)} for p in paths],
        "runs": [],
    }
    records = sorted({Path(p).parent / IMPORT_RECORD for p in paths if (Path(p).parent / IMPORT_RECORD).is_file()})
    if records:  # outcomes `agentrepro import` wrote: the report says what is not sealed
        provenance["imported"] = [read_import_record(r) for r in records]
    parity = [
        {
            "check": "advantages recomputed from batch dumps",
            "status": "not_run",
            "detail": "outcome files only: no run directories with batch dumps were given",
        }
    ]
    return write_analysis(Path(out), Analysis(header, tables, notes, parity, provenance, df))


# --- study mode ---------------------------------------------------------------------------------------


def analyze_study(study: str, root: str | os.PathLike = ".") -> Path:
    """Analyse runs/<study>/ into analysis/<study>/ (see the module docstring)."""
    return write_analysis(locate(study, Path(root)).analysis, study_analysis(study, root))


def study_analysis(study: str, root: str | os.PathLike = ".") -> Analysis:
    """The analysis of runs/<study>/, computed from the lock and the run directories and not written; the same
    whatever the root's path (paths in it are relative to the root)."""
    root = Path(root)
    home = locate(study, root)
    study, lock_path, manifest_path = home.name, home.lock, home.manifest
    lock = None
    if lock_path.is_file():
        lock = read_lock(lock_path, verify=False)  # the audit checks its hashes
        manifest, source = manifest_of(lock, lock_path), _shown(lock_path, root)
    elif manifest_path.is_file():
        manifest, source = load_yaml(manifest_path), _shown(manifest_path, root)
    else:
        raise BadInput(f"neither {lock_path} nor {manifest_path} exists", where=f"study {study!r}")
    for key in ("methods", "seeds"):
        if key not in manifest:
            raise BadInput("missing key", path=source, where=key)
    methods, seeds = list(manifest["methods"]), list(manifest["seeds"])
    analysis = manifest.get("analysis") or {}
    settings = Settings(
        tolerance_pp=float(analysis.get("tolerance_pp", Settings.tolerance_pp)),
        alpha=float(analysis.get("alpha", Settings.alpha)),
        claims=list(analysis.get("claims", [])),
        threshold=analysis.get("threshold"),
    )
    notes = []
    if "tolerance_pp" not in analysis:
        notes.append(
            f"{source} declares no analysis.tolerance_pp: the default of {settings.tolerance_pp:g} pp was used, "
            "which was not fixed before running."
        )
    panel = lock.get("task_panel") if lock else None
    if lock is None:
        notes.append(
            f"No lock ({_shown(lock_path, root)}): settings come from the manifest and task hashes are checked between methods only."
        )
    elif not panel:
        raise BadInput("missing or empty task_panel", path=lock_path, where="task_panel")
    files, inputs, run_dirs = [], RunInputs(), []
    for method in methods:
        for seed in seeds:
            run_dir = home.run_dir(method, seed)
            if not run_dir.is_dir():
                raise BadInput(f"seed {seed} missing for method {method!r}: no run directory", path=run_dir)
            run_files, side = read_run(run_dir, method, seed)
            files += run_files
            run_dirs.append(run_dir)
            inputs.metrics[(method, seed)] = side["metrics"]
            inputs.timings[(method, seed)] = side["timings"]
            if side["graph_diagnostics"]:
                inputs.diagnostics[(method, seed)] = side["graph_diagnostics"]
    on_disk = [f"{m}/seed{s}" for m, s, _ in home.run_dirs_on_disk()]
    extra = [r for r in on_disk if r not in {f"{m}/seed{s}" for m in methods for s in seeds}]
    if extra:
        notes.append(f"Run directories not in the manifest were left out of the analysis: {', '.join(extra)}.")
    df = read_outcomes(files)
    check_paths(df)
    validate_outcomes(df, panel, panel_source=str(lock_path), expected_seeds=dict.fromkeys(methods, seeds))
    ref, ref_path = None, analysis.get("reference") or manifest.get("reference")
    if ref_path:
        ref_file = home.reference(ref_path)
        ref = load_reference(ref_file)
        settings.reference = reference_settings(ref, _shown(ref_file, root))
    settings.final_step = _final_step(df, analysis.get("final_step"), source)
    train_steps = (manifest.get("train") or {}).get("steps")
    if train_steps is not None and train_steps != settings.final_step:
        notes.append(
            f"The final evaluated step ({settings.final_step}) is not the configured number of training steps ({train_steps})."
        )
    tables, more = compute(df, _ordered_methods(df, methods), settings, ref, inputs, "analysis.claims[{i}]", source)
    header = {"study": study, "title": manifest.get("title"), "settings": asdict(settings)}
    runs = [run_provenance(d, m, s, root) for d, (m, s) in zip(run_dirs, [(m, s) for m in methods for s in seeds])]
    provenance = {
        "lock": lock,
        "lock_sha256": sha256_json(lock) if lock else None,
        "runs": runs,
    }
    if lock:  # the backend files each run ran against its placement's pinned ones, per method (backends/sources.py)
        provenance["source_parity"] = study_rows(
            lock, [(m, s, d) for d, (m, s) in zip(run_dirs, [(m, s) for m in methods for s in seeds])]
        )
    entries = certificate(run_dirs, root)
    parity = parity_checks(run_dirs, entries)
    overlap = overlapping_runs(runs)
    if overlap:
        more.append(overlap)
    if panel:
        parity.append(
            {
                "check": "every method and seed scored on the frozen task panel",
                "status": "pass",
                "detail": f"{len(panel)} tasks of {lock_path.name}: every (task_id, task_hash) present exactly once per "
                f"episode in all {len(run_dirs)} runs at each evaluated step",
            }
        )
    else:
        parity.append(
            {
                "check": "every method and seed scored on the frozen task panel",
                "status": "not_run",
                "detail": "no lock with a task panel: task sets were only compared between methods",
            }
        )
    parity.append(task_seed_check(lock, run_dirs))
    return Analysis(header, tables, notes + more, parity, provenance, df, entries)


def _shown(path: Path, root: Path) -> str:
    """`path` relative to the root when it lies under it (as the lock records files), else as it is."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()
