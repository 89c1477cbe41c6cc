# One job per evaluated checkpoint of a run: 0, every `eval.every` steps, and `eval.checkpoint`.
# Its own provenance.json and seal live in eval/step<N>/; only outcomes.jsonl is declared, so a failed
# attempt keeps its provenance for the retry. Once the outcomes are written, `agentrepro eval` prunes the step's
# checkpoint as the manifest's eval.keep_checkpoints says (src/agentrepro/backends/checkpoints.py), before its seal.


rule eval:
    input:
        seal=run_file(RUN.OUTPUTS),
    output:
        outcomes=str(layout.outcomes_path(RUN_DIR, "{step}")),
    log:
        run_log("eval-step{step}.log"),
    benchmark:
        run_log("eval-step{step}.benchmark.tsv")
    conda:
        "../../envs/agentrepro.yaml"
    params:
        run_dir=run_dir,
        slots=GPU_SLOTS,
    threads: PLAN.job_threads(evaluation=True)
    resources:
        **PLAN.job_resources(evaluation=True),
    shell:
        "python {params.slots:q} --gpus {resources.gpu} --"
        " agentrepro eval --run {params.run_dir} --step {wildcards.step} > {log} 2>&1"
