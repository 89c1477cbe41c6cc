"""Data parallel (trainer/parallel.py, gather.py, spawn.py): the rule for the number of ranks, whole-batch
advantages from gathered rollouts, two gloo ranks taking one process's update, and `agentrepro train` on two ranks."""

import shutil

import pytest
import torch
import yaml
from helpers import run_cli
from trainer_helpers import tiny_config, tiny_policy, tiny_spec_and_codec, train_verb

from agentrepro.errors import BadInput
from agentrepro.reading import read_jsonl
from agentrepro.trainer.checkpoint import load_checkpoint, saved_steps
from agentrepro.trainer.credit import training_targets
from agentrepro.trainer.gather import merge_rollouts
from agentrepro.trainer.parallel import sampling_seed, shares, world_size
from agentrepro.trainer.rollout import Sampler, rollout
from agentrepro.trainer.spawn import _one_line
from agentrepro.trainer.update import batched_token_stats

SEEDS = [0, 0, 1, 1, 2, 2]  # three groups of two


def _config(resources=None, **train):
    config = tiny_config(**train)
    if resources is not None:
        config["resources"] = resources
    return config


def test_world_size_rule():
    """Ranks: train.data_parallel when set, else the job's GPUs on CUDA and one on the CPU; impossible numbers refused naming the field."""
    assert world_size(_config()) == 1
    assert world_size(_config({"gpus": 2})) == 1  # a CPU run given GPUs still runs one rank
    assert world_size(_config({"gpus": 2}, device="cuda")) == 2
    assert world_size(_config({"gpus": 0}, device="cuda")) == 1
    assert world_size(_config(data_parallel=2)) == 2
    assert world_size(_config({"gpus": 4}, device="cuda", data_parallel=2)) == 2
    cases = [
        (_config(data_parallel=3), "train.data_parallel"),  # more ranks than groups
        (_config({"gpus": 1}, device="cuda", data_parallel=2), "train.data_parallel"),
        (_config({"gpus": 2}, device="cuda:1"), "train.device"),
        (_config({"gpus": 4}, device="cuda"), "resources.gpus"),  # 4 GPUs for 2 groups
        (_config(data_parallel=-1), "train.data_parallel"),
    ]
    for config, where in cases:
        with pytest.raises(BadInput) as err:
            world_size(config, path="run.yaml")
        assert f"run.yaml: {where}:" in str(err.value)


def test_shares_are_contiguous_whole_groups_and_seeds_differ_by_rank():
    """Each rank gets whole groups, contiguous and balanced; rank 0 keeps the single-process sampling seed."""
    assert shares(5, 2) == [range(2), range(2, 5)] and shares(4, 1) == [range(4)]
    assert [len(s) for s in shares(7, 3)] in ([2, 3, 2], [2, 2, 3], [3, 2, 2])
    assert sampling_seed(4, 0) == 4 * 1_000_003 + 1
    assert len({sampling_seed(s, r) for s in range(4) for r in range(8)}) == 32


