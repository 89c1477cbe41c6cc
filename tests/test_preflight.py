"""`agentrepro preflight`: each job's demands against the manifest, one line per violation naming the manifest field, the
framework's key and both numbers, exit 2 (subprocesses, as a user runs it); freeze runs the same check.

The numbers come from the facts of verl-agent @ 20bd331 (tests/fixtures/frameworks/verl-agent-20bd331.ray.json and the
recorded scripts) and Relax's recipe (relax.args.json): each test says which."""

from __future__ import annotations

import json
import math
import shlex
import subprocess
import time

import pytest
import yaml
from helpers import FIXTURES, REPO, run_cli

from agentrepro import preflight, slurm
from agentrepro.backends.base import AT_LEAST, DIVIDES, DIVISOR, Demand
from agentrepro.backends.relax import recipe as relax_recipe
from agentrepro.backends.verl_agent import demands
from agentrepro.errors import BadInput
from agentrepro.manifest.loading import load_manifest
from agentrepro.planning import StudyPlan

RAY = json.loads((FIXTURES / "frameworks" / "verl-agent-20bd331.ray.json").read_text())
RECIPES = json.loads((FIXTURES / "frameworks" / "verl-agent-20bd331.recipes.json").read_text())
RELAX = json.loads((FIXTURES / "frameworks" / "relax.args.json").read_text())["graphgpo_recipe"]


def study(tmp_path, name="graphgpo-alfworld", **changes):
    """The shipped manifest `name` under tmp_path/manifests/, with `changes` ({dotted key: value}) applied."""
    manifest = yaml.safe_load((REPO / "manifests" / f"{name}.yaml").read_text())
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        node = manifest
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    (tmp_path / "manifests").mkdir(exist_ok=True)
    path = tmp_path / "manifests" / f"{name}.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    return path


def script_variable(script: str, name: str) -> str:
    recipe = next(r for r in RECIPES["recipes"] if r["script"] == script)
    return next(v["value_as_written"] for v in recipe["shell_variables"] if v["name"] == name)


def test_the_shipped_studies_pass_with_the_numbers_of_the_recipes(tmp_path):
    """graphgpo-alfworld passes; its CPU demand is the GraphGPO script's num_cpus_per_env_worker (0.2, line 9) x
    (16 x 8 training + 128 validation env workers) + the TaskRunner's 1 + one per GPU worker = 54.2, which its
    resources.cpus (55) covers; GiGPO's script has 0.1 (28.6); the worker ports cover 256 env workers, the TaskRunner,
    2 GPU workers and the driver plus Ray's idle pool of num_cpus."""
    jobs = preflight.check(StudyPlan.load(REPO / "manifests" / "graphgpo-alfworld.yaml"))
    by = {(j.method, d.what): d for j in jobs for d in j.demands}
    graphgpo = float(script_variable("recipe/GraphGPO/run_qwen2.5_1.5b_alfworld_train.sh", "num_cpus_per_env_worker"))
    gigpo = float(script_variable("examples/gigpo_trainer/run_alfworld.sh", "num_cpus_per_env_worker"))
    envs = 16 * 8 + 128
    gpus = 2
    assert (
        by[("graphgpo", "CPUs the recipe reserves in Ray")].need
        == pytest.approx(envs * graphgpo + RAY["task_runner"]["num_cpus"] + gpus * RAY["gpu_workers"]["bundle_cpus"])
        == 54.2
    )
    assert by[("gigpo", "CPUs the recipe reserves in Ray")].need == pytest.approx(envs * gigpo + 1 + gpus) == 28.6
    assert (demands.TASK_RUNNER_CPUS, demands.BUNDLE_CPUS) == (
        RAY["task_runner"]["num_cpus"],
        RAY["gpu_workers"]["bundle_cpus"],
    )
    cpus = load_manifest(REPO / "manifests" / "graphgpo-alfworld.yaml")["resources"]["cpus"]
    assert cpus == math.ceil(max(d.need for (m, w), d in by.items() if w == "CPUs the recipe reserves in Ray"))
    assert by[("graphgpo", "Ray worker ports")].need == envs + 1 + gpus + 1 + cpus
    jobs = preflight.check(StudyPlan.load(REPO / "manifests" / "graphgpo-alfworld-relax.yaml"))
    assert {j.backend for j in jobs} == {"relax"}


