"""ToolSandbox's side of the ``toolsandbox`` target: a process that imports Apple's ToolSandbox package and
answers JSON lines on stdin/stdout, one request per line.

Why a process: ToolSandbox keeps its world state in one module-level execution context, so two episodes
in one interpreter would share it; and its tools print and may hang. Each host runner owns one worker, so
episodes run in parallel, a crash or hang ends one episode as an infrastructure error, and the package's
own output never reaches the host's terminal (everything but the protocol goes to stderr).

This file imports only the standard library and ``tool_sandbox`` (never this project's packages), so it
also runs by path under another interpreter where ToolSandbox is installed (``--server "PY FILE"``).

Agent tool calls become the Python code ToolSandbox's own agents produce (``openai_tool_call_to_python_code``),
with call ids chosen here: the code is executed, so nothing the agent wrote is pasted into it except JSON
values, and a call to a tool outside the scenario's allow list is answered with an error, never run.
The reference agent (``scripted:gold``) plays each milestone of the scenario in a topological order of its
milestone graph: a tool trace becomes that call, a database target becomes the write that produces it, a
message to the user is said, and values a milestone extracts from an earlier tool result are filled in
from that result, as ToolSandbox's evaluator fills them.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import math
import os
import re
import sys
from typing import Any

PROTOCOL = 1
AUGMENTED = re.compile(r"distraction_tools|scrambled|all_tools")
RAPID_API_MODULE = "tool_sandbox.tools.rapid_api_search_tools"
SETTING_TOOLS = {
    "cellular": "set_cellular_service_status",
    "wifi": "set_wifi_status",
    "location_service": "set_location_service_status",
    "low_battery_mode": "set_low_battery_mode_status",
}


def load_scenarios(include_augmented: bool) -> dict[str, Any]:
    """The 129 base scenarios (built straight from their four modules, fast), or all of them with ToolSandbox's
    augmentations (distraction tools, scrambled names and descriptions) as its CLI runs them."""
    import random

    from tool_sandbox.common.tool_discovery import ToolBackend

    if include_augmented:
        from tool_sandbox.scenarios import named_scenarios

        random.seed(42)  # ToolSandbox's CLI seeds before building; the augmentations shuffle tool lists
        return named_scenarios(preferred_tool_backend=ToolBackend.DEFAULT)
    from tool_sandbox.scenarios.insufficient_information_scenarios import named_insufficient_information_scenarios
    from tool_sandbox.scenarios.multiple_tool_call_scenarios import named_multiple_tool_call_scenarios
    from tool_sandbox.scenarios.multiple_user_turn_scenarios import named_multiple_user_turn_scenarios
    from tool_sandbox.scenarios.single_tool_call_scenarios import named_single_tool_call_scenarios

    scenarios: dict[str, Any] = {}
    for build in (named_single_tool_call_scenarios, named_multiple_tool_call_scenarios, named_multiple_user_turn_scenarios,
                  named_insufficient_information_scenarios):  # fmt: skip
        scenarios.update(build(preferred_tool_backend=ToolBackend.DEFAULT))
    return scenarios


def finite_json(value: Any) -> str | None:
    """JSON text of ``value`` when it is JSON without NaN or infinities (their Python repr is not a literal)."""
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return None


class Worker:
    def __init__(self) -> None:
        from tool_sandbox.common import execution_context as ec
        from tool_sandbox.roles.base_role import BaseRole
        from tool_sandbox.roles.execution_environment import ExecutionEnvironment

        self.ec = ec
        self.RoleType = ec.RoleType
        self.SANDBOX = ec.DatabaseNamespace.SANDBOX

        class AgentView(BaseRole):
            role_type = ec.RoleType.AGENT

        class UserView(BaseRole):
            role_type = ec.RoleType.USER

        self.agent_view, self.user_view = AgentView, UserView
        self.environment = ExecutionEnvironment()
        self.scenarios: dict[str, Any] = {}
        self.name: str | None = None
        self.scenario: Any = None
        self.start = 0
        self.turn = 0
        self.plan: list[int] = []
        self.traces: dict[int, list[str]] = {}
        self.pending: int | None = None

    # --- requests ----------------------------------------------------------------------------------
    def hello(self, request: dict[str, Any]) -> dict[str, Any]:
        from tool_sandbox.scenarios.user_simulator_few_shot_examples import USER_INSTRUCTION

        self.scenarios = load_scenarios(bool(request.get("include_augmented")))
        tools = self.ec.get_current_context().name_to_tool
        rapid = {name for name, tool in tools.items() if getattr(tool, "__module__", "") == RAPID_API_MODULE}
        listed = []
        for name, scenario in self.scenarios.items():
            context = scenario.starting_context
            allowed = list(context.tool_allow_list or [])
            rows = context.get_database(self.SANDBOX, get_all_history_snapshots=True, drop_sandbox_message_index=False).to_dicts()
            dialogue = [r for r in rows if r["sender"] is not None and r.get("visible_to") != [self.RoleType.USER]]
            instruction = next((r["content"] for r in dialogue if r["sender"] == self.RoleType.SYSTEM and r["recipient"] == self.RoleType.USER), "")
            first = next((r["content"] for r in dialogue if r["sender"] == self.RoleType.USER and r["recipient"] == self.RoleType.AGENT), "")
            stable = {
                "name": name, "tools": sorted(allowed), "categories": [str(c) for c in scenario.categories],
                "dialogue": [[str(r["sender"]), str(r["recipient"]), r["content"]] for r in dialogue], "max_messages": scenario.max_messages,
                "milestones": len(scenario.evaluation.milestone_matcher.milestones), "minefields": len(scenario.evaluation.minefield_matcher.milestones),
            }  # fmt: skip
            listed.append({
                "name": name, "categories": stable["categories"], "tools": allowed, "rapid_api_tools": sorted(set(allowed) & rapid),
                "user_task": instruction.removeprefix(USER_INSTRUCTION).strip(), "first_message": first, "max_messages": scenario.max_messages,
                "milestones": stable["milestones"], "minefields": stable["minefields"], "augmented": bool(AUGMENTED.search(name)),
                "version": hashlib.sha256(json.dumps(stable, sort_keys=True, default=str).encode()).hexdigest(),
            })  # fmt: skip
        return {"protocol": PROTOCOL, "package": package_version(), "scenarios": listed, "rapid_api_key": "RAPID_API_KEY" in os.environ}

    def reset(self, request: dict[str, Any]) -> dict[str, Any]:
        name = str(request.get("name"))
        if name not in self.scenarios:
            raise KeyError(f"no scenario {name!r}")
        self.name, self.scenario = name, self.scenarios[name]
        context = copy.deepcopy(self.scenario.starting_context)
        self.ec.set_current_context(context)
        rows = context.get_database(self.SANDBOX, drop_sandbox_message_index=False, get_all_history_snapshots=True)
        last = context.max_sandbox_message_index
        for index in range(last + 1):  # the system's set-up code (tool imports) runs first, as Scenario.play does
            if rows["recipient"][index] == self.RoleType.EXECUTION_ENVIRONMENT and rows["sender"][index] == self.RoleType.SYSTEM:
                self.environment.respond(ending_index=index)
        self.start, self.turn, self.traces, self.pending = last, 0, {}, None
        self.plan = reference_order(self.scenario)
        return {"messages": self.agent_messages(), "tools": self.agent_tools(), "next": self.advance()}

    def agent(self, request: dict[str, Any]) -> dict[str, Any]:
        from tool_sandbox.common.message_conversion import Message

        self.require_turn("agent")
        self.turn += 1
        calls = request.get("tool_calls") or []
        if calls:
            messages = [self.call_message(Message, index, call) for index, call in enumerate(calls)]
        else:
            messages = [Message(sender=self.RoleType.AGENT, recipient=self.RoleType.USER, content=str(request.get("content") or ""))]
        self.agent_view.add_messages(messages)
        step = self.advance()
        if self.pending is not None and calls:
            self.traces[self.pending] = self.new_traces()
        self.pending = None
        return {"messages": self.agent_messages(), "next": step}

    def user(self, request: dict[str, Any]) -> dict[str, Any]:
        from tool_sandbox.common.message_conversion import Message

        self.require_turn("user")
        if request.get("end"):
            code = f"user_end_{self.turn}_response = end_conversation()\nprint(repr(user_end_{self.turn}_response))"
            message = Message(sender=self.RoleType.USER, recipient=self.RoleType.EXECUTION_ENVIRONMENT, content=code)
        else:
            message = Message(sender=self.RoleType.USER, recipient=self.RoleType.AGENT, content=str(request.get("content") or ""))
        self.user_view.add_messages([message])
        return {"messages": self.agent_messages(), "next": self.advance()}

    def user_view_request(self, request: dict[str, Any]) -> dict[str, Any]:
        """What ToolSandbox's simulated user reads: its instructions, few-shot turns and the dialogue, and its tools."""
        from tool_sandbox.common.tool_conversion import convert_to_openai_tool
        from tool_sandbox.roles.openai_api_user import OpenAIAPIUser

        messages = self.user_view.filter_messages(self.user_view.get_messages())
        tools = [convert_to_openai_tool(tool) for tool in self.user_view.get_available_tools().values()]
        return {"messages": OpenAIAPIUser.to_openai_messages(messages), "tools": tools}

    def evaluate(self, request: dict[str, Any]) -> dict[str, Any]:
        context = self.ec.get_current_context()
        result = self.scenario.evaluation.evaluate(execution_context=context, max_turn_count=self.scenario.max_messages)
        return {
            "milestone_similarity": float(result.milestone_similarity), "minefield_similarity": float(result.minefield_similarity),
            "similarity": float(result.similarity), "turn_count": int(result.turn_count),
            "milestone_mapping": {str(k): [int(v[0]), float(v[1])] for k, v in result.milestone_mapping.items()},
            "minefield_mapping": {str(k): [int(v[0]), float(v[1])] for k, v in result.minefield_mapping.items()},
            "milestones": len(self.scenario.evaluation.milestone_matcher.milestones),
            "minefields": len(self.scenario.evaluation.minefield_matcher.milestones),
        }  # fmt: skip

    def reference(self, request: dict[str, Any]) -> dict[str, Any]:
        """The reference agent's next turn: the next milestone's action, or ``stop`` when none is left."""
        while self.plan:
            index = self.plan.pop(0)
            action = milestone_action(self.scenario, index, self.traces, self.ec.get_current_context())
            if action is None:
                continue
            if action.get("tool_calls"):
                self.pending = index
            return action
        return {"stop": True}

    # --- helpers -------------------------------------------------------------------------------------
    def require_turn(self, role: str) -> None:
        if self.scenario is None:
            raise RuntimeError("no episode: reset first")
        if self.advance() != role:
            raise RuntimeError(f"it is not the {role}'s turn")

    def advance(self) -> str:
        """Let the execution environment answer until a message waits for the agent or the user, or the episode ends."""
        while True:
            context = self.ec.get_current_context()
            row = context.get_database(self.SANDBOX, drop_sandbox_message_index=False)
            if not row["conversation_active"][-1]:
                return "end"
            if row["sandbox_message_index"][-1] >= self.scenario.max_messages + self.start:
                return "limit"
            recipient = row["recipient"][-1]
            if recipient == self.RoleType.AGENT:
                return "agent"
            if recipient == self.RoleType.USER:
                return "user"
            if recipient != self.RoleType.EXECUTION_ENVIRONMENT:
                return "end"
            self.environment.respond()

    def call_message(self, message_class: Any, index: int, call: dict[str, Any]) -> Any:
        from openai.types.chat.chat_completion_message_tool_call import ChatCompletionMessageToolCall, Function
        from tool_sandbox.common.message_conversion import openai_tool_call_to_python_code

        context = self.ec.get_current_context()
        call_id = f"call_{self.turn}_{index}"  # never the agent's id: it becomes part of executed code
        name = str(call.get("name") or "")
        arguments = call.get("arguments")
        available = self.agent_view.get_available_tools()
        text = finite_json(arguments) if isinstance(arguments, dict) else None
        if name in available and text is not None:
            tool_call = ChatCompletionMessageToolCall(id=call_id, type="function", function=Function(name=name, arguments=text))
            code = openai_tool_call_to_python_code(tool_call, set(available), execution_facing_tool_name=context.get_execution_facing_tool_name(name))
        else:
            problem = f"tool {name!r} is not available" if name not in available else "the arguments are not a JSON object"
            kept = arguments if isinstance(arguments, dict) and text is not None else {}
            code = f"{call_id}_parameters = {kept!r}\n{call_id}_response = None\nraise KeyError({problem!r})"
        return message_class(sender=self.RoleType.AGENT, recipient=self.RoleType.EXECUTION_ENVIRONMENT, content=code,
                             openai_tool_call_id=call_id, openai_function_name=name)  # fmt: skip

    def new_traces(self) -> list[str]:
        rows = self.ec.get_current_context().get_database(self.SANDBOX, get_all_history_snapshots=True).to_dicts()
        traces: list[str] = []
        for row in reversed(rows):
            if row["sender"] != self.RoleType.EXECUTION_ENVIRONMENT or row["recipient"] != self.RoleType.AGENT:
                break
            traces = list(row.get("tool_trace") or []) + traces
        return traces

    def agent_messages(self) -> list[dict[str, Any]]:
        from tool_sandbox.common.message_conversion import to_openai_messages

        messages = self.agent_view.filter_messages(self.agent_view.get_messages())
        converted, origins = to_openai_messages(messages)
        for message, origin in zip(converted, origins):  # ToolSandbox keeps a tool's exception apart; the host reads "error"
            if message.get("role") == "tool":
                message["error"] = messages[origin[0]].tool_call_exception is not None
        return converted

    def agent_tools(self) -> list[dict[str, Any]]:
        from tool_sandbox.common.tool_conversion import convert_to_openai_tools

        return convert_to_openai_tools(self.agent_view.get_available_tools())


