"""The command backend: no shell ever parses a manifest value; hostile values arrive intact or are refused."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrepro.backends import get_backend
from agentrepro.backends.command.backend import CommandBackend, context, run_template
from agentrepro.errors import BadInput

validate_block = get_backend("command").check_block  # the block alone, with the registry's adapters
NASTY = "a b'c\"d; touch PWNED $(touch PWNED2) `touch PWNED3` $HOME"


def test_nasty_config_value_reaches_the_trainer_verbatim(tmp_path, make_config, write_config):
    """A value with spaces, quotes, `;`, `$(...)` and backticks arrives verbatim (argument and env); nothing in it is executed."""
    config = make_config()
    config["train"]["note"] = NASTY
    config["backend"]["command"] += " --note {train.note}"
    config["backend"]["env"] = {"MINI_NOTE_ENV": "{train.note}"}
    work = tmp_path / "work"
    work.mkdir()
    result = run_cli("train", "--config", write_config(config), "--out", tmp_path / "run", cwd=work)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "run" / "note.txt").read_text() == NASTY
    assert (tmp_path / "run" / "note_env.txt").read_text() == NASTY
    assert list(work.iterdir()) == [] and not list(tmp_path.glob("PWNED*"))
    # the exact external command is kept in the run dir, and re-parses to the same value
    import shlex

    recorded = (tmp_path / "run" / "external_command.txt").read_text().strip()
    words = shlex.split(recorded)
    assert words[words.index("--note") + 1] == NASTY


def test_block_checks():
    """Unknown keys, a missing command, bad env names, an unknown adapter and shell syntax are BadInput at their key."""
    with pytest.raises(BadInput, match=r"backend.extra"):
        validate_block({"name": "command", "command": "x", "extra": 1})
    with pytest.raises(BadInput, match=r"backend.command"):
        validate_block({"name": "command"})
    with pytest.raises(BadInput, match=r"backend.env"):
        validate_block({"name": "command", "command": "x", "env": ["A=1"]})
    with pytest.raises(BadInput, match=r"backend.adapter: unknown adapter 'ray'"):
        validate_block({"name": "command", "command": "x", "adapter": "ray"})
    with pytest.raises(BadInput, match=r"backend.env: 'BASH_FUNC_f%%' is not a variable name"):
        validate_block({"name": "command", "command": "x", "env": {"BASH_FUNC_f%%": "() { {x}; }"}})
    with pytest.raises(
        BadInput, match=r"backend.env.AGENTREPRO_RUN_DIR: names starting with AGENTREPRO_ are the harness's"
    ):
        validate_block({"name": "command", "command": "x", "env": {"AGENTREPRO_RUN_DIR": "/elsewhere"}})
    with pytest.raises(BadInput, match=r"backend.eval_command: shell syntax '>'"):
        validate_block({"name": "command", "command": "x", "eval_command": "x > {outcomes}"})


def test_unknown_placeholder_in_eval_command_fails_before_training(make_config):
    """validate_config renders both templates, so a typo in eval_command is found before hours of training."""
    config = make_config()
    config["backend"]["eval_command"] += " {eval.nope}"
    with pytest.raises(BadInput, match=r"backend.eval_command: unknown placeholder \{eval.nope\}"):
        CommandBackend().validate_config(config)


def test_eval_without_eval_command(trained_run):
    """Evaluating a command run without eval_command is BadInput naming backend.eval_command."""
    import yaml

    from agentrepro import runconfig

    resolved = runconfig.read_resolved_config(trained_run)
    del resolved["backend"]["eval_command"]
    runconfig.write_resolved_config(trained_run, resolved)
    with pytest.raises(BadInput, match=r"backend.eval_command"):
        CommandBackend().evaluate(trained_run, 3)
    assert yaml.safe_load((trained_run / "resolved_config.yaml").read_text())["backend"].get("eval_command") is None


HOSTILE = [
    "$(touch PWNED)",
    "`touch PWNED`",
    "x; touch PWNED",
    "x\ntouch PWNED\n",
    "it's",
    'say "hi" \\',
    "--flag",
    "-c",
    "$HOME ${HOME}",
    "{x}",
    "",
    "~ * #",
    "é" + "x" * 60_000,
]
DUMP = "import json, os, sys; json.dump({'argv': sys.argv[2:], 'env': os.environ['NOTE']}, open(sys.argv[1], 'w'))"


@pytest.mark.parametrize("value", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_value_in_every_accepted_placement_is_delivered_and_runs_nothing(value, tmp_path):
    """Run for real: as a word, part of a word, quoted, in backend.env, and as `$1` and `$NOTE` of an inline sh
    script, each hostile value arrives exactly and no file appears."""
    work, run_dir = tmp_path / "work", tmp_path / "run"
    work.mkdir()
    run_dir.mkdir()
    (work / "dump.py").write_text(DUMP)
    config = {"train": {"note": value}, "backend": {}}
    block = {
        "name": "command",
        "cwd": str(work),
        "env": {"NOTE": "{train.note}"},
        "command": "{python} dump.py {run_dir}/argv.json {train.note} --note={train.note} a{train.note}b "
        "'{train.note}' \"{train.note}\" 'pre-'{train.note}",
        "eval_command": 'sh -c \'printf %s "$1" > "$AGENTREPRO_RUN_DIR/pos.txt"; '
        'printf %s "$NOTE" > "$AGENTREPRO_RUN_DIR/env.txt"\' sh {train.note}',
    }
    validate_block(block)
    ctx = context(config, run_dir)
    argv = run_template(block, "command", ctx, run_dir, "train")
    run_template(block, "eval_command", ctx, run_dir, "eval")
    dumped = json.loads((run_dir / "argv.json").read_text())
    assert dumped == {"argv": [value, "--note=" + value, "a" + value + "b", value, value, "pre-" + value], "env": value}
    assert argv[0] == sys.executable and argv[3] == value
    assert (run_dir / "pos.txt").read_text() == value and (run_dir / "env.txt").read_text() == value
    assert sorted(p.name for p in work.iterdir()) == ["dump.py"]
    assert sorted(p.name for p in run_dir.iterdir()) == ["argv.json", "env.txt", "logs", "pos.txt"]
    assert not list(tmp_path.rglob("PWNED"))


SHELL_ROUTE = {
    "name": "command",
    "env": {"NOTE": "{v}"},
    "command": 'sh -c \'printf %s "$1" > "$AGENTREPRO_RUN_DIR/pos"; printf %s "$NOTE" > "$AGENTREPRO_RUN_DIR/env"; '
    'printf %s "$2" > "$AGENTREPRO_RUN_DIR/word"\' sh {v} --v={v}',
}


@settings(max_examples=80, deadline=None)
@given(st.text(st.characters(blacklist_characters="\0", blacklist_categories=["Cs"])))
def test_any_value_reaches_an_inline_shell_script_as_data(value):
    """Property: through the backend, any text given to an inline sh script as "$1", "$2" and "$NOTE" is written back exactly."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        run_dir.mkdir()
        run_template(
            SHELL_ROUTE, "command", context({"v": value}, run_dir), run_dir, "train", record=run_dir / "cmd.txt"
        )
        assert [(run_dir / name).read_bytes().decode() for name in ("pos", "env", "word")] == [
            value,
            value,
            "--v=" + value,
        ]
        assert sorted(p.name for p in Path(tmp).rglob("*")) == [
            "cmd.txt",
            "env",
            "logs",
            "pos",
            "run",
            "train.owner",  # the owner lock the run held while its program ran (backends/ray_head.owned)
            "train.stderr.log",
            "train.stdout.log",
            "word",
        ]


