"""Every size a manifest or an option can set is bounded, refused past its bound in one line that names the file
(or option), the field and the bound; and errors raised by the environments name the file they came from.

The study is the shipped default (manifests/frozenlake-cpu.yaml, with 4 tasks), copied and edited per test, frozen as
a user would (`agentrepro freeze` in a subprocess) or in-process for the many-example property tests.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import REPO, run_cli
from hostile_kit import invoke, record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("AGENTREPRO_HOSTILE_EXAMPLES", "60"))
SETTINGS = settings(
    max_examples=max(10, EXAMPLES // 3),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _cpu_study(root: Path, **changes) -> Path:
    """The default study under `root` (4 tasks) with dotted keys changed (`a__b` for `a.b`); returns its manifest."""
    from study_kit import set_key

    manifest = yaml.safe_load((REPO / "manifests" / "frozenlake-cpu.yaml").read_text())
    manifest["eval"]["tasks"] = 4
    for key, value in changes.items():
        manifest = set_key(manifest, key.replace("__", "."), value)
    (root / "manifests" / "references").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "manifests" / "references" / "frozenlake-cpu.yaml", root / "manifests" / "references")
    path = root / "manifests" / "frozenlake-cpu.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    return path


def _freeze(manifest: Path) -> subprocess.CompletedProcess:
    return run_cli("freeze", manifest, "--root", manifest.parent.parent, "--allow-dirty", timeout=300)


def _one_line(done: subprocess.CompletedProcess, *names: str) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


# ------------------------------------------------------------------------------ errors that lose their file


@pytest.mark.parametrize(
    "changes, names",
    [
        ({"env__params__size": 4000}, ["env.params.size", "<= 64"]),
        ({"env__params__max_actions_per_step": 10**9}, ["env.params.max_actions_per_step", "<= 100"]),
        ({"env__params__colour": "red"}, ["env.params.colour", "unknown parameter"]),
        ({"env__name": "nosuch"}, ["env.name", "unknown environment 'nosuch'"]),
    ],
)
def test_freeze_names_the_manifest_for_the_environments_refusals(tmp_path, changes, names):
    """A bad env.params value or an unknown env.name is refused naming the manifest file, the field and the bound."""
    manifest = _cpu_study(tmp_path, **changes)
    _one_line(_freeze(manifest), f"{manifest}: ", *names)
    record("sizes", "verb:freeze")


def test_a_huge_desc_option_is_refused_naming_the_option(tmp_path):
    """`env replay --param desc=` with 20,001 rows is refused naming --param desc (not env.params.size), in one short line."""
    responses = tmp_path / "r.jsonl"
    responses.write_text(json.dumps("<answer>Up</answer>") + "\n")
    desc = json.dumps(["SG"] + ["FF"] * 20000)
    line = _one_line(
        run_cli(
            "env", "replay", "--env", "frozenlake", "--seed", "1", "--param", f"desc={desc}", "--responses", responses
        ),
        "--param desc",
        "at most 64",
    )
    assert "env.params" not in line and len(line) < 400
    record("sizes", "verb:env")


# ------------------------------------------------------------------------------ the builtin model


@pytest.mark.parametrize(
    "config, names",
    [
        ({"d_model": 10**12}, ["model.config.d_model", "[1, 8,192]"]),
        ({"n_layers": 10**6}, ["model.config.n_layers", "[1, 128]"]),
        ({"max_positions": 10**9}, ["model.config.max_positions", "[1, 65,536]"]),
        ({"vocab": 5}, ["model.config.vocab", "unknown key"]),
        ({"d_model": 4096, "n_layers": 64, "n_heads": 32}, ["model.config", "GiB", "bound of 16 GiB"]),
    ],
)
def test_a_builtin_model_too_large_does_not_freeze(tmp_path, config, names):
    """`model.config` past a key's bound, or whose training memory passes 16 GiB, is refused by freeze with the bound."""
    manifest = _cpu_study(tmp_path, model__config=config)
    _one_line(_freeze(manifest), str(manifest), *names)
    record("sizes", "verb:freeze")


# ------------------------------------------------------------------------------ the other sizes of a manifest


@pytest.mark.parametrize(
    "key, value, names",
    [
        ("train__steps", 10**12, ["train.steps", "1000000"]),
        ("train__group_size", 10**7, ["train.group_size", "1000000"]),
        ("train__threads", 10**5, ["train.threads", "1024"]),
        ("train__data_parallel", 10**6, ["train.data_parallel", "1024"]),
        ("methods__ppo__epochs", 10**6, ["methods.ppo.epochs", "1000"]),
        ("eval__every", 10**12, ["eval.every", "1000000"]),
        ("resources__gpus", 10**6, ["resources.gpus", "1024"]),
        ("resources__mem_mb", 10**12, ["resources.mem_mb", "67108864"]),
        ("eval__server", {"deadline_s": 10**9}, ["eval.server.deadline_s", "604800"]),
    ],
)
def test_other_manifest_sizes_are_bounded(tmp_path, key, value, names):
    """Training steps, batch, threads, ranks, epochs, eval cadence, resources and served time limits have maximums."""
    manifest = _cpu_study(tmp_path, **{key: value})
    _one_line(_freeze(manifest), str(manifest), *names)
    record("sizes", "verb:freeze")


def test_a_batch_past_its_bound_is_refused_by_the_trainer():
    """groups x group_size beyond 1,000,000 trajectories a step is refused naming train.group_size (each alone is in bounds)."""
    from agentrepro.errors import BadInput
    from agentrepro.trainer.config import TrainConfig

    with pytest.raises(BadInput, match=r"train.group_size: expected groups x group_size at most 1,000,000"):
        TrainConfig.from_dict({"groups": 1000, "group_size": 1001})


