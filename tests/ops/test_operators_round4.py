"""Operators round 4 (issue 37), one probe per kind: a run folder never becomes a dead end, damage is a clear
exit 2 (a full disk a clear exit 1), every check comes before the expensive part, a second writer is refused,
nothing is silent or wrong, one reader per state file and one error renderer.

Each drives the real ``factory`` entry point in a subprocess (or, for the full disk, the real checkpoint writer
against ``/dev/full``, whose writes the kernel answers with ENOSPC)."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.ops.conftest import FAST_GATE, TINY, put, run_factory, stop_when

pytest.importorskip("torch")
pytest.importorskip("peft")

SMALL = ["--groups", "1", "--group-size", "2", "--set", "rollout.max_new_tokens=8", "--set", "rollout.max_seq_len=1024",
         "--set", "threads=1", "--set", "warm_start.steps=0", "--set", "heldout.seeds=0", "--sandbox", "bwrap"]  # fmt: skip


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("registry")
    put(root)
    return root


def train_args(tiny_model: Path, out: Path, *extra: str) -> list[str]:
    return ["train", "tiny_cancel", "--model", str(tiny_model), "--iterations", "1", "--output", str(out), *SMALL, *extra]


def checkpoint(out: Path, adapter: Path | None) -> Path:
    """A checkpoint folder as `factory train` writes it (state.json, and the adapter copied from ``adapter``)."""
    found = out / "checkpoints" / "iter-000000"
    found.mkdir(parents=True)
    (found / "state.json").write_text(json.dumps({"iteration": 0, "order": [0], "env_id": "trace/tiny_cancel-v0"}))
    if adapter is not None:
        shutil.copytree(adapter, found / "adapter")
    (out / "metrics.jsonl").write_text("")
    return found


# --- dead ends ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_run_killed_before_its_first_checkpoint_is_started_over_by_resume_and_by_a_new_run(
    tmp_path: Path, registry: Path, tiny_model: Path
) -> None:
    """What kill -9 before the first checkpoint leaves (run.json, a metrics row, a half checkpoint folder) is
    accepted by both next commands: each says it starts from iteration 0 and what it removed."""
    out = tmp_path / "run"
    (out / "checkpoints" / ".staging-iter-000000" / "adapter").mkdir(parents=True)
    (out / "run.json").write_text(json.dumps({"env_id": "trace/tiny_cancel-v0", "config": {}}))
    (out / "metrics.jsonl").write_text('{"iteration": 0, "phase": "grpo"}\n')
    resumed = run_factory(*train_args(tiny_model, out, "--resume", "--json"), TRACE_FACTORY_REGISTRY=str(registry))
    assert resumed.code == 0, resumed.stderr[-2000:]
    said = " ".join(resumed.lines)
    assert "holds no checkpoint to resume" in said and "starting from iteration 0" in said and "metrics.jsonl" in said, said
    assert not list((out / "checkpoints").glob(".staging-*"))
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(r["iteration"], r["phase"]) for r in rows] == [(0, "grpo")] and "loss" in rows[0]  # this run's row, not the old one


def test_a_new_run_into_a_partial_folder_starts_it_over_and_says_so(tmp_path: Path) -> None:
    """The same rule without a model: ``resume_point`` accepts the partial folder in every mode and clears it."""
    from trainer.checkpoint import ResumeError, resume_point

    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.jsonl").write_text('{"iteration": 0}\n')
    said: list[str] = []
    assert resume_point(out, "trace/tiny_cancel-v0", None, False, note=said.append) is None
    assert not (out / "metrics.jsonl").exists() and "starting from iteration 0" in said[0] and "removed its metrics.jsonl" in said[0]
    with pytest.raises(ResumeError, match="is empty; run the same command without --resume"):
        resume_point(out, "trace/tiny_cancel-v0", None, True)  # nothing at all is still nothing to resume


# --- damage: exit 2 naming the file (a full disk: exit 1), never "a bug" -------------------------------------


@pytest.mark.parametrize("damage", ["truncated", "no_adapter", "no_weights"])
def test_a_damaged_checkpoint_is_exit_2_naming_the_file_before_the_model_loads(
    tmp_path: Path, registry: Path, tiny_model: Path, adapters: Path, damage: str
) -> None:
    out = tmp_path / "run"
    found = checkpoint(out, None if damage == "no_adapter" else adapters / "tiny_cancel")
    weights = found / "adapter" / "adapter_model.safetensors"
    if damage == "truncated":
        with open(weights, "r+b") as handle:
            handle.truncate(weights.stat().st_size // 2)
    elif damage == "no_weights":
        weights.unlink()
    ran = run_factory(*train_args(tiny_model, out, "--resume"), TRACE_FACTORY_REGISTRY=str(registry))
    assert ran.code == 2, ran.stderr[-1500:]
    line = ran.lines[-1]
    named = {"truncated": f"{weights} is damaged (cut short", "no_adapter": f"{found / 'adapter'}: no such folder",
             "no_weights": f"{found / 'adapter'} holds no adapter weights"}[damage]  # fmt: skip
    assert named in line and f"remove {found} to resume from an earlier checkpoint" in line, line
    assert "internal error" not in ran.stderr and "Traceback" not in ran.stderr and "Loading weights" not in ran.stderr


def test_a_full_disk_while_checkpointing_is_a_run_failure_with_no_half_checkpoint_left(tmp_path: Path) -> None:
    """ENOSPC from the kernel (writes to /dev/full) while the adapter is saved: one line naming the checkpoint
    and the fix, the run's error (exit 1, not bad input, not a bug), and no ``.staging-iter-*`` folder."""
    from factory.cli.exits import exit_code
    from trainer.checkpoint import CheckpointWriteError, save, write_adapter

    class Policy:
        def save_pretrained(self, folder: str) -> None:
            with open("/dev/full", "wb", buffering=0) as full:
                full.write(b"\0" * 4096)

    class Accelerator:
        is_main_process, process_index = True, 0

        def wait_for_everyone(self) -> None:
            pass

    import torch

    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))])
    with pytest.raises(CheckpointWriteError) as raised:
        save(tmp_path, 3, Policy(), optimizer, Accelerator(), {"order": [0]}, keep=2)
    message = str(raised.value)
    assert f"cannot write checkpoint {tmp_path / 'checkpoints' / 'iter-000003'} (no space left on the device)" in message
    assert "free some space, then run the same command again" in message and exit_code(raised.value) == 1
    assert list((tmp_path / "checkpoints").iterdir()) == []
    with pytest.raises(CheckpointWriteError, match=r"cannot write the adapter .*adapter \(no space left on the device\)"):
        write_adapter(Policy(), tmp_path / "adapter")  # the final adapter: the same rule
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoints"]  # no .adapter-* staging folder