REFUSED = [
    ("command", "bash -c {train.note}", "{train.note} (word 3) is among the options, script or code of `bash`"),
    ("command", "sh -c 'cat <<EOF\n{train.note}\nEOF'", "puts a placeholder beside blanks or shell punctuation"),
    ("command", "cat <<EOF", "shell syntax '<'"),
    ("command", "sh -c 'eval \"$NOTE\"'", "uses `eval`"),
    ("command", "eval {train.note}", "'eval' needs a shell"),
    ("command", "{python} -c {train.note}", "is among the code of `python`"),
    ("command", "{python} train.py; touch PWNED", "shell syntax ';'"),
    ("eval_command", "bash -c 'echo {train.note}'", "puts a placeholder beside blanks"),
]


@pytest.mark.parametrize("key, template, message", REFUSED, ids=[r[1] for r in REFUSED])
def test_re_evaluating_templates_are_exit_2_before_anything_runs(
    key, template, message, tmp_path, make_config, write_config
):
    """`agentrepro train` refuses each re-evaluating form with exit 2 and one line naming the file and the field; nothing runs."""
    config = make_config()
    config["train"]["note"] = "$(touch PWNED)"
    config["backend"][key] = template
    config["backend"]["env"] = {"NOTE": "{train.note}"}
    path = write_config(config)
    result = run_cli("train", "--config", path, "--out", tmp_path / "run", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and lines[0].startswith(f"agentrepro train: error: {path}: backend.{key}: ")
        and message in lines[0]
    ), lines
    assert not (tmp_path / "run").exists() and not list(tmp_path.rglob("PWNED"))


@pytest.mark.parametrize(
    "value, message",
    [
        # A NUL never reaches the template: the reading layer refuses it in the config file, naming the field.
        ("a\0; touch PWNED", "train.note: control character U+0000"),
        ("x" * 200_000, "over Linux's limit of 131071"),
    ],
)
def test_values_no_argument_can_carry_are_exit_2(value, message, tmp_path, make_config, write_config):
    """A NUL character or a value over the one-argument limit is exit 2 naming the field, not a traceback."""
    config = make_config()
    config["train"]["note"] = value
    config["backend"]["command"] += " --note {train.note}"
    result = run_cli("train", "--config", write_config(config), "--out", tmp_path / "run", cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr
    assert "U+0000" in message or ("backend.command: " in result.stderr and "{train.note}" in result.stderr)
    assert "Traceback" not in result.stderr and not (tmp_path / "run").exists()


def test_inline_shell_script_reads_values_from_the_environment(tmp_path, mini_trainer, make_config, write_config):
    """The supported way to use a shell: an inline `sh -c` script (pipes allowed) that gets values as `$1` and env variables."""
    config = make_config()
    config["train"]["note"] = NASTY
    config["backend"]["env"] = {"NOTE": "{train.note}", "MINI": str(mini_trainer)}
    config["backend"]["command"] = (
        'sh -c \'printf %s "$1" > "$AGENTREPRO_RUN_DIR/pos.txt"; printf %s "$NOTE" | cat > "$AGENTREPRO_RUN_DIR/env.txt"; '
        'exec "$AGENTREPRO_PYTHON" "$MINI" train --run "$AGENTREPRO_RUN_DIR" --steps 3 --lr 0.25 --resume "$AGENTREPRO_RESUME"\' '
        "sh {train.note}"
    )
    work = tmp_path / "work"
    work.mkdir()
    result = run_cli("train", "--config", write_config(config), "--out", tmp_path / "run", cwd=work)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "run" / "pos.txt").read_text() == NASTY and (tmp_path / "run" / "env.txt").read_text() == NASTY
    assert len((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()) == 3
    assert list(work.iterdir()) == [] and not list(tmp_path.rglob("PWNED*"))
