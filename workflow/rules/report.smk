# The study's HTML and PDF report (docs/design.md §8). Both also go into Snakemake's own report:
#   snakemake --report reports/<study>/snakemake-report.html --config manifest=manifests/<study>.yaml
# (captions in workflow/report/; Snakemake adds the rule graph, runtimes and the code of every rule).
# The PDF is printed by Chromium if installed, else WeasyPrint; `--config pdf=false` writes only the HTML.


rule report:
    input:
        analysis=analysis_file("analysis.json"),
        lock=LOCK,
    output:
        html=report(
            report_file("report.html"),
            caption="../report/report_html.rst",
            category="Report",
        ),
        **get_report_pdf(),
        figures=report(
            directory(report_file("figures")),
            patterns=["{name}.png"],
            caption="../report/figures.rst",
            category="Figures",
        ),
    log:
        study_log("report.log"),
    benchmark:
        study_log("report.benchmark.tsv")
    conda:
        "../../envs/agentrepro.yaml"
    params:
        study=LAYOUT.manifest,
        pdf="" if PDF else "--no-pdf",
    resources:
        runtime=30,
        mem_mb=4000,
    shell:
        "agentrepro report {params.pdf} {params.study:q} > {log} 2>&1"
