"""An env that reports, in its first user message, what it can see of the sandbox it runs in: its rlimits, the
sizes of its writable mounts, its environment, its command
line and import path (each worker's own hash seed left out, there and in the environment: every worker draws
its own). Gate and training must open workers in which this message is the same."""

import json
import os
import sys

from trace_env import sdk


def _mount(path):
    try:
        st = os.statvfs(path)
    except OSError as exc:
        return str(exc)
    return [st.f_blocks * st.f_frsize, st.f_files]


def _seen():
    with open("/proc/self/limits") as f:
        limits = f.read()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    argv = [a for i, a in enumerate(sys.argv) if i == 0 or sys.argv[i - 1] != "--hash-seed"]
    flags = {name: getattr(sys.flags, name) for name in dir(sys.flags)
             if not name.startswith("_") and name not in ("hash_randomization", "count", "index")}
    return {"limits": limits, "mounts": {p: _mount(p) for p in ("/tmp", "/dev/shm", os.getcwd())},
            "environ": env, "argv": argv, "path": sys.path, "flags": flags, "cwd": os.getcwd()}


class SeesItsSandbox(sdk.TaskEnv):
    capability = "sees_its_sandbox"
    target = "tau2-airline"
    description = "Reports what it sees of its sandbox."
    tool_names = ["get_reservation_details"]
    max_steps = 2

    def generate(self, seed):
        return sdk.Scenario(seed=seed, state={"seen": _seen()}, user={}, truth={})

    def system_prompt(self, scenario):
        return "You are an airline agent."

    def first_user_message(self, scenario):
        return json.dumps(scenario.state["seen"], sort_keys=True)

    @sdk.tool
    def get_reservation_details(self, state, reservation_id):
        raise sdk.ToolError("Reservation not found")

    def evaluate(self, episode):
        return sdk.Reward(components={"done": 1.0}, weights={"done": 1.0})

    def reference_solution(self, scenario):
        return [sdk.say("Done.")]


ENV = SeesItsSandbox
