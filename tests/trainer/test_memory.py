"""The update's token budget (trainer/memory.py): the activation estimate against the peaks measured on an
H200, the budget's bounds, one line when nothing fits, and what a job's GPU must hold."""

from __future__ import annotations

import pytest

from agentrepro.errors import BadInput
from agentrepro.trainer import memory
from agentrepro.trainer.model_size import PretrainedShape

GIB = 1 << 30
QWEN_05B = PretrainedShape("qwen2", "silu", 896, 24, 4864, 14, 2, 64, 151936, True)
QWEN_15B = PretrainedShape("qwen2", "silu", 1536, 28, 8960, 12, 2, 128, 151936, True)

# benchmarks/RESULTS.md, "The builtin trainer on one H200 at model size" (2026-12-01): peak GPU GiB of the same
# 0.5B update without checkpointing at two pass sizes, so their difference is the activations of 16,384 tokens
MEASURED_16K_TOKENS_GIB = {("fp32", "eager"): 64.4 - 40.8}


def _per_token(shape, precision="bf16-master", kernels="compiled", checkpointing=False):
    return memory.token_bytes(
        layers=shape.layers,
        hidden=shape.hidden,
        intermediate=shape.intermediate,
        precision=precision,
        kernels=kernels,
        checkpointing=checkpointing,
    )


def test_the_activation_estimate_is_not_below_what_the_h200_measured():
    """16,384 more tokens a pass cost 23.6 GiB at 0.5B fp32 eager; the estimate holds at least that, and at most
    25% more (a loose estimate wastes the budget it exists to use)."""
    for (precision, kernels), measured in MEASURED_16K_TOKENS_GIB.items():
        estimate = _per_token(QWEN_05B, precision, kernels) * 16_384 / GIB
        assert measured <= estimate <= 1.25 * measured, (precision, kernels, estimate)
    assert _per_token(QWEN_05B) < _per_token(QWEN_05B, "bf16-master", "eager") < _per_token(QWEN_05B, "fp32", "eager")
    assert _per_token(QWEN_05B, checkpointing=True) < _per_token(QWEN_05B) / 3


@pytest.mark.parametrize("shape", [QWEN_05B, QWEN_15B])
def test_the_budget_fits_what_is_left_and_is_a_multiple_of_the_quantum(shape):
    """On an H200 (139.8 GiB) with the weights and rollout engine in place, the budget leaves room for the step's
    state, the head's chunk and the reserve, and falls in [1,024, 65,536]."""
    total = int(139.8 * GIB)
    available = total - shape.parameters * (4 + 2 + 2) - 4 * GIB  # weights, bf16 copy, engine, KV cache
    per_token = _per_token(shape)
    tokens = memory.pass_tokens(
        available=available, total=total, parameters=shape.parameters, per_token=per_token, precision="bf16-master"
    )
    assert tokens % memory.QUANTUM == 0 and memory.MIN_PASS_TOKENS <= tokens <= memory.MAX_PASS_TOKENS
    used = tokens * per_token + shape.parameters * (memory.STEP_BYTES + memory.BF16_GRAD_BYTES)
    assert used + memory.HEAD_CHUNK_BYTES + memory.RESERVE_BYTES + 0.05 * total <= available
    smaller = memory.pass_tokens(
        available=available // 2, total=total, parameters=shape.parameters, per_token=per_token, precision="fp32"
    )
    assert smaller < tokens


def test_a_gpu_that_cannot_hold_one_pass_is_refused_in_one_line_naming_the_field():
    per_token = _per_token(QWEN_15B, "fp32", "eager")
    with pytest.raises(BadInput, match=r"^train\.micro_batch_tokens: the GPU has 24\.0 GiB") as caught:
        memory.pass_tokens(
            available=24 * GIB, total=24 * GIB, parameters=QWEN_15B.parameters, per_token=per_token, precision="fp32"
        )
    assert "\n" not in str(caught.value)