def package_version() -> str:
    from importlib import metadata

    try:
        return f"tool_sandbox {metadata.version('tool_sandbox')}"
    except metadata.PackageNotFoundError:
        return "tool_sandbox (unknown version)"


# --- the reference agent ------------------------------------------------------------------------------
def reference_order(scenario: Any) -> list[int]:
    """A topological order of the milestone graph that changes state as early as it may: a milestone's guardrails
    forbid database changes between it and its predecessors, so a write left for later can void them."""
    import networkx

    matcher = scenario.evaluation.milestone_matcher
    if not matcher.milestones:
        return []

    def key(index: int) -> tuple[int, int]:
        writes = any(str(c.database_namespace) != "SANDBOX" for c in matcher.milestones[index].snapshot_constraints)
        return (0 if writes else 1, index)

    return list(networkx.lexicographical_topological_sort(matcher.milestone_dag, key=key))


def extracted(constraint: Any, traces: dict[int, list[str]]) -> dict[str, Any]:
    """The first value the constraint's extractor finds in the tool results of the milestone it refers to."""
    extractor = getattr(constraint.snapshot_constraint, "keywords", {}).get("extractor")
    for text in traces.get(constraint.reference_milestone_node_index, []):
        try:
            values = extractor(json.loads(text)) if extractor else []
        except (KeyError, IndexError, TypeError, ValueError):
            values = []
        if values:
            return dict(values[0])
    return {}


