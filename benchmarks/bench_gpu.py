"""The builtin trainer on a GPU at model size: seconds per RL step (rollout, advantage, update), generated
tokens/s against transformers `generate` in the same run, update MFU, peak memory.

    PYTHONPATH=src python3 benchmarks/bench_gpu.py [--model 0.5b|1.5b|smoke] [--steps 2] [--json out.json]

The model is a random-weight Qwen2 of Qwen2.5-0.5B's (or 1.5B's) shape, built from the config values below
(no hub), saved with a byte-level BPE tokenizer trained here on Sokoban texts (the VAGEN-Lite system prompt and
observations), and trained by `agentrepro.trainer.loop.Trainer` from that local directory: Sokoban, concat
mode, 16 groups x 8 = 128 trajectories, `--turns` turns of up to 256 new tokens (a random model seldom samples
<|endoftext|>, so turns run to 256), bf16, the static rollout engine, GraphGPO advantages, micro-batches of
`--micro-tokens` padded tokens with activation checkpointing. The policy reads the system prompt before the
first observation (702 tokens with this tokenizer, whose vocabulary the corpus caps at 688).

Measured:
* RL step seconds split into rollout / advantage (graph build + estimator) / update (median of --steps steps
  after one untimed step that captures the CUDA graph);
* one turn of 256 tokens for the 128 first prompts: the static engine vs `model.generate` (bf16, sampling,
  min_new_tokens = max_new_tokens so both generate the same count), tokens/s and their ratio;
* update MFU = model FLOPs / update seconds / 989e12 (H200 SXM dense bf16 peak, NVIDIA datasheet). Model FLOPs
  = 3 x forward (backward = 2 x forward; the recomputation of checkpointing is not counted), forward =
  2 x N x T + 4 x L x d x P, with N the parameters of every matmul (all non-embedding linear weights plus the
  tied LM head, V x d), T the attended tokens, L layers, d = hidden size, P the causal (query, key) pairs
  over attended tokens, sum over rows of n(n+1)/2; padding is computed but not counted. The update applies the
  LM head to generated tokens only, so `update_mfu_head_on_generated` also gives the stricter count (the head's
  V x d over the generated tokens);
* `--profile`: one more update under torch.profiler, CUDA kernel seconds by kind (matmul, attention, other).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

# Qwen2.5 configs: the values of config.json in Qwen/Qwen2.5-0.5B-Instruct and Qwen/Qwen2.5-1.5B-Instruct on
# the Hugging Face hub (transcribed; no download). "smoke" is a small shape for a first check of a machine.
SHAPES = {
    "0.5b": {
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
    },
    "1.5b": {
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_hidden_layers": 28,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
    },
    "smoke": {
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 4096,
        "max_position_embeddings": 4096,
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
    },
}
H200_BF16_PEAK = 989e12
EOS = "<|endoftext|>"


def sokoban_texts(n_seeds: int = 200) -> tuple[str, list[str]]:
    from agentrepro.environments import make_env

    env = make_env("sokoban", {})
    texts = [env.system_prompt()]
    for seed in range(n_seeds):
        obs, _ = env.reset(seed)
        texts.append(obs)
        for action in env.solve()[:3]:
            obs, *_ = env.step(env.format_actions([action]))
            texts.append(obs)
    return env.system_prompt(), texts


def build_model_dir(path: Path, shape: str, vocab: int) -> str:
    """A random-weight Qwen2 of `shape` and a BPE tokenizer trained on Sokoban texts, saved to `path`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen2Config

    _, texts = sokoban_texts()
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    core.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=vocab, special_tokens=[EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token=EOS, pad_token=EOS)
    tok.save_pretrained(path)
    cfg = Qwen2Config(
        **SHAPES[shape], eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id
    )
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(path)
    return str(path)


