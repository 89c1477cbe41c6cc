"""The analysis → report contract: every table of analysis/<study>/, its CSV file and its columns in order.

This is the one declaration of that contract (docs/design.md §3.6). The writers take their column lists
from it (`names`), `agentrepro analyze` checks every table against it before writing (`check_frame`), the
report validates analysis.json against it (agentrepro.report.load) and draws its plain tables from it,
and the table lists of docs/formats.md "Analysis" and docs/internals.md are generated from it
(agentrepro.analysis.contract_docs; a test fails when they are out of date).

A table's columns are its `required` columns (the contract the report relies on; docs/design.md §3.6
fixes them) followed by its other columns, always written, in the declared order. An `open` table
(diagnostics, training) then carries any other field of the per-step JSONL rows it is read from, sorted
by name. Each `tables.<name>` of analysis.json is the list of row objects of `<name>.csv`. Each column
has a kind (KINDS), which the report checks; a trailing `?` also allows null.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

KINDS = {
    "str": "a string",
    "int": "an integer",
    "num": "a finite number",
    "rate": "a fraction in [0, 1] (rates are never percentages)",
    "p": "a p-value in [0, 1]",
    "seconds": "a duration in seconds",
    "share": "a fraction of a total (of the step time)",
    "seed": 'an integer seed or "all"',
    "bool": "true or false",
    "verdict": "reproduced, not_reproduced or inconclusive",
    "json": "a JSON object (histograms; JSON text in the CSV)",
}


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # a key of KINDS, optionally followed by "?" (null allowed)
    required: bool = True  # part of the contract the report relies on (docs/design.md §3.6)
    title: str = ""  # a few words for people (the report's column header); default: the name
    null: str = ""  # what null means, where it means more than "missing"

    @property
    def header(self) -> str:
        return self.title or self.name


@dataclass(frozen=True)
class Table:
    name: str
    row: str  # what one row is
    columns: tuple[Column, ...]
    open: bool = False  # other fields of the source rows follow, sorted by name
    key: tuple[str, ...] = ("method",)  # the columns that name a row for people (an audit's problem line)

    @property
    def file(self) -> str:
        return f"{self.name}.csv"

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def required(self) -> list[Column]:
        return [c for c in self.columns if c.required]


def _cols(required: str, extra: str = "") -> tuple[Column, ...]:
    """Columns from 'name:kind' words: the required ones, then the extra ones."""

    def parse(words: str, req: bool) -> list[Column]:
        return [Column(name, kind, required=req) for name, _, kind in (w.partition(":") for w in words.split())]

    return tuple(parse(required, True) + parse(extra, False))


RATE_COLUMNS = "n:int successes:int rate:rate wilson_lo:rate wilson_hi:rate"
CLUSTERED = "ci_lo:rate ci_hi:rate n_eff:num ci_test:str"  # the pooled rate's task-clustered interval (intervals.clustered_wilson)
PER_STEP = "method:str seed:int step:int"

TABLES: tuple[Table, ...] = (
    Table(
        "runs",
        "method × seed × step: successes of n episodes and the Wilson interval",
        _cols(f"method:str seed:int step:int {RATE_COLUMNS}"),
        key=("method", "seed", "step"),
    ),
    Table(
        "methods",
        "method × step: mean ± std (ddof = 1) of the per-seed rates, pooled k/n with the Wilson interval "
        "(episodes as independent) and the task-clustered interval (seeds replay the same tasks)",
        _cols(
            "method:str step:int seeds:int mean:rate std:num? pooled_n:int pooled_successes:int pooled_rate:rate "
            "wilson_lo:rate wilson_hi:rate",
            f"std_ddof:int {CLUSTERED}",
        ),
        key=("method", "step"),
    ),
    Table(
        "paired",
        "method pair × seed (or `all`, seeds pooled by task) × step: the 2×2 table, a − b with its CI and tests",
        _cols(
            "method_a:str method_b:str seed:seed step:int n_tasks:int both:int a_only:int b_only:int neither:int "
            "delta:num ci_lo:num? ci_hi:num? mcnemar_p:p? p_holm:p?",
            "p:p? test:str boot_lo:num? boot_hi:num? n_pairs:int family:str",
        ),
        key=("method_a", "method_b", "seed", "step"),
    ),
    Table(
        "learning",
        "method × seed (or `all`, seeds pooled by task) at the final step against the same method's step 0 on the "
        "same tasks: the 2×2 table (gained: solved at the step only; lost: at step 0 only), the difference with its CI and tests",
        _cols(
            "method:str seed:seed step:int baseline_step:int n_tasks:int both:int gained:int lost:int neither:int "
            "delta:num ci_lo:num? ci_hi:num? mcnemar_p:p? p_holm:p?",
            "p:p? test:str boot_lo:num? boot_hi:num? n_pairs:int family:str",
        ),
        key=("method", "seed", "step"),
    ),
    Table(
        "categories",
        "method × task category × step, pooled over seeds, with the Wilson and the task-clustered interval",
        _cols(f"method:str category:str step:int {RATE_COLUMNS}", CLUSTERED),
        key=("method", "category", "step"),
    ),
    Table(
        "verdicts",
        "method with a reference value (a paper, a reference implementation or an earlier run): ours − reference at the "
        "final step, its 90%/95% CIs and the verdict; `paper`, `paper_std` and `paper_seeds` hold the reference's "
        "value, std and seeds whatever its kind (analysis.json's `settings.reference.kind` says which)",
        _cols(
            "method:str paper:rate paper_std:num? ours:rate delta:num ci90_lo:num? ci90_hi:num? ci95_lo:num? "
            "ci95_hi:num? tolerance:num verdict:verdict tasks_needed:num? reason:str",
            "seeds_needed:num? test:str seeds:int n_tasks:int paper_seeds:num? source:str? checked:bool needed:str",
        ),
        key=("method",),
    ),
    Table(
        "claims",
        "declared claim at the final step: 'a > b' (one row: the paired `all` difference, Holm-adjusted p, "
        "whether it holds) or 'a == b ± m pp' (one row per seed and one `all` row on the shared tasks: TOST verdict, tasks needed)",
        _cols(
            "claim:str method_a:str method_b:str delta:num? ci_lo:num? ci_hi:num? p:p? p_holm:p? holds:bool",
            "statement:str kind:str seed:seed margin:num? n_tasks:int? seeds:int? ci90_lo:num? ci90_hi:num? "
            "verdict:verdict? tasks_needed:num? test:str? family:str? needed:str?",
        ),
        key=("claim", "seed"),
    ),
    Table(
        "families",
        "statistical family: the comparisons Holm-adjusted together (agentrepro.analysis.families), named by the key "
        "the paired, learning and claims rows carry in `family`",
        _cols("family:str label:str comparisons:int adjustment:str table:str"),
        key=("family",),
    ),
    Table(
        "diagnostics",
        "method × seed × training step: the graph diagnostics of graph_diagnostics.jsonl",
        _cols(
            PER_STEP,
            "groups:num? nodes:num? edges:num? duplicate_edge_ratio:num? shared_state_rate:num? "
            "singleton_out_edge_ratio:num? nonzero_graph_adv_ratio:num? all_fail_groups:num? all_success_groups:num? "
            "unreachable_ratio:num? distance_hist:json? step_group_size_hist:json?",
        ),
        open=True,
        key=("method", "seed", "step"),
    ),
    Table(
        "overhead",
        "method × timed component: seconds per step (p50, p95, mean) and its share of the step time",
        (
            Column("method", "str", title="Method"),
            Column("component", "str", title="Component"),
            Column("n", "int", title="Steps"),
            Column("p50_s", "seconds", title="p50"),
            Column("p95_s", "seconds", title="p95"),
            Column("mean_s", "seconds", title="Mean"),
            Column("share_of_step", "share?", title="Share of step time"),
        ),
        key=("method", "component"),
    ),
    Table(
        "convergence",
        "method × seed: area under the eval curve, steps and env steps to the threshold, cost",
        (
            Column("method", "str", title="Method"),
            Column("seed", "int", title="Seed"),
            Column("auc", "rate?", title="AUC (mean rate over checkpoints)"),
            Column("threshold", "rate?", title="Threshold"),
            Column("steps_to_threshold", "num?", title="Steps to threshold", null="not reached"),
            Column("env_steps_to_threshold", "num?", title="Env steps to threshold", null="not reached"),
            Column("tokens_generated", "num?", title="Tokens generated"),
            Column("wall_s", "seconds?", title="Wall time"),
            Column("gpu_hours", "num?", title="GPU-hours"),
            Column("eval_steps", "int", required=False),
        ),
        key=("method", "seed"),
    ),
    Table(
        "training",
        "method × seed × training step: the metrics of metrics.jsonl",
        _cols(
            PER_STEP,
            "env_steps:num? episodes:num? tokens_generated:num? tokens_trained:num? train_success_rate:num? "
            "reward_mean:num? valid_action_ratio:num? loss_policy:num? loss_value:num? kl:num? entropy:num? "
            "grad_norm:num? lr:num? wall_s:num? gpu_hours:num?",
        ),
        open=True,
        key=("method", "seed", "step"),
    ),
)
BY_NAME: dict[str, Table] = {t.name: t for t in TABLES}
TABLE_NAMES: list[str] = [t.name for t in TABLES]


def names(table: str) -> list[str]:
    """The declared columns of `table`, in order."""
    return BY_NAME[table].names


def empty(table: str) -> pd.DataFrame:
    """A table with its declared columns and no row."""
    return pd.DataFrame(columns=names(table))


def check_frame(table: str, frame: pd.DataFrame) -> None:
    """Raise if `frame`'s columns are not the declared ones in order (open tables: then other fields, sorted).

    A mismatch is a bug in the analysis, not bad input: the writer and this declaration disagree.
    """
    declared, got = names(table), [str(c) for c in frame.columns]
    head, rest = got[: len(declared)], got[len(declared) :]
    if head != declared or (
        rest and not (BY_NAME[table].open and rest == sorted(rest) and not set(rest) & set(declared))
    ):
        raise RuntimeError(
            f"table {table!r}: columns {got} differ from the contract {declared} "
            "(agentrepro.analysis.contract declares them)"
        )
