# agentrepro: one DAG from a study manifest to its report (docs/design.md §1).
#   snakemake --cores 2                                            the default study, on this machine
#   snakemake --cores 2 --config manifest=manifests/<study>.yaml   another study
#   snakemake --profile slurm                                      the same DAG through SLURM
# The stages live in workflow/rules/, one file each; their helpers in workflow/rules/common.smk.

report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/freeze.smk"
include: "workflow/rules/warmstart.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/eval.smk"
include: "workflow/rules/analyze.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        get_final_outputs(),
    default_target: True
