# The builtin trainer's warm start as a step of its own: one job per seed and warm-start identity
# (agentrepro.trainer.shared_warmstart: the seed, model, env and warm-start settings, hashed), not one per method.
# It writes runs/<study>/_warmstart/seed<k>-<id12>/ (checkpoint, step-0 outcomes, provenance, seal); every method
# of that seed with the same identity trains from it (`agentrepro train --from-warmstart`), so the methods start
# from the same bytes and step 0 is evaluated once. Its helpers (warmstart_of, get_warmstart_*) are in common.smk;
# the train rule takes get_warmstart_seal as an input and passes get_warmstart_flag.


wildcard_constraints:
    warmstart=r"seed\d+-[0-9a-f]{12}",


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
