"""One exit-code contract for every command (issue 23): 0 success, 1 the run failed, 2 bad input or usage, 130/143
interrupted. The walk below names every command the app has (found by walking it) and, for each class, either a
real probe through the real entry point (a subprocess: signals and ``main``'s last boundary included) or why the
class cannot happen for that command. The note's table is this walk."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from factory.cli.exits import BAD_INPUT, FAILED, INTERRUPTED, OK, TERMINATED
from tests.conftest import SHARED_TARGETS, TEST_ENVS
from tests.ops.conftest import FAST_GATE, TINY, UNSOLVED, Ran, put, run_factory, stop_when
from tests.ops.test_cli_contract import ALL
from tests.targets.helpers import requires_servers

CLASSES = ("ok", "failed", "bad input", "stopped")
TASKS = SHARED_TARGETS / "tau2" / "airline" / "tasks.json"
NEVER_SOLVED = TINY.replace('        rid = scenario.user["reservation_id"]\n        turns = [sdk.call(',
                            '        return [sdk.say("Hello.")]\n        rid = scenario.user["reservation_id"]\n        turns = [sdk.call(', 1)
SMALL_TRAIN = ["--groups", "1", "--group-size", "2", "--set", "rollout.max_new_tokens=8", "--set", "rollout.max_seq_len=1024",
               "--set", "threads=1", "--set", "warm_start.steps=16", "--sandbox", "bwrap"]  # fmt: skip
# (warm_start.steps: the former default, so a tiny model's size default of 400 steps does not slow the walk)


@dataclass
class Scene:
    """What the probes share: a folder, a registry with tiny_cancel, env files, the tiny model and an adapter."""

    tmp: Path
    registry: Path
    model: Path
    adapters: Path
    menu: Path
    server: str  # base URL of a scripted LLM server that refuses every request (HTTP 400)
    stalling: object  # a scripted LLM server that answers only after a minute

    def file(self, name: str, text: str) -> Path:
        path = self.tmp / name
        path.write_text(text)
        return path


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path, adapters: Path):
    from env_registry.registry import Registry
    from factory.testing.llm_server import ScriptedLLMServer, ScriptedReply
    from router.menu import build_menu, save_menu

    tmp = tmp_path_factory.mktemp("walk")
    registry = tmp / "registry"
    put(registry)
    menu = save_menu(build_menu(registry=Registry(registry), capabilities=["tiny_cancel"], backend="bwrap"), tmp / "menu.json")
    refusing = ScriptedLLMServer(lambda request: ScriptedReply(status=400, text="no"))
    stalling = ScriptedLLMServer(lambda request: ScriptedReply(text="late", delay_s=20))
    with refusing, stalling:
        yield Scene(tmp, registry, tiny_model, adapters, menu, refusing.openai_base_url, stalling)


def run(scene: Scene, *args: str, **env: str) -> Ran:
    return run_factory(*args, TRACE_FACTORY_REGISTRY=str(scene.registry), TRACE_FACTORY_CACHE=str(scene.tmp / "cache"), **env)


def stop(scene: Scene, args: list[str], ready: Callable[[str, list[str]], bool], signum: int = signal.SIGTERM, **env: str) -> Ran:
    ran, _ = stop_when(args, ready, signum, TRACE_FACTORY_REGISTRY=str(scene.registry), TRACE_FACTORY_CACHE=str(scene.tmp / "cache"), **env)
    return ran


def first_progress(line: str, seen: list[str]) -> bool:
    return line.startswith("[")


def injected_trajectories(scene: Scene) -> Path:
    from tests.ops.test_outputs import trajectories

    folder = scene.tmp / "traj"
    folder.mkdir(exist_ok=True)
    return trajectories(folder, 12)


def _rollout_stopped(s: Scene) -> tuple[Ran, int]:
    """The real τ² server behind a proxy that never answers the first tool call: SIGTERM while the call hangs."""
    import time

    from tests.targets.helpers import server_command

    pid = s.tmp / "hang.pid"
    seen: list[float] = []

    def hanging(line: str, lines: list[str]) -> bool:
        if pid.exists() and not seen:
            seen.append(time.monotonic())
        return bool(seen) and time.monotonic() - seen[0] > 3.0  # the handshake is done, the first call is out

    args = ["rollout", "--target", "tau2-airline", "--backend", "mcp", "--server", server_command("airline", "hang", 1, pid),
            "--task-ids", "1", "--policy", "scripted:gold", "--out", str(s.tmp / "r-stop")]  # fmt: skip
    return stop(s, args, hanging), TERMINATED


Probe = Callable[[Scene], tuple[Ran, int]]
Walk = dict[tuple[str, str], "Probe | str"]


def _rollout() -> Walk:
    base = ["rollout", "--target", "mcp", "--tasks", str(TASKS), "--task-ids", "0", "--policy", "scripted:gold"]
    return {
        ("rollout", "ok"): lambda s: (run(s, "rollout", "--target", "tau2-airline", "--backend", "mcp", "--task-ids", "0",
                                          "--policy", "scripted:gold", "--out", str(s.tmp / "r-ok")), OK),  # fmt: skip
        ("rollout", "failed"): lambda s: (run(s, *base, "--server", "/bin/false", "--out", str(s.tmp / "r-failed")), FAILED),
        ("rollout", "bad input"): lambda s: (run(s, *base, "--policy", "bogus", "--out", str(s.tmp / "r-bad")), BAD_INPUT),
        ("rollout", "stopped"): _rollout_stopped,
    }


def _analyze() -> Walk:
    def llm(s: Scene, url: str) -> list[str]:
        return ["analyze", str(injected_trajectories(s)), "--llm", "compat:m", "--llm-base-url", url, "--runs", "1", "--bootstrap", "0",
                "--no-cache"]  # fmt: skip

    return {
        ("analyze", "ok"): lambda s: (run(s, "analyze", str(injected_trajectories(s)), "--out", str(s.tmp / "a-ok"), "--bootstrap", "0"), OK),
        ("analyze", "failed"): lambda s: (run(s, *llm(s, s.server), "--out", str(s.tmp / "a-failed")), FAILED),  # the labeling LLM refuses
        ("analyze", "bad input"): lambda s: (run(s, "analyze", str(s.tmp / "missing.jsonl"), "--out", str(s.tmp / "a-bad")), BAD_INPUT),
        ("analyze", "stopped"): lambda s: (stop(s, [*llm(s, s.stalling.openai_base_url), "--out", str(s.tmp / "a-stop")],  # type: ignore[attr-defined]
                                                lambda line, seen: bool(s.stalling.requests), signal.SIGINT), INTERRUPTED),  # type: ignore[attr-defined]
    }


def _gate(command: str) -> Walk:
    def args(s: Scene, source: str, name: str) -> list[str]:
        path = str(s.file(name, source))
        return ([command, path] if command == "validate" else [command, "--from-file", path, "--registry", str(s.tmp / "b-reg")]) + [
            "--sandbox", "bwrap", *FAST_GATE]  # fmt: skip

    bad = [command, "missing_env.py"] if command == "validate" else [command, "--capability", "telepathy"]
    signum, code = (signal.SIGINT, INTERRUPTED) if command == "validate" else (signal.SIGTERM, TERMINATED)
    return {
        (command, "ok"): lambda s: (run(s, *args(s, TINY, f"{command}_ok.py")), OK),
        (command, "failed"): lambda s: (run(s, *args(s, UNSOLVED, f"{command}_unsolved.py")), FAILED),  # the gate fails it
        (command, "bad input"): lambda s: (run(s, *bad), BAD_INPUT),
        (command, "stopped"): lambda s: (stop(s, args(s, TINY, f"{command}_stop.py"), first_progress, signum), code),
    }


def _envs() -> Walk:
    instant = "finishes in well under a second, reading the registry only: there is nothing to interrupt"
    return {
        ("envs list", "ok"): lambda s: (run(s, "envs", "list"), OK),
        ("envs list", "failed"): "only reads and lists: a damaged entry is listed as broken (with its fix), an unreadable registry is bad input",
        ("envs list", "bad input"): lambda s: (run(s, "envs", "list", "--registry", str(s.file("not-a-folder", ""))), BAD_INPUT),
        ("envs list", "stopped"): instant,
        ("envs show", "ok"): lambda s: (run(s, "envs", "show", "tiny_cancel"), OK),
        ("envs show", "failed"): "only reads one entry: a broken or tampered entry is bad input, with its fix",
        ("envs show", "bad input"): lambda s: (run(s, "envs", "show", "no_such_env"), BAD_INPUT),
        ("envs show", "stopped"): instant,
        ("envs remove", "ok"): _remove,
        ("envs remove", "failed"): _remove_on_a_read_only_registry,
        ("envs remove", "bad input"): lambda s: (run(s, "envs", "remove", "no_such_env"), BAD_INPUT),
        ("envs remove", "stopped"): instant,
    }


def _remove(s: Scene) -> tuple[Ran, int]:
    put(s.tmp / "rm-reg", "doomed")
    return run(s, "envs", "remove", "doomed", "--registry", str(s.tmp / "rm-reg")), OK


def _remove_on_a_read_only_registry(s: Scene) -> tuple[Ran, int]:
    import subprocess

    from tests.reliability.conftest import CAN_MOUNT, tmpfs

    if not CAN_MOUNT:
        pytest.skip("needs root and mount for a read-only registry")
    with tmpfs(s.tmp / "ro-reg", "2m") as root:
        put(root, "kept")
        subprocess.run(["mount", "-o", "remount,ro", str(root)], check=True)
        return run(s, "envs", "remove", "kept", "--registry", str(root)), FAILED


def _train() -> Walk:
    def args(s: Scene, name: str, *extra: str, out: str = "") -> list[str]:
        return ["train", name, "--model", str(s.model), "--iterations", "1", "--output", str(s.tmp / f"t-{name}-{out}"), *SMALL_TRAIN, *extra]

    def never_solved(s: Scene) -> tuple[Ran, int]:
        put(s.registry, "never_solved", NEVER_SOLVED)
        return run(s, *args(s, "never_solved", "--set", "warm_start.steps=1", "--set", "warm_start.seeds=2")), FAILED

    return {
        ("train", "ok"): lambda s: (run(s, *args(s, "tiny_cancel")), OK),
        ("train", "failed"): never_solved,  # no reference episode succeeds: nothing to warm-start from
        ("train", "bad input"): lambda s: (run(s, *args(s, "tiny_cancel", "--resume", out="resume")), BAD_INPUT),  # nothing to resume
        ("train", "stopped"): lambda s: (stop(s, args(s, "tiny_cancel", out="stop"), lambda line, seen: "Loading weights" in line or line.startswith("[")),
                                         TERMINATED),  # fmt: skip
    }


def _route() -> Walk:
    def args(s: Scene, texts: int = 1) -> list[str]:
        return ["route", *sum((["--text", f"please cancel reservation ABC{i:03d}"] for i in range(texts)), []),
                "--menu", str(s.menu), "--adapters", str(s.adapters), "--model", str(s.model)]  # fmt: skip

    return {
        ("route", "ok"): lambda s: (run(s, *args(s)), OK),
        ("route", "failed"): "routing runs the frozen model on what it was given: a bad menu, adapter, label or model is bad input; "
                             "only the sandbox that plays a menu's demos could fail the run (exit 1), and it cannot be made to fail here",
        ("route", "bad input"): lambda s: (run(s, "route", "--text", "x", "--adapters", str(s.tmp / "no-adapters")), BAD_INPUT),
        ("route", "stopped"): lambda s: (stop(s, args(s, 300), lambda line, seen: "routing" in line, signal.SIGINT), INTERRUPTED),
    }


def _eval() -> Walk:
    def args(s: Scene, out: str, ids: str = "0") -> list[str]:
        return ["eval", "--target", "tau2-airline", "--task-ids", ids, "--arms", "base", "--model", str(s.model), "--max-steps", "1",
                "--max-tokens", "4", "--out", str(s.tmp / out)]  # fmt: skip

    return {
        ("eval", "ok"): lambda s: (run(s, *args(s, "e-ok")), OK),
        ("eval", "failed"): lambda s: (run(s, *args(s, "e-failed"), "--user", "compat:m", TRACE_LLM_BASE_URL=s.server), FAILED),  # every user errs
        ("eval", "bad input"): lambda s: (run(s, *args(s, "e-bad"), "--user", "bogus"), BAD_INPUT),
        ("eval", "stopped"): lambda s: (stop(s, args(s, "e-stop", "0,1,2,3"), first_progress), TERMINATED),
    }


def _run() -> Walk:
    def config(s: Scene, name: str, **rollouts: str) -> Path:
        extra = "".join(f'{k} = "{v}"\n' for k, v in rollouts.items())
        return s.file(name, f'run_dir = "{s.tmp / name}.run"\nmodel = "tiny"\nsandbox = "bwrap"\n[[targets]]\nname = "tau2-airline"\n'
                            f'limit = 1\n[rollouts]\nmax_steps = 1\nmax_tokens = 4\n{extra}')  # fmt: skip

    def corrupt(s: Scene) -> tuple[Ran, int]:
        path = config(s, "corrupt.toml")
        Path(f"{s.tmp / 'corrupt.toml'}.run").mkdir()
        Path(f"{s.tmp / 'corrupt.toml'}.run/pipeline.json").write_text("{ not json")
        return run(s, "run", "--config", str(path)), BAD_INPUT  # a corrupt state file is bad input, not a bug

    return {
        ("run", "ok"): lambda s: (run(s, "run", "--config", str(config(s, "ok.toml")), "--until", "rollouts"), OK),
        ("run", "failed"): lambda s: (run(s, "run", "--config", str(config(s, "failed.toml", user="compat:m")), "--until", "rollouts",
                                          TRACE_LLM_BASE_URL=s.server), FAILED),  # every rollout's user errs  # fmt: skip
        ("run", "bad input"): corrupt,
        ("run", "stopped"): lambda s: (stop(s, ["run", "--config", str(config(s, "stop.toml"))], lambda line, seen: "rollouts: running" in line),
                                       TERMINATED),  # fmt: skip
    }


def _sandbox() -> Walk:
    return {
        ("sandbox status", "ok"): lambda s: (run(s, "sandbox", "status"), OK),
        ("sandbox status", "failed"): lambda s: (run(s, "sandbox", "status", PATH=str(s.tmp / "empty-path"),
                                                     DOCKER_HOST=f"unix://{s.tmp}/none.sock"), FAILED),  # no isolating backend  # fmt: skip
        ("sandbox status", "bad input"): lambda s: (run(s, "sandbox", "status", "--bogus"), BAD_INPUT),
        ("sandbox status", "stopped"): "probes the backends in a few seconds and changes nothing: nothing to keep on a stop",
        ("sandbox build-image", "ok"): _image_present,
        ("sandbox build-image", "failed"): lambda s: (run(s, "sandbox", "build-image", "--tag", "trace-walk:none", "--no-verify",
                                                          DOCKER_HOST=f"unix://{s.tmp}/none.sock"), FAILED),  # no daemon answers  # fmt: skip
        ("sandbox build-image", "bad input"): lambda s: (run(s, "sandbox", "build-image", "--rootfs", str(s.file("plain-file", "") / "x.tar")),
                                                         BAD_INPUT),  # a path under a file  # fmt: skip
        ("sandbox build-image", "stopped"): _rootfs_stopped,
        ("sandbox reap", "ok"): lambda s: (run(s, "sandbox", "reap"), OK),
        ("sandbox reap", "failed"): _reap_failed,
        ("sandbox reap", "bad input"): lambda s: (run(s, "sandbox", "reap", "--bogus"), BAD_INPUT),
        ("sandbox reap", "stopped"): "finishes in about a second; every item it removes is removed whole or not at all",
        ("sandbox exec", "ok"): lambda s: (run(s, "sandbox", "exec", "--sandbox", "bwrap", "--", "python3", "-c", "pass"), OK),
        ("sandbox exec", "failed"): lambda s: (run(s, "sandbox", "exec", "--sandbox", "bwrap", "--", "python3", "-c", "raise SystemExit(1)"),
                                               FAILED),  # the one exception: the sandboxed command's own code, passed through  # fmt: skip
        ("sandbox exec", "bad input"): lambda s: (run(s, "sandbox", "exec", "--sandbox", "vm", "--", "true"), BAD_INPUT),
        ("sandbox exec", "stopped"): lambda s: (stop(s, ["sandbox", "exec", "--sandbox", "bwrap", "--", "sleep", "60"],
                                                     lambda line, seen: line.startswith("sandbox: bwrap")), TERMINATED),  # fmt: skip
    }


def _serve() -> Walk:
    return {
        ("serve", "ok"): "a server runs until it is stopped; its sessions are driven by OpenEnv's own client in .venv-openenv, where "
                         "openenv-core is installed (tests/integrations/test_openenv.py)",
        ("serve", "failed"): "a session whose env fails ends that session with the env's error, never the server; nothing the "
                             "command does after its checks can fail the run as a whole",
        ("serve", "bad input"): lambda s: (run(s, "serve", "no_such_env"), BAD_INPUT),  # openenv missing here, or no such env: one line
        ("serve", "stopped"): "uvicorn's own shutdown on SIGINT/SIGTERM; it holds no state to keep (each session's sandbox is closed "
                              "with it), tested where openenv-core is installed",
    }


def _reap_failed(s: Scene) -> tuple[Ran, int]:
    """A dead sandbox's work dir holding a file the reaper cannot delete: named, and exit 1 (tests/ops/test_reap.py)."""
    from tests.ops.test_reap import make_leftovers

    found = make_leftovers(s.tmp / "reap")
    try:
        return run(s, "sandbox", "reap", **found.env()), FAILED
    finally:
        found.release()


