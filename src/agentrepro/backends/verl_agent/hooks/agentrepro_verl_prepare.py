"""verl-agent's own data preparation, offline: `python3 agentrepro_verl_prepare.py ARGS`, run in the checkout, runs
examples/data_preprocess/prepare.py as its script with ARGS, with `datasets.load_dataset('hiyouga/geometry3k')`
answered by local rows instead of a download.

prepare.py downloads Geometry3K only for its modality and its row count ("We do NOT use the data", prepare.py:37-41
at 20bd331): in text mode each row it writes is {data_source: "text", prompt: [{role: user, content: ""}], ability:
"agent", extra_info: {split, index}} beside the dataset's own `answer` column, which nothing downstream reads. The
local rows are as many as the script selects (--train_data_size, --val_data_size; 256 each by default, as there),
with `problem`, `images` and `answer` empty: the files hold what the download gives but for `answer`'s text. Every
other call of `load_dataset` is the library's own, and with HF_DATASETS_OFFLINE=1 (every framework program's) it
reads local files only. Standard library only: `datasets` is the image's, patched when the script imports it (as
the integration patches verl's modules), and a checkout whose preparation does not import it runs unchanged.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys

try:  # by its own name, run as a script from this backend's hooks folder: the shared folder (mounted too) holds it
    if __name__ == "__main__":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), *[os.pardir] * 3, "hooks"))
    import agentrepro_import_patch
except ModuleNotFoundError:  # as part of the agentrepro package
    from agentrepro.hooks import agentrepro_import_patch

SOURCE = "hiyouga/geometry3k"
MODULE = "examples.data_preprocess.prepare"
DEFAULT_ROWS = 256  # prepare.py's --train_data_size and --val_data_size


def sizes(argv: list[str]) -> tuple[int, int]:
    """The train and validation row counts the script will select (its own defaults where not given)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--train_data_size", type=int, default=DEFAULT_ROWS)
    parser.add_argument("--val_data_size", type=int, default=DEFAULT_ROWS)
    known, _ = parser.parse_known_args(argv)
    return known.train_data_size, known.val_data_size


def answer_locally(train: int, val: int) -> None:
    """When the script imports `datasets` (the image's), make its `load_dataset(SOURCE)` return `train` and `val`
    placeholder rows; every other call is the library's own. Without the library nothing is patched."""
    sys.meta_path.insert(
        0, agentrepro_import_patch.PatchOnImport({"datasets": lambda module: _patch(module, train, val)})
    )


def _patch(datasets, train: int, val: int) -> None:
    real = datasets.load_dataset

    def rows(count: int):
        return datasets.Dataset.from_dict(
            {"problem": [""] * count, "images": [[] for _ in range(count)], "answer": [""] * count}
        )

    def load_dataset(path, *args, **kwargs):
        if path != SOURCE:
            return real(path, *args, **kwargs)
        return datasets.DatasetDict({"train": rows(train), "test": rows(val)})

    datasets.load_dataset = load_dataset


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    answer_locally(*sizes(argv))
    sys.path.insert(0, os.getcwd())  # as `python3 -m` puts the checkout first
    sys.argv = [MODULE, *argv]
    runpy.run_module(MODULE, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
