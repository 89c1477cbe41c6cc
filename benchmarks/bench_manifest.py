"""How much audit and bundle cost over the unavoidable work: hashing (audit) and gzip+tar (bundle).

Builds a synthetic study in a temporary directory: R runs, each with a metrics file, a checkpoint
(left out of bundles) and E + 1 evaluation steps (0 and E more) of T outcome rows, all sealed and chained
like real runs, with an analysis and a report. Then times
* audit_study() against a baseline that only reads and SHA-256-hashes every sealed file once;
* write_bundle() against a baseline tar.gz (tarfile + gzip) of the same files;
and prints the ratios. Run: `.venv/bin/python benchmarks/bench_manifest.py [--runs 12 --tasks 512 --steps 4]`.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from study_kit import BASE, fake_outputs, fake_run, set_key, write_study

from agentrepro.audit.bundle import write_bundle
from agentrepro.audit.study import audit_study
from agentrepro.jobs.freeze import freeze


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--tasks", type=int, default=512)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tasks = [{"task_id": f"t{i}", "category": "c", "gamefile": f"g/{i}.tw"} for i in range(args.tasks)]
        methods = {f"m{i}": {"estimator": "grpo"} for i in range(max(1, args.runs // 3))}
        manifest = set_key(set_key(set_key(BASE, "eval.tasks", args.tasks), "methods", methods), "seeds", [0, 1, 2])
        manifest = set_key(set_key(manifest, "analysis.claims", []), "resources.cpus", 64)  # the recipe's env workers
        manifest = set_key(set_key(manifest, "train.steps", 10 * args.steps), "eval.every", 10)  # evaluated: 0, 10, ...
        write_study(root, manifest, tasks=tasks)
        (root / "manifests" / "references" / "demo.yaml").write_text(
            "paper: none\nmetric: success_rate\nvalues: {m0: {value: 0.5}}\n"
        )
        lock, _, _ = freeze(root / "manifests" / "demo.yaml", root=root, allow_dirty=True)
        for method in methods:
            for seed in (0, 1, 2):
                fake_run(
                    root,
                    lock,
                    method,
                    seed,
                    steps=tuple(range(0, 10 * args.steps + 1, 10)),
                    extra={"timings.jsonl": [{"step": s, "rollout": 0.1, "update": 0.2} for s in range(2000)]},
                )
        fake_outputs(root)
        sealed = sorted(
            p
            for p in (root / "runs").rglob("*")
            if p.is_file() and p.name != "OUTPUTS.sha256" and "logs" not in p.parts
        )
        size = sum(p.stat().st_size for p in sealed)

        def baseline_hash():
            for p in sealed:
                hashlib.sha256(p.read_bytes()).hexdigest()

        def baseline_tar():
            with tarfile.open(root / "plain.tar.gz", "w:gz") as tar:
                for p in sealed:
                    if "checkpoints" not in p.parts:
                        tar.add(p, arcname=str(p.relative_to(root)))

        problems = audit_study("demo", root)
        assert problems == [], problems[:3]
        t_hash = best_of(baseline_hash, args.repeat)
        t_audit = best_of(lambda: audit_study("demo", root), args.repeat)
        t_tar = best_of(baseline_tar, args.repeat)
        t_bundle = best_of(lambda: write_bundle("demo", root / "b.tar.gz", root), args.repeat)
        runs = len(methods) * 3
        print(
            f"study: {runs} runs x {args.steps + 1} eval steps (0 and every 10 of {10 * args.steps}) x {args.tasks} tasks; {len(sealed)} sealed files, {size / 1e6:.1f} MB"
        )
        print(f"hash every sealed file once : {t_hash * 1e3:8.1f} ms (baseline)")
        print(f"audit_study                 : {t_audit * 1e3:8.1f} ms  ratio {t_audit / t_hash:5.2f}x")
        print(f"plain tar.gz of same files  : {t_tar * 1e3:8.1f} ms (baseline)")
        print(f"write_bundle (incl. audit)  : {t_bundle * 1e3:8.1f} ms  ratio {t_bundle / t_tar:5.2f}x")


if __name__ == "__main__":
    main()
