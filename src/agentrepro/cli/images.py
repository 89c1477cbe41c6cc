"""`agentrepro images MANIFEST [-o RECORD]`: prepare every container image of the study on this host before its jobs
run (containers/prepare.py `prepare_images`): pull or load it into the runtime's store, or convert it into Apptainer's
SIF in the image cache. The workflow's `images` rule runs it on the host that submits the jobs, so that no GPU job
converts an image on a node without a network; `-o` writes what each image took as JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from agentrepro.containers.prepare import prepare_images
from agentrepro.errors import BadInput
from agentrepro.fileio import atomic_write_text
from agentrepro.manifest.identifiers import digest_problem
from agentrepro.planning import StudyPlan
from agentrepro.seal import refuse_study_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("manifest", type=Path, help="the study manifest")
    parser.add_argument("-o", "--output", type=Path, help="write each image's record (JSON) here")


def run(args: argparse.Namespace) -> int:
    if args.output is not None:
        refuse_study_file(args.output, option="-o")
    plan = StudyPlan.load(args.manifest)
    images = plan.images
    for image in images:  # what a frozen study cannot hold: a placeholder or a mutable pin
        problem = None if image.is_file else digest_problem(image.digest, image.ref)
        if problem is not None:
            raise BadInput(f"{image.pinned}: {problem}", path=args.manifest, where="image.digest")
    if not images:
        print(f"{plan.study}: no placement runs in a container image; nothing to prepare")
    records = prepare_images(images)
    if args.output is not None:
        atomic_write_text(args.output, json.dumps({"study": plan.study, "images": records}, indent=1) + "\n")
    return 0
