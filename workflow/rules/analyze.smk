# Paired statistics, verdicts, diagnostics and overhead of the whole study (docs/design.md §3.6).


rule analyze:
    input:
        lock=LOCK,
        seals=get_train_seals(),
        outcomes=get_outcomes(),
    output:
        analysis=f"analysis/{STUDY}/analysis.json",
        verdicts=report(f"analysis/{STUDY}/verdicts.csv", caption="../report/verdicts.rst", category="Tables"),
        claims=report(f"analysis/{STUDY}/claims.csv", caption="../report/claims.rst", category="Tables"),
        methods=report(f"analysis/{STUDY}/methods.csv", caption="../report/methods.rst", category="Tables"),
        paired=report(f"analysis/{STUDY}/paired.csv", caption="../report/paired.rst", category="Tables"),
    log:
        f"logs/{STUDY}/analyze.log",
    benchmark:
        f"logs/{STUDY}/analyze.benchmark.tsv"
    conda:
        "../../envs/agentrepro.yaml"
    params:
        study=STUDY,
    resources:
        runtime=30,
        mem_mb=4000,
    shell:
        "agentrepro analyze {params.study} > {log} 2>&1"
