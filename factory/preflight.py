"""Names a command is given, checked before any expensive work (a sandbox started, a model loaded, a gate run).

A typo must cost a second, not the minute it takes to load a model or the sandbox start that comes before
the line that finally fails; and it must be named as what it is (``--policy 'bogus' is not a policy``), not
as whatever the first component to trip on it says (``OPENAI_API_KEY is not set``). Paths are checked by
:mod:`factory.cli.paths`; this module checks the other names: policies, simulated users, judges, models.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from schemas.errors import InputError

SCRIPTED_POLICIES = ("scripted:gold", "scripted:empty", "gold", "empty")
LLM_PROVIDERS = ("openai", "anthropic", "vllm", "sglang", "ollama", "compat", "openai-compatible", "local")
LLM_FORMS = "PROVIDER:MODEL (openai:gpt-4.1, anthropic:claude-opus-4-5, vllm:Qwen/Qwen3-8B, ollama:llama3.1:8b, compat:MODEL)"
HUB_TIMEOUT_S = 3.0


def _llm_problem(flag: str, text: str) -> str | None:
    """None when ``text`` is PROVIDER:MODEL with a known provider (keys are checked later, by the client)."""
    provider, sep, model = text.partition(":")
    if not sep or provider.lower() not in LLM_PROVIDERS:
        return f"{flag} {text!r} names no provider"
    if not model.strip():
        return f"{flag} {text!r} names no model"
    return None


def check_policy(text: str, flag: str = "--policy") -> None:
    """scripted:gold, scripted:empty, hf:PATH[@ADAPTER] (the model checked like ``--model``) or PROVIDER:MODEL."""
    spec = (text or "").strip()
    if spec in SCRIPTED_POLICIES:
        return
    if spec.startswith("scripted:"):
        raise InputError(f"unknown scripted policy {spec!r}; use scripted:gold or scripted:empty")
    if spec.startswith("hf:"):
        model = spec.removeprefix("hf:").split("@", 1)[0]
        check_model(model, f"{flag} hf:")
        return
    if _llm_problem(flag, spec):
        raise InputError(f"{flag} {spec!r} is not a policy: use scripted:gold, scripted:empty, hf:MODEL_FOLDER[@ADAPTER] "
                         f"or an LLM as {LLM_FORMS}")


def check_user(text: str, flag: str = "--user") -> None:
    """scripted, or an LLM as PROVIDER:MODEL (``llm:`` before it is accepted, as the target env accepts it)."""
    spec = (text or "").strip()
    if spec == "scripted":
        return
    if _llm_problem(flag, spec.removeprefix("llm:")):
        raise InputError(f"{flag} {spec!r} is not a simulated user: use scripted or an LLM as {LLM_FORMS}")


def check_judge(text: str | None, flag: str = "--judge") -> None:
    if text is None:
        return
    if _llm_problem(flag, text.strip()):
        raise InputError(f"{flag} {text!r} is not a judge: name an LLM as {LLM_FORMS}, or leave --judge out")


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "~", os.sep)) or name.count("/") > 1 or os.sep != "/" and os.sep in name


def _hub_unreachable(endpoint: str) -> str | None:
    """Why the hub cannot be reached, within ``HUB_TIMEOUT_S`` even when name resolution hangs (it has no
    timeout of its own): the check runs in a daemon thread that is given up on."""
    from llm_clients.reachability import unreachable

    answer: list[str | None] = []
    worker = threading.Thread(target=lambda: answer.append(unreachable(endpoint, HUB_TIMEOUT_S)), daemon=True)
    worker.start()
    worker.join(HUB_TIMEOUT_S + 0.5)
    return answer[0] if answer else f"no answer within {HUB_TIMEOUT_S:.0f} s"


def model_problem(name: str, flag: str = "--model") -> str | None:
    """None when ``name`` can be loaded without surprises: a local model folder, a hub id already in the
    Hugging Face cache, or a hub id with the hub reachable now; else one line with the fix."""
    where = f"{flag}{'' if flag.endswith(':') else ' '}{name}"
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir():
            return f"{where}: not a folder; pass a model folder (with config.json) or a hub id such as Qwen/Qwen3-8B"
        if not (path / "config.json").is_file() and not any(path.glob("*.gguf")):
            return f"{where}: no config.json in that folder, so it is not a transformers model folder"
        if (path / "config.json").is_file():
            return _config_problem(path / "config.json", where)
        return None
    if _looks_like_path(name):
        return f"{where}: no such folder; pass a local model folder or a hub id such as Qwen/Qwen3-8B"
    try:
        from huggingface_hub import constants, try_to_load_from_cache
        from huggingface_hub.utils import HFValidationError, validate_repo_id
    except ImportError:  # pragma: no cover - transformers brings huggingface_hub
        return None
    try:
        validate_repo_id(name)
    except HFValidationError:
        return f"{where}: neither a folder nor a Hugging Face model id; pass a local model folder or a hub id such as Qwen/Qwen3-8B"
    if isinstance(try_to_load_from_cache(name, "config.json"), str):
        return None
    offline = constants.HF_HUB_OFFLINE or os.environ.get("TRANSFORMERS_OFFLINE", "").lower() in ("1", "true", "yes")
    fix = f"pass a local model folder, or download it where there is network (huggingface-cli download {name}) and use it offline"
    if offline:
        return f"{where}: not a local folder and not in the Hugging Face cache ({constants.HF_HUB_CACHE}), and HF_HUB_OFFLINE is set; {fix}"
    problem = _hub_unreachable(constants.ENDPOINT)
    if problem:
        return (f"{where}: not a local folder and not in the Hugging Face cache, and {constants.ENDPOINT} cannot be reached "
                f"({problem}); {fix} (HF_HUB_OFFLINE=1)")
    return None


def _config_problem(path: Path, where: str) -> str | None:
    """A model folder's ``config.json`` that cannot be read or is not a JSON object, found before sandboxes start."""
    import json

    from schemas.files import read_regular, reason

    fix = "restore it (copy the model folder again) or pass another --model"
    try:
        data = json.loads(read_regular(path, follow=True))
    except OSError as exc:
        return f"{where}: {path} is unreadable ({reason(exc)}); {fix}"
    except ValueError as exc:
        return f"{where}: {path} is damaged ({' '.join(str(exc).split())[:200]}); {fix}"
    return None if isinstance(data, dict) else f"{where}: {path} is damaged (not a JSON object); {fix}"


def check_model(name: str, flag: str = "--model") -> None:
    problem = model_problem(name, flag)
    if problem:
        raise InputError(problem)
