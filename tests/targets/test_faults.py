"""Target failures end the episode with a recorded infrastructure error, never a crash or a silent zero."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from env_registry.targets.env import TargetEnv
from env_registry.targets.errors import TargetStartError
from tests.targets.helpers import requires_servers, server_command, tool_call

pytestmark = requires_servers


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def _wait_gone(pids: list[int], timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


def _pid(path: Path) -> int:
    for _ in range(100):
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError("the server wrote no pid file")


def test_server_killed_mid_episode_ends_it_with_an_infrastructure_error(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    env = TargetEnv("tau2-airline", task_id="0", server=server_command("airline", pid_file=pid_file))
    try:
        env.reset(seed=0)
        observation = env.step(tool_call("get_user_details", user_id="mia_li_3668"))[0]
        assert '"user_id": "mia_li_3668"' in observation
        pid = _pid(pid_file)
        server = _children(pid)
        assert server  # the real τ² server behind the proxy
        os.kill(pid, signal.SIGKILL)
        _, reward, terminated, truncated, info = env.step(tool_call("get_user_details", user_id="mia_li_3668"))
        assert (reward, terminated, truncated) == (0.0, True, False)
        assert info["termination_reason"] == "infrastructure_error"
        assert "died during call_tool" in info["infrastructure_error"] and "\n" not in info["infrastructure_error"]
        assert info["reward_detail"]["fully_judged"] is False
        assert _wait_gone(server) == []  # the orphaned server sees its input close and exits
        pid_file.unlink()
        _, info = env.reset(seed=0)  # the next episode gets a new server
        assert '"user_id": "mia_li_3668"' in env.step(tool_call("get_user_details", user_id="mia_li_3668"))[0]
        assert _pid(pid_file) != pid
    finally:
        env.close()


@pytest.mark.parametrize(
    "mode,message",
    [
        ("garbage", "sent a malformed reply to call_tool"),
        ("badresult", "sent a malformed reply to call_tool"),
        ("hang", "did not answer call_tool within 5s"),
        ("exit", "died during call_tool"),
    ],
)
def test_misbehaving_server_is_recorded_per_episode(mode: str, message: str) -> None:
    env = TargetEnv("tau2-retail", task_id="0", server=server_command("retail", mode=mode, at=1), call_timeout_s=5)
    try:
        env.reset(seed=0)  # bookkeeping calls (reset_state) pass through untouched
        _, reward, terminated, _, info = env.step(tool_call("get_user_details", user_id="yusuf_rossi_9620"))
        assert (reward, terminated, info["termination_reason"]) == (0.0, True, "infrastructure_error")
        assert message in info["infrastructure_error"]
    finally:
        env.close()


@pytest.mark.parametrize(
    "command,message",
    [
        ("no-such-mcp-server-here", "command not found (no-such-mcp-server-here); is the server installed?"),
        (f"{sys.executable} -c \"import sys; sys.stderr.write('bad config: no DB'); sys.exit(2)\"", "exited (or closed its output) before the MCP handshake; server stderr: bad config: no DB"),
        (f"{sys.executable} -c \"import time; time.sleep(30)\"", "no handshake within 1s"),
    ],
)
def test_a_server_that_cannot_start_raises_one_clear_error(command: str, message: str) -> None:
    from env_registry.targets.catalog import resolve_target
    from env_registry.targets.mcp import MCPBackend, parse_server

    spec = resolve_target("tau2-airline", server=parse_server(command).model_copy(update={"start_timeout_s": 1}))
    backend = MCPBackend(spec.server, spec.shape)
    try:
        with pytest.raises(TargetStartError) as caught:
            backend.reset()
        assert message in str(caught.value) and "\n" not in str(caught.value)
    finally:
        backend.close()


def test_close_leaves_no_process_and_no_state_behind(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    env = TargetEnv("tau2-retail", task_id="0", server=server_command("retail", pid_file=pid_file))
    env.reset(seed=0)
    env.step(tool_call("find_user_id_by_name_zip", first_name="Yusuf", last_name="Rossi", zip="19122"))
    backend = env.unwrapped.runner.backend
    state_dir = backend._state_dir
    assert state_dir is not None and any(state_dir.iterdir())
    proxy = _pid(pid_file)
    processes = [proxy, *_children(proxy)]
    assert len(processes) == 2 and all(_alive(p) for p in processes)
    env.close()
    assert _wait_gone(processes) == [] and not state_dir.exists()


def test_a_target_nobody_closes_still_takes_its_state_folder_with_it(tmp_path: Path) -> None:
    """A script that forgets ``env.close()`` must not leave the server's state files (megabytes each) in /tmp."""
    script = (
        "import json, sys\n"
        "from env_registry.targets.env import TargetEnv\n"
        "from tests.targets.helpers import tool_call\n"
        "env = TargetEnv('tau2-retail', task_id='0')\n"
        "env.reset(seed=0)\n"
        "env.step(tool_call('find_user_id_by_name_zip', first_name='Yusuf', last_name='Rossi', zip='19122'))\n"
        "folder = env.unwrapped.runner.backend._state_dir\n"
        "print(json.dumps({'folder': str(folder), 'files': len(list(folder.iterdir()))}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["files"] >= 1  # the server did keep its state there
    assert not Path(seen["folder"]).exists()
