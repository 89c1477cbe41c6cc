# Paired statistics, verdicts, diagnostics and overhead of the whole study (docs/design.md §3.6).


rule analyze:
    input:
        lock=LOCK,
        seals=get_train_seals(),
        outcomes=get_outcomes(),
    output:
        analysis=analysis_file("analysis.json"),
        verdicts=report(analysis_file("verdicts.csv"), caption="../report/verdicts.rst", category="Tables"),
        claims=report(analysis_file("claims.csv"), caption="../report/claims.rst", category="Tables"),
        methods=report(analysis_file("methods.csv"), caption="../report/methods.rst", category="Tables"),
        paired=report(analysis_file("paired.csv"), caption="../report/paired.rst", category="Tables"),
    log:
        study_log("analyze.log"),
    benchmark:
        study_log("analyze.benchmark.tsv")
    conda:
        "../../envs/agentrepro.yaml"
    params:
        study=LAYOUT.manifest,
    resources:
        runtime=30,
        mem_mb=4000,
    shell:
        "agentrepro analyze {params.study:q} > {log} 2>&1"
