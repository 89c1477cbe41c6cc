"""The verl-agent outcome integration (agentrepro/hooks: verl_site/sitecustomize.py and agentrepro_verl_hook.py) driven through its real entry (sitecustomize on
PYTHONPATH, switched on by AGENTREPRO_VERL_OUT) against a STAND-IN module tree (verl_standin.py): the modules, classes,
names and signatures of verl-agent @ 20bd331 (tests/fixtures/frameworks/verl-agent-20bd331.patched.json), with bodies
that only do what the integration relies on. It cannot run against the real verl here (no GPU stack)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import head_pythonpath, load_file_module

from agentrepro import outcomes
from agentrepro.backends.verl_agent import integration, outputs
from agentrepro.hooks import STARTUP_DIR, STARTUP_ENV

FACTS = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "frameworks" / "verl-agent-20bd331.patched.json").read_text()
)
from agentrepro.backends.verl_agent.hooks import agentrepro_verl_hook as hook  # noqa: E402

standin = load_file_module("verl_standin", Path(__file__).with_name("verl_standin.py"))
stand_in_tree = standin.stand_in_tree


def test_patched_names_match_the_facts():
    """Every name the integration wraps, with its signature, is the one recorded at 20bd331, and nothing else is wrapped."""
    recorded = {(n["module"], n["qualname"]): n["signature"] for n in FACTS["names"]}
    shipped = {(module, name): sig for module, names in hook.PATCHES.items() for name, sig in names.items()}
    assert FACTS["commit"] == hook.COMMIT and shipped == recorded
    assert set(hook.PATCHERS) == set(hook.PATCHES)


def test_outcome_lines_from_the_stand_in_tree(tmp_path):
    """Validation env i plays panel game i (not its seeded shuffle); one line per episode lands in
    verl_validation/<step>.jsonl and converts to outcome rows that pass the outcomes schema and the panel; the
    metrics of Tracking.log land in verl_metrics.jsonl."""
    tree, run = tmp_path / "verl-agent", tmp_path / "run"
    tree.mkdir()
    run.mkdir()
    stand_in_tree(tree)
    games = [
        "valid_seen/pick_and_place_simple-1/trial_a/game.tw-pddl",
        "valid_seen/look_at_obj_in_light-2/trial_b/game.tw-pddl",
        "valid_seen/pick_two_obj_and_place-3/trial_c/game.tw-pddl",
    ]
    split = [str(tmp_path / "data" / g) for g in reversed(games)] + [
        str(tmp_path / "data" / "valid_seen/other/game.tw-pddl")
    ]
    config = {
        "study": "graphgpo-alfworld",
        "method": "graphgpo",
        "seed": 0,
        "backend": {"name": "verl-agent"},
        "eval": {
            "task_panel": [
                {"task_id": g, "task_hash": f"{i:064x}", "category": g.split("/")[1].split("-")[0]}
                for i, g in enumerate(games)
            ]
        },
    }
    env = {
        **integration.env(run, panel_file=integration.write_panel(config, run)),
        "ALFWORLD_DATA": str(tmp_path / "data"),
        "PATH": "/usr/bin:/bin",
    }
    env["PYTHONPATH"] = head_pythonpath(env, tree)  # the integration's, then the stand-in tree as the checkout
    result = subprocess.run([sys.executable, "driver.py", *split], cwd=tree, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(x) for x in (run / "verl_validation" / "5.jsonl").read_text().splitlines()]
    assert [(x["task_id"], x["won"], x["turns"], x["tokens"]) for x in lines] == [
        (games[0], True, 1, 4),
        (games[1], False, 2, 8),
        (games[2], True, 3, 12),
    ]
    assert [x["gamefile"] for x in lines] == [str(tmp_path / "data" / g) for g in games]
    rows = outputs.convert_eval(run, 5, config)
    outcomes.check_rows(rows, config=config, step=5, source="5.jsonl")
    assert [(r["task_id"], r["success"], r["category"]) for r in rows] == [
        (games[0], 1, "pick_and_place_simple"),
        (games[1], 0, "look_at_obj_in_light"),
        (games[2], 1, "pick_two_obj_and_place"),
    ]
    metrics = [json.loads(x) for x in (run / "verl_metrics.jsonl").read_text().splitlines()]
    assert metrics == [{"step": 5, "data": {"val/success_rate": 2 / 3, "timing_s/step": 2.5}}]


def test_a_signature_other_than_20bd331_refuses_to_start(tmp_path):
    """A framework whose wrapped name has another signature stops at import, naming the name, instead of recording wrong outcomes."""
    tree, run = tmp_path / "verl-agent", tmp_path / "run"
    tree.mkdir()
    run.mkdir()
    stand_in_tree(tree)
    tracking = tree / "verl" / "utils" / "tracking.py"
    tracking.write_text(
        tracking.read_text().replace("def log(self, data, step, backend=None)", "def log(self, data, step)")
    )
    env = {**integration.env(run), "PATH": "/usr/bin:/bin"}
    env["PYTHONPATH"] = head_pythonpath(env, tree)
    result = subprocess.run(
        [sys.executable, "-c", "import verl.utils.tracking"], cwd=tree, env=env, capture_output=True, text=True
    )
    assert (
        result.returncode != 0
        and "verl.utils.tracking.Tracking.log(self, data, step) is not (self, data, step, backend=None)"
        in result.stderr
    )


def test_the_images_own_sitecustomize_still_runs_before_the_integration(tmp_path):
    """The startup folder's sitecustomize.py comes first on the path and would shadow an image's own (one that sets
    up its environment, say): it runs that one first, as `site` would have, then installs the hooks
    AGENTREPRO_STARTUP names, in order; without it only the image's runs."""
    image_site = tmp_path / "image-site"
    image_site.mkdir()
    (image_site / "sitecustomize.py").write_text("import os\nos.environ['RAN'] = 'image'\n")
    for name in ("first_hook", "second_hook"):
        (image_site / f"{name}.py").write_text(f"import os\ndef install():\n    os.environ['RAN'] += ',{name}'\n")
    probe = "import os, sys; print(os.environ.get('RAN'), 'agentrepro_verl_hook' in sys.modules)"
    env = {"PYTHONPATH": f"{STARTUP_DIR}:{image_site}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.split() == ["image", "False"], done.stderr
    env[STARTUP_ENV] = "first_hook,second_hook"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.split() == ["image,first_hook,second_hook", "False"], done.stderr
    assert integration.env(tmp_path)[STARTUP_ENV] == integration.HOOK == "agentrepro_verl_hook"
