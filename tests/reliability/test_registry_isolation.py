"""Issue 14 item 1: one bad registry entry never takes down the rest.

Each fault is made on a temporary registry beside a sound entry: the sound entry still loads, the bad one is
listed as broken (or tampered) with the command that fixes it, ``import env_registry`` neither hangs nor
raises, ``factory --help`` never touches the registry, and ``factory envs remove`` clears the bad entry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from env_registry.registry import BrokenEntryError, IntegrityError, Registry, RegistryError
from tests.reliability.conftest import one_line, put, run_factory, run_python, subprocess_env


def _replace(path: Path, make: Callable[[Path], None]) -> None:
    path.unlink()
    make(path)


def non_utf8(path: Path) -> None:
    path.write_bytes(path.read_bytes() + b"\xff")


FAULTS: dict[str, tuple[str, Callable[[Path], None], str, str]] = {
    # name: (file in the version folder, how to damage it, status listed, words in the problem)
    "non-utf8 manifest": ("manifest.json", non_utf8, "broken", "is not UTF-8 text (byte 0xff"),
    "manifest is a folder": ("manifest.json", lambda p: _replace(p, lambda q: q.mkdir()), "broken", "is a folder, not a file"),
    "manifest is a FIFO": ("manifest.json", lambda p: _replace(p, lambda q: os.mkfifo(q)), "broken", "is a FIFO (named pipe)"),
    "env.py symlink loop": ("env.py", lambda p: _replace(p, lambda q: q.symlink_to(q.name)), "broken", "is a symbolic link"),
    "manifest missing": ("manifest.json", lambda p: p.unlink(), "broken", "manifest.json is missing"),
    "non-utf8 env.py": ("env.py", non_utf8, "tampered", "fails its content-hash check"),
    "non-utf8 report.json": ("report.json", non_utf8, "tampered", "fails its content-hash check"),
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "registry"
    put(root, "sound_env")
    put(root, "bad_env", report={"passed": True})
    return root


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_bad_entry_is_listed_as_broken_and_the_others_load(root: Path, fault: str) -> None:
    victim, damage, status, words = FAULTS[fault]
    damage(root / "bad_env" / "v0" / victim)
    registry = Registry(root)
    entries = {e.gym_id: e for e in registry.entries()}
    assert entries["trace/sound_env-v0"].status == "ok"
    bad = entries["trace/bad_env-v0"]
    assert bad.status == status and words in (bad.problem or "")
    assert "factory envs remove bad_env --version 0" in (bad.problem or "")
    assert registry.get("sound_env").manifest.capability == "sound_env"
    assert [m.capability for m in registry.manifests()] == ["sound_env"]
    with pytest.raises(IntegrityError if status == "tampered" else BrokenEntryError, match=r"factory envs remove bad_env"):
        registry.get("bad_env")
    assert Registry(root).remove("bad_env", 0) == [0]
    assert [e.gym_id for e in Registry(root).entries()] == ["trace/sound_env-v0"]


def test_broken_capability_folders_are_listed_and_removable(root: Path) -> None:
    (root / "looping").symlink_to("looping")
    (root / "dangling").symlink_to("nowhere")
    (root / "Not A Capability").mkdir()
    (root / "Not A Capability" / "v0").mkdir()
    (root / "file_version").mkdir()
    (root / "file_version" / "v0").write_text("not a folder")
    listed = {e.gym_id: e for e in Registry(root).entries()}
    assert listed["trace/sound_env-v0"].status == "ok"
    assert "symbolic link loop" in (listed["trace/looping"].problem or "")
    assert "dangling" in (listed["trace/dangling"].problem or "")
    assert "not a capability folder" in (listed["trace/Not A Capability"].problem or "")
    assert "is not a folder" in (listed["trace/file_version-v0"].problem or "")
    for name in ("looping", "dangling", "Not A Capability", "file_version"):
        Registry(root).remove(name)
    assert sorted(e.gym_id for e in Registry(root).entries()) == ["trace/bad_env-v0", "trace/sound_env-v0"]
    assert not [p for p in root.iterdir() if p.name.startswith((".staging", ".retired"))]


def test_unreadable_entries_are_broken_with_the_fix(root: Path) -> None:
    """Real permissions (as root the reader runs without the DAC override capabilities): an unreadable manifest,
    version folder and capability folder are each listed as broken with the chmod fix; the sound entry loads."""
    put(root, "bad_folder")
    put(root, "bad_capability")
    targets = {"trace/bad_env-v0": root / "bad_env" / "v0" / "manifest.json", "trace/bad_folder-v0": root / "bad_folder" / "v0",
               "trace/bad_capability": root / "bad_capability"}
    for target in targets.values():
        target.chmod(0)
    try:
        code = (
            "import json, gymnasium as gym, env_registry\nfrom env_registry.registry import Registry\n"
            "print(sorted(k for k in gym.registry if k.startswith('trace/')))\n"
            "print(json.dumps({e.gym_id: [e.status, e.problem] for e in Registry().entries()}))"
        )
        result = run_python(code, root, unprivileged=True)
        assert result.returncode == 0, result.stderr
        registered, entries = result.stdout.strip().splitlines()
        assert "'trace/sound_env-v0'" in registered and "'trace/bad_env-v0'" in registered  # nothing vanished
        listed = json.loads(entries)
        assert listed["trace/sound_env-v0"][0] == "ok"
        for gym_id in targets:
            status, problem = listed[gym_id]
            assert status == "broken" and "permission denied" in problem and "chmod -R u+rwX" in problem, problem
        shown = run_factory("envs", "show", "bad_env", unprivileged=True, TRACE_FACTORY_REGISTRY=str(root))
        assert shown.code == 2 and "permission denied" in one_line(shown.stderr)
    finally:
        for target in targets.values():
            target.chmod(0o755)


def test_import_help_list_and_remove_survive_every_fault_at_once(root: Path, tiny_source: str) -> None:
    """The issue's reproduction: with every damage at once, nothing hangs, nothing raises, everything is listed."""
    for index, (victim, damage, _, _) in enumerate(FAULTS.values()):
        put(root, f"bad_{index}", report={"n": index})
        damage(root / f"bad_{index}" / "v0" / victim)
    (root / "looping").symlink_to("looping")

    imported = run_python(
        "import gymnasium as gym, env_registry\n"
        "ids = sorted(k for k in gym.registry if k.startswith('trace/'))\n"
        "print(len(ids), 'trace/sound_env-v0' in ids)\n"
        "e = gym.make('trace/sound_env-v0'); obs, info = e.reset(seed=1); print(obs[:8]); e.close()\n"
        "try:\n    gym.make('trace/bad_2-v0')\nexcept env_registry.RegistryError as exc:\n    print('refused:', exc)",
        root, timeout=90,
    )
    assert imported.returncode == 0, imported.stderr
    counted, observation, refused = imported.stdout.strip().splitlines()
    assert counted == f"{len(FAULTS) + 2} True" and observation == "[system]"  # every entry but the looping folder
    assert refused.startswith("refused: env trace/bad_2-v0 is broken") and "FIFO" in refused

    helped = run_factory("--help", timeout=30, TRACE_FACTORY_REGISTRY=str(root))
    assert helped.code == 0 and "build" in helped.stdout
    listed = run_factory("envs", "list", "--json", timeout=30, TRACE_FACTORY_REGISTRY=str(root))
    assert listed.code == 0, listed.stderr
    statuses = {e["gym_id"]: e["status"] for e in json.loads(listed.stdout)}
    assert statuses["trace/sound_env-v0"] == "ok" and statuses["trace/looping"] == "broken"
    assert sorted(statuses.values()).count("ok") == 2  # sound_env and bad_env
    removed = run_factory("envs", "remove", "bad_2", "--json", timeout=30, TRACE_FACTORY_REGISTRY=str(root))
    assert removed.code == 0 and json.loads(removed.stdout)["removed"] == ["trace/bad_2-v0"]


