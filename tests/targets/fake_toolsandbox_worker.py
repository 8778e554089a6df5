"""A small ToolSandbox-shaped worker for CI, where Apple's package cannot be installed: the worker protocol of
``env_registry/targets/toolsandbox_worker.py`` over our own phone kit (``trace_env.kits.toolsandbox``) and
three scenarios of our own, with a simple evaluator of our own (the fraction of milestones reached in order,
zeroed when a minefield is hit). It tests everything on the host side of the protocol; the real worker is
tested against the real package (tests/targets/test_toolsandbox_real.py).

Scenario ``crash_fake`` exits the process at the agent's first turn (a worker that dies mid-episode).
"""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from trace_env.kits import toolsandbox as phone  # noqa: E402
from trace_env.sdk import ToolError  # noqa: E402

NOW = 1_700_000_000.0
FRIEND = {"person_id": "p-friend", "name": "Ada Quill", "phone_number": "+14155550101", "relationship": "friend", "is_self": False}
OWNER = {"person_id": "p-self", "name": "Bo Reed", "phone_number": "+14155550100", "relationship": "self", "is_self": True}
SETTINGS = {"cellular": True, "wifi": True, "location_service": True, "low_battery_mode": False, "latitude": 37.0, "longitude": -122.0}


def scenario(name, task, first, tools, settings, milestones, minefields=(), rapid=(), augmented=False):
    return {"name": name, "task": task, "first": first, "tools": list(tools), "settings": {**SETTINGS, **settings},
            "milestones": list(milestones), "minefields": list(minefields), "rapid": list(rapid), "augmented": augmented}  # fmt: skip


SCENARIOS = [
    scenario("wifi_on_fake", "You want your wifi on.", "Please turn my wifi on", ["set_wifi_status", "get_wifi_status"],
             {"wifi": False}, [("call", "set_wifi_status", {"on": True}), ("say", "Wifi is on now")]),  # fmt: skip
    scenario("text_fake", "Tell Ada Quill: see you at six. Her number is +14155550101.", "Text Ada that I'll see her at six",
             ["search_contacts", "send_message_with_phone_number", "set_cellular_service_status"], {"cellular": False},
             [("call", "set_cellular_service_status", {"on": True}), ("call", "search_contacts", {"name": "Ada Quill"}),
              ("call", "send_message_with_phone_number", {"phone_number": "+14155550101", "content": "See you at six"}),
              ("say", "Your message to Ada Quill was sent")], minefields=[("call", "remove_contact", {})]),  # fmt: skip
    scenario("weather_fake", "Ask about the weather.", "What's the weather?", ["search_weather_around_lat_lon"], {},
             [("say", "It is sunny")], rapid=["search_weather_around_lat_lon"]),  # fmt: skip
    scenario("wifi_on_fake_3_distraction_tools", "You want your wifi on.", "Please turn my wifi on",
             ["set_wifi_status", "get_wifi_status", "set_cellular_service_status"], {"wifi": False},
             [("call", "set_wifi_status", {"on": True}), ("say", "Wifi is on now")], augmented=True),  # fmt: skip
    scenario("crash_fake", "Nothing.", "Crash please", ["get_wifi_status"], {}, [("say", "never")]),
]