def test_eval_env_with_an_adapter_folder_holding_no_weights_is_exit_2(tmp_path: Path, registry: Path, tiny_model: Path, adapters: Path) -> None:
    hollow = tmp_path / "adapters" / "tiny_cancel"
    hollow.mkdir(parents=True)
    shutil.copy(adapters / "tiny_cancel" / "adapter_config.json", hollow)
    ran = run_factory("eval", "--env", "tiny_cancel", "--adapters", str(tmp_path / "adapters"), "--model", str(tiny_model),
                      "--out", str(tmp_path / "eval"), "--heldout-seeds", "1", TRACE_FACTORY_REGISTRY=str(registry))  # fmt: skip
    assert ran.code == 2 and f"adapter tiny_cancel: {hollow} holds no adapter weights" in ran.lines[-1], ran.stderr[-1500:]
    assert not (tmp_path / "eval").exists()


# --- checks before the expensive part ------------------------------------------------------------------------


BAD_NAMES = ["../../x", "caf\u00e9", "a" * 65, "a/b", ""]


def test_a_module_declaring_a_bad_capability_is_refused_before_the_gate(tmp_path: Path) -> None:
    """Each bad name, read from the module's syntax tree: `validate` of all five says each (exit 2) and runs no
    gate; `build --from-file` refuses one before its gate and registers nothing."""
    paths = []
    for i, name in enumerate(BAD_NAMES):
        paths.append(tmp_path / f"env{i}.py")
        paths[-1].write_text(TINY.replace('capability = "tiny_cancel"', f"capability = {name!r}"))
    started = time.monotonic()
    ran = run_factory("validate", *map(str, paths), "--sandbox", "bwrap", *FAST_GATE)
    assert ran.code == 2, ran.stderr[-1500:]
    refused = [line for line in ran.lines if "declares a bad capability" in line and "is not a capability name" in line]
    assert [next(str(p) for p in paths if line.startswith(f"error: {p} ")) for line in refused] == list(map(str, paths)), ran.lines
    assert "validating" not in ran.stderr and time.monotonic() - started < 30  # no gate ran
    built = run_factory("build", "--from-file", str(paths[0]), "--registry", str(tmp_path / "r"), "--sandbox", "bwrap")
    assert built.code == 2 and "declares a bad capability: '../../x' is not a capability name" in built.lines[-1], built.stderr
    assert "validating" not in built.stderr and not (tmp_path / "r").exists()


