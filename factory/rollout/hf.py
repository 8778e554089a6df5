"""A local Hugging Face model (optionally with a PEFT adapter) as a rollout policy.

``hf:PATH`` loads ``AutoModelForCausalLM`` and its tokenizer from a folder (or hub id already in the local
cache); ``hf:PATH@ADAPTER`` adds a PEFT adapter on top. The model sees the conversation exactly as
training showed it: the trainer's token layout (``trainer.chat``: the one renderer of
``env_registry.conversation``, tools and calls written into the text where the template cannot render
them, the turns it generated kept as sampled) and the trainer's batched engine (``trainer.engines``):
episodes running in parallel threads that ask for a turn at about the same time are generated in one
batch. Greedy by default (temperature 0); with a temperature, each batch is seeded from its episodes'
(seed, turn) pairs. An adapter's tools are rendered as it was trained on them (``trained_prompt.json``,
written by ``factory train``: compact signatures or JSON schemas); the base model gets JSON schemas.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from env_registry.targets.tasks import Task
from schemas.errors import FactoryError, one_line
from factory.rollout.policies import Act, Action, Policy, PolicyError


def _split_spec(spec: str) -> tuple[str, str | None]:
    """``hf:PATH[@ADAPTER]`` -> (PATH, ADAPTER or None)."""
    body = spec.removeprefix("hf:")
    if "@" not in body:
        return body, None
    model, _, adapter = body.rpartition("@")
    return model, adapter or None


@dataclass
class _Request:
    ids: list[int]
    key: str
    result: Any = None
    error: BaseException | None = None
    done: bool = False


@dataclass
class Batcher:
    """Generation requests from many threads served in batches: whoever holds the engine runs every request
    queued so far as one batch (a short ``linger_s`` lets the others queue first)."""

    engine: Any
    temperature: float
    linger_s: float = 0.02
    max_batch: int = 64
    _pending: list[_Request] = field(default_factory=list)
    _queue_lock: threading.Lock = field(default_factory=threading.Lock)
    _engine_lock: threading.Lock = field(default_factory=threading.Lock)

    def generate(self, ids: list[int], key: str) -> Any:
        request = _Request(list(ids), key)
        with self._queue_lock:
            self._pending.append(request)
        while not request.done:
            with self._engine_lock:
                if request.done:
                    break
                time.sleep(self.linger_s)
                with self._queue_lock:
                    batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch:]
                self._run(batch)
        if request.error is not None:
            raise request.error
        return request.result

    def _run(self, batch: list[_Request]) -> None:
        import torch

        try:
            if self.temperature > 0:
                digest = hashlib.sha256("|".join(sorted(r.key for r in batch)).encode()).digest()
                torch.manual_seed(int.from_bytes(digest[:8], "big") % (2**63))
            out = self.engine.session({i: r.ids for i, r in enumerate(batch)}).generate()
            for i, request in enumerate(batch):
                request.result = out[i]
        except Exception as exc:  # noqa: BLE001 - every waiting episode gets the failure, none hangs
            for request in batch:
                request.error = exc
        finally:
            for request in batch:
                request.done = True


class HFPolicy(Policy):
    """``compact_tools``: how tools are rendered unless a generation asks otherwise (an adapter's training mode)."""

    def __init__(self, model: Any, tokenizer: Any, spec: str, temperature: float | None = 0.0, max_new_tokens: int = 512,
                 compact_tools: bool = False) -> None:  # fmt: skip
        from trainer.engines import TransformersEngine

        self.model = model
        self.tokenizer = tokenizer
        self.spec = spec
        self.temperature = float(temperature or 0.0)
        self.max_new_tokens = max_new_tokens
        self.compact_tools = compact_tools
        self.warning: str | None = None  # set by from_spec when an explicit mode differs from the adapter's training
        self._formats: dict[bool, Any] = {}
        self.chat = self.format(compact_tools)
        self.batcher = Batcher(TransformersEngine(model, self.chat, self.temperature, max_new_tokens), self.temperature)

    def format(self, compact_tools: bool | None = None) -> Any:
        """The ``trainer.chat.ChatFormat`` of a tool rendering (default: this policy's); one per mode, made once."""
        from trainer.chat import ChatFormat

        compact = self.compact_tools if compact_tools is None else compact_tools
        if compact not in self._formats:
            try:
                self._formats[compact] = ChatFormat(self.tokenizer, compact)
            except FactoryError as exc:
                raise FactoryError(f"--policy {self.spec!r}: {exc}") from None
        return self._formats[compact]

    @classmethod
    def from_spec(cls, spec: str, *, temperature: float | None = 0.0, max_new_tokens: int = 512,
                  compact_tools: bool | None = None) -> "HFPolicy":  # fmt: skip
        """Load ``hf:PATH[@ADAPTER]``. Tools are rendered as the adapter was trained on them unless
        ``compact_tools`` says otherwise (then ``warning`` says that it differs from the training)."""
        from env_registry.conversation import tools_mode, trained_prompt

        path, adapter = _split_spec(spec)
        if not path:
            raise FactoryError(f"--policy {spec!r} names no model; expected hf:PATH or hf:PATH@ADAPTER")
        for label, folder in (("model", path), ("adapter", adapter)):
            if folder and ("/" in folder or folder.startswith(".")) and not Path(folder).expanduser().exists():
                raise FactoryError(f"--policy {spec!r}: {label} folder {folder} does not exist")
        try:
            compact, warning = tools_mode(trained_prompt(adapter) if adapter else None, compact_tools, adapter)
        except FactoryError as exc:
            raise FactoryError(f"--policy {spec!r}: {exc}") from None
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer
            from transformers.utils import logging as hf_logging
        except ImportError:
            raise FactoryError("hf: policies need transformers and torch: pip install 'trace-factory[train]'") from None
        hf_logging.disable_progress_bar()  # our own progress bar is the one to watch
        try:
            where = str(Path(path).expanduser()) if Path(path).expanduser().exists() else path
            tokenizer = AutoTokenizer.from_pretrained(where)
            model = AutoModelForCausalLM.from_pretrained(where)
            if adapter:
                try:
                    from peft import PeftModel
                except ImportError:
                    raise FactoryError("an @ADAPTER needs peft: pip install 'trace-factory[train]'") from None
                model = PeftModel.from_pretrained(model, str(Path(adapter).expanduser()))
        except FactoryError:
            raise
        except Exception as exc:  # noqa: BLE001 - transformers raises many types for a bad folder
            raise FactoryError(f"--policy {spec!r}: cannot load: {type(exc).__name__}: {one_line(exc)[:600]}") from None
        if getattr(tokenizer, "chat_template", None) is None:
            raise FactoryError(f"--policy {spec!r}: the tokenizer has no chat template, so tools cannot be rendered")
        model.eval()
        policy = cls(model, tokenizer, spec, temperature, max_new_tokens, compact_tools=compact)
        policy.warning = warning
        return policy

    def start(self, task: Task, tools: list[dict[str, Any]], seed: int) -> Act:
        """One episode: its token context is kept as training keeps it (generated turns as sampled)."""
        from trainer.chat import EpisodeTokens

        state: list[EpisodeTokens] = []
        turn = iter(range(1_000_000))

        def act(messages: list[dict[str, Any]]) -> Action:
            try:
                if not state:
                    state.append(EpisodeTokens(self.chat, messages, tools))
                else:
                    state[0].observe(messages)
            except FactoryError as exc:
                raise PolicyError(f"policy {self.spec}: {exc}") from None
            generated = self._generate(state[0].ids, f"{seed}:{next(turn)}")
            state[0].generated(generated.tokens, generated.ended)
            return self.chat.decode_action(generated.tokens)

        return act

    def generate(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], seed: int, turn: int,
                 compact_tools: bool | None = None) -> str:  # fmt: skip
        """One turn from the messages alone (no per-episode state): the conversation in the training layout,
        the assistant turns re-tokenised from their rendering; ``compact_tools`` picks the tool rendering of
        the adapter applied for this turn (default: this policy's)."""
        try:
            chat = self.format(compact_tools)
            ids = chat.conversation_ids(messages, tools, generation_prompt=True)[0]
        except FactoryError as exc:
            raise PolicyError(f"policy {self.spec}: {exc}") from None
        return chat.decode_action(self._generate(ids, f"{seed}:{turn}").tokens)

    def _generate(self, ids: list[int], key: str) -> Any:
        try:
            return self.batcher.generate(ids, key)
        except (RuntimeError, ValueError) as exc:  # torch/transformers failures (out of memory, bad input)
            raise PolicyError(f"policy {self.spec}: generation failed: {type(exc).__name__}: {str(exc)[:300]}") from None