def test_schema_maximums_are_the_bounds_the_code_applies():
    """The manifest schema states the maximums agentrepro.bounds, the train config and the served evaluator own."""
    from agentrepro.bounds import MAX_CPUS, MAX_GPU_MEM_GB, MAX_GPUS, MAX_MEM_MB, MAX_RUNTIME_MIN, MAX_TRAIN_STEPS
    from agentrepro.serving.servers import TIME_LIMITS_S
    from agentrepro.trainer.config import INTEGER_BOUNDS

    schema = json.loads((REPO / "workflow" / "schemas" / "manifest.schema.json").read_text())["$defs"]
    resources = schema["resources"]["properties"]
    assert [resources[k]["maximum"] for k in ("gpus", "cpus", "runtime_min", "mem_mb", "gpu_mem_gb")] == [
        MAX_GPUS,
        MAX_CPUS,
        MAX_RUNTIME_MIN,
        MAX_MEM_MB,
        MAX_GPU_MEM_GB,
    ]
    evaluation = schema["eval"]["properties"]
    assert evaluation["every"]["maximum"] == evaluation["checkpoint"]["oneOf"][1]["maximum"] == MAX_TRAIN_STEPS
    assert evaluation["checkpoint"]["oneOf"][2]["items"]["maximum"] == MAX_TRAIN_STEPS
    assert schema["analysis"]["properties"]["final_step"]["maximum"] == MAX_TRAIN_STEPS == INTEGER_BOUNDS["steps"][1]
    assert {k: schema["eval_server"]["properties"][k]["maximum"] for k in TIME_LIMITS_S} == TIME_LIMITS_S
    train = json.loads((REPO / "workflow" / "schemas" / "train_config.schema.json").read_text())["properties"]
    assert {k: (train[k]["minimum"], train[k]["maximum"]) for k in INTEGER_BOUNDS} == INTEGER_BOUNDS


# ------------------------------------------------------------------------------ environment parameters


def _integer_params() -> list[tuple[str, str, bool]]:
    """(environment, parameter, takes a pair) of every integer-valued parameter of the generated games."""
    from agentrepro.environments import REGISTRY

    out = []
    for env in ("sokoban", "frozenlake"):
        for param in REGISTRY.get(env).parameters:
            default = param.default
            if (isinstance(default, int) and not isinstance(default, bool)) or param.name in (
                "num_gen_steps",
                "min_solution_steps",
            ):
                out.append((env, param.name, param.name in ("dim_room", "min_solution_steps")))
            elif isinstance(default, list) and all(isinstance(v, int) for v in default):
                out.append((env, param.name, True))
    return out


INTEGER_PARAMS = _integer_params()


@pytest.mark.parametrize("env, name, pair", INTEGER_PARAMS, ids=[f"{e}.{n}" for e, n, _ in INTEGER_PARAMS])
@SETTINGS
@given(
    value=st.one_of(st.integers(min_value=1_000_001, max_value=10**40), st.integers(max_value=-1, min_value=-(10**40)))
)
def test_every_integer_parameter_is_bounded(env, name, pair, value):
    """Any integer past a million (or negative) for any integer parameter of a game: exit 2 naming `--param NAME`, at once."""
    given_value = [value, value] if pair else value
    status, message = invoke("env", "show", "--env", env, "--seed", "1", "--param", f"{name}={json.dumps(given_value)}")
    ok = status == 2 and f"--param {name}" in message and "Traceback" not in message and len(message) < 600
    record("sizes", "verb:env")
    assert ok, f"{name}={value}: exit {status}: {message[-400:]}"


@pytest.mark.parametrize(
    "name, value, bound",
    [
        ("dim_room", [200, 200], "[3, 20]"),
        ("reset_seed_max_tries", 10**12, "<= 10000"),
        ("generate_room_tries", 10**6, "<= 100"),
        ("num_gen_steps", 10**6, "<= 1000"),
        ("min_solution_steps", [0, 10**6], "<= 1000"),
        ("min_solution_bfs_max_depth", 10**9, "<= 1000"),
        ("success_reward", 1e300, "1e+06"),
    ],
)
def test_sokoban_generation_sizes_name_their_bound(name, value, bound):
    """Sokoban's room size and generation budgets (the reference bounds none) are refused with the bound (subprocess)."""
    _one_line(
        run_cli("env", "show", "--env", "sokoban", "--seed", "1", "--param", f"{name}={json.dumps(value)}"),
        f"--param {name}",
        bound,
    )
    record("sizes", "verb:env")


# ------------------------------------------------------------------------------ options


TIME_OPTIONS = [
    "--request-timeout",
    "--deadline",
    "--startup-timeout",
    "--max-tokens",
    "--concurrency",
    "--max-turns",
    "--episodes",
]


@pytest.mark.parametrize("option", TIME_OPTIONS)
@SETTINGS
@given(
    text=st.one_of(
        st.sampled_from(["nan", "inf", "-1", "0", "1e999", "1e12", "", "x"]),
        st.integers(min_value=-(10**30), max_value=10**30).map(str),
        st.floats().map(repr),
    )
)
def test_eval_limits_exit_2_naming_the_option(tmp_path, option, text):
    """Any text for a served evaluation's limit: refused naming the option, or accepted (and the missing model named)."""
    status, message = invoke(
        "eval",
        "--model",
        tmp_path / "no-model",
        "--env",
        "frozenlake",
        "--seeds",
        "1",
        "--server",
        "http://127.0.0.1:9",
        "--out",
        tmp_path / "out",
        f"{option}={text}",
    )
    ok = status == 2 and "Traceback" not in message and (option in message or "--model" in message)
    record("options", "verb:eval")
    assert ok, f"{option}={text!r}: exit {status}: {message[-300:]}"
