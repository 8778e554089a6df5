"""Find adapter folders, agree on their base model, and load that model and its tokenizer.

An adapters folder holds one PEFT adapter folder per capability, named after it::

    adapters/precondition_verification/adapter_config.json (+ adapter_model.safetensors)
    adapters/permission_error_recovery/...

or is the folder ``factory train`` writes its runs into (``runs/<capability>/adapter/``), read as it is.
Each adapter is shown tools the way it was trained on them (:class:`AdapterPrompts`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from env_registry.conversation import PromptRecordError, TrainedPrompt, tools_mode, trained_prompt
from router.errors import AdapterError
from schemas.names import is_capability_name


def _check(name: str, path: Path) -> tuple[str, Path]:
    if not is_capability_name(name):
        raise AdapterError(f"adapter name {name!r} ({path}) is not a capability name (lowercase letters, digits, _)")
    if not (path / "adapter_config.json").is_file():
        raise AdapterError(f"{path}: not a PEFT adapter folder (no adapter_config.json); save adapters with save_pretrained")
    return name, path


def adapters_in(folder: Path) -> dict[str, Path]:
    """Every subfolder of ``folder`` that holds an adapter, by capability name."""
    folder = Path(folder)
    if not folder.is_dir():
        raise AdapterError(f"--adapters {folder}: no such folder")
    found: dict[str, Path] = {}
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        for candidate in (sub, sub / "adapter"):  # an adapter folder, or a `factory train` run folder
            if (candidate / "adapter_config.json").is_file():
                name, path = _check(sub.name, candidate)
                found[name] = path
                break
    if not found:
        raise AdapterError(f"--adapters {folder}: no adapter folders inside (expected <capability>/adapter_config.json, "
                           "or <capability>/adapter/ as `factory train` writes it)")
    return found


def parse_adapter_flags(flags: Iterable[str]) -> dict[str, Path]:
    """``NAME=PATH`` pairs from ``--adapter``."""
    out: dict[str, Path] = {}
    for flag in flags:
        name, sep, path = flag.partition("=")
        if not sep or not name or not path:
            raise AdapterError(f"--adapter {flag!r}: expected CAPABILITY=PATH")
        if name in out:
            raise AdapterError(f"--adapter {name}: given twice")
        out.update([_check(name, Path(path))])
    return out


def adapters_given(folder: Path | None, flags: Iterable[str] | None) -> dict[str, str]:
    """The adapters of ``--adapters FOLDER`` and ``--adapter NAME=PATH`` together (a flag wins over the folder)."""
    found = {k: str(v) for k, v in adapters_in(folder).items()} if folder else {}
    found.update({k: str(v) for k, v in parse_adapter_flags(flags or []).items()})
    return found


def adapter_base_model(adapters: dict[str, Path]) -> str | None:
    """The base model all adapters were trained on (``base_model_name_or_path``), if they agree."""
    bases: dict[str, str] = {}
    for name, path in adapters.items():
        try:
            config = json.loads((path / "adapter_config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise AdapterError(f"{path / 'adapter_config.json'}: unreadable ({exc})") from None
        base = config.get("base_model_name_or_path") if isinstance(config, dict) else None
        if base:
            bases[name] = str(base)
    distinct = sorted(set(bases.values()))
    if len(distinct) > 1:
        listing = "; ".join(f"{n}: {b}" for n, b in sorted(bases.items()))
        raise AdapterError(f"the adapters were trained on different base models ({listing}); route among adapters of one base model")
    return distinct[0] if distinct else None


@dataclass(frozen=True)
class AdapterPrompts:
    """How each adapter was shown tools in training (``trained_prompt.json``, or its run's ``run.json``), and
    an explicit ``override`` (``--compact-tools``/``--schema-tools``) that applies to every generation."""

    trained: dict[str, TrainedPrompt | None]
    override: bool | None = None

    @classmethod
    def read(cls, adapters: Mapping[str, str | Path], override: bool | None = None) -> "AdapterPrompts":
        try:
            return cls({name: trained_prompt(path) for name, path in adapters.items()}, override)
        except PromptRecordError as exc:
            raise AdapterError(str(exc)) from None

    def compact_tools(self, choice: Any) -> bool:
        """The rendering for a generation with ``choice`` applied: None (the base model: JSON schemas unless
        overridden), a capability's adapter, or a routing decision (its chosen adapter; a soft mix's largest)."""
        name = getattr(choice, "choice", choice)
        if name is None:
            return bool(self.override)
        return tools_mode(self.trained.get(name), self.override, name)[0]

    def warnings(self) -> list[str]:
        """One line per adapter the override shows another rendering than it was trained on."""
        return [line for name, prompt in sorted(self.trained.items()) if (line := tools_mode(prompt, self.override, name)[1])]


def load_base_model(model_id: str, device: str = "cpu", dtype: str = "auto") -> tuple[Any, Any]:
    """The base model (eval mode) and its tokenizer from a local folder or a hub id."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch_dtype: Any = dtype if dtype == "auto" else getattr(torch, dtype, None)
    if torch_dtype is None:
        raise AdapterError(f"--dtype {dtype!r} is not a torch dtype (e.g. float32, bfloat16, auto)")
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_id)
        model = AutoModelForCausalLM.from_pretrained(model_id, dtype=torch_dtype)
    except (OSError, ValueError) as exc:
        raise AdapterError(f"base model {model_id!r} could not be loaded: {' '.join(str(exc).split())[:300]}") from None
    model.to(device)
    model.eval()
    return model, tokenizer
