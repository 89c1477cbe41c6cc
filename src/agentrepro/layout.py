"""Where a study's files live, and nothing else.

The one owner of the study layout (docs/design.md §2, §3.3). Everything that reads or writes a study's files
(the workflow, the verbs, the backends, the trainer, the analysis, the report and the audit) asks here.

* `locate(study, root=".") -> Study`: a study named by its slug lives in `<root>/manifests/<slug>.yaml`; a
  study whose manifest lives elsewhere is named by the manifest's path (a `.yaml`/`.yml` file, e.g.
  `tests/workflow/manifests/wf-tiny.yaml`). Its lock sits beside its manifest; its `reference:` is relative to
  the manifest's folder; runs, analysis, reports and logs live under the root, by slug.
* The shared warm starts `runs/<study>/_warmstart/seed<k>-<id12>/` (`Study.warmstart_dir`; trainer/shared_warmstart.py).
* The run directory `runs/<study>/<method>/seed<k>/`: the name of every file of the run contract
  (`RunFiles`), and the paths that carry a step (`eval_dir`, `outcomes_path`, `batch_dump`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from agentrepro.errors import BadInput

SLUG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")
# A method's directory name: a slug, or a slug @ the backend it runs on (`graphgpo@relax`; agentrepro.placement).
METHOD_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(?:@[A-Za-z0-9][A-Za-z0-9._-]*)?\Z")
STEP_DIR_RE = re.compile(r"^step(\d+)\Z")
SEED_DIR_RE = re.compile(r"^seed(\d+)\Z")
MANIFEST_SUFFIXES = (".yaml", ".yml")
MANIFESTS, RUNS, ANALYSIS, REPORTS, LOGS = "manifests", "runs", "analysis", "reports", "logs"
# runs/<study>/_warmstart/seed<k>-<id>/: the shared warm starts (a name no method slug can take).
WARMSTARTS = "_warmstart"
WARMSTART_DIR_RE = re.compile(r"^seed(\d+)-([0-9a-f]{12})\Z")
LOCK_SUFFIX = ".lock.json"
# reports/<study>/analysis.sha256: every analysis file the report was rendered from (sha256sum lines, root-relative
# paths), sealed with the report; the audit checks that the analysis still hashes so (audit/chain.py).
REPORT_ANALYSIS_RECORD = "analysis.sha256"
STUDY_HELP = "the study: its slug (manifest manifests/STUDY.yaml under --root) or the path of its manifest"


class RunFiles:
    """The names inside a run directory (docs/design.md §3.3)."""

    CONFIG = "config.yaml"  # written by `agentrepro resolve`
    RESOLVED_CONFIG = "resolved_config.yaml"
    COMMAND = "command.txt"
    PROVENANCE = "provenance.json"  # also inside every eval/step<N>/
    OUTPUTS = "OUTPUTS.sha256"  # the seal, written last (also inside every eval/step<N>/)
    METRICS = "metrics.jsonl"
    TIMINGS = "timings.jsonl"
    GRAPH_DIAGNOSTICS = "graph_diagnostics.jsonl"
    WARMSTART = "warmstart.json"
    WANDB_RUN = "wandb_run.json"  # the run's W&B id, kept across its attempts (agentrepro.tracking)
    BATCHES = "batches"  # batches/step<N>.jsonl
    CHECKPOINTS = "checkpoints"
    EVAL = "eval"  # eval/step<N>/outcomes.jsonl
    OUTCOMES = "outcomes.jsonl"
    PRUNED = "pruned.json"  # eval/step<N>/pruned.json: checkpoint files removed once N was evaluated
    LOGS = "logs"  # live logs: never sealed
    STEP_LOGS = (METRICS, TIMINGS, GRAPH_DIAGNOSTICS)


def step_name(step: int | str) -> str:
    """`step<N>` (a string step such as Snakemake's `{step}` wildcard passes through)."""
    return f"step{step}"


def eval_dir(run_dir: str | os.PathLike, step: int | str) -> Path:
    return Path(run_dir) / RunFiles.EVAL / step_name(step)


def outcomes_path(run_dir: str | os.PathLike, step: int | str) -> Path:
    return eval_dir(run_dir, step) / RunFiles.OUTCOMES


def batch_dump(run_dir: str | os.PathLike, step: int | str) -> Path:
    return Path(run_dir) / RunFiles.BATCHES / f"{step_name(step)}.jsonl"


def checkpoint_dir(run_dir: str | os.PathLike) -> Path:
    return Path(run_dir) / RunFiles.CHECKPOINTS


def checkpoint_file(run_dir: str | os.PathLike, step: int | str) -> Path:
    """`checkpoints/step<N>.pt`: the builtin trainer's checkpoint of step N (weights, optimizer, random states)."""
    return checkpoint_dir(run_dir) / f"{step_name(step)}.pt"


def tokenizer_dir(run_dir: str | os.PathLike) -> Path:
    """`checkpoints/tokenizer/`: the builtin trainer's tokenizer, saved once per run."""
    return checkpoint_dir(run_dir) / "tokenizer"


def hf_checkpoint(run_dir: str | os.PathLike, step: int | str) -> Path:
    """`checkpoints/hf/step<N>/`: checkpoint N as a Hugging Face model directory (what the served evaluator reads)."""
    return checkpoint_dir(run_dir) / "hf" / step_name(step)


def run_log(run_dir: str | os.PathLike, name: str) -> Path:
    """`logs/<name>` of a run (a stage's log or benchmark file)."""
    return Path(run_dir) / RunFiles.LOGS / name


def evaluations_on_disk(run_dir: str | os.PathLike) -> list[tuple[int, Path]]:
    """(step, eval/step<N>/) of every evaluation directory present, by step."""
    found = [
        (int(m.group(1)), p)
        for p in (Path(run_dir) / RunFiles.EVAL).glob("step*")
        if p.is_dir() and (m := STEP_DIR_RE.match(p.name))
    ]
    return sorted(found)


def batch_dumps_on_disk(run_dir: str | os.PathLike) -> list[Path]:
    return sorted((Path(run_dir) / RunFiles.BATCHES).glob("step*.jsonl"))


@dataclass(frozen=True)
class Study:
    """The paths of one study under `root`; `manifest` is where its manifest is (its home)."""

    name: str
    manifest: Path
    root: Path = Path(".")

    @property
    def lock(self) -> Path:
        return lock_path(self.manifest)

    def reference(self, relative: str) -> Path:
        """A manifest's `reference:` (relative to the manifest's folder)."""
        return self.manifest.parent / relative

    @property
    def runs(self) -> Path:
        return self.root / RUNS / self.name

    def run_dir(self, method: str, seed: int | str) -> Path:
        return self.runs / method / f"seed{seed}"

    @property
    def warmstarts(self) -> Path:
        """runs/<study>/_warmstart/: the study's shared warm starts (one per seed and warm-start identity)."""
        return self.runs / WARMSTARTS

    def warmstart_dir(self, seed: int | str, identity: str) -> Path:
        """runs/<study>/_warmstart/seed<k>-<first 12 hex of the identity>/ (trainer/shared_warmstart.py)."""
        return self.warmstarts / warmstart_name(seed, identity)

    def run_dirs_on_disk(self) -> list[tuple[str, int, Path]]:
        """(method, seed, runs/<study>/<method>/seed<k>/) of every run directory present, sorted."""
        if not self.runs.is_dir():
            return []
        return [
            (method_dir.name, int(m.group(1)), seed_dir)
            for method_dir in sorted(p for p in self.runs.iterdir() if p.is_dir())
            for seed_dir in sorted(p for p in method_dir.iterdir() if p.is_dir())
            if (m := SEED_DIR_RE.match(seed_dir.name))
        ]

    @property
    def analysis(self) -> Path:
        return self.root / ANALYSIS / self.name

    @property
    def reports(self) -> Path:
        return self.root / REPORTS / self.name

    @property
    def logs(self) -> Path:
        return self.root / LOGS / self.name

    def log(self, name: str) -> Path:
        """`logs/<study>/<name>`: logs of the study-wide stages (freeze, analyze, report)."""
        return self.logs / name


def warmstart_name(seed: int | str, identity: str) -> str:
    """`seed<k>-<id12>`: the folder of a shared warm start (its full identity is in its resolved config)."""
    return f"seed{seed}-{identity[:12]}"


def lock_path(manifest: str | os.PathLike) -> Path:
    """The lock beside its manifest: `<dir>/<study>.yaml` -> `<dir>/<study>.lock.json`."""
    manifest = Path(manifest)
    return manifest.with_name(manifest.name.rsplit(".", 1)[0] + LOCK_SUFFIX)


def is_manifest_path(study: str | os.PathLike) -> bool:
    return Path(study).suffix in MANIFEST_SUFFIXES


def locate(study: str | os.PathLike, root: str | os.PathLike = ".") -> Study:
    """The study named `study`: a slug (manifest `<root>/manifests/<slug>.yaml`) or the path of its manifest.

    A manifest path is taken as given (relative to the current directory, like `agentrepro freeze`); the
    study's slug is its file name, which `load_manifest` requires to equal the manifest's `study`.
    """
    root = Path(root)
    text = os.fspath(study)
    if is_manifest_path(text):
        manifest = Path(text)
        name = manifest.name.rsplit(".", 1)[0]
    else:
        name, manifest = text, root / MANIFESTS / f"{text}.yaml"
    if not SLUG_RE.match(name):
        raise BadInput(
            f"expected a study slug (letters, digits, '.', '_', '-') or the path of its manifest, got {text!r}",
            where="STUDY",
        )
    return Study(name=name, manifest=manifest, root=root)
