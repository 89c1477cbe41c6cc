"""Immutable identifiers: each kind of mutable or incomplete identifier gets its own reason."""

from __future__ import annotations

import pytest

from agentrepro.manifest.identifiers import commit_problem, digest_problem, is_placeholder, sha256_problem

FULL = "20bd331bdbc9026a5668e11362178e10ab7400c8"


@pytest.mark.parametrize(
    "value, words",
    [
        ("main", "branch or tag"),
        ("v1.2.0", "branch or tag"),
        ("20bd331", "short commit hash (7 of 40"),
        (FULL.upper(), "upper-case"),
        ("TODO-pin-me", "placeholder"),
        (12345, "expected a 40-hex commit"),
        (FULL + "\n", "whitespace around it"),
        (" " + FULL, "whitespace around it"),
    ],
)
def test_mutable_commits_are_refused_with_a_reason(value, words):
    """Branches, tags, short or upper-case hashes and placeholders are refused, each saying why."""
    assert words in commit_problem(value)


def test_full_commit_is_accepted():
    """A 40-hex lower-case commit is immutable."""
    assert commit_problem(FULL) is None


@pytest.mark.parametrize(
    "digest, ref, words",
    [
        (None, "repo/img:latest", "tag 'repo/img:latest' alone is mutable"),
        ("sha256:abc", "repo/img:1", "expected sha256:<64"),
        ("TODO-digest", "repo/img:1", "placeholder"),
        ("sha256:" + "a" * 64, "repo/img@sha256:" + "b" * 64, "different digest"),
        ("sha256:" + "a" * 64 + "\n", "repo/img:1", "expected sha256:<64"),
    ],
)
def test_image_digests(digest, ref, words):
    """An image needs its sha256 digest, consistent with any digest in its ref."""
    assert words in digest_problem(digest, ref)


def test_good_digest_and_sha256():
    """Well-formed digests and file hashes pass; placeholders are recognised in any case."""
    assert digest_problem("sha256:" + "0" * 64, "repo/img:1") is None
    assert sha256_problem("f" * 64) is None and "placeholder" in sha256_problem("todo")
    assert sha256_problem("f" * 64 + "\n") is not None  # matched whole: a trailing line break is not a hash
    assert is_placeholder("todo-x") and not is_placeholder("a-todo")