def test_what_a_gpu_must_hold_grows_with_the_model_and_the_options():
    """0.5B with the fast path needs about 10 GiB before activations and fits the 40 GiB of an A100-40GB; 1.5B in
    fp32 with a KL reference needs more than 1.5B with the fast path."""
    fast = {"update_precision": "bf16-master", "update_kernels": "compiled"}
    small = memory.gpu_bytes(QWEN_05B, fast) / GIB
    assert 8 < small < 20
    plain_kl = memory.gpu_bytes(QWEN_15B, {"update_precision": "fp32", "update_kernels": "eager", "kl_coef": 0.1})
    assert plain_kl > memory.gpu_bytes(QWEN_15B, fast) > memory.gpu_bytes(QWEN_05B, fast)
    assert memory.gpu_bytes(QWEN_05B, {**fast, "micro_batch_tokens": 32_768}) > memory.gpu_bytes(QWEN_05B, fast)


def test_a_shared_gpu_gives_the_job_its_share(monkeypatch):
    """device_memory: free plus torch's cached blocks; with AGENTREPRO_GPU_SHARE=2 (gpu_slots.py --per-gpu 2) the
    job's total is half the device and what it may still use is that half less what it holds (CUDA calls faked:
    no GPU here)."""
    import torch

    from agentrepro.trainer import policy, step_record

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (100 * GIB, 140 * GIB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device: 30 * GIB)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device: 20 * GIB)
    monkeypatch.delenv(policy.GPU_SHARE, raising=False)
    assert step_record.device_memory(torch.device("cuda")) == (110 * GIB, 140 * GIB)
    monkeypatch.setenv(policy.GPU_SHARE, "2")
    assert step_record.device_memory(torch.device("cuda")) == (50 * GIB, 70 * GIB)


def test_the_host_memory_is_lowered_by_every_cgroup_limit_above_the_process(tmp_path):
    """A SLURM job's cgroup (memory.max 8 GiB, 3 GiB used) bounds what the CPU's passes may take, though the node
    has more; a group without a limit ("max") and a folder without the files change nothing."""
    from agentrepro.cgroups import host_memory

    root = tmp_path / "cgroup"
    job = root / "system.slice" / "slurmstepd.scope" / "job_7"
    step = job / "step_0" / "user" / "task_0"
    step.mkdir(parents=True)
    (job / "memory.max").write_text(f"{8 * GIB}\n")
    (job / "memory.current").write_text(f"{3 * GIB}\n")
    (step / "memory.max").write_text("max\n")
    (step / "memory.current").write_text(f"{1 * GIB}\n")
    membership = tmp_path / "self-cgroup"
    membership.write_text(f"0::/{step.relative_to(root)}\n")
    node_available, node_total = host_memory(root, tmp_path / "absent")
    available, total = host_memory(root, membership)
    assert total == min(node_total, 8 * GIB) and available == min(node_available, 5 * GIB)
    membership.write_text("0::/\n")  # the root group: no limit
    assert host_memory(root, membership)[1] == node_total


