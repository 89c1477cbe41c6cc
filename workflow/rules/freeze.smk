# The lock must exist and match the manifest before any job runs (docs/design.md §3.2).
#
# * No lock yet: this rule is the first job of the DAG (a dry run shows it first, so `snakemake -n` plans a
#   study whose manifest still has placeholders). It runs `agentrepro freeze`, which refuses mutable
#   references, so a placeholder fails here, before any training starts.
# * A lock that matches the manifest (same manifest_sha256): the rule is not defined at all and the lock is
#   a plain input, so a newer manifest mtime, a fresh clone or a code change never re-freezes it.
# * A lock that disagrees: common.smk stops the workflow (dry run too) and tells the user to run
#   `agentrepro freeze` after reviewing the change. The workflow never re-freezes on its own.

if LOCK_STATE == "missing":

    localrules:
        freeze,

    rule freeze:
        input:
            manifest=ancient(MANIFEST),
        output:
            lock=LOCK,
        log:
            study_log("freeze.log"),
        benchmark:
            study_log("freeze.benchmark.tsv")
        conda:
            "../../envs/agentrepro.yaml"
        params:
            flags=FREEZE_FLAGS,
        shell:
            "agentrepro freeze {params.flags} {input.manifest} > {log} 2>&1"