def test_help_never_touches_the_registry(tmp_path: Path) -> None:
    """An audit hook sees every open and listing: `factory --help` and `factory build --help` make none in the registry."""
    root = tmp_path / "registry"
    put(root, "sound_env")
    os.mkfifo(root / "trap")
    code = (
        "import sys\nroot = sys.argv[1]\nseen = []\n"
        "def hook(event, args):\n"
        "    if event in ('open', 'os.listdir', 'os.scandir') and args and root in str(args[0]):\n"
        "        seen.append((event, str(args[0])))\n"
        "sys.addaudithook(hook)\n"
        "from factory.cli import main\n"
        "for argv in (['--help'], ['build', '--help'], ['envs', '--help'], ['validate', '--help']):\n"
        "    sys.argv = ['factory', *argv]\n"
        "    try:\n        main()\n    except SystemExit:\n        pass\n"
        "print('TOUCHED', seen, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=60,
                          env=subprocess_env(TRACE_FACTORY_REGISTRY=str(root)))
    assert done.returncode == 0, done.stderr
    assert "TOUCHED []" in done.stderr


def test_a_manifest_that_names_another_version_is_broken(root: Path) -> None:
    """A number read from a file is checked against where the file is: v0's manifest may not claim v7."""
    import shutil

    shutil.copytree(root / "bad_env" / "v0", root / "bad_env" / "v7")
    entries = {e.gym_id: e for e in Registry(root).entries()}
    assert entries["trace/bad_env-v0"].status == "ok"
    assert entries["trace/bad_env-v7"].status == "broken"
    assert "describes trace/bad_env-v0, not the folder it is in" in (entries["trace/bad_env-v7"].problem or "")
    with pytest.raises(RegistryError, match="not the folder it is in"):
        Registry(root).get("bad_env")  # the latest is the broken one: refused, never silently the older one
    manifest, created = put(root, "bad_env", report={"passed": True})
    assert created and manifest.version == 8  # numbering never reuses a broken version's number
