"""Makes tests/trainer/trainer_helpers.py importable (tests/ alone is on pytest's pythonpath)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest


@pytest.fixture(scope="session")
def tiny_chat_model(tmp_path_factory):
    """A random-weight Qwen2 directory with an offline-trained BPE tokenizer and a ChatML chat template (serving/tiny.py)."""
    from agentrepro.serving import tiny

    return tiny.build(tmp_path_factory.mktemp("tiny-chat") / "tiny-chat")
