"""An adapter folder that names its base model so it loads from anywhere.

PEFT's ``save_pretrained`` writes ``base_model_name_or_path`` as the model was named when it was loaded: a
relative folder typed on the command line (``--model ./models/tiny``) then only resolves from the folder
training ran in, and ``AutoPeftModelForCausalLM.from_pretrained(adapter_dir)`` fails everywhere else. After
every save the name is rewritten: a hub id stays a hub id, a folder in the Hugging Face hub cache becomes
the hub id it was downloaded as, and any other local folder becomes its absolute path, with one warning (the
adapter then loads from any folder of this machine, not from another machine).
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

CONFIG = "adapter_config.json"
_HUB_CACHE = re.compile(r"(?:^|/)models--([^/]+?)--([^/]+)/snapshots/[^/]+/?$")
_log = logging.getLogger(__name__)
_warned: set[str] = set()


def portable_base_name(name: str, cwd: Path | None = None) -> str:
    """The base-model name that resolves from any folder: a hub id where there is one, else an absolute path."""
    cached = _HUB_CACHE.search(name.replace(os.sep, "/"))
    if cached:
        return f"{cached.group(1)}/{cached.group(2)}"
    local = Path(name).expanduser()
    if local.is_absolute():
        return str(local)  # already loads from anywhere; kept as given (symlinks and all)
    local = (cwd or Path.cwd()) / local
    if not local.exists():  # not a folder here: a hub id (or a name the user chose); nothing to resolve
        return name
    return os.path.abspath(local)


def make_portable(adapter_dir: Path, cwd: Path | None = None) -> str | None:
    """Rewrite ``adapter_dir``'s ``base_model_name_or_path`` with :func:`portable_base_name`; returns the name
    written (None where the folder holds no adapter config). Warns once per base model given by a local path."""
    config_file = Path(adapter_dir) / CONFIG
    try:
        config = json.loads(config_file.read_text())
    except (OSError, ValueError):
        return None
    name = config.get("base_model_name_or_path")
    if not isinstance(name, str) or not name:
        return None
    portable = portable_base_name(name, cwd)
    if portable.startswith(os.sep) and portable not in _warned:
        _warned.add(portable)
        _log.warning(
            "adapter_config.json names its base model by the absolute path %s: the adapter loads from any folder "
            "of this machine; to load it elsewhere, train from a hub id (--model org/name) or edit "
            "base_model_name_or_path", portable,
        )
    if portable != name:
        config["base_model_name_or_path"] = portable
        config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return portable