@pytest.mark.parametrize(
    "changes, line",
    [
        # Ray worker processes against the head's worker ports
        (
            {"backend.ray": {"worker_ports": 80}},
            "backend.ray.worker_ports = 80: 260 Ray worker processes (256 env workers",
        ),
        # CPUs the recipe reserves in Ray against resources.cpus
        (
            {"resources.cpus": 8},
            "resources.cpus = 8: env.resources_per_worker.num_cpus 0.2 x 256 env workers + 1 TaskRunner + 1 x 2 GPU "
            "workers = 54.2 exceeds it",
        ),
        ({"backend.ray": {"num_cpus": 40}}, "backend.ray.num_cpus = 40: env.resources_per_worker.num_cpus 0.2 x 256"),
        # GPUs against the rollout's tensor-parallel size
        (
            {"resources.gpus": 3},
            "resources.gpus -> trainer.n_gpus_per_node x trainer.nnodes = 3: "
            "actor_rollout_ref.rollout.tensor_model_parallel_size = 2 does not divide it",
        ),
        # a batch that must divide by the data-parallel size
        (
            {"resources.gpus": 3},
            "resources.gpus -> trainer.n_gpus_per_node x trainer.nnodes = 3: data.train_batch_size x "
            "actor_rollout_ref.rollout.n = 16 is not a multiple of it",
        ),
        (
            {"resources.gpus": 16},
            "resources.gpus -> 16 GPUs x actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu 32 = 512: "
            "actor_rollout_ref.actor.ppo_mini_batch_size x actor_rollout_ref.rollout.n = 256 is not a multiple of it",
        ),
    ],
)
def test_each_violation_is_one_line_naming_both_sides(tmp_path, changes, line):
    """A manifest asking less than its jobs demand: `agentrepro preflight` prints the demand tables and one line per
    violation (the field, the framework's key, both numbers), exit 2; freeze stops at the first with the same line."""
    path = study(tmp_path, **changes)
    result = run_cli("preflight", path, "--method", "graphgpo", "--seed", "0", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    errors = result.stderr.splitlines()
    assert any(line in e for e in errors), result.stderr
    assert all(e.startswith(f"agentrepro preflight: error: {path}: graphgpo seed 0: ") for e in errors)
    assert "| demand |" in result.stdout and "**no**" in result.stdout


def test_a_verl_job_over_two_nodes_is_verls_nnodes_and_offers_each_nodes_cpus_and_gpus(tmp_path):
    """resources.nodes 2 becomes trainer.nnodes=2 on the script's command line; the job's Ray cluster offers
    resources.cpus and resources.gpus on each node, so 29 CPUs a node cover the GraphGPO recipe's 54.2 + 2 more GPU
    workers' bundles, and 8 a node do not, said with the nodes. `agentrepro command` shows the sbatch flags and what
    the job adds over its nodes."""
    from agentrepro.backends.verl_agent import recipes

    relax = {"backends.relax.resources": {"nodes": 1}}  # its jobs keep to one node
    plan = StudyPlan.load(study(tmp_path, **{"resources.nodes": 2, "resources.cpus": 29}, **relax))
    job = plan.job("graphgpo", plan.seeds[0])
    assert "trainer.nnodes=2" in [o.word() for o in recipes.appended(job.config, job.run_dir, resume=True)]
    by = {d.what: d for d in next(j for j in preflight.study_demands(plan) if j.method == "graphgpo").demands}
    cpus, gpus = by["CPUs the recipe reserves in Ray"], by["GPUs of the trainer"]
    assert (cpus.need, cpus.have, cpus.holds()) == (pytest.approx(56.2), 58, True)
    assert (gpus.need, gpus.have, gpus.via) == (4, 4, "2 on each of resources.nodes 2")
    shown = run_cli("command", plan.manifest_file, "--method", "graphgpo", "--seed", "0", cwd=tmp_path).stdout
    assert "trainer.nnodes=2" in shown and "--nodes=2" in shown and "--gres=gpu:2" in shown, shown
    assert "# over 2 nodes (in the job, from its SLURM allocation): the head also gets --node-ip" in shown
    path = study(tmp_path, **{"resources.nodes": 2, "resources.cpus": 8}, **relax)
    result = run_cli("preflight", path, "--method", "graphgpo", "--seed", "0", cwd=tmp_path)
    assert result.returncode == 2 and "resources.cpus -> 8 on each of resources.nodes 2 = 16: " in result.stderr


def test_the_rollouts_heads_from_the_models_config(tmp_path):
    """With the model's config.json under backend.model_path (12 attention heads, 2 KV heads: Qwen2.5-1.5B), a rollout
    tensor-parallel size of 3 (backend.overrides) leaves KV heads vLLM can neither split nor replicate evenly."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"num_attention_heads": 12, "num_key_value_heads": 2}))
    path = study(
        tmp_path,
        **{
            "backend.model_path": str(model),
            "resources.gpus": 6,
            "backend.overrides": {"actor_rollout_ref.rollout.tensor_model_parallel_size": 3},
        },
    )
    result = run_cli("preflight", path, "--method", "gigpo", "--seed", "1", cwd=tmp_path)
    assert result.returncode == 2
    assert (
        "backend.overrides.actor_rollout_ref.rollout.tensor_model_parallel_size = 3: num_key_value_heads (model config.json) "
        "= 2 does not divide it"
    ) in result.stderr
    assert "num_attention_heads" not in result.stderr  # 12 heads split over 3


def test_verl_agent_needs_alfworld_games_to_train_on(tmp_path):
    """verl-agent's training env workers play $ALFWORLD_DATA/json_2.1.1/train (config_tw.yaml:2 at 20bd331), which
    the harness sets to data.eval.path: a data directory holding only the evaluation split is refused, naming both
    (with no game the workers start, and the first reset of a training env never returns: seen in the rehearsal of
    verl-agent's own code, test_verl_rehearsal.py); one game directory there is enough."""
    path = study(tmp_path)
    for split, game in (("valid_seen", "look_at_obj-1/trial_T0"), ("train", "look_at_obj-2/trial_T0")):
        folder = tmp_path / "data" / "alfworld" / "json_2.1.1" / split / game
        folder.mkdir(parents=True)
        (folder / "traj_data.json").write_text("{}")
        if split == "train":
            result = run_cli("preflight", path, "--method", "graphgpo", "--seed", "0", cwd=tmp_path)
            assert result.returncode == 2
            assert (
                "data.eval.path -> game directories in json_2.1.1/train = 0: data_path of config_tw.yaml "
                "($ALFWORLD_DATA/json_2.1.1/train) = 1 exceeds it"
            ) in result.stderr, result.stderr
        (folder / "game.tw-pddl").write_text("{}")
    result = run_cli("preflight", path, "--method", "graphgpo", "--seed", "0", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "| ALFWorld games to train on |" in result.stdout and "= 1 | at least | yes |" in result.stdout


def test_relax_tensor_parallel_must_divide_the_query_groups(tmp_path):
    """The Relax recipe makes NUM_GPUS its tensor-parallel size (line 257) over a model with --num-query-groups 2 (line
    170): resources.gpus 4 is refused naming both; the study's own backends.relax.resources is named when it sets gpus."""
    flags = {f["flag"]: f for f in RELAX["flags"]}
    assert (flags["--num-query-groups"]["value"], flags["--tensor-model-parallel-size"]["src"].rsplit(":", 1)[1]) == (
        "2",
        "257",
    )
    assert (int(flags["--num-query-groups"]["value"]), int(flags["--num-attention-heads"]["value"])) == (
        relax_recipe.QUERY_GROUPS,
        relax_recipe.ATTENTION_HEADS,
    )
    assert (int(flags["--micro-batch-size"]["value"]), int(flags["--global-batch-size"]["value"])) == (
        relax_recipe.MICRO_BATCH_SIZE,
        relax_recipe.GLOBAL_BATCH_SIZE,
    )
    knobs = {k["name"]: k["default"] for k in RELAX["input_env_knobs"]}
    assert (
        knobs["MODEL_REVISION"] == relax_recipe.PINNED_MODEL_REVISION
    )  # the script's default is the prepare lock's pin
    path = study(tmp_path, "graphgpo-alfworld-relax", **{"resources.gpus": 4})
    result = run_cli("preflight", path, "--method", "graphgpo", "--seed", "0", cwd=tmp_path)
    assert result.returncode == 2
    assert (
        "resources.gpus -> NUM_GPUS -> --tensor-model-parallel-size = 4: --num-query-groups = 2 is not a multiple of it"
        in result.stderr
    )
    path = study(tmp_path, "graphgpo-alfworld", **{"backends.relax.resources": {"gpus": 4}})
    with pytest.raises(BadInput, match=r"gigpo@relax seed 0: backends\.relax\.resources\.gpus -> NUM_GPUS"):
        preflight.check(StudyPlan.load(path))


def test_the_hard_coded_port_is_shown_and_reserved_not_compared():
    """Relax's Ray Serve port (8000) is a row of the table, reserved when the job starts (never a violation here)."""
    path = REPO / "manifests" / "graphgpo-alfworld-relax.yaml"
    job = preflight.job_demands(StudyPlan.load(path), "grpo", 0)
    serve = next(d for d in job.demands if d.what == "Ray Serve's HTTP port")
    assert (
        serve.need == 8000
        and serve.holds()
        and "| Ray Serve's HTTP port | serve.start port, get_serve_url = 8000 | reserved" in preflight.table(job)
    )


def test_demand_rules_and_their_lines():
    """Each rule holds and fails where its arithmetic says, and a failure names field, key and both numbers."""
    assert Demand("w", "k", 5, "f", 5, AT_LEAST, "s").holds() and not Demand("w", "k", 6, "f", 5, AT_LEAST, "s").holds()
    assert Demand("w", "k", 16, "f", 4, DIVIDES, "s").holds() and not Demand("w", "k", 16, "f", 3, DIVIDES, "s").holds()
    assert Demand("w", "k", 2, "f", 4, DIVISOR, "s").holds() and not Demand("w", "k", 2, "f", 3, DIVISOR, "s").holds()
    assert Demand("w", "k", 1, "f", None, AT_LEAST, "s").holds()
    assert (
        Demand("CPUs", "key", 54.2, "resources.cpus", 1, AT_LEAST, "src").violation()
        == "resources.cpus = 1: key = 54.2 exceeds it (CPUs; src)"
    )


def test_unknown_method_or_seed_is_one_line(tmp_path):
    """--method and --seed must name the study's: BadInput, one line, exit 2."""
    result = run_cli("preflight", REPO / "manifests" / "graphgpo-alfworld.yaml", "--method", "ppo", cwd=tmp_path)
    assert (
        result.returncode == 2
        and "--method: not a method of the study" in result.stderr
        and len(result.stderr.splitlines()) == 1
    )
    result = run_cli("preflight", REPO / "manifests" / "graphgpo-alfworld.yaml", "--seed", "7", cwd=tmp_path)
    assert result.returncode == 2 and "--seed: not a seed of the study" in result.stderr


def test_docs_show_each_shipped_studys_demand_table():
    """docs/preflight.md holds the demand table `agentrepro preflight` prints for each shipped framework study."""
    docs = (REPO / "docs" / "preflight.md").read_text(encoding="utf-8")
    for name in ("graphgpo-alfworld", "graphgpo-alfworld-relax"):
        path = REPO / "manifests" / f"{name}.yaml"
        for table in preflight.tables(preflight.study_demands(StudyPlan.load(path))):
            assert table in docs, (name, table.splitlines()[0])


# Qwen2.5-1.5B-Instruct's config.json shape (as in benchmarks/bench_gpu.py SHAPES): 1.54 billion parameters
QWEN_15B = {
    "model_type": "qwen2",
    "hidden_act": "silu",
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
}


def test_a_builtin_gpu_job_whose_model_does_not_fit_its_gpu_is_refused(tmp_path):
    """vagen-sokoban with a local model of Qwen2.5-1.5B's shape: on a 16 GiB GPU preflight and freeze exit 2 naming
    resources.gpu_mem_gb and both numbers; on an 80 GiB GPU the demand holds; without gpu_mem_gb it is listed, not
    checked. Only config.json is read (no weights)."""
    model = tmp_path / "qwen-1.5b"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(QWEN_15B))
    path = study(tmp_path, "vagen-sokoban", **{"model.path": str(model), "resources.gpu_mem_gb": 16})
    for verb in ("preflight", "freeze"):
        result = run_cli(verb, path, "--allow-dirty", cwd=tmp_path) if verb == "freeze" else run_cli(verb, path)
        assert result.returncode == 2, result.stderr
        line = result.stderr.strip().splitlines()[-1]
        assert "resources.gpu_mem_gb = 16: weights, optimizer state and bf16 copies of 1,543," in line, line
        assert "exceeds it (GPU memory (GiB); model.path config.json" in line, line
    (job,) = preflight.study_demands(StudyPlan.load(path), methods=["ppo_concat"], seeds=[0])
    (demand,) = job.demands
    assert 16 < demand.need < 80 and demand.field == "resources.gpu_mem_gb" and not demand.holds()
    fits = study(tmp_path, "vagen-sokoban", **{"model.path": str(model), "resources.gpu_mem_gb": 80})
    assert run_cli("preflight", fits).returncode == 0
    unsaid = study(tmp_path, "vagen-sokoban", **{"model.path": str(model)})
    shown = run_cli("preflight", unsaid)
    assert shown.returncode == 0 and "resources.gpu_mem_gb = not set" in shown.stdout, shown.stdout


def _sbatch_state(flags: list[str]) -> str:
    """Submit `true` with these sbatch flags to the local SLURM and return the job's state and reason a moment
    later (then cancel it)."""
    job = subprocess.run(
        ["sbatch", "--parsable", "--output", "/dev/null", *shlex.split(" ".join(flags)), "--wrap", "sleep 30"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    try:
        time.sleep(3)
        return subprocess.run(
            ["squeue", "--noheader", "--format=%T %r", "--jobs", job], capture_output=True, text=True
        ).stdout.strip()
    finally:
        subprocess.run(["scancel", job], check=False)


@pytest.mark.slurm
def test_resources_a_partition_cannot_give_are_refused_with_its_limit(slurm_cluster, tmp_path):
    """Against the local SLURM's `short` partition (10 minutes, one node of 1 fake GPU of type fakegpu), read with
    sinfo: 30 minutes, a GPU model the node has not, two GPUs and a partition that does not exist are each one line
    naming the manifest field and the limit, exit 2. SLURM itself takes the 30-minute job and leaves it pending for
    ever (PartitionTimeLimit), which is why the preflight says it first; the request that fits is submitted with the
    flags `agentrepro command` shows and runs."""
    base = {"resources.partition": "short", "resources.runtime_min": 10, "resources.gpus": 1, "resources.cpus": 1}
    fits = study(tmp_path, "frozenlake-cpu", **base, **{"resources.gpu_model": "fakegpu", "resources.mem_mb": 1000})
    result = run_cli("preflight", fits)
    assert result.returncode == 0, result.stderr
    shown = run_cli("command", fits, "--method", "grpo", "--seed", "0").stdout
    flags = shown.split("is submitted with: sbatch ", 1)[1].splitlines()[0].split()
    assert flags[:2] == ["-p", "short"] and "--gpus=fakegpu:1" in flags, flags
    assert _sbatch_state(flags).split()[0] in ("RUNNING", "COMPLETING", "CONFIGURING")
    cases = [
        (
            {"resources.runtime_min": 30},
            "resources.runtime_min: grpo's train jobs ask 30 minutes, more than its time limit of 10",
        ),
        (
            {"resources.gpu_model": "h100"},
            "resources.gpu_model: grpo's train jobs ask GPUs of model 'h100'; its nodes' GPU types: fakegpu",
        ),
        (
            {"resources.gpus": 2},
            "resources.gpus: grpo's train jobs ask 2 GPU(s) on one node, more than its nodes have (1)",
        ),
        ({"resources.partition": "nope"}, "resources.partition: sinfo lists no partition 'nope'"),
        (  # the profile's 2 retries (profiles/slurm/config.yaml, where the CLI runs) ask 5 minutes more each
            {"resources.runtime_retry_min": 5},
            "resources.runtime_retry_min: grpo's train jobs ask 20 minutes on the last of their 2 retries "
            "(profiles/slurm/config.yaml), more than its time limit of 10",
        ),
        (
            {"resources.mem_retry_mb": 10**6},
            "resources.mem_retry_mb: grpo's train jobs ask 2004000 MB on the last of their 2 retries",
        ),
    ]
    for change, line in cases:
        path = study(tmp_path, "frozenlake-cpu", **{**base, **change})
        refused = run_cli("preflight", path)
        assert refused.returncode == 2 and line in refused.stderr, (change, refused.stderr)
    assert "PartitionTimeLimit" in _sbatch_state(["-p", "short", "-t", "30"])


def test_the_retries_are_the_slurm_profiles_and_each_asks_more(tmp_path):
    """`retries` from profiles/slurm/config.yaml where the study runs (the repository's: 2), none elsewhere; a job
    whose first attempt fits and whose last retry does not is refused on the retry's field, one that fits is not."""
    from agentrepro import planning

    assert preflight.profile_retries(REPO) == 2 and preflight.profile_retries(tmp_path) is None
    partition = slurm.Partition("short", minutes=60, nodes=1, cpus=4, mem_mb=8000, gpus={})
    ask = planning.job_resources({"runtime_min": 40, "runtime_retry_min": 10, "mem_mb": 6000, "mem_retry_mb": 500})[0]
    assert preflight._fits(ask, partition, retries=2) == []
    assert preflight._fits(ask, partition, retries=3) == [
        ("runtime_retry_min", "70 minutes on the last of their 3 retries (profiles/slurm/config.yaml), more than its "
         "time limit of 60"),
    ]  # fmt: skip
    assert preflight._fits(ask, partition, retries=5)[1][0] == "mem_retry_mb"  # 8500 MB, more than the node's 8000


@pytest.mark.slurm
def test_a_job_over_more_nodes_or_more_gpus_a_node_than_its_partition_holds_is_refused(slurm_cluster):
    """The local SLURM's partition `pair` (two nodes of one fake GPU each), read with sinfo: a job of two nodes with one
    GPU on each fits; three nodes, or two GPUs on each (asked as the per-node GRES), do not, each said with the limit."""
    from agentrepro import planning

    pair = slurm.read_partition("pair")
    if isinstance(pair, str):
        pytest.fail(f"the local SLURM has no partition `pair` (scripts/slurm-cluster.sh): {pair!r}")
    assert pair.nodes == 2 and pair.gpus == {"fakegpu": 1}

    def refused(**ask):
        resources = planning.job_resources({"gpus": 1, "partition": "pair", **ask}, spans_nodes=True)[0]
        return preflight._fits(resources, pair)

    assert refused(nodes=2) == [] and refused(nodes=2, gpu_model="fakegpu") == []
    assert refused(nodes=3) == [("nodes", "3 nodes, more than it has (2)")]
    assert refused(nodes=2, gpus=2) == [("gpus", "2 GPU(s) on one node, more than its nodes have (1)")]
