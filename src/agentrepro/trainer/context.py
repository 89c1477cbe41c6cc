"""What a run needs besides the weights: its parsed config, environment factory, tokenizer and codec.

`RunSpec.from_config(config)` checks a resolved run config (the blocks `model`, `env`, `train`, `eval`,
plus `study`, `method`, `seed`); `make_codec` turns a tokenizer into the text <-> token bridge used by
rollouts and the warm start (for a local model with a chat template: the chat prompts, trainer/dialogue.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentrepro.environments import make_env, validate_params
from agentrepro.errors import BadInput
from agentrepro.runconfig import EvalConfig
from agentrepro.trainer.config import TrainConfig, resolve_auto
from agentrepro.trainer.dialogue import Codec
from agentrepro.trainer.model_size import qwen2_silu
from agentrepro.trainer.policy import ModelSpec, load_local_tokenizer
from agentrepro.trainer.tokenizer import build_word_tokenizer, encode_words, probe_texts

VOCAB_PROBE_SEEDS = range(20001, 20033)  # warm-start validation seeds: never evaluated


@dataclass(frozen=True)
class RunSpec:
    study: str
    method: str
    seed: int
    model: ModelSpec
    env_name: str
    env_params: dict[str, Any]
    train: TrainConfig
    eval: EvalConfig = field(default_factory=EvalConfig)

    @classmethod
    def from_config(cls, config: dict[str, Any], *, path: object = None) -> RunSpec:
        for key in ("study", "method", "seed", "env"):
            if key not in config:
                raise BadInput("missing key", path=path, where=key)
        seed = config["seed"]
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise BadInput(f"expected a non-negative integer, got {seed!r}", path=path, where="seed")
        env = config["env"] or {}
        if "name" not in env:
            raise BadInput("missing key", path=path, where="env.name")
        params = validate_params(env["name"], env.get("params") or {}, path=path)
        if params.get("render_mode") == "vision":  # a text model would see only the "<image>" placeholder
            raise BadInput(
                "the builtin trainer plays text observations only; image observations need a vision-language "
                "model of another backend (evaluated with eval.engine: served)",
                path=path,
                where="env.params.render_mode",
            )
        evaluation = EvalConfig.of(config, path=path)
        model = config.get("model") or {}
        # `auto` update precision and kernels as the builtin backend resolves them (a config given straight to the
        # trainer may still say auto)
        train = TrainConfig.from_dict(resolve_auto(config.get("train") or {}, qwen2_silu=qwen2_silu(model)), path=path)
        return cls(
            str(config["study"]),
            str(config["method"]),
            seed,
            ModelSpec.from_dict(model, path=path),
            env["name"],
            params,
            train,
            evaluation,
        )

    def make_env(self, *, training: bool):
        """A fresh environment; training rollouts use `train.format_reward` when it is set."""
        params = dict(self.env_params)
        if training and self.train.format_reward is not None:
            params["format_reward"] = self.train.format_reward
        return make_env(self.env_name, params)

    def view(self, observation: str, info: dict) -> str:
        """What the policy reads: the grid for a tiny model, the full observation for a pretrained one."""
        return info["grid"] if self.model.emits_action_words else observation

    def build_tokenizer(self):
        if not self.model.emits_action_words:
            return load_local_tokenizer(self.model)
        env = self.make_env(training=False)
        return build_word_tokenizer(env.action_names, probe_texts(env, VOCAB_PROBE_SEEDS, self.view))

    def make_codec(self, tokenizer) -> Codec:
        env = self.make_env(training=False)  # writes action words in the env's own prompt format
        if self.model.emits_action_words:

            def render(ids: list[int]) -> str:
                return env.format_actions(tokenizer.convert_ids_to_tokens(ids))

            def demo(actions: list[str]) -> list[int]:
                return [tokenizer.convert_tokens_to_ids(a) for a in actions] + [tokenizer.eos_token_id]
        else:

            def render(ids: list[int]) -> str:
                return tokenizer.decode(ids, skip_special_tokens=True)

            def demo(actions: list[str]) -> list[int]:
                return [*encode_words(tokenizer, env.format_actions(actions)), tokenizer.eos_token_id]

        # a local model whose tokenizer has a chat template is prompted as the served evaluator prompts it
        template = None if self.model.emits_action_words else getattr(tokenizer, "chat_template", None)
        if isinstance(template, dict):  # named templates: apply_chat_template (and a chat server) use "default"
            template = template.get("default")
        return Codec(tokenizer, self.view, render, demo, chat_template=template)
