"""verl-agent's own data preparation run offline: examples/data_preprocess/prepare.py of verl-agent @ 20bd331,
extracted at test time from its source archive (verl-agent-20bd331.tar.gz in the folder AGENTREPRO_FRAMEWORKS names;
skipped where it is not given), with the real `datasets` library and no Hugging Face cache.

What is stood in: `verl.utils.hdfs_io`, which the script imports and uses only with --hdfs_dir (importing the real
`verl` package needs its GPU-side requirements, which the rehearsal image has and this test's environment does not).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from agentrepro.backends import launch
from agentrepro.backends.verl_agent import integration

ARCHIVE = Path(os.environ.get("AGENTREPRO_FRAMEWORKS", "frameworks-not-given")) / "verl-agent-20bd331.tar.gz"
SCRIPT = "examples/data_preprocess/prepare.py"


@pytest.fixture
def checkout(tmp_path) -> Path:
    if not ARCHIVE.is_file():
        pytest.skip(f"verl-agent's source archive is not here ({ARCHIVE}): set AGENTREPRO_FRAMEWORKS to its folder")
    pytest.importorskip("pyarrow.parquet")
    pytest.importorskip("datasets", reason="the test extra's datasets reads and writes what verl-agent's script does")
    root = tmp_path / "verl-agent"
    with tarfile.open(ARCHIVE) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(SCRIPT))
        member.name = SCRIPT
        tar.extract(member, root, filter="data")
    (root / "verl" / "utils").mkdir(parents=True)
    (root / "verl" / "__init__.py").write_text("")
    (root / "verl" / "utils" / "__init__.py").write_text("")
    (root / "verl" / "utils" / "hdfs_io.py").write_text(
        "def copy(src, dst):\n    raise AssertionError('no --hdfs_dir')\n\n\nmakedirs = copy\n"
    )
    return root


def _run(argv: list[str], checkout: Path, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, **launch.OFFLINE, "HF_HOME": str(home), "PYTHONPATH": str(checkout)}
    return subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True, timeout=300)


def test_the_scripts_data_preparation_runs_offline_and_writes_its_rows(checkout, tmp_path):
    """Offline, the script as shipped stops at its download of Geometry3K; through the hook it writes the train and
    test parquet files of the sizes asked, each row what its text mode makes of a dataset row, `answer` empty."""
    out = tmp_path / "data"
    args = ["--mode", "text", "--train_data_size", "3", "--val_data_size", "2", "--local_dir", str(out)]
    shipped = _run([sys.executable, "-m", "examples.data_preprocess.prepare", *args], checkout, tmp_path / "hf")
    assert shipped.returncode != 0 and "geometry3k" in shipped.stderr
    result = _run([sys.executable, str(integration.PREPARE), *args], checkout, tmp_path / "hf")
    assert result.returncode == 0, result.stderr
    import pyarrow.parquet as pq

    for split, count in (("train", 3), ("test", 2)):
        rows = pq.read_table(out / "text" / f"{split}.parquet").to_pylist()
        assert rows == [
            {
                "answer": "",
                "data_source": "text",
                "prompt": [{"role": "user", "content": ""}],
                "ability": "agent",
                "extra_info": {"split": split, "index": index},
            }
            for index in range(count)
        ]
