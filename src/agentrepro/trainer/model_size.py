"""The builtin model built from a config: its keys and their bounds, and the memory its training takes.

`model: {name: tiny-gpt2 | tiny-qwen2, config: {d_model, n_layers, n_heads, max_positions}}` builds a small
causal LM locally (trainer/policy.py) over the word-level tokenizer of the environment (trainer/tokenizer.py,
at most `MAX_VOCAB` words). Every key is declared once here, with its default and bounds: `check_config`
refuses anything else in one line naming `model.config.<key>` and the bound, and fills in the defaults.

`training_memory(config, train)` estimates what training such a model holds in memory from the config alone
(no torch): its parameters (counted exactly as the two architectures lay them out, the vocabulary taken at
its bound) times the bytes each takes during an update (float32 weights and gradients, AdamW's two moments;
a frozen float32 copy for the KL reference when `kl_coef` > 0; a bf16 copy with its gradients under
`update_precision: bf16-master`, which `auto` is on CUDA). Activations are not counted: they depend on the batch, not on the config.
`check_model` (called when a manifest is loaded, so `freeze` refuses it) refuses a model whose estimate
exceeds `MAX_TRAINING_BYTES`; a preflight on the machine that will train can call `training_memory` itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrepro.errors import BadInput, shown
from agentrepro.trainer.config import resolve_auto

TINY_ARCHS = ("tiny-gpt2", "tiny-qwen2")


@dataclass(frozen=True)
class Size:
    """One key of a builtin model's config: its default, smallest and largest value, and what it is."""

    default: int
    low: int
    high: int
    help: str


CONFIG: dict[str, Size] = {
    "d_model": Size(64, 1, 8192, "hidden size (a multiple of n_heads)"),
    "n_layers": Size(2, 1, 128, "transformer blocks"),
    "n_heads": Size(4, 1, 128, "attention heads"),
    "max_positions": Size(512, 1, 65_536, "longest sequence: prompt and generated tokens of a trajectory"),
}
MAX_VOCAB = 65_536  # words of the builtin word-level tokenizer (specials, actions, observation words)
MAX_TRAINING_BYTES = 16 << 30  # weights, gradients and optimizer state of a builtin model: 16 GiB
BYTES_PER_PARAMETER = 4 + 4 + 8  # float32 weights and gradients, AdamW's exp_avg and exp_avg_sq
KL_REFERENCE_BYTES = 4  # the frozen float32 reference policy (train.kl_coef > 0)
BF16_MASTER_BYTES = 2 + 2  # the bf16 copy and its gradients (train.update_precision: bf16-master)


def check_config(name: Any, config: Any, *, path: object = None) -> dict[str, int]:
    """The full config of builtin model `name` (defaults filled in); BadInput naming `model.<key>` otherwise."""
    if name not in TINY_ARCHS:
        raise BadInput(
            f"expected one of {', '.join(TINY_ARCHS)} (or give model.path: a local model directory), got {shown(name)}",
            path=path,
            where="model.name",
        )
    if not isinstance(config, dict):
        raise BadInput(f"expected a mapping, got {shown(config)}", path=path, where="model.config")
    for key, value in config.items():
        size = CONFIG.get(key)
        if size is None:
            raise BadInput(
                f"unknown key (expected one of: {', '.join(sorted(CONFIG))})", path=path, where=f"model.config.{key}"
            )
        if not isinstance(value, int) or isinstance(value, bool) or not size.low <= value <= size.high:
            raise BadInput(
                f"expected an integer in [{size.low:,}, {size.high:,}], got {shown(value)}",
                path=path,
                where=f"model.config.{key}",
            )
    full = {key: config.get(key, size.default) for key, size in CONFIG.items()}
    if full["d_model"] % full["n_heads"]:
        raise BadInput(
            f"d_model ({full['d_model']}) must be a multiple of n_heads ({full['n_heads']})",
            path=path,
            where="model.config.n_heads",
        )
    return full


def parameters(name: str, config: dict[str, int], vocab: int = MAX_VOCAB) -> int:
    """Parameters of builtin model `name` with the full `config` over `vocab` words, the value head included
    (the output head is tied to the input embedding in both)."""
    d, layers, positions = config["d_model"], config["n_layers"], config["max_positions"]
    if name == "tiny-gpt2":  # wte, wpe; per block ln_1, c_attn, c_proj, ln_2, c_fc, mlp c_proj; ln_f
        per_layer = 2 * d + (3 * d * d + 3 * d) + (d * d + d) + 2 * d + (4 * d * d + 4 * d) + (4 * d * d + d)
        body = vocab * d + positions * d + layers * per_layer + 2 * d
    else:  # embed_tokens; per block q/k/v (biased), o_proj, gate/up/down (4d), two RMSNorms; norm
        per_layer = 3 * (d * d + d) + d * d + 3 * (4 * d * d) + 2 * d
        body = vocab * d + layers * per_layer + d
    return body + d + 1  # the value head


