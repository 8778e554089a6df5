"""TRL's ``GRPOTrainer`` on a registered env, in one line: a ``rollout_func`` built from the trainer's own parts.

    from integrations.trl import trace_grpo
    trainer = GRPOTrainer(model=model, args=GRPOConfig(...), **trace_grpo("trace/precondition_verification-v0"))

Why ``rollout_func`` and not ``environment_factory``: an env here is a conversation with a simulated user.
TRL's ``environment_factory`` exposes an env's methods as tools and ends a rollout at the model's first
reply without a tool call, so the user never answers and our envs, which grade the end of the
conversation, always score 0. ``rollout_func`` lets the env drive the loop: every live episode generates
one assistant turn per step (batched, KV cache kept), the env answers (tool results, the user's reply),
and the episode is returned as one sequence in which only the sampled tokens are trained on.

What each rollout returns to TRL: ``prompt_ids`` (the chat template over system prompt, tools and first
user message), ``completion_ids`` (every turn; trailing env tokens dropped), ``env_mask`` (1 on sampled
tokens, 0 on env tokens), ``logprobs`` (of the completion tokens under the policy that sampled them, at the
sampling temperature) and ``trace_env_reward`` (the env's reward, or None for an episode without one: cut at
``max_seq_len`` or broken by its sandbox; TRL then gives it no advantage and its tokens are masked).

The seed of each episode travels in the dataset's ``prompt`` (``seed_dataset``), since TRL passes a
``rollout_func`` only prompts; equal prompts replay the same scenario, which is what a GRPO group is.
"""

from __future__ import annotations

import functools
import re
import weakref
from contextlib import nullcontext
from typing import Any

from trainer.chat import ChatFormat
from trainer.config import RolloutSettings
from trainer.envpool import EnvPool
from trainer.rollout import Rollout, collect_groups

REWARD_FIELD = "trace_env_reward"
_SEED = re.compile(r"^\s*(?:seed\s*)?(\d+)\s*$", re.IGNORECASE)


def seed_of(prompt: Any) -> int:
    """The scenario seed a dataset prompt names: an int, ``"seed 17"`` / ``"17"``, or chat messages ending so."""
    text = prompt
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], dict):
        text = prompt[-1].get("content")
    if isinstance(text, int) and not isinstance(text, bool) and text >= 0:
        return text
    match = _SEED.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"prompt {str(prompt)[:80]!r} names no scenario seed; build the dataset with integrations.trl.seed_dataset(n)")
    return int(match.group(1))


def seed_dataset(n: int, first: int = 0) -> Any:
    """A ``datasets.Dataset`` with one row per scenario seed: ``{"prompt": "seed <k>"}``, k = first .. first + n - 1."""
    from datasets import Dataset

    if n < 1 or first < 0:
        raise ValueError("seed_dataset needs n >= 1 and first >= 0")
    return Dataset.from_dict({"prompt": [f"seed {k}" for k in range(first, first + n)]})


def trace_env_reward(completions: list[Any], **fields: Any) -> list[float | None]:
    """The env's own reward, as the rollout function recorded it (TRL passes rollout extras by name)."""
    if REWARD_FIELD not in fields:
        raise ValueError("trace_env_reward reads the rewards of integrations.trl.TraceRollout: pass rollout_func=TraceRollout(...) too")
    return list(fields[REWARD_FIELD])