def test_unknown_target_unreadable_model_config_and_a_too_long_out_are_refused_up_front(
    tmp_path: Path, registry: Path, tiny_model: Path
) -> None:
    target = run_factory("build", "-c", "precondition_verification", "--target", "nope", "--registry", str(tmp_path / "r"))
    assert target.code == 2 and "unknown target 'nope'" in target.lines[-1] and not (tmp_path / "r").exists()

    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)
    (model / "config.json").write_text('{"model_type": "qwen3", ')  # cut short
    bad = run_factory(*train_args(model, tmp_path / "run"), TRACE_FACTORY_REGISTRY=str(registry))
    assert bad.code == 2 and f"{model / 'config.json'} is damaged" in bad.lines[-1], bad.stderr[-1500:]
    assert "sandbox" not in bad.stderr.lower() and not (tmp_path / "run").exists()

    long = tmp_path / ("o" * 300)
    out = run_factory("eval", "--env", "tiny_cancel", "--model", str(tiny_model), "--out", str(long), "--heldout-seeds", "1",
                      TRACE_FACTORY_REGISTRY=str(registry))  # fmt: skip
    assert out.code == 2 and "over the file system's 255-byte limit" in out.lines[-1] and "held-out" not in out.stderr, out.stderr[-800:]


# --- two writers ---------------------------------------------------------------------------------------------


