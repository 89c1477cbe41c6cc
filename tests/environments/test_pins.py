"""Pinned hashes of what the environments emit: task hashes (they enter locks and outcomes), system prompts
(not in the reference fixtures), default parameters and `env show` records.

A change here means every frozen lock and outcome file of a study would stop matching. Change a pin only
together with a deliberate, documented change of the environment.
"""

from __future__ import annotations

import pytest

from agentrepro.cli.env import show_record
from agentrepro.environments import make_env, task_panel, validate_params
from agentrepro.fileio import sha256_bytes, sha256_json

LAKE = ["SFFF", "FHFH", "FFFH", "HFFG"]

TASK_HASHES = [
    (
        "sokoban",
        {},
        {
            0: "960549db1695af2a8967ae9f2fc546b49e89ae65edb6b22951edd84422601770",
            7: "ed14831bbfc92f49c7d205c2a0f4bdf8d0b9154184bb7f6528181ed67518d162",
            10001: "f144197ad5f4eeb101e4a08de3b734c946a09efecd78f0d6c0098b73eb666eab",
        },
    ),
    (
        "sokoban",
        {"min_solution_steps": [1, 5]},
        {
            0: "ded496b1b2e9985d5165815d04c3edcae31b4675f467b97ccb56410ff44446cc",
            10001: "9aa019093563405608f4339b53d010a14d497815bcf8b46620130ca421808801",
        },
    ),
    (
        "frozenlake",
        {},
        {
            0: "4d144a0a6d21eeb6122e8fa12b3d901341fbaf950b6fb36110c3d38446f59125",
            3: "ed5f18ecd24a4ae5da9c6bb3ca71a67719d53f2fca64f7e4be2851f3aec76c79",
            10001: "a8271d36d61a5fa5ec3fe86dc0ba2a928ec91e1fafd112c698fb7dab07c46d56",
        },
    ),
    (
        "frozenlake",
        {"prompt_format": "wm", "desc": LAKE},
        {0: "d01f8e0a4883ca5f6708644918c8eea413eb240d610d8c5b70c180f404b4282c"},
    ),
]

# (env, prompt_format) -> sha256 of the system prompt with examples, without examples
# (both with max_actions_per_step 4 and action_sep "|", so the substitutions are covered too)
SYSTEM_PROMPTS = {
    ("sokoban", "free_think"): (
        "27753089616cbd8040348f0309cb1762d9e86325bdd0715e6b5345be7d64ab3e",
        "cbe7da1737aa820a92436b445c2f0c3a790b4d17f03f8eb9a2585d580341e9e5",
    ),
    ("sokoban", "wm"): (
        "20cb0f4e4f8c30d65401b40c2e48e9a8502066539fd495a2a5aa66f0cd899965",
        "86f63749f5b752d593ef3e43d2e983458aeb22e01f747be010030538d8743941",
    ),
    ("sokoban", "free_wm"): (
        "9b856bb4917e48103585a228e5949f4cb8d8128e67714ae661caceddea502cc7",
        "62dfc779e2d7bbe85af84ac98b1baaae8e90e96180c8fa6ad711813a17f0ec25",
    ),
    ("frozenlake", "free_think"): (
        "5929ae67742d2d4cc31a87df67bccc5963d378f26d6c2a477b3ec4d17811b309",
        "9e666144f2189deadf3616519d042dfaad0ad88b03d5b77bd725172c23e8b25f",
    ),
    ("frozenlake", "wm"): (
        "81f520fae7352e1f76409e07f45a9d5fd4a08a1f2e6919d886256c8a897b1012",
        "1737887905ddc797d3fe05adce2ce7d3a3b2bbc1094e68407c98f312a669bff6",
    ),
}

FORMATTED = {
    "free_think": "<think></think><answer>up, left</answer>",
    "wm": "<observation></observation><think></think><answer>up, left</answer><prediction></prediction>",
    "free_wm": "<observation></observation><answer>up, left</answer><prediction></prediction>",
}


@pytest.mark.parametrize("name,params,expected", TASK_HASHES)
def test_task_hashes_are_pinned(name, params, expected):
    """task_panel gives the same task hashes as before the refactor (locks and outcomes stay valid)."""
    panel = task_panel(name, params, list(expected))
    assert {row["seed"]: row["task_hash"] for row in panel} == expected


@pytest.mark.parametrize("key", sorted(SYSTEM_PROMPTS))
def test_system_prompts_are_pinned(key):
    """Each environment's system prompt in each of its formats, with and without examples, is unchanged."""
    name, fmt = key
    got = tuple(
        sha256_bytes(
            make_env(
                name,
                {"prompt_format": fmt, "use_example_in_sys_prompt": ex, "max_actions_per_step": 4, "action_sep": "|"},
            )
            .system_prompt()
            .encode()
        )
        for ex in (True, False)
    )
    assert got == SYSTEM_PROMPTS[key]


@pytest.mark.parametrize("key", sorted(SYSTEM_PROMPTS))
def test_format_actions_is_pinned(key):
    """format_actions writes the same well-formed response in each prompt format."""
    name, fmt = key
    assert make_env(name, {"prompt_format": fmt}).format_actions(["up", "left"]) == FORMATTED[fmt]


@pytest.mark.parametrize(
    "name,expected",
    [
        ("sokoban", "1f517520c8dd3dd40fac89343fd724631dcd1000b5ad46a9f2bff51a58e965ff"),
        ("frozenlake", "819dceab366dd5d3630a3927d8a30a2885b4a24b84c34372b775f75a7d706d63"),
    ],
)
def test_default_params_are_pinned(name, expected):
    """The full default parameters (they enter every task hash) are unchanged."""
    assert sha256_json(validate_params(name, {})) == expected


@pytest.mark.parametrize(
    "name,params,expected",
    [
        ("sokoban", {"min_solution_steps": [1, 5]}, "b11063243ff070348144ba75114656f370ff4c4605bee5e01bc63a666bdbe0de"),
        ("frozenlake", {}, "47fa69ab3ef1a11ea4b6c4866a12140e5504cf29ef8e099969d89964a90ce0e4"),
    ],
)
def test_show_records_are_pinned(name, params, expected):
    """`env show --json`'s record of seed 10003 (grid, solution, hash, Sokoban's generation seed) is unchanged."""
    assert sha256_json(show_record(name, validate_params(name, params), 10003)) == expected