def _rootfs_stopped(s: Scene) -> tuple[Ran, int]:
    folder = s.tmp / "rootfs"
    folder.mkdir()
    ran = stop(s, ["sandbox", "build-image", "--rootfs", str(folder / "stop.tar")], lambda line, seen: "root filesystem" in line)
    assert list(folder.iterdir()) == []  # no half-written tar left behind
    return ran, TERMINATED


def _image_present(s: Scene) -> tuple[Ran, int]:
    from sandbox import image

    try:
        present = image.image_exists(image.DEFAULT_TAG)
    except Exception:  # noqa: BLE001 - no docker SDK or daemon here
        present = False
    if not present:
        pytest.skip("the docker sandbox image is not built here (factory sandbox build-image takes minutes)")
    return run(s, "sandbox", "build-image", "--if-missing"), OK


WALK: Walk = {**_rollout(), **_analyze(), **_gate("build"), **_gate("validate"), **_envs(), **_train(), **_route(), **_eval(), **_run(),
              **_sandbox(), **_serve()}  # fmt: skip
CASES = [(name, kind) for name in (" ".join(p) for p in ALL) for kind in CLASSES]


def test_the_walk_covers_every_command_and_class() -> None:
    assert sorted(WALK) == sorted(CASES), set(CASES) ^ set(WALK)
    for key, probe in WALK.items():
        assert callable(probe) or (isinstance(probe, str) and len(probe) > 40), key


