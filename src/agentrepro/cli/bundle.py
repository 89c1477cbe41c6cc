"""`agentrepro bundle STUDY -o FILE.tar.gz [--root DIR] [--sign KEY]`: pack what a reviewer needs, deterministically,
optionally signed with an SSH key (OpenSSH's `ssh-keygen -Y sign`, audit/sign.py); print the bundle's short digest."""

from __future__ import annotations

import argparse

from agentrepro.audit.bundle import CHECKPOINT_BYTES, add_max_file_option, max_file_bytes, write_bundle
from agentrepro.audit.sign import NAMESPACE
from agentrepro.bounds import number
from agentrepro.fileio import check_output_file
from agentrepro.seal import refuse_study_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("study", help="study slug (manifests/<study>.yaml under --root)")
    parser.add_argument("-o", "--output", required=True, help="the archive to write (.tar.gz)")
    parser.add_argument("--root", default=".", help="root directory (default: .)")
    add_max_file_option(parser, "leave out (and list) files larger than this")
    parser.add_argument(
        "--checkpoint-mb",
        type=number(0, 1 << 30),
        default=CHECKPOINT_BYTES / (1 << 20),
        help="ship each run's final checkpoint where every file of it is at most this, for `audit --bundle "
        "--re-eval`; 0 ships none (default: %(default)s)",
    )
    parser.add_argument(
        "--sign",
        metavar="KEY",
        help="sign the bundle with this SSH private key (or its .pub, the key in ssh-agent); "
        "reviewers verify it with `agentrepro audit --bundle FILE --allowed-signers FILE`",
    )


def run(args: argparse.Namespace) -> int:
    check_output_file(args.output, option="-o")
    refuse_study_file(args.output, option="-o")
    info = write_bundle(
        args.study,
        args.output,
        args.root,
        max_file_bytes=max_file_bytes(args),
        key=args.sign,
        checkpoint_bytes=int(args.checkpoint_mb * (1 << 20)),
    )
    print(f"{args.output}: {info['files']} files, {len(info['left_out'])} left out, sha256 {info['sha256']}")
    print(f"bundle digest {info['digest']} (quote it: `agentrepro audit --bundle` prints the same for this content)")
    if info["signed_by"]:
        print(f"signed (namespace {NAMESPACE}) by {info['signed_by']}")
    if info["audit_at_bundling"]:
        print(
            f"note: the study has {len(info['audit_at_bundling'])} audit problem(s), recorded in BUNDLE.json; "
            f"run `agentrepro audit {args.study}`"
        )
    return 0
