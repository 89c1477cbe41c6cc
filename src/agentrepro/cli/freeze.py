"""`agentrepro freeze MANIFEST [-o LOCK] [--root DIR] [--allow-dirty]`: the manifest resolved into its immutable lock
(agentrepro.jobs.freeze builds it)."""

from __future__ import annotations

import argparse

from agentrepro.jobs.freeze import freeze
from agentrepro.lockfile import lock_sha256


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("manifest", help="the study manifest (manifests/<study>.yaml)")
    parser.add_argument("-o", "--output", help="lock path (default: manifests/<study>.lock.json beside the manifest)")
    parser.add_argument(
        "--root", default=".", help="root directory: data paths and the harness's git tree (default: .)"
    )
    parser.add_argument(
        "--allow-dirty",
        action="store_true",
        help="freeze even if the harness's git tree has uncommitted changes (recorded in the lock)",
    )


def run(args: argparse.Namespace) -> int:
    lock, path, written = freeze(args.manifest, root=args.root, out=args.output, allow_dirty=args.allow_dirty)
    state = "wrote" if written else "unchanged"
    dirty = " (dirty tree allowed)" if lock["harness"]["dirty"] else ""
    print(f"{path}: {state}, lock {lock_sha256(lock)}, {len(lock['task_panel'])} tasks{dirty}")
    return 0