class _Unadapted:
    """``TokenLogProbs`` reads a model through PEFT's interface; a plain model is its own base."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def get_base_model(self) -> Any:
        return self.model

    def disable_adapter(self) -> Any:
        return nullcontext()


class TraceRollout:
    """``rollout_func(prompts, trainer)`` for ``GRPOTrainer``: multi-turn episodes of one registered env.

    ``max_steps`` caps the env's turns (gym.make's ``max_steps``: the env truncates and grades the state
    reached); ``max_new_tokens`` bounds each assistant turn and ``max_seq_len`` the whole episode;
    ``temperature`` defaults to the trainer's ``args.temperature`` so TRL's loss sees the distribution sampled.
    The env pool (one sandboxed env per concurrent episode) opens on first use and is kept across steps.
    """

    def __init__(
        self,
        env_id: str,
        *,
        sandbox: str | None = None,
        max_steps: int | None = None,
        max_new_tokens: int = 256,
        max_seq_len: int = 4096,
        temperature: float | None = None,
        env_workers: int | None = None,
        logprob_batch: int = 8,
    ) -> None:
        if max_new_tokens >= max_seq_len:
            raise ValueError("max_new_tokens must be smaller than max_seq_len")
        self.env_id = env_id
        self.sandbox = sandbox
        self.max_steps = max_steps
        self.max_new_tokens = max_new_tokens
        self.max_seq_len = max_seq_len
        self.temperature = temperature
        self.env_workers = env_workers
        self.logprob_batch = logprob_batch
        self.pool: EnvPool | None = None
        self.last: list[Rollout] = []
        self._chat: ChatFormat | None = None
        self._finalizer: Any = None

    def _env_pool(self) -> EnvPool:
        if self.pool is None:
            import gymnasium as gym

            make = functools.partial(gym.make, max_steps=self.max_steps) if self.max_steps else None
            self.pool = EnvPool(self.env_id, sandbox=self.sandbox, make=make, workers=self.env_workers)
            self._finalizer = weakref.finalize(self, self.pool.close)
        return self.pool

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        import torch

        from trainer.engines import TransformersEngine

        if self._chat is None or self._chat.tokenizer is not trainer.processing_class:
            self._chat = ChatFormat(trainer.processing_class)
        chat = self._chat
        temperature = self.temperature if self.temperature is not None else float(trainer.args.temperature)
        settings = RolloutSettings(temperature=temperature, max_new_tokens=self.max_new_tokens, max_seq_len=self.max_seq_len,
                                   env_workers=self.env_workers)
        model = trainer.accelerator.unwrap_model(trainer.model)
        engine = TransformersEngine(model, chat, temperature, self.max_new_tokens)
        rollouts, _ = collect_groups(engine, chat, self._env_pool(), [seed_of(p) for p in prompts], 1, settings)
        self.last = rollouts
        out: dict[str, list[Any]] = {"prompt_ids": [], "completion_ids": [], "env_mask": [], REWARD_FIELD: []}
        for rollout in rollouts:
            ids, mask = rollout.sequence()
            prompt = rollout.prompt_ids or [chat.eos_id]  # an env that never reset: one masked placeholder token
            completion, completion_mask = ids[len(rollout.prompt_ids):], mask[len(rollout.prompt_ids):]
            if not completion or not rollout.trainable:
                completion, completion_mask = completion or [chat.eos_id], [0] * max(1, len(completion))
            out["prompt_ids"].append(prompt)
            out["completion_ids"].append(completion)
            out["env_mask"].append(completion_mask)
            out[REWARD_FIELD].append(rollout.reward if rollout.trainable else None)
        with torch.no_grad():
            out["logprobs"] = self._logprobs(model, out["prompt_ids"], out["completion_ids"], temperature, chat.pad_id)
        return out

    def _logprobs(self, model: Any, prompts: list[list[int]], completions: list[list[int]], temperature: float,
                  pad_id: int) -> list[list[float]]:
        """Per-token log-probabilities of each completion under ``model`` at ``temperature`` (one forward pass
        per batch, through the trainer's chunked output layer; the weights are those that sampled)."""
        import torch

        from trainer.logprobs import TokenLogProbs

        policy = model if hasattr(model, "get_base_model") else _Unadapted(model)
        scorer = TokenLogProbs(policy, temperature=temperature)
        device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        result: list[list[float]] = []
        try:
            for start in range(0, len(prompts), self.logprob_batch):
                batch = [p + c for p, c in zip(prompts[start: start + self.logprob_batch], completions[start: start + self.logprob_batch])]
                width = max(len(seq) for seq in batch)
                ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                rows, cols = [], []
                for row, (seq, prompt) in enumerate(zip(batch, prompts[start:])):
                    ids[row, : len(seq)] = torch.tensor(seq)
                    mask[row, : len(seq)] = 1
                    rows += [row] * (len(seq) - len(prompt))
                    cols += list(range(len(prompt), len(seq)))
                values = scorer(ids.to(device), mask.to(device), torch.tensor(rows, device=device), torch.tensor(cols, device=device))
                flat = values.float().cpu().tolist()
                offset = 0
                for seq, prompt in zip(batch, prompts[start:]):
                    n = len(seq) - len(prompt)
                    result.append(flat[offset: offset + n])
                    offset += n
        finally:
            model.train(was_training)
        return result

    def close(self) -> None:
        """Stop the env pool's sandbox workers (also done when this object is collected, or at exit)."""
        if self._finalizer is not None:
            self._finalizer()
        self.pool = None


def trace_grpo(env_id: str, *, seeds: int = 1024, first_seed: int = 0, **rollout: Any) -> dict[str, Any]:
    """The ``GRPOTrainer`` keyword arguments for one env: ``rollout_func``, ``reward_funcs`` and ``train_dataset``.

    ``rollout`` goes to :class:`TraceRollout` (``sandbox``, ``max_steps``, ``max_new_tokens``, ``max_seq_len``...).
    """
    return {
        "rollout_func": TraceRollout(env_id, **rollout),
        "reward_funcs": [trace_env_reward],
        "train_dataset": seed_dataset(seeds, first_seed),
    }