@pytest.mark.slow
@requires_servers
@pytest.mark.parametrize("command, kind", [c for c in CASES if callable(WALK[c])], ids=[f"{c[0]}: {c[1]}" for c in CASES if callable(WALK[c])])
def test_every_command_keeps_the_exit_code_contract(scene: Scene, command: str, kind: str) -> None:
    ran, expected = WALK[(command, kind)](scene)  # type: ignore[operator]
    assert ran.code == expected, f"{command} ({kind}): exit {ran.code}, expected {expected}\n{ran.stdout[-1500:]}\n{ran.stderr[-2500:]}"
    assert "Traceback" not in ran.stderr and "internal error" not in ran.stderr
    if kind == "bad input":
        assert ran.lines and ran.lines[-1].startswith("error:"), ran.stderr[-800:]  # one line that says what is wrong
    if kind == "failed" and command != "sandbox exec":
        said = (ran.stdout + ran.stderr).lower()
        assert "error" in said or "fail" in said or "not registered" in said or "no isolating backend" in said, said[-800:]
    if (command, kind) == ("train", "failed"):  # the failure line names the env once, however the error was worded
        [failed] = [line for line in ran.lines if line.startswith("failed:")]
        assert failed.count("never_solved-v0") == 1, failed
    if (command, kind) == ("run", "ok"):
        assert "factory run:" in ran.stdout and "rollouts" in ran.stdout  # it ends with the summary table
    if kind == "stopped":  # one line on stderr says so, whatever the command
        assert ran.lines and ("interrupted" in ran.lines[-1] or "stopped" in ran.lines[-1]), ran.stderr[-800:]
