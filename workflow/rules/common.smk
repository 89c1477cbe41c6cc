# Config, manifest and lock loading, and the get_<thing>(wildcards) helpers of every rule.
# The plan itself (methods x seeds, evaluated steps, resources, warm starts) is agentrepro.planning's.
from pathlib import Path

from snakemake.exceptions import WorkflowError

from agentrepro import layout, planning
from agentrepro.errors import BadInput
from agentrepro.process import PREEMPT_HELD, forward_preemption_signal

# The signal SLURM sends before a job's time limit is for the training alone (agentrepro.process): this process (the
# job's Snakemake under SLURM) passes it on to what it started, its shells and the GPU slot wrapper ignore it.
forward_preemption_signal()
shell.prefix(f"set -euo pipefail; {PREEMPT_HELD}; ")

WORKFLOW_DIR = Path(workflow.basedir) / "workflow" if (Path(workflow.basedir) / "workflow").is_dir() else Path(workflow.basedir).parent


DEFAULT_MANIFEST = "manifests/frozenlake-cpu.yaml"
MANIFEST = str(config.get("manifest", DEFAULT_MANIFEST))
GPU_SLOTS = str(WORKFLOW_DIR / "scripts" / "gpu_slots.py")
RESUME_FLAG = str(WORKFLOW_DIR / "scripts" / "resume_flag.py")
FREEZE_FLAGS = str(config.get("freeze_flags", ""))
# --config pdf=false: the report job writes only the HTML (no PDF: saves the print, ~20 s without Chromium).
PDF = str(config.get("pdf", True)).lower() not in ("false", "0", "no")

try:
    PLAN = planning.study_plan(MANIFEST)
    LOCK_STATE = PLAN.lock_state()
except BadInput as exc:
    raise WorkflowError(str(exc)) from None

# Every path comes from agentrepro.layout (the study's home is the manifest's folder; the rest is under the
# working directory, by slug). The analyze and report jobs name the study by its manifest, so that a
# manifest outside manifests/ is found again there.
STUDY = PLAN.study
LAYOUT = PLAN.layout
LOCK = PLAN.lock
RUN_DIR = str(LAYOUT.run_dir("{method}", "{seed}"))
RUN = layout.RunFiles


def run_file(name):
    """A file of the run of the job's wildcards (a pattern with {method} and {seed})."""
    return str(Path(RUN_DIR) / name)


def run_log(name):
    """logs/<name> of the run of the job's wildcards."""
    return str(layout.run_log(RUN_DIR, name))


def study_log(name):
    """logs/<study>/<name>: logs of the study-wide stages."""
    return str(LAYOUT.log(name))


def analysis_file(name):
    return str(LAYOUT.analysis / name)


def report_file(name):
    return str(LAYOUT.reports / name)


def run_dir(wildcards):
    """runs/<study>/<method>/seed<k> of the job's wildcards."""
    return str(LAYOUT.run_dir(wildcards.method, wildcards.seed))


_SHOWN = {}


def get_launches(wildcards):
    """What the train job of these wildcards runs, as `agentrepro command MANIFEST --method M --seed K` prints it
    (agentrepro.planning.StudyPlan.shown): the train job's message, so `snakemake -n -p` lists every external program
    before anything runs. Text only: it never enters a job's shell command."""
    key = (wildcards.method, int(wildcards.seed))
    if key not in _SHOWN:
        try:
            _SHOWN[key] = PLAN.shown(*key, check=False)  # freeze and train check
        except BadInput as exc:
            raise WorkflowError(str(exc)) from None
    return _SHOWN[key]


def get_runs():
    """Every (method, seed) of the study."""
    return [(m, s) for m in PLAN.methods for s in PLAN.seeds]


def get_train_seals():
    """The OUTPUTS.sha256 seal of every run: train writes it last."""
    return [str(LAYOUT.run_dir(m, s) / RUN.OUTPUTS) for m, s in get_runs()]


def get_outcomes():
    """outcomes.jsonl of every run at every evaluated step (= every checkpoint the backend saves)."""
    return [str(layout.outcomes_path(LAYOUT.run_dir(m, s), n)) for m, s in get_runs() for n in PLAN.steps]


def get_final_outputs():
    """The final targets of the DAG (the all target): the study's report, and every run's seal and outcomes.

    Snakemake does not rebuild a missing intermediate file whose consumers are up to date; naming the seals
    and outcomes here as targets means that deleting one run's outcomes re-runs that run's evaluation, and
    then (its input being newer) the analysis and the report, and nothing else.
    """
    pdf = [report_file("report.pdf")] if PDF else []
    return [report_file("report.html"), *pdf, *get_warmstart_seals(), *get_train_seals(), *get_outcomes()]


def get_report_pdf():
    """The report job's PDF output (named `pdf`), unless `--config pdf=false`."""
    if not PDF:
        return {}
    return {"pdf": report(report_file("report.pdf"), caption="../report/report_pdf.rst", category="Report")}


# --- the shared warm starts (workflow/rules/warmstart.smk) ------------------------------------------------


def warmstart_path(name, *parts):
    """runs/<study>/_warmstart/<name>/<parts> (name: a seed<k>-<id12> folder or the {warmstart} wildcard)."""
    return str(Path(LAYOUT.warmstarts, name, *parts))


def warmstart_of(method, seed):
    """The warm-start folder of a method x seed, or None when it does not warm-start with the builtin backend."""
    ident = PLAN.warmstarts.get((method, int(seed)))
    return None if ident is None else warmstart_path(layout.warmstart_name(seed, ident))


def get_warmstart_seals():
    """The seal of every planned warm start (targets of `all`, so that a deleted warm start is made again)."""
    return sorted({str(Path(warmstart_of(m, s)) / RUN.OUTPUTS) for m, s in get_runs() if warmstart_of(m, s)})


def get_warmstart_seal(wildcards):
    """A train job's warm start (its seal), or nothing."""
    folder = warmstart_of(wildcards.method, wildcards.seed)
    return [] if folder is None else [str(Path(folder) / RUN.OUTPUTS)]


def get_warmstart_flag(wildcards):
    """`--from-warmstart DIR` for a train job with a warm start, else nothing."""
    folder = warmstart_of(wildcards.method, wildcards.seed)
    return "" if folder is None else f"--from-warmstart {folder}"


def get_warmstart_config(wildcards):
    """The run config of the first method (manifest order) of the warm start's seed that uses it."""
    for method, seed in get_runs():
        if warmstart_of(method, seed) == warmstart_path(wildcards.warmstart):
            return str(LAYOUT.run_dir(method, seed) / RUN.CONFIG)
    raise WorkflowError(f"{warmstart_path(wildcards.warmstart)}: no method of the study plans this warm start")
