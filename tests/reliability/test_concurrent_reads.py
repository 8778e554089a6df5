"""Issue 14 item 2: readers never see a false tamper alarm while the same capability is being rebuilt.

Builders refresh ``trace/tiny_cancel-v0`` over and over (same source, new report: the version folder is
swapped each time) while readers read it; every read must verify. A swap caught mid-read is read again; a real
edit is still refused. The readers keep reading until the builders have swapped the folder enough times under
them, so the test asks the same of a loaded machine as of an idle one (only slower).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from schemas import files
from env_registry.registry import IntegrityError, Registry
from tests.reliability.conftest import put, subprocess_env

READS_PER_READER = 5_000
READERS = 2
BUILDERS = 2
SWAPS_PER_BUILDER = 25  # refreshes each builder makes while the readers read
DEADLINE_S = 480

BUILDER = """
import sys
from pathlib import Path
from env_registry.registry import Registry
from tests.reliability.conftest import TINY
from trace_env.loader import load_env
root, stop, tag, started = sys.argv[1], Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
env = load_env(TINY)
registry = Registry(root)
count = under_readers = 0
while not stop.exists():
    reading = started.exists()
    registry.put(TINY, capability="tiny_cancel", target=env.target, tools=env.tools(), max_steps=env.max_steps,
                 report={"builder": tag, "n": count})
    count += 1
    under_readers += reading
    if under_readers == SWAPS:
        (started.parent / f"enough-{tag}").touch()
print(under_readers)
"""

READER = """
import json, sys
from env_registry.registry import IntegrityError, Registry, RegistryError
import time
from pathlib import Path
root, reads, started, builders, deadline = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
registry = Registry(root)
integrity, other, messages = 0, 0, []
started.touch()
index = 0
def enough():
    return len(list(started.parent.glob("enough-*"))) >= builders
while index < reads or not enough():
    if time.monotonic() > deadline:
        sys.exit(f"the builders made too few swaps before the deadline ({index} reads)")
    try:
        stored = registry.get("tiny_cancel", 0 if index % 2 else None)
        assert stored.manifest.version == 0 and stored.report["n"] >= 0
    except IntegrityError as exc:
        integrity += 1
        messages.append(str(exc))
    except RegistryError as exc:
        other += 1
        messages.append(str(exc))
    index += 1
print(json.dumps({"reads": index, "integrity": integrity, "other": other, "retries": getattr(registry, "swap_retries", 0), "messages": messages[:3]}))
"""


@pytest.mark.slow
def test_no_false_integrity_errors_over_ten_thousand_reads_during_rebuilds(tmp_path: Path) -> None:
    root = tmp_path / "registry"
    put(root, report={"builder": "seed", "n": 0})
    stop = tmp_path / "stop"
    env = subprocess_env()
    marks = tmp_path / "marks"
    marks.mkdir()
    started = marks / "started"
    builder_source = BUILDER.replace("SWAPS", str(SWAPS_PER_BUILDER))
    builders = [subprocess.Popen([sys.executable, "-c", builder_source, str(root), str(stop), str(i), str(started)],
                                 env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(BUILDERS)]
    try:
        time.sleep(0.5)  # the builders are swapping before the first read
        deadline = time.monotonic() + DEADLINE_S  # CLOCK_MONOTONIC is system-wide on Linux
        readers = [subprocess.Popen([sys.executable, "-c", READER, str(root), str(READS_PER_READER), str(started),
                                     str(BUILDERS), str(deadline)], env=env, text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(READERS)]
        results = []
        for reader in readers:
            out, err = reader.communicate(timeout=DEADLINE_S + 60)
            assert reader.returncode == 0, err
            results.append(json.loads(out))
    finally:
        stop.touch()
        refreshes = []
        for builder in builders:
            out, err = builder.communicate(timeout=120)
            assert builder.returncode == 0, err
            refreshes.append(int(out))
    reads = sum(r["reads"] for r in results)
    figures = {"reads": reads, "refreshes_under_readers": sum(refreshes), "swap_retries": sum(r["retries"] for r in results),
               "false_integrity_errors": sum(r["integrity"] for r in results), "other_errors": sum(r["other"] for r in results)}
    print(f"\nconcurrency: {figures}")
    assert reads >= 10_000
    assert figures["false_integrity_errors"] == 0, [r["messages"] for r in results]
    assert figures["other_errors"] == 0, [r["messages"] for r in results]
    # the version folder really was swapped under the readers, again and again
    assert sum(refreshes) >= BUILDERS * SWAPS_PER_BUILDER
    assert Registry(root).versions("tiny_cancel") == [0]
    assert not [p for p in root.iterdir() if p.name.startswith((".staging", ".retired"))]


def test_a_swap_caught_mid_read_is_read_again_and_a_real_edit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deterministic: a refresh lands between reading the manifest and the source. The reader notices that its
    folder is no longer the one at the path, reads again, and returns the new version whole; an in-place edit
    (same folder) is tampering."""
    root = tmp_path / "registry"
    put(root, report={"n": 1})
    real_read = files.read_regular
    swapped = []

    def read_then_swap(path, **kwargs):  # noqa: ANN001, ANN003
        data = real_read(path, **kwargs)
        if str(path) == "manifest.json" and not swapped:
            swapped.append(True)
            put(root, report={"n": 2})  # the writer swaps v0 now, between this read and the next
        return data

    monkeypatch.setattr(files, "read_regular", read_then_swap)
    registry = Registry(root)
    stored = registry.get("tiny_cancel")
    assert swapped and registry.swap_retries >= 1
    assert stored.report == {"n": 2}
    monkeypatch.setattr(files, "read_regular", real_read)
    env_file = root / "tiny_cancel" / "v0" / "env.py"
    env_file.write_text(env_file.read_text() + "# edited in place\n")
    fresh = Registry(root)
    with pytest.raises(IntegrityError, match="fails its content-hash check"):
        fresh.get("tiny_cancel")
    assert fresh.swap_retries == 0