@pytest.mark.parametrize("mode", ["concat", "non_concat"])
def test_merged_rollouts_give_the_advantages_of_one_rollout(mode):
    """Two ranks' rollouts (whole groups each) merged = one rollout of all trajectories: same step rows and GraphGPO advantages."""
    spec, tok, codec = tiny_spec_and_codec(mode=mode, estimator="graphgpo")
    policy = tiny_policy(spec, tok)
    g = torch.Generator().manual_seed(1)
    choices = torch.tensor([tok.convert_tokens_to_ids(a) for a in ("up", "down", "left", "right")] + [codec.eos])
    table = choices[torch.randint(len(choices), (len(SEEDS), 4, 4), generator=g)]  # each trajectory's tokens, fixed

    def play(first):
        seeds = SEEDS[first : first + 2] if first is not None else SEEDS
        offset = first or 0
        sampler = lambda logits, trajs, turn, position: table[[t + offset for t in trajs], turn, position]  # noqa: E731
        return rollout(
            policy,
            [spec.make_env(training=True) for _ in seeds],
            seeds,
            [(offset + i) // 2 for i in range(len(seeds))],
            codec,
            sampler,
            mode=mode,
            max_turns=4,
            max_new_tokens=4,
            device=torch.device("cpu"),
        )

    whole = play(None)
    merged = merge_rollouts([play(0), play(2), play(4)], codec.pad)  # three ranks of one group each
    assert merged.step_rows() == whole.step_rows() and merged.per_turn_rows == whole.per_turn_rows
    assert merged.generated_tokens() == whole.generated_tokens() and sorted(merged.row_traj.tolist()) == sorted(
        whole.row_traj.tolist()
    )  # non_concat: rows in rank order
    for ta, tb in zip(
        sorted(merged.turns, key=lambda t: (t.traj, t.turn)), sorted(whole.turns, key=lambda t: (t.traj, t.turn))
    ):
        assert (
            merged.input_ids[ta.row, ta.start : ta.end].tolist() == whole.input_ids[tb.row, tb.start : tb.end].tolist()
        )
    ours, theirs = training_targets(merged, None, spec.train), training_targets(whole, None, spec.train)
    assert ours.turn_advantages.tolist() == theirs.turn_advantages.tolist()
    assert len(set(ours.turn_advantages.round(9).tolist())) > 2  # rewards differ: the advantages are not trivial


def test_two_gloo_ranks_take_the_update_of_one_process(tmp_path):
    """One update (2 epochs x 2 minibatches, KL, entropy, clipping, weight decay) on two gloo ranks = one process over the whole batch."""
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from parallel_helpers import UPDATE, one_update, rank_main

    spec, tok, codec = tiny_spec_and_codec(**UPDATE)
    policy = tiny_policy(spec, tok)
    sampler = Sampler(1.0, torch.Generator().manual_seed(3))
    parts = []
    for share in ([0, 0, 1, 1], [2, 2]):  # rank 0: two groups, rank 1: one (unequal shares and widths)
        seeds = [SEEDS[2 * g] for g in share]
        ro = rollout(
            policy,
            [spec.make_env(training=True) for _ in seeds],
            seeds,
            share,
            codec,
            sampler,
            mode="concat",
            max_turns=4,
            max_new_tokens=4,
            device=torch.device("cpu"),
        )
        old = batched_token_stats(
            policy, ro.input_ids, ro.attention_mask, 0, with_values=False, device=torch.device("cpu"), bf16=False
        )[0]
        parts.append((ro, {"old": old, "ref": old.clone()}))
    saved = {"model": policy.state_dict(), "parts": parts}
    torch.save(saved, tmp_path / "batch.pt")
    single = one_update(saved)

    store = dist.TCPStore("127.0.0.1", 0, None, True, wait_for_workers=False)
    mp.start_processes(
        rank_main, args=(2, store.port, str(tmp_path / "batch.pt"), str(tmp_path)), nprocs=2, start_method="spawn"
    )
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(2)]
    moved = [k for k in single["model"] if not torch.equal(single["model"][k], policy.state_dict()[k])]
    assert moved and "value_head.weight" not in moved  # the update moved the LM, weight decay left the value head alone
    for got in ranks:
        assert set(got["model"]) == set(single["model"])
        for k in single["model"]:
            torch.testing.assert_close(got["model"][k], single["model"][k], rtol=1e-5, atol=1e-6, msg=k)
        assert got["stats"] == pytest.approx(single["stats"], rel=1e-5, abs=1e-7)
    assert all(torch.equal(ranks[0]["model"][k], ranks[1]["model"][k]) for k in single["model"])


