"""``--adapters DIR``: a folder of PEFT adapter folders, or the folder `factory train` writes its runs into."""

from __future__ import annotations

from pathlib import Path

import pytest

from router.errors import AdapterError
from router.loading import adapters_in


def _adapter(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "adapter_config.json").write_text("{}")
    return path


def test_adapter_folders_and_train_run_folders_are_both_read(tmp_path: Path) -> None:
    plain = _adapter(tmp_path / "precondition_verification")
    run = _adapter(tmp_path / "permission_error_recovery" / "adapter")  # factory train --all --output tmp_path
    (tmp_path / "permission_error_recovery" / "metrics.jsonl").write_text("")
    (tmp_path / "notes").mkdir()  # neither: left out
    assert adapters_in(tmp_path) == {"precondition_verification": plain, "permission_error_recovery": run}


def test_a_folder_without_adapters_names_both_layouts(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(AdapterError, match=r"<capability>/adapter_config.json, or <capability>/adapter/"):
        adapters_in(tmp_path)


def test_a_run_folder_that_is_not_a_capability_name_is_refused(tmp_path: Path) -> None:
    _adapter(tmp_path / "Bad-Name" / "adapter")
    with pytest.raises(AdapterError, match="is not a capability name"):
        adapters_in(tmp_path)
