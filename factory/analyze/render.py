"""Trajectories as compact text for an analysis LLM: what the user asked, each tool call with its result,
and the agent's replies. Long tool results are cut so a batch of trajectories fits one prompt."""

from __future__ import annotations

from schemas.trajectory import Trajectory


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 20] + f" …[{len(text) - limit + 20} chars cut]"


def render_trajectory(
    trajectory: Trajectory, *, show_outcome: bool, result_chars: int = 500, text_chars: int = 600, max_chars: int = 12000
) -> str:
    """One trajectory as numbered lines. ``show_outcome`` is off for labeling, so labels are not biased by it."""
    head = f"### Trajectory {trajectory.id} (task {trajectory.task_id}"
    head += f", {'SUCCESS' if trajectory.success else 'FAILURE'}, reward {trajectory.reward:g})" if show_outcome else ")"
    lines = [head]
    for message in trajectory.messages:
        if message.role == "system":
            continue
        if message.role == "tool":
            flag = " ERROR" if getattr(message, "error", False) else ""
            lines.append(f"  tool result{flag} ({message.name or message.tool_call_id}): {_clip(message.content or '', result_chars)}")
            continue
        if message.content:
            lines.append(f"  {message.role}: {_clip(message.content, text_chars)}")
        for call in message.tool_calls or []:
            lines.append(f"  {message.role} calls {call.function.name}({_clip(call.function.arguments, 400)})")
    text = "\n".join(lines)
    if len(text) > max_chars:
        keep = max_chars // 2
        text = text[:keep] + "\n  …[middle of the conversation cut]…\n" + text[-keep:]
    return text