def test_train_verb_on_two_ranks_writes_metrics_and_checkpoints_once(tmp_path):
    """`agentrepro train` with data_parallel 2 (tiny default policy): one metrics row per step counting both ranks' episodes,
    checkpoints with both ranks' sampling states, and a run resumed from step 1 ends bit for bit where it ended."""
    config = tiny_config(steps=2, data_parallel=2)
    del config["model"]  # the builtin backend's default tiny policy
    run = train_verb(config, tmp_path)
    metrics = read_jsonl(run / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2] and [m["step"] for m in read_jsonl(run / "timings.jsonl")] == [1, 2]
    assert [m["episodes"] for m in metrics] == [4, 8]  # groups x group_size per step, over both ranks
    assert all(m["cpu_rss_gb"] > 0 and m["gpu_peak_mem_gb"] is None for m in metrics)
    assert all("gather" in t for t in read_jsonl(run / "timings.jsonl"))
    assert saved_steps(run) == [0, 1, 2]
    states = load_checkpoint(run, 2)["rng"]["sample_ranks"]
    assert len(states) == 2 and not torch.equal(states[0], states[1])
    assert not list(run.rglob("*.tmp*"))  # nothing half-written by a second writer
    assert (run / "OUTPUTS.sha256").is_file()
    # resumed from step 1, each rank continues its own sampling stream: step 2 is the uninterrupted run's, bit for bit
    again = tmp_path / "again"
    shutil.copytree(run, again)
    (again / "checkpoints" / "step2.pt").unlink()
    done = run_cli("train", "--config", tmp_path / "config.yaml", "--out", again)
    assert done.returncode == 0, done.stderr
    machine = ("wall_s", "gpu_hours", "cpu_rss_gb")
    assert [{k: v for k, v in m.items() if k not in machine} for m in read_jsonl(again / "metrics.jsonl")] == [
        {k: v for k, v in m.items() if k not in machine} for m in metrics
    ]
    ours, theirs = load_checkpoint(again, 2)["model"], load_checkpoint(run, 2)["model"]
    assert all(torch.equal(ours[k], theirs[k]) for k in theirs)


def test_a_rank_failure_ends_the_job_with_one_line(tmp_path):
    """A rank that fails (CUDA asked for on a machine without it) ends `agentrepro train` with one error line, no traceback."""
    if torch.cuda.is_available():
        pytest.skip("needs a machine without CUDA")
    config = tiny_config(steps=1, data_parallel=2, device="cuda")
    cfg_path = tmp_path / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(config))
    done = run_cli("train", "--config", cfg_path, "--out", tmp_path / "run")
    assert done.returncode == 2, done.stderr
    assert "train.device" in done.stderr and "CUDA is not available" in done.stderr and "Traceback" not in done.stderr


def test_a_rank_traceback_becomes_one_line():
    """A rank's traceback text becomes one line: BadInput stays BadInput, anything else names the rank."""
    trace = "Traceback (most recent call last):\n  File x\nRuntimeError: out of memory\n\n"
    err = _one_line(1, 2, trace)
    assert str(err) == "data-parallel rank 1 of 2 failed: RuntimeError: out of memory"
    bad = _one_line(0, 2, "Traceback\nagentrepro.errors.BadInput: run.yaml: train.lr: expected a number > 0, got 0\n")
    assert isinstance(bad, BadInput) and str(bad) == "run.yaml: train.lr: expected a number > 0, got 0"


def test_ppo_non_concat_on_two_ranks_trains_its_critic(tmp_path):
    """PPO in non-concat mode on two ranks: the gathered values and returns train the value head (loss_value logged)."""
    config = tiny_config(steps=1, data_parallel=2, estimator="ppo", mode="non_concat", epochs=2, format_reward=0.5)
    cfg_path = tmp_path / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(config))
    run = tmp_path / "run"
    done = run_cli("train", "--config", cfg_path, "--out", run)
    assert done.returncode == 0, done.stderr
    [row] = read_jsonl(run / "metrics.jsonl")
    assert row["step"] == 1 and row["loss_value"] > 0 and row["episodes"] == 4
    before, after = load_checkpoint(run, 0)["model"], load_checkpoint(run, 1)["model"]
    assert not torch.equal(before["value_head.weight"], after["value_head.weight"])
