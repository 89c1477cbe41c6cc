"""The run config around a backend: reading it, resolving it over the backend's defaults, the run's identity.

* `load_run_config(path)`: the config written by `agentrepro resolve` (internals.md), checked key by key.
* `resolve_config(config, defaults)`: the config deep-merged over the backend's defaults.
* `write_resolved_config(run_dir, resolved)`: resolved_config.yaml, with its hash in a header comment
  (`layout.config_sha256`, over the canonical JSON of the document, so `layout.config_file_sha256` recomputes it).
* `provenance_base(config, resolved)`: the run's identity written with every attempt.
* `clear_outputs(run_dir)`: what `--no-resume` removes (only the names of the run contract).
* `check_training_outputs(run_dir, resolved)`: the minimum a finished training must have written.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.metadata
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from agentrepro import attempts
from agentrepro.backends.process import Terminated
from agentrepro.bounds import MAX_SEED
from agentrepro.errors import BadInput, Failure
from agentrepro.fileio import atomic_write_text, iter_jsonl, load_json, load_yaml
from agentrepro.layout import METHOD_RE, SLUG_RE, RunFiles, checkpoint_dir, config_file_sha256, config_sha256

RESOLVED = RunFiles.RESOLVED_CONFIG
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
# Top-level keys of a run config (internals.md "Manifest -> lock -> run config").
RUN_CONFIG_KEYS = {"study", "title", "method", "seed", "lock", "backend", "image", "model", "env", "data",
                   "train", "eval", "resources", "reference", "analysis"}
MAPPING_KEYS = ("backend", "image", "model", "env", "data", "train", "eval", "resources", "analysis")
# What `--no-resume` removes: the run contract's outputs, never anything else in the directory.
OUTPUT_NAMES = (RunFiles.RESOLVED_CONFIG, RunFiles.COMMAND, *RunFiles.STEP_LOGS, RunFiles.WARMSTART,
                RunFiles.BATCHES, RunFiles.CHECKPOINTS, RunFiles.EVAL, RunFiles.OUTPUTS)
PACKAGES = ("agentrepro", "numpy", "scipy", "torch", "transformers", "tokenizers", "statsmodels", "pandas",
            "pyyaml", "jsonschema", "snakemake")


def load_run_config(path: str | Path) -> dict[str, Any]:
    """Read and check a run config; BadInput names the file and the key path."""
    path = Path(path)
    config = load_yaml(path)
    validate_run_config(config, path)
    return config


def validate_run_config(config: Any, path: str | Path) -> None:
    if not isinstance(config, dict):
        raise BadInput(f"expected a mapping at the top level, got {type(config).__name__}", path=path)
    unknown = sorted(set(config) - RUN_CONFIG_KEYS)
    if unknown:
        raise BadInput(f"unknown key (expected one of {', '.join(sorted(RUN_CONFIG_KEYS))})", path=path, where=unknown[0])
    for key, pattern, what in (("study", SLUG_RE, ""), ("method", METHOD_RE, ", optionally @ its backend")):
        value = config.get(key)
        if not isinstance(value, str) or not pattern.match(value):
            raise BadInput(f"expected a slug (letters, digits, '.', '_', '-'){what}, got {value!r}", path=path, where=key)
    seed = config.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
        raise BadInput(f"expected an integer in [0, {MAX_SEED}], got {seed!r}", path=path, where="seed")
    for key in MAPPING_KEYS:
        if key in config and not isinstance(config[key], dict):
            raise BadInput(f"expected a mapping, got {type(config[key]).__name__}", path=path, where=key)
    backend = config.get("backend")
    if not isinstance(backend, dict) or not isinstance(backend.get("name"), str):
        raise BadInput("expected a mapping with a string `name`", path=path, where="backend" if not isinstance(backend, dict) else "backend.name")
    if "lock" in config:
        lock = config["lock"]
        if not isinstance(lock, dict) or set(lock) - {"path", "sha256"}:
            raise BadInput("expected {path, sha256}", path=path, where="lock")
        if not isinstance(lock.get("sha256"), str) or not SHA256_RE.match(lock["sha256"]):
            raise BadInput(f"expected 64 lowercase hex digits, got {lock.get('sha256')!r}", path=path, where="lock.sha256")
        if not isinstance(lock.get("path"), str):
            raise BadInput("expected a path string", path=path, where="lock.path")
    if "train" in config and "steps" in config["train"]:
        steps = config["train"]["steps"]
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
            raise BadInput(f"expected a non-negative integer, got {steps!r}", path=path, where="train.steps")


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """A new dict: `base` updated recursively by `override` (mappings merge, everything else replaces)."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def resolve_config(config: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    return deep_merge(defaults or {}, config)


def write_resolved_config(run_dir: Path, resolved: dict[str, Any]) -> str:
    """Write resolved_config.yaml atomically; returns its config_sha256."""
    import yaml

    digest = config_sha256(resolved)
    header = (f"# config_sha256: {digest}\n"
              "# (SHA-256 of the canonical JSON of this document: sorted keys, no whitespace)\n")
    atomic_write_text(run_dir / RESOLVED, header + yaml.safe_dump(resolved, sort_keys=False, allow_unicode=True))
    return digest


