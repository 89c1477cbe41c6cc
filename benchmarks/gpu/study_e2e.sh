#!/usr/bin/env bash
# The shipped GPU study (manifests/vagen-sokoban.yaml) through the real Snakefile, at a reduced size, on one GPU:
# its model.path placeholder filled with a random-weight Qwen2 of Qwen2.5-0.5B's shape and a ChatML template
# (agentrepro.serving.tiny), then freeze -> resolve -> train -> eval -> analyze with the defaults users get.
#
#     benchmarks/gpu/study_e2e.sh OUT [DEVICE [SHAPE]]     # DEVICE cuda (default) or cpu, SHAPE qwen2.5-0.5b or tiny
#
# Reduced: the two methods of the study's first claim (ppo_concat, grpo_concat), seeds 0 and 1, 3 RL steps (the first
# compiles the update's kernels), evaluated at steps 0 and 3 on 32 tasks, turns of at most 128 tokens (a random-weight
# model never ends a turn early, so every turn runs to the cap: the shipped 512 would time only the cap); everything
# else as shipped. Two jobs share the GPU (AGENTREPRO_JOBS_PER_GPU=2). The study comes back as OUT/study.tgz
# (manifests, lock, runs without checkpoints, analysis), with OUT/snakemake.log and OUT/wall.txt; the report is built
# from it elsewhere (`agentrepro report vagen-sokoban --root <unpacked>`). Needs snakemake and agentrepro importable,
# and `agentrepro` on PATH. E2E_LIMIT_S (default: none) stops snakemake after that many seconds and still packs what
# finished, for a device whose commands have a time limit.
set -euo pipefail
out=$(realpath -m "$1")
device=${2:-cuda}
shape=${3:-qwen2.5-0.5b}
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
mkdir -p "$out"
cp -r "$repo/Snakefile" "$repo/workflow" "$repo/profiles" "$repo/envs" "$work/"
mkdir -p "$work/manifests"
cp -r "$repo/manifests/references" "$work/manifests/"
python3 -c "from agentrepro.serving.tiny import build; build('$work/model', shape='$shape', max_tokens=8192)"
python3 - "$repo/manifests/vagen-sokoban.yaml" "$work/manifests/vagen-sokoban.yaml" "$work/model" "$device" <<'EOF'
import sys

import yaml

source, target, model, device = sys.argv[1:]
manifest = yaml.safe_load(open(source))
manifest["model"]["path"] = model
manifest["methods"] = {m: manifest["methods"][m] for m in ("ppo_concat", "grpo_concat")}
manifest["seeds"] = [0, 1]
manifest["train"].update(steps=3, max_new_tokens=128, device=device)
manifest["eval"].update(tasks=32, every=3)
manifest["resources"].update(runtime_min=30, gpus=0 if device == "cpu" else 1)
manifest["analysis"]["claims"] = manifest["analysis"]["claims"][:1]
yaml.safe_dump(manifest, open(target, "w"), sort_keys=False)
EOF
cd "$work"
start=$(date +%s)
gpus=$([ "$device" = cpu ] && echo 0 || echo 2)
set +e
AGENTREPRO_JOBS_PER_GPU=2 AGENTREPRO_GPU_DEVICES=0 timeout "${E2E_LIMIT_S:-0}" python3 -m snakemake --cores 16 --resources gpu="$gpus" \
    --until analyze --config manifest=manifests/vagen-sokoban.yaml freeze_flags=--allow-dirty \
    > "$out/snakemake.log" 2>&1
status=$?
set -e
echo "snakemake exit $status, $(( $(date +%s) - start )) s" | tee "$out/wall.txt"
# one archive (a device hands back only shallow folders): manifests, lock, analysis and the runs without their
# checkpoints (gigabytes at model size): configs, metrics, timings, outcomes, provenance, logs
tar --exclude=checkpoints -czf "$out/study.tgz" $(ls -d manifests analysis runs logs 2>/dev/null)
exit $status