@dataclass(frozen=True)
class Memory:
    """What training a builtin model holds besides activations."""

    parameters: int
    bytes_per_parameter: int

    @property
    def bytes(self) -> int:
        return self.parameters * self.bytes_per_parameter

    def __str__(self) -> str:
        return f"{self.parameters:,} parameters x {self.bytes_per_parameter} bytes = {self.bytes / (1 << 30):.1f} GiB"


def training_memory(
    name: str, config: dict[str, Any], train: dict[str, Any] | None = None, *, vocab: int = MAX_VOCAB
) -> Memory:
    """The memory estimate of training builtin model `name` with `config` (checked) under the `train` block."""
    train = resolve_auto(train or {}, qwen2_silu=False)  # `auto` precision: bf16-master on CUDA
    per = (
        BYTES_PER_PARAMETER
        + (KL_REFERENCE_BYTES if (train.get("kl_coef") or 0) > 0 else 0)
        + (BF16_MASTER_BYTES if train["update_precision"] == "bf16-master" else 0)
    )
    return Memory(parameters(name, check_config(name, config), vocab), per)


def check_model(model: dict[str, Any], trains: dict[str, dict[str, Any]], *, path: object = None) -> None:
    """Refuse a builtin model whose config is out of bounds, or whose training would hold more than
    MAX_TRAINING_BYTES under any of `trains` (label -> train block; the label is named)."""
    config = check_config(model.get("name"), model.get("config"), path=path)
    for label, train in trains.items():
        memory = training_memory(model["name"], config, train)
        if memory.bytes > MAX_TRAINING_BYTES:
            raise BadInput(
                f"training this model would hold about {memory} (vocabulary at its bound, {MAX_VOCAB:,} words; "
                f"{label}), more than the builtin model's bound of {MAX_TRAINING_BYTES / (1 << 30):g} GiB: "
                "make it smaller, or give model.path (a local model directory)",
                path=path,
                where="model.config",
            )


@dataclass(frozen=True)
class PretrainedShape:
    """What a local model directory's config.json says of its shape (read without torch or transformers)."""

    model_type: str
    hidden_act: str
    hidden: int
    layers: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool

    @classmethod
    def read(cls, directory: object) -> PretrainedShape | None:
        """The shape in `directory`/config.json; None when it has none, or not the keys of a decoder-only LM."""
        path = Path(str(directory)) / "config.json"
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
            config = {**config, **(config.get("text_config") or {})}  # a vision-language model's language model
            hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
            return cls(
                model_type=str(config.get("model_type", "")),
                hidden_act=str(config.get("hidden_act", "silu")),
                hidden=hidden,
                layers=int(config["num_hidden_layers"]),
                intermediate=int(config.get("intermediate_size") or 4 * hidden),
                heads=heads,
                kv_heads=int(config.get("num_key_value_heads") or heads),
                head_dim=int(config.get("head_dim") or hidden // heads),
                vocab=int(config["vocab_size"]),
                tied=bool(config.get("tie_word_embeddings", False)),
            )
        except (OSError, ValueError, TypeError, KeyError, ZeroDivisionError, AttributeError):
            return None

    @property
    def qwen2_silu(self) -> bool:
        """A Qwen2 model with silu: what compiled update kernels and the static rollout engine implement."""
        return self.model_type == "qwen2" and self.hidden_act == "silu"

    @property
    def parameters(self) -> int:
        """Parameters of a Llama/Qwen2-style decoder (biased q/k/v as Qwen2's), embeddings, head and value head."""
        d, kv = self.hidden, self.kv_heads * self.head_dim
        attention = d * self.heads * self.head_dim + self.heads * self.head_dim + 2 * (d * kv + kv)
        attention += self.heads * self.head_dim * d
        per_layer = attention + 3 * d * self.intermediate + 2 * d
        embeddings = self.vocab * d * (1 if self.tied else 2)
        return embeddings + self.layers * per_layer + d + d + 1


def qwen2_silu(model: dict[str, Any]) -> bool:
    """Whether the run's model (its manifest block) is a Qwen2 model with silu: a builtin tiny-qwen2, or a local
    directory whose config.json says so (False when it cannot be read, e.g. a path not yet filled in)."""
    if model.get("path") is None:
        return model.get("name", "tiny-qwen2") == "tiny-qwen2"
    shape = PretrainedShape.read(model["path"])
    return shape is not None and shape.qwen2_silu