def read_resolved_config(run_dir: Path) -> dict[str, Any]:
    path = Path(run_dir) / RESOLVED
    if not path.is_file():
        raise BadInput(f"no {RESOLVED}: not a run directory written by `agentrepro train`", path=run_dir)
    resolved = load_yaml(path)
    validate_run_config(resolved, path)
    return resolved


def command_line(argv: list[str] | None = None) -> str:
    """The exact command line of this process, shell-quoted, as a user would type it."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return shlex.join(["agentrepro", *argv])


def write_command(run_dir: Path, command: str) -> None:
    atomic_write_text(run_dir / RunFiles.COMMAND, command + "\n")


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def lock_identity(config: dict[str, Any], root: Path = Path(".")) -> dict[str, Any]:
    """The lock hash the run carries; when the lock file is at hand, it must hash to that value."""
    lock = config.get("lock")
    if lock is None:
        return {"lock_sha256": None, "lock_path": None, "lock_verified": False}
    path = root / lock["path"]
    verified = False
    if path.is_file():
        from agentrepro.manifest.lock import lock_sha256

        actual = lock_sha256(load_json(path))
        if actual != lock["sha256"]:
            raise BadInput(f"the lock file hashes to {actual}, the config says {lock['sha256']} (re-run `agentrepro resolve`)",
                           path=path, where="lock.sha256")
        verified = True
    return {"lock_sha256": lock["sha256"], "lock_path": lock["path"], "lock_verified": verified}


def provenance_base(config: dict[str, Any], resolved_sha: str, *, root: Path = Path(".")) -> dict[str, Any]:
    return {
        "study": config["study"], "method": config["method"], "seed": config["seed"],
        "backend": config["backend"]["name"],
        **lock_identity(config, root),
        "resolved_config_sha256": resolved_sha,
        "packages": package_versions(),
    }


def previous_config_sha(run_dir: Path) -> str | None:
    path = run_dir / RESOLVED
    if not path.is_file():
        return None
    try:
        return config_file_sha256(path)
    except BadInput:
        return None


def has_checkpoints(run_dir: Path) -> bool:
    ckpt = checkpoint_dir(run_dir)
    return ckpt.is_dir() and any(ckpt.iterdir())


def clear_outputs(run_dir: Path, names: tuple[str, ...] = OUTPUT_NAMES) -> list[str]:
    """Remove the run contract's outputs (not provenance.json, logs/, or the input config; `names`: another
    directory's list, e.g. a warm start's); returns the names removed."""
    removed = []
    for name in names:
        path = run_dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
            removed.append(name)
        elif path.exists() or path.is_symlink():
            path.unlink()
            removed.append(name)
    return removed


def check_training_outputs(run_dir: Path, resolved: dict[str, Any]) -> None:
    """metrics.jsonl exists, every row has an integer `step`, steps increase and end at train.steps."""
    path = run_dir / RunFiles.METRICS
    if not path.is_file():
        raise Failure(f"{path}: the backend finished without writing {RunFiles.METRICS}")
    last = None
    for number, row in iter_jsonl(path):
        step = row.get("step") if isinstance(row, dict) else None
        if not isinstance(step, int) or isinstance(step, bool):
            raise Failure(f"{path}: line {number}: expected an object with an integer `step`")
        if last is not None and step <= last:
            raise Failure(f"{path}: line {number}: step {step} does not follow step {last}")
        last = step
    wanted = (resolved.get("train") or {}).get("steps")
    if isinstance(wanted, int) and wanted > 0 and last != wanted:
        raise Failure(f"{path}: training ended at step {last}, the config asks for train.steps = {wanted}")


@contextlib.contextmanager
def attempt_closed_on_error(directory: Path, *, verb: str, backend_name: str):
    """Close the open provenance attempt of `directory` when the work inside fails or is stopped.

    Ctrl-C or SIGTERM: `killed` (SIGTERM exits 143 after saying so); BadInput/Failure: `failed` with the
    message; any other exception (a backend crash): `failed` with its type, re-raised as Failure (exit 1).
    On success the caller closes the attempt itself, with what it wants to record.
    """
    try:
        yield
    except (KeyboardInterrupt, Terminated) as exc:
        attempts.finish_attempt(directory, status="killed", reason=f"interrupted ({type(exc).__name__}: {exc})")
        if isinstance(exc, Terminated):
            print(f"agentrepro {verb}: terminated ({exc}); the attempt is recorded as killed", file=sys.stderr)
            raise SystemExit(143) from None
        raise
    except (BadInput, Failure) as exc:
        attempts.finish_attempt(directory, status="failed", reason=str(exc))
        raise
    except Exception as exc:  # noqa: BLE001 - a backend crash is a failed attempt, recorded with its reason
        attempts.finish_attempt(directory, status="failed", reason=f"{type(exc).__name__}: {exc}")
        raise Failure(f"{backend_name} backend raised {type(exc).__name__}: {exc}") from exc
