"""OpenSSH signatures of a bundle: the author signs with an SSH key, a reviewer verifies against an allowed-signers file.

A bundle's BUNDLE.sha256 lists the SHA-256 of every other member, so signing it signs the bundle's whole content;
the signature travels in the bundle as BUNDLE.sha256.sig. It is an `ssh-keygen -Y sign` signature (the SSHSIG
format git uses for commits) in the namespace NAMESPACE, so that a signature made for anything else (a commit, a
file) cannot pass for a bundle's. `ssh-keygen` does the cryptography; nothing here parses a key or a signature.

* `sign(data, key)`: the armoured signature of `data` by the private key file `key` (or its public half with the
  private key in ssh-agent).
* `check(data, signature, allowed_signers=None)`: one problem line, or None, and what was established in words.
  Without an allowed-signers file only the signature's validity for the key it names is checked
  (`-Y check-novalidate`): the bundle was not changed since that key signed it, whoever holds the key. With one,
  the signer must be a principal of that file, for this namespace (`-Y find-principals`, then `-Y verify`).
* `digest(sums)`: the bundle's short digest, to quote in a paper or a review thread: the first DIGEST_HEX hex digits
  of the SHA-256 of BUNDLE.sha256, which changes with any member (and not with the signature or the gzip wrapping).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from agentrepro.errors import BadInput, Failure

NAMESPACE = "agentrepro-bundle"
DIGEST_HEX = 16
INSTALL = "install OpenSSH's ssh-keygen (Debian: apt-get install openssh-client)"
TIMEOUT_S = 60
# An armoured SSHSIG signature is a few kilobytes (an RSA-16384 key's is under 5 KB); ssh-keygen takes a minute over
# a 60 MB one and then names nothing, so a larger one is refused before it is given to ssh-keygen.
MAX_SIGNATURE_BYTES = 64 * 1024


def digest(sums: bytes) -> str:
    """'sha256:' and the first DIGEST_HEX hex digits of the SHA-256 of BUNDLE.sha256's bytes."""
    return "sha256:" + hashlib.sha256(sums).hexdigest()[:DIGEST_HEX]


def _keygen() -> str:
    path = shutil.which("ssh-keygen")
    if path is None:
        raise Failure(f"ssh-keygen not found on PATH: {INSTALL}")
    return path


def _run(args: list[str], data: bytes | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([_keygen(), *args], input=data, capture_output=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise Failure(
            f"ssh-keygen {args[0]} {args[1]} did not finish in {TIMEOUT_S} s (a key that asks for a passphrase "
            "with no terminal? load it into ssh-agent)"
        ) from None


def _said(out: subprocess.CompletedProcess) -> str:
    return " ".join((out.stderr or out.stdout).decode("utf-8", "replace").split())[:300]


def sign(data: bytes, key: str | os.PathLike) -> bytes:
    """The SSHSIG signature of `data` by `key` (BadInput: no such key; Failure: ssh-keygen refused)."""
    key = Path(key)
    if not key.is_file():
        raise BadInput("no such SSH key file", path=key, where="--sign")
    out = _run(["-Y", "sign", "-f", str(key), "-n", NAMESPACE], data)
    if out.returncode != 0 or not out.stdout.startswith(b"-----BEGIN SSH SIGNATURE-----"):
        raise Failure(f"ssh-keygen could not sign with {key}: {_said(out)}")
    return out.stdout


def fingerprint(key: str | os.PathLike) -> str:
    """The key's fingerprint as ssh-keygen prints it ('256 SHA256:... comment (ED25519)')."""
    out = _run(["-l", "-f", str(key)])
    return out.stdout.decode("utf-8", "replace").strip() if out.returncode == 0 else "unknown key"


def check(data: bytes, signature: bytes, allowed_signers: str | os.PathLike | None = None) -> tuple[str | None, str]:
    """(None, what was verified) or (one problem, what was attempted) for `signature` over `data` (module docstring)."""
    if len(signature) > MAX_SIGNATURE_BYTES:
        return (
            f"is {len(signature):,} bytes, more than an SSH signature has ({MAX_SIGNATURE_BYTES:,}): not checked",
            "signed, but the signature is not one",
        )
    with tempfile.TemporaryDirectory(prefix="agentrepro-sig-") as tmp:
        sig = Path(tmp) / "bundle.sig"
        sig.write_bytes(signature)
        if allowed_signers is None:
            out = _run(["-Y", "check-novalidate", "-n", NAMESPACE, "-s", str(sig)], data)
            if out.returncode != 0:
                return f"the signature does not verify ({_said(out)})", "signed, but the signature is invalid"
            return None, (
                f"signed; the signature is valid for the key it names ({_said(out)}), not checked against an "
                "allowed-signers file (--allowed-signers)"
            )
        allowed = Path(allowed_signers)
        if not allowed.is_file():
            raise BadInput("no such allowed-signers file", path=allowed, where="--allowed-signers")
        found = _run(["-Y", "find-principals", "-s", str(sig), "-f", str(allowed)])
        principals = found.stdout.decode("utf-8", "replace").split() if found.returncode == 0 else []
        if not principals:
            return (
                f"the signing key is not in {allowed} ({_said(found) or 'no principal matches'})",
                "signed by a key the allowed-signers file does not list",
            )
        for principal in principals:
            out = _run(["-Y", "verify", "-f", str(allowed), "-I", principal, "-n", NAMESPACE, "-s", str(sig)], data)
            if out.returncode == 0:
                return None, f"signed by {principal}, verified against {allowed} ({_said(out)})"
        return (
            f"the signature does not verify for {', '.join(principals)} of {allowed} ({_said(out)})",
            "signed, but it does not verify",
        )