class Fake:
    def __init__(self) -> None:
        self.tools = phone.PhoneTools()
        self.scenarios = {}

    def hello(self, request):
        wanted = [s for s in SCENARIOS if request.get("include_augmented") or not s["augmented"]]
        self.scenarios = {s["name"]: s for s in wanted}
        listed = [{"name": s["name"], "categories": ["FAKE"], "tools": s["tools"], "rapid_api_tools": s["rapid"], "user_task": s["task"],
                   "first_message": s["first"], "max_messages": 12, "milestones": len(s["milestones"]), "minefields": len(s["minefields"]),
                   "augmented": s["augmented"], "version": f"v1-{s['name']}"} for s in wanted]  # fmt: skip
        return {"protocol": 1, "package": "fake_toolsandbox 0", "scenarios": listed, "rapid_api_key": "RAPID_API_KEY" in os.environ}

    def reset(self, request):
        self.s = self.scenarios[request["name"]]
        self.db = {"current_timestamp": NOW, "timezone": "UTC", "settings": dict(self.s["settings"]), "contacts": [dict(OWNER), dict(FRIEND)],
                   "messages": [], "reminders": []}  # fmt: skip
        self.messages = [{"role": "system", "content": "Fake phone assistant."}, {"role": "user", "content": self.s["first"]}]
        self.events, self.next, self.turn, self.plan = [], "agent", 0, list(self.s["milestones"])
        tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}} for n in self.s["tools"]]
        return {"messages": self.messages, "tools": tools, "next": "agent"}

    def agent(self, request):
        if self.s["name"] == "crash_fake":
            os._exit(3)
        self.turn += 1
        calls = request.get("tool_calls") or []
        if calls:
            wire = [{"id": f"call_{self.turn}_{i}", "type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
                    for i, c in enumerate(calls)]  # fmt: skip
            self.messages.append({"role": "assistant", "content": "", "tool_calls": wire})
            for call, item in zip(calls, wire):
                content, error = self.run(call["name"], call["arguments"])
                self.messages.append({"tool_call_id": item["id"], "role": "tool", "name": call["name"], "content": content, "error": error})
            self.next = "agent"
        else:
            self.messages.append({"role": "assistant", "content": request.get("content") or ""})
            self.events.append(("say", request.get("content") or ""))
            self.next = "user"
        if len(self.messages) >= 14:
            self.next = "limit"
        return {"messages": self.messages, "next": self.next}

    def run(self, name, arguments):
        if name not in self.s["tools"] or not isinstance(arguments, dict):
            self.events.append(("call", name, arguments))
            return f"KeyError: tool {name!r} is not available", True
        try:
            result = getattr(self.tools, name)(self.db, **arguments)
        except ToolError as exc:
            return f"{exc.exception}: {exc}", True
        except TypeError as exc:
            return f"TypeError: {exc}", True
        self.events.append(("call", name, arguments))
        return repr(result), False

    def user(self, request):
        if request.get("end"):
            self.next = "end"
        else:
            self.messages.append({"role": "user", "content": request.get("content") or ""})
            self.next = "agent"
        return {"messages": self.messages, "next": self.next}

    def user_view(self, request):
        dialogue = [{"role": {"user": "assistant", "assistant": "user"}[m["role"]], "content": m["content"]}
                    for m in self.messages if m["role"] in ("user", "assistant") and m.get("content")]  # fmt: skip
        tool = {"type": "function", "function": {"name": "end_conversation", "parameters": {"type": "object", "properties": {}}}}
        return {"messages": [{"role": "system", "content": f"You are the user. Your task: {self.s['task']}"}, *dialogue], "tools": [tool]}

    def reached(self, milestone, event):
        if milestone[0] != event[0]:
            return False
        if milestone[0] == "say":
            return milestone[1].lower() in event[1].lower()
        return milestone[1] == event[1] and all(event[2].get(k) == v for k, v in milestone[2].items())

    def evaluate(self, request):
        done, position = 0, 0
        for milestone in self.s["milestones"]:
            hit = next((i for i in range(position, len(self.events)) if self.reached(milestone, self.events[i])), None)
            if hit is None:
                break
            done, position = done + 1, hit + 1
        mine = any(self.reached(m, e) for m in self.s["minefields"] for e in self.events)
        similarity = 0.0 if mine else done / len(self.s["milestones"])
        return {"milestone_similarity": done / len(self.s["milestones"]), "minefield_similarity": float(mine), "similarity": similarity,
                "turn_count": len(self.messages) - 2, "milestone_mapping": {}, "minefield_mapping": {},
                "milestones": len(self.s["milestones"]), "minefields": len(self.s["minefields"])}  # fmt: skip

    def reference(self, request):
        if not self.plan:
            return {"stop": True}
        kind, *rest = self.plan.pop(0)
        if kind == "say":
            return {"content": rest[0]}
        return {"tool_calls": [{"name": rest[0], "arguments": copy.deepcopy(rest[1])}]}


def main() -> None:
    fake = Fake()
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = getattr(fake, request["op"])(request)
            reply["ok"] = True
        except Exception as exc:  # noqa: BLE001
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