def update_flops(attention_mask: torch.Tensor, cfg, head_tokens: float | None = None) -> float:
    """3 x (2 N T + 4 L d P); with `head_tokens`, the LM head's V x d counted over that many tokens only (the
    generated tokens, the only ones the loss needs) instead of all T."""
    d, L = cfg.hidden_size, cfg.num_hidden_layers
    hd = d // cfg.num_attention_heads
    attn_lin = d * d + 2 * d * cfg.num_key_value_heads * hd + d * d  # q, k, v, o
    body, head = L * (attn_lin + 3 * d * cfg.intermediate_size), cfg.vocab_size * d
    n = attention_mask.sum(-1).double()
    tokens, pairs = float(n.sum()), float((n * (n + 1) / 2).sum())
    head_tokens = tokens if head_tokens is None else head_tokens
    return 3 * (2 * body * tokens + 2 * head * head_tokens + 4 * L * d * pairs)


GEMM_NAMES = ("gemm", "cutlass", "xmma", "nvjet", "cublas")


def profile_update(run, device) -> dict:
    """CUDA kernel time of one update by kind (matmul, attention, other) and the largest kernels, from
    torch.profiler; the profiler slows the host side, so its wall time is not the benchmark's."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize(device)
    wall = time.perf_counter() - t0
    kinds: dict[str, float] = {}
    kernels = []
    for e in prof.key_averages():
        t = e.self_device_time_total / 1e6
        if t <= 0:
            continue
        name = e.key.lower()
        kind = (
            "matmul"
            if any(k in name for k in GEMM_NAMES)
            else "attention"
            if any(k in name for k in ("fmha", "attention", "flash", "sdpa"))
            else "other"
        )
        kinds[kind] = kinds.get(kind, 0.0) + t
        kernels.append((t, e.count, e.key[:90]))
    kernels.sort(reverse=True)
    return {
        "wall_s_profiled": wall,
        "kernel_s": sum(kinds.values()),
        "kernel_s_by_kind": kinds,
        "top_kernels": [{"s": round(t, 4), "calls": c, "name": k} for t, c, k in kernels[:12]],
    }


@torch.no_grad()
def engine_check(engine, codec, device) -> dict:
    """The static engine's logits (prefill of 6 columns, one decode step) against transformers' forward of the
    same replica weights on the same rows (padding inside a row): the largest absolute difference."""
    rows, n = 4, 7
    ids = torch.randint(1, 300, (rows, n), generator=torch.Generator().manual_seed(0)).to(device)
    attn = torch.ones_like(ids)
    attn[1, 2:4] = 0
    engine.allocate(rows, 64)
    engine.ids[:, :n], engine.attn[:, :n] = ids, attn
    first = engine.prefill(0, n - 1)
    second = engine.decode(n - 1, ids[:, n - 1], attn[:, : n - 1].sum(-1))
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    ref = engine.lm(input_ids=ids, attention_mask=attn, position_ids=pos).logits.float()
    scale = float(ref.abs().max())
    return {
        "max_abs_diff_prefill": float((first - ref[:, n - 2]).abs().max()),
        "max_abs_diff_decode": float((second - ref[:, n - 1]).abs().max()),
        "max_abs_logit": scale,
        "same_argmax": bool(torch.equal(second.argmax(-1), ref[:, n - 1].argmax(-1))),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(SHAPES), default="0.5b")
    parser.add_argument("--steps", type=int, default=2, help="timed RL steps (after one untimed)")
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--groups", type=int, default=16, help="groups of 8 trajectories")
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--micro-tokens", type=int, default=16384)
    parser.add_argument("--vocab", type=int, default=1000, help="BPE vocabulary of the trained tokenizer")
    parser.add_argument("--json", default=None)
    parser.add_argument("--no-checkpointing", action="store_true", help="update without activation checkpointing")
    parser.add_argument("--skip-generate", action="store_true", help="no engine-vs-generate turn")
    parser.add_argument(
        "--update-kernels",
        default="eager",
        choices=("eager", "compiled"),
        help="train.update_kernels (trainer/kernels.py); the runs recorded before this option existed were eager",
    )
    parser.add_argument(
        "--update-precision",
        default="fp32",
        choices=("fp32", "bf16-master"),
        help="train.update_precision (trainer/precision.py); the runs recorded before this option existed were fp32",
    )
    parser.add_argument(
        "--profile", action="store_true", help="one more update under torch.profiler: kernel time by kind"
    )
    parser.add_argument("--device", default="cuda", help="cpu: a check of this script (no timings worth reading)")
    args = parser.parse_args(argv)
    import agentrepro.trainer.loop as loop
    from agentrepro.trainer.rollout import Codec, Sampler, rollout

    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    out: dict = {
        "model": args.model,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
    }
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_model_dir(Path(tmp) / "model", args.model, args.vocab)
        config = {
            "study": "bench",
            "method": "graphgpo",
            "seed": 0,
            "env": {"name": "sokoban", "params": {}},
            "model": {"name": "qwen2.5-" + args.model, "path": model_dir},
            "train": {
                "estimator": "graphgpo",
                "steps": 1000,
                "groups": args.groups,
                "group_size": 8,
                "max_turns": args.turns,
                "max_new_tokens": args.new_tokens,
                "device": args.device,
                "rollout_engine": "static",
                "update_kernels": args.update_kernels,
                "update_precision": args.update_precision,
                "warmstart": False,
                "progress": False,
                "micro_batch_tokens": args.micro_tokens,
                "grad_checkpointing": not args.no_checkpointing,
                "checkpoint_every": 1000,
                "lr": 1e-6,
            },
            "eval": {"checkpoint": "last"},
        }  # saved at step 0 and 1000 only: no checkpoint inside the timed steps
        trainer = loop.Trainer(config, Path(tmp) / "run", resume=False)
        system, _ = sokoban_texts(0)
        base = trainer.codec  # the policy reads VAGEN-Lite's system prompt before the first observation
        trainer.codec = codec = Codec(
            base.tokenizer,
            lambda obs, info: f"{system}\n{obs}" if obs.startswith("[Initial") else obs,
            base.render,
            base.demo,
        )
        captured = []
        real_update = loop.update

        def spy(policy, optimizer, scheduler, batch, cfg, generator, dev):
            captured.append(batch)
            sync()
            return real_update(policy, optimizer, scheduler, batch, cfg, generator, dev)

        loop.update = spy
        for _ in range(args.steps + 1):
            trainer.train_step()
        sync()
        metrics = [json.loads(line) for line in (Path(tmp) / "run" / "metrics.jsonl").read_text().splitlines()][1:]
        timings = [json.loads(line) for line in (Path(tmp) / "run" / "timings.jsonl").read_text().splitlines()][1:]
        med = lambda key: statistics.median(t.get(key, 0.0) for t in timings)  # noqa: E731
        lm_cfg = trainer.policy.lm.config
        flops = statistics.median(update_flops(b.attention_mask, lm_cfg) for b in captured[1:])
        flops_strict = statistics.median(
            update_flops(b.attention_mask, lm_cfg, float(b.mask.sum())) for b in captured[1:]
        )
        out["step"] = {
            k: med(k) for k in ("rollout", "graph_build", "shortest_paths", "advantage", "update", "step_total")
        }
        out["step"]["advantage_total"] = sum(out["step"][k] for k in ("graph_build", "shortest_paths", "advantage"))
        out["tokens_per_step"] = {
            "generated": metrics[-1]["tokens_generated"] - metrics[-2]["tokens_generated"]
            if len(metrics) > 1
            else metrics[-1]["tokens_generated"] // (args.steps + 1),
            "trained_rows_x_width": list(captured[-1].attention_mask.shape),
            "attended": int(captured[-1].attention_mask.sum()),
            "trained": int(captured[-1].mask.sum()),
        }
        out["rollout_tokens_per_s"] = out["tokens_per_step"]["generated"] / out["step"]["rollout"]
        out["update_tflops"] = flops / out["step"]["update"] / 1e12
        out["update_mfu"] = flops / out["step"]["update"] / H200_BF16_PEAK
        out["gpu_peak_mem_gb"] = max((m["gpu_peak_mem_gb"] or 0.0) for m in metrics)
        out["cpu_rss_gb"] = max(m["cpu_rss_gb"] for m in metrics)
        out["update_flops_formula"] = "3 x (2 N T + 4 L d P)"
        # the same with the LM head counted over the generated tokens only (all the loss needs)
        out["update_mfu_head_on_generated"] = flops_strict / out["step"]["update"] / H200_BF16_PEAK
        out["update_flops"] = {"all_tokens_head": flops, "generated_tokens_head": flops_strict}
        out["grad_checkpointing"] = not args.no_checkpointing
        out["micro_batch_tokens"] = args.micro_tokens
        out["update_kernels"] = args.update_kernels
        out["update_precision"] = args.update_precision
        if args.profile and device.type == "cuda":
            last = captured[-1]
            out["update_profile"] = profile_update(
                lambda: real_update(
                    trainer.update_model,
                    trainer.optimizer,
                    trainer.scheduler,
                    last,
                    trainer.cfg,
                    trainer.update_gen,
                    device,
                ),
                device,
            )
        if args.skip_generate:
            print(json.dumps(out, indent=1))
            if args.json:
                Path(args.json).write_text(json.dumps(out, indent=1))
            return 0
        # one turn, the 128 first prompts: static engine vs transformers generate
        envs = trainer.envs
        seeds = list(range(1000, 1000 + len(envs)))
        n_new = args.new_tokens

        def engine_turn():
            return rollout(
                trainer.policy,
                envs,
                seeds,
                [0] * len(envs),
                codec,
                Sampler(1.0, torch.Generator().manual_seed(1)),
                mode="concat",
                max_turns=1,
                max_new_tokens=n_new,
                device=device,
                engine=trainer.engine,
            )

        engine_turn()
        sync()
        out["engine_check"] = engine_check(trainer.engine, codec, device)
        t0 = time.perf_counter()
        ro = engine_turn()
        sync()
        engine_s = time.perf_counter() - t0
        prompts = [codec.prompt(*env.reset(s)) for env, s in zip(envs, seeds)]
        width = max(map(len, prompts))
        pad = codec.pad
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=device)
        attn = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
        hf = trainer.engine.lm  # the bf16 replica, synced to the policy
        kw = {"do_sample": True, "temperature": 1.0, "top_k": 0, "top_p": 1.0, "pad_token_id": pad}
        with torch.no_grad():
            hf.generate(input_ids=ids, attention_mask=attn, max_new_tokens=8, min_new_tokens=8, **kw)
            sync()
            t0 = time.perf_counter()
            gen = hf.generate(input_ids=ids, attention_mask=attn, max_new_tokens=n_new, min_new_tokens=n_new, **kw)
            sync()
            hf_s = time.perf_counter() - t0
        out["turn"] = {
            "rows": len(envs),
            "prompt_tokens_max": width,
            "prompt_tokens_mean": sum(map(len, prompts)) / len(prompts),
            "new_tokens": n_new,
            "engine_tokens": ro.generated_tokens(),
            "engine_s": engine_s,
            "engine_tokens_per_s": ro.generated_tokens() / engine_s,
            "generate_tokens": int((gen.shape[1] - width) * gen.shape[0]),
            "generate_s": hf_s,
            "generate_tokens_per_s": (gen.shape[1] - width) * gen.shape[0] / hf_s,
        }
        out["turn"]["speedup"] = out["turn"]["engine_tokens_per_s"] / out["turn"]["generate_tokens_per_s"]
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
