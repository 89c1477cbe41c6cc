"""`agentrepro bundle STUDY -o FILE.tar.gz [--root DIR]`: pack what a reviewer needs, deterministically."""

from __future__ import annotations

import argparse

from agentrepro.fileio import check_output_file
from agentrepro.audit.bundle import add_max_file_option, max_file_bytes, write_bundle


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("study", help="study slug (manifests/<study>.yaml under --root)")
    parser.add_argument("-o", "--output", required=True, help="the archive to write (.tar.gz)")
    parser.add_argument("--root", default=".", help="root directory (default: .)")
    add_max_file_option(parser, "leave out (and list) files larger than this")


def run(args: argparse.Namespace) -> int:
    check_output_file(args.output, option="-o")
    info = write_bundle(args.study, args.output, args.root, max_file_bytes=max_file_bytes(args))
    print(f"{args.output}: {info['files']} files, {len(info['left_out'])} left out, sha256 {info['sha256']}")
    if info["audit_at_bundling"]:
        print(f"note: the study has {len(info['audit_at_bundling'])} audit problem(s), recorded in BUNDLE.json; "
              f"run `agentrepro audit {args.study}`")
    return 0