def test_a_second_train_into_the_same_output_is_refused(tmp_path: Path, registry: Path, tiny_model: Path) -> None:
    """A first `factory train` holds the folder's lock (taken here by a process of its own, the same flock);
    the second is exit 2 before it loads a model, and nothing of the folder is touched."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.jsonl").write_text('{"iteration": 0}\n')  # the first run's row, before its first checkpoint
    holder = subprocess.Popen(
        ["python3", "-c", f"import filelock, time; held = filelock.FileLock({str(out / '.train.lock')!r}); held.acquire(); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        second = run_factory(*train_args(tiny_model, out), TRACE_FACTORY_REGISTRY=str(registry))
    finally:
        holder.kill()
        holder.wait()
    assert second.code == 2 and f"another `factory train` is writing to {out}" in second.lines[-1], second.stderr[-1500:]
    assert (out / "metrics.jsonl").read_text() == '{"iteration": 0}\n'  # the first run's partial metrics are its own


# --- silent or wrong -----------------------------------------------------------------------------------------


def test_a_build_stopped_by_sigterm_says_what_is_kept_and_how_to_go_on(tmp_path: Path) -> None:
    """``factory build --all`` (no --report: every built-in blueprint) stopped while the first gate runs: 143 and
    the line that says nothing was registered and that the same command builds them."""
    args = ["build", "--all", "--registry", str(tmp_path / "r"), "--sandbox", "bwrap", *FAST_GATE]
    stopped, _ = stop_when(args, lambda line, seen: "validating" in line)
    assert stopped.code == 143, stopped.stderr[-1500:]
    assert re.search(r"stopped by SIGTERM; nothing was registered; run the same command again to build \w+", stopped.lines[-1]), stopped.lines[-3:]


def test_bad_names_and_paths_are_said_as_what_they_are(tmp_path: Path) -> None:
    removed = run_factory("envs", "remove", "../../x", "--registry", str(tmp_path / "r"))
    assert removed.code == 2 and "'../../x' is not a capability name" in removed.lines[-1] and "factory envs list" in removed.lines[-1]
    assert "factory build --capability ../../x" not in removed.stderr  # no command that would be refused

    missing = run_factory("validate", str(tmp_path / "envs") + "/")
    assert missing.code == 2 and f"{tmp_path / 'envs'}/: no such folder" in missing.lines[-1], missing.stderr

    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    analyzed = run_factory("analyze", str(empty), "--out", str(tmp_path / "analysis"))
    assert analyzed.code == 2 and f"no trajectories in {empty}" in analyzed.lines[-1]


# --- one reader per state file, one renderer -------------------------------------------------------------------


def test_a_train_run_json_has_one_reader_and_errors_are_never_cut_to_their_first_line() -> None:
    """Every module that reads a `factory train` run.json or summary.json goes through schemas.files
    (read_train_run, read_train_summary); product code
    renders errors through schemas.errors (one_line, validation_message), never ``str(exc).splitlines()[0]``."""
    packages = [init.parent for init in REPO_ROOT.glob("*/__init__.py") if init.parent.name not in ("tests", "bench", "examples", "scripts")]
    product = [p for package in packages for p in package.rglob("*.py")]  # the project's packages, never a venv
    readers, cut = [], []
    for path in product:
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.name != "files.py" and (re.search(r"""/ ["']run\.json["']|["']summary\.json["']\)\.read_text""", text)):
            readers.append(str(path.relative_to(REPO_ROOT)))
        cut += [f"{path.relative_to(REPO_ROOT)}:{n}" for n, line in enumerate(text.splitlines(), 1)
                if re.search(r"str\(\w*exc\w*\)[^\n]*splitlines\(\)(?: or \[[^\]]*\]\))?\[0\]", line)]  # fmt: skip
    assert readers == [], readers
    assert cut == [], cut


def test_help_paragraphs_are_never_broken_mid_sentence() -> None:
    """Every command's --help text: each prose paragraph one line, wrapped by the terminal at its width, so none
    breaks where the docstring's source line did ("...or vLLM" / "--lora-modules), ...")."""
    import typer.main

    from factory.cli import app

    def commands(command, path="factory"):  # noqa: ANN001, ANN202 - click objects
        yield path, command
        for name, sub in getattr(command, "commands", {}).items():
            yield from commands(sub, f"{path} {name}")

    broken = []
    for path, command in commands(typer.main.get_command(app)):
        for paragraph in (command.help or "").split("\n\n"):
            lines = paragraph.splitlines()
            if len(lines) > 1 and not any(line.startswith((" ", "- ", "* ", "|")) for line in lines[1:]):
                broken.append(f"{path}: {lines[0][:60]}")
    assert broken == [], broken


def test_train_without_accelerate_installed_is_one_line(tmp_path: Path, registry: Path, tiny_model: Path) -> None:
    """accelerate missing from this Python (hidden by a sitecustomize: ``import accelerate`` fails): one line
    naming it and the install command, exit 2, before a model loads; never an import traceback or "a bug"."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['accelerate'] = None  # import accelerate: ModuleNotFoundError\n")
    ran = run_factory(*train_args(tiny_model, tmp_path / "run"), TRACE_FACTORY_REGISTRY=str(registry),
                      PYTHONPATH=f"{hide}:{REPO_ROOT}")  # fmt: skip
    assert ran.code == 2 and "factory train needs accelerate" in ran.lines[-1] and "pip install 'trace-factory[train]'" in ran.lines[-1], ran.stderr[-1500:]
    assert "Traceback" not in ran.stderr and "internal error" not in ran.stderr and not (tmp_path / "run").exists()