def milestone_action(scenario: Any, index: int, traces: dict[int, list[str]], context: Any) -> dict[str, Any] | None:
    """The turn that reaches milestone ``index``: tool calls or a message to the user (None: nothing to do)."""
    from tool_sandbox.common.evaluation import addition_similarity, guardrail_similarity, removal_similarity, update_similarity

    milestone = scenario.evaluation.milestone_matcher.milestones[index]
    calls: list[dict[str, Any]] = []
    for constraint in milestone.snapshot_constraints:
        measure = getattr(constraint.snapshot_constraint, "func", constraint.snapshot_constraint)
        if measure is guardrail_similarity or constraint.target_dataframe is None:
            continue
        rows = constraint.target_dataframe.to_dicts()
        namespace = str(constraint.database_namespace)
        fill = getattr(constraint.snapshot_constraint, "keywords", {}).get("fill_to")
        if namespace == "SANDBOX":
            row = rows[0]
            if str(row.get("recipient")) == "USER":
                content = str(row.get("content") or "")
                if fill == "content":
                    try:
                        content = content.format(**extracted(constraint, traces))
                    except (KeyError, IndexError, ValueError):
                        pass
                return {"content": content}
            if row.get("tool_trace") is None:
                continue
            trace = json.loads(row["tool_trace"])
            trace = trace[0] if isinstance(trace, list) else trace
            arguments = dict(trace.get("arguments") or {})
            if fill == "tool_trace":
                arguments.update(extracted(constraint, traces))
            if calls and calls[-1]["name"] == trace["tool_name"]:  # several constraints on one call fill in its arguments
                calls[-1]["arguments"].update(arguments)
            else:
                calls.append({"name": trace["tool_name"], "arguments": arguments})
        elif namespace == "SETTING":
            calls += [{"name": SETTING_TOOLS[column], "arguments": {"on": value}} for column, value in rows[0].items() if column in SETTING_TOOLS]
        elif measure is addition_similarity:
            tool = {"MESSAGING": "send_message_with_phone_number", "REMINDER": "add_reminder", "CONTACT": "add_contact"}[namespace]
            for row in rows:
                if namespace == "MESSAGING":
                    row = {"phone_number": row.get("recipient_phone_number"), "content": row.get("content")}
                calls.append({"name": tool, "arguments": row})
        elif measure is removal_similarity:
            key, tool = ("person_id", "remove_contact") if namespace == "CONTACT" else ("reminder_id", "remove_reminder")
            calls += [{"name": tool, "arguments": {key: row[key]}} for row in rows]
        elif measure is update_similarity:
            tool = "modify_contact" if namespace == "CONTACT" else "modify_reminder"
            calls += [{"name": tool, "arguments": row} for row in rows]
    if not calls:
        return None
    for call in calls:  # only the tool's own parameters, under the names the agent sees
        tool = context.name_to_tool.get(call["name"])
        if tool is not None:
            parameters = inspect.signature(tool).parameters
            call["arguments"] = {k: v for k, v in call["arguments"].items() if k in parameters and not (isinstance(v, float) and math.isnan(v))}
        call["name"] = context.get_agent_facing_tool_name(call["name"])
    return {"tool_calls": calls}


# --- the loop -----------------------------------------------------------------------------------------
def main() -> None:
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # the package's prints and progress bars go to stderr, never into the protocol
    sys.stdout = sys.stderr
    try:
        worker = Worker()
    except Exception as exc:  # noqa: BLE001 - the host turns this into one line
        channel.write(json.dumps({"ok": False, "fatal": True, "error": f"cannot import ToolSandbox: {type(exc).__name__}: {exc}"}) + "\n")
        return
    handlers = {
        "hello": worker.hello, "reset": worker.reset, "agent": worker.agent, "user": worker.user,
        "user_view": worker.user_view_request, "evaluate": worker.evaluate, "reference": worker.reference,
    }  # fmt: skip
    for line in sys.stdin:
        try:
            request = json.loads(line)
            reply = handlers[request["op"]](request)
            reply["ok"] = True
        except Exception as exc:  # noqa: BLE001 - one bad request fails that request only
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}
        channel.write(json.dumps(reply, default=str) + "\n")


if __name__ == "__main__":
    main()
