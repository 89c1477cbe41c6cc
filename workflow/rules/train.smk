# One job per method x seed: resolve its config from the lock, then train it.


wildcard_constraints:
    method="|".join(PLAN.methods),
    seed=r"\d+",
    step=r"\d+",


localrules:
    resolve,


# The study's container images, prepared on the host that submits the jobs (a local rule) before any train job: an
# Apptainer conversion or a registry pull then never falls to a GPU job on a node without a network
# (containers/prepare.py). Only for studies whose placements run in images.
IMAGES = [study_log("images.json")] if PLAN.images else []
if IMAGES:

    localrules:
        images,

    rule images:
        input:
            lock=LOCK,
        output:
            record=IMAGES[0],
        log:
            study_log("images.log"),
        conda:
            "../../envs/agentrepro.yaml"
        params:
            manifest=MANIFEST,
        shell:
            "agentrepro images {params.manifest:q} -o {output.record} > {log} 2>&1"


rule resolve:
    input:
        lock=LOCK,
    output:
        config=run_file(RUN.CONFIG),
    log:
        run_log("resolve.log"),
    benchmark:
        run_log("resolve.benchmark.tsv")
    conda:
        "../../envs/agentrepro.yaml"
    shell:
        "agentrepro resolve {input.lock} --method {wildcards.method} --seed {wildcards.seed}"
        " -o {output.config} > {log} 2>&1"


# The output is the run's seal, written last by `agentrepro train`. Checkpoints, metrics and
# provenance.json are not declared: Snakemake deletes the declared outputs of a failed job, and a retry
# must find the earlier attempts (provenance.json) and the last checkpoint (resume) where they were.
# A run whose config changed (a re-frozen lock) starts again instead (workflow/scripts/resume_flag.py).
rule train:
    input:
        config=run_file(RUN.CONFIG),
        lock=LOCK,
        warmstart=get_warmstart_seal,  # workflow/rules/warmstart.smk
        images=IMAGES,
    output:
        seal=run_file(RUN.OUTPUTS),
    log:
        run_log("train.log"),
    benchmark:
        run_log("train.benchmark.tsv")
    conda:
        "../../envs/agentrepro.yaml"
    params:
        run_dir=run_dir,
        slots=GPU_SLOTS,
        resume_flag=RESUME_FLAG,
        from_warmstart=get_warmstart_flag,
        launches=get_launches,  # shown, never run: `agentrepro train` runs them (common.smk)
    message:
        "train {wildcards.method} seed {wildcards.seed}: agentrepro train runs\n{params.launches}"
    threads: PLAN.job_threads()
    resources:
        **PLAN.job_resources(),
    shell:
        "python {params.slots:q} --gpus {resources.gpu} --"
        " agentrepro train --config {input.config} --out {params.run_dir} {params.from_warmstart}"
        " $(python {params.resume_flag:q} {input.config} {params.run_dir} {params.from_warmstart}) > {log} 2>&1"