def test_a_cgroup_v1_memory_limit_lowers_the_host_memory_too(tmp_path):
    """Older SLURM nodes use cgroup v1: the memory controller's limit_in_bytes (6 GiB, 2 GiB used) bounds the passes;
    v1's "no limit" (a number near 2^63) and the other controllers change nothing."""
    from agentrepro.cgroups import host_memory

    root = tmp_path / "cgroup"
    job = root / "memory" / "slurm" / "uid_0" / "job_9"
    step = job / "step_batch"
    step.mkdir(parents=True)
    (job / "memory.limit_in_bytes").write_text(f"{6 * GIB}\n")
    (job / "memory.usage_in_bytes").write_text(f"{2 * GIB}\n")
    (step / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (step / "memory.usage_in_bytes").write_text(f"{1 * GIB}\n")
    membership = tmp_path / "self-cgroup"
    membership.write_text("5:cpuset:/slurm/uid_0/job_9\n4:memory:/slurm/uid_0/job_9/step_batch\n0::/\n")
    node_available, node_total = host_memory(root, tmp_path / "absent")
    available, total = host_memory(root, membership)
    assert total == min(node_total, 6 * GIB) and available == min(node_available, 4 * GIB)


def test_a_budget_that_holds_the_whole_minibatch_makes_one_pass_as_zero_does():
    """An auto budget larger than the minibatch keeps the one-pass path (rows in order, every column), so a small
    CPU study trains exactly as before the budget applied there."""
    import torch

    from agentrepro.trainer.update import micro_batches

    attn = torch.ones(4, 10, dtype=torch.long)
    attn[1, 6:] = 0
    idx = torch.arange(4)
    for budget in (0, 40, 65_536):
        ((rows, width),) = micro_batches(attn, idx, budget)
        assert rows.tolist() == [0, 1, 2, 3] and width == 10
    assert len(micro_batches(attn, idx, 39)) > 1


def test_the_host_that_cannot_hold_one_pass_is_named_as_the_host():
    per_token = _per_token(QWEN_15B, "fp32", "eager")
    with pytest.raises(BadInput, match=r"^train\.micro_batch_tokens: the host has 8\.0 GiB"):
        memory.pass_tokens(
            available=8 * GIB,
            total=8 * GIB,
            parameters=QWEN_15B.parameters,
            per_token=per_token,
            precision="fp32",
            where="host",
        )


def test_a_small_vocabularys_head_and_a_small_jobs_reserve_leave_a_cpu_job_of_one_gib_its_passes():
    """A SLURM job's cgroup of 1,000 MB (the local SLURM's memory a CPU), 0.7 GiB left once a tiny model is loaded:
    a 512-word head's chunk is what its pass's tokens times 512 logits hold, not Qwen's full gigabyte chunk, and the
    reserve is a quarter of the job, not 2 GiB; the same job at Qwen's vocabulary is refused, naming the field."""
    total, available = 1000 * 2**20, int(0.7 * GIB)
    tiny = {"parameters": 4_481, "per_token": 2 * 12 * (16 + 64), "precision": "fp32", "where": "host"}
    tokens = memory.pass_tokens(available=available, total=total, vocab=512, **tiny)
    assert memory.MIN_PASS_TOKENS <= tokens <= memory.MAX_PASS_TOKENS
    used = tokens * tiny["per_token"] + memory.head_chunk_bytes(512, tokens) + 4_481 * memory.STEP_BYTES
    assert used + total // 4 + 0.05 * total <= available
    assert memory.head_chunk_bytes(512, 1024) == 12 * 512 * 1024 < memory.head_chunk_bytes(151_936, 1024)
    assert memory.head_chunk_bytes(151_936, 65_536) == memory.HEAD_CHUNK_BYTES - 12 * (2**28 % 151_936)
    with pytest.raises(BadInput, match=r"^train\.micro_batch_tokens: the host has 0\.7 GiB"):
        memory.pass_tokens(available=available, total=total, vocab=151_936, **tiny)


def test_a_run_on_a_shared_gpu_holds_torchs_cache_to_its_share(monkeypatch):
    """run_device on a GPU shared by K jobs caps torch's caching allocator at 1/K of the device (CUDA faked: no GPU
    here); alone on it, or on the CPU, nothing is capped. On CUDA the allocator's segments are expandable unless the
    environment already configures the allocator; on the CPU nothing is set."""
    import types

    import torch

    from agentrepro.trainer import policy

    for key in policy.ALLOC_CONF:
        monkeypatch.delenv(key, raising=False)
    settings = []
    monkeypatch.setattr(policy, "allocator_settings", settings.append)
    policy.run_device(types.SimpleNamespace(device="cpu", threads=torch.get_num_threads()))
    assert settings == []
    capped = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(
        torch.cuda, "set_per_process_memory_fraction", lambda f, device=None: capped.append((f, device))
    )
    train = types.SimpleNamespace(device="cuda:0", threads=1)
    monkeypatch.delenv(policy.GPU_SHARE, raising=False)
    policy.run_device(train)
    monkeypatch.setenv(policy.GPU_SHARE, "garbage")
    policy.run_device(train)
    assert capped == []
    monkeypatch.setenv(policy.GPU_SHARE, "2")
    assert policy.run_device(train) == torch.device("cuda:0")
    assert capped == [(0.5, torch.device("cuda:0"))]
    policy.run_device(types.SimpleNamespace(device="cpu", threads=torch.get_num_threads()))  # threads unchanged
    assert len(capped) == 1
    assert settings == [policy.EXPANDABLE] * 3
    monkeypatch.setenv(policy.ALLOC_CONF[1], "max_split_size_mb:512")  # the user's own settings are kept
    policy.run_device(train)
    assert settings == [policy.EXPANDABLE] * 3
