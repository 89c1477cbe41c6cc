# The builtin trainer's warm start as a step of its own (issue 18): one job per seed and warm-start identity
# (agentrepro.trainer.warmstart_id: the seed, model, env and warm-start settings, hashed), not one per method.
# It writes runs/<study>/_warmstart/seed<k>-<id12>/ (checkpoint, step-0 outcomes, provenance, seal); every method
# of that seed with the same identity trains from it (`agentrepro train --from-warmstart`), so the methods start
# from the same bytes and step 0 is evaluated once. Included before train.smk, whose train rule takes these inputs.


wildcard_constraints:
    warmstart=r"seed\d+-[0-9a-f]{12}",


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


rule warmstart:
    input:
        config=get_warmstart_config,
        lock=LOCK,
    output:
        seal=warmstart_path("{warmstart}", RUN.OUTPUTS),
    log:
        warmstart_path("{warmstart}", RUN.LOGS, "warmstart.log"),
    benchmark:
        warmstart_path("{warmstart}", RUN.LOGS, "warmstart.benchmark.tsv")
    conda:
        "../../envs/agentrepro.yaml"
    params:
        out=lambda wildcards: warmstart_path(wildcards.warmstart),
        slots=GPU_SLOTS,
    threads: PLAN.threads
    resources:
        **PLAN.resources,
    shell:
        "python {params.slots:q} --gpus {resources.gpu} --"
        " agentrepro warmstart --config {input.config} --out {params.out} > {log} 2>&1"
