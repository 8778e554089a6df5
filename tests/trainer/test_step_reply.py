"""A step's reply is validated once, on the host, as it crosses the sandbox wall; the trainer reuses that.

A real sandboxed env (trace/wifi_on-v0 under bwrap) answers a reset and two steps through the trainer's
:class:`EnvPool`. The wall's check (``schemas.wire.check_reply``) runs once per call; the trainer's own
validation (``StepInfo.model_validate`` in ``trainer.envpool``) does not run at all for those answers, and the messages the trainer
gets are the very objects the wall produced. An ``info`` that never crossed the wall is still validated.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import env_registry.hosted as hosted
from schemas.wire import CheckedInfo, MalformedReply, StepInfo, check_reply
from trainer import envpool
from trainer.envpool import EnvPool

TOOL_CALL = '<tool_call>{"name": "set_wifi_status", "arguments": {"on": true}}</tool_call>'


def test_a_step_reply_is_validated_once_on_the_host(wifi_env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    walls: Counter[str] = Counter()
    infos: list[Any] = []
    trainer_checks: list[Any] = []

    def wall(method: str, result: Any) -> Any:
        walls[method] += 1
        data = check_reply(method, result)
        if method in ("reset", "step"):
            infos.append(data["info"])
        return data

    class SpiedStepInfo(StepInfo):
        """StepInfo as the trainer sees it, noting each validation the trainer asks of it."""

        @classmethod
        def model_validate(cls, data: Any, *args: Any, **kwargs: Any) -> StepInfo:
            trainer_checks.append(data)
            return StepInfo.model_validate(data, *args, **kwargs)

    monkeypatch.setattr(hosted, "check_reply", wall)
    monkeypatch.setattr(envpool, "StepInfo", SpiedStepInfo)
    with EnvPool(wifi_env, sandbox="bwrap", audit_share=0.0) as pool:  # the pool's own calls only (no audit replay)
        [reset] = pool.reset([0], [3])
        [talk] = pool.step([0], ["Let me look."])
        [call] = pool.step([0], [TOOL_CALL])

    assert (walls["reset"], walls["step"]) == (1, 2)  # the wall: once per call
    assert trainer_checks == []  # the trainer: never again for answers that crossed the wall
    assert all(isinstance(info, CheckedInfo) for info in infos)
    replies = [reset.reply, talk.reply, call.reply]
    assert all(reply is not None for reply in replies), [o.error for o in (reset, talk, call)]
    for reply, info in zip(replies, infos):
        assert reply.info is info.checked  # the wall's object itself, not a copy validated again
    assert reset.reply.tools and reset.reply.messages[0]["role"] == "system"
    assert (talk.reply.terminated, call.reply.terminated, call.reply.reward) == (False, True, 1.0)


def test_an_info_that_did_not_cross_the_wall_is_validated_by_the_trainer() -> None:
    outcome = envpool._checked(0.5, False, False, {"messages": [{"role": "robot", "content": "hi"}]})
    assert outcome.reply is None and "messages[0].role" in str(outcome.error)
    plain = envpool._checked(0.5, False, False, {"messages": [{"role": "user", "content": "hi"}]})
    assert plain.reply is not None and plain.reply.messages == [{"role": "user", "content": "hi"}]


def test_the_wall_refuses_a_step_whose_messages_are_malformed() -> None:
    reply = {"observation": "", "reward": 0.0, "terminated": False, "truncated": False,
             "info": {"new_messages": [{"role": "robot", "content": "hi"}]}}  # fmt: skip
    with pytest.raises(MalformedReply, match=r"info\.new_messages\[0\]\.role"):
        check_reply("step", reply)
    reply["info"] = {"new_messages": [{"role": "user", "content": "hi"}], "anything": {"else": 1}}
    info = check_reply("step", reply)["info"]
    assert info == reply["info"] and info.checked.new_messages == [{"role": "user", "content": "hi"}]


def test_an_action_is_made_plain_once_and_encoded_once_per_step(wifi_env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """gym.make's env hands a sandboxed runner the action as given; the runner makes it plain once and the
    worker client writes it as JSON once. An action that cannot be written still gets an error observation."""
    import json

    import gymnasium as gym

    import sandbox.client as client

    plain: list[Any] = []
    encoded: list[str] = []
    real_plain, real_dumps = hosted.action_to_json, json.dumps

    def spy_plain(action: Any) -> Any:
        plain.append(action)
        return real_plain(action)

    class SpyJSON:
        def __getattr__(self, name: str) -> Any:
            return getattr(json, name)

        @staticmethod
        def dumps(obj: Any, *args: Any, **kwargs: Any) -> str:
            text = real_dumps(obj, *args, **kwargs)
            if isinstance(obj, dict) and obj.get("method") == "step":
                encoded.append(text)
            return text

    env = gym.make(wifi_env, sandbox="bwrap")
    try:
        env.reset(seed=3)
        monkeypatch.setattr(hosted, "action_to_json", spy_plain)
        monkeypatch.setattr(client, "json", SpyJSON())
        env.step({"role": "assistant", "content": "Let me look."})
        assert (len(plain), len(encoded)) == (1, 1)
        cyclic: dict[str, Any] = {"role": "assistant"}
        cyclic["self"] = cyclic
        observation, *_ = env.step(cyclic)
        assert "could not be encoded as JSON (ValueError)" in observation
    finally:
        env.close()
