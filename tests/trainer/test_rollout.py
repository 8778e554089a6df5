"""Multi-turn rollouts in the real sandboxed env: exact token layout and masks across turns, the KV cache
kept across turns, hints stripped, truncation and sandbox failures counted, envs reused."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from trainer.chat import ChatFormat
from trainer.config import HintSettings, RolloutSettings
from trainer.engines import Generated, TransformersEngine
from trainer.envpool import EnvPool
from trainer.rollout import collect_groups

pytestmark = pytest.mark.usefixtures("wifi_env")


@pytest.fixture(scope="module")
def policy(tiny_model):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    return AutoModelForCausalLM.from_pretrained(tiny_model), ChatFormat(tokenizer)


@pytest.fixture(scope="module")
def pool(wifi_env):
    with EnvPool(wifi_env, sandbox="bwrap") as envs:
        yield envs


class ScriptedSession:
    def __init__(self, engine: "ScriptedEngine", keys: list[int]) -> None:
        self.engine, self.keys, self.turn = engine, keys, 0

    def extend(self, key: int, tokens: list[int]) -> None:
        self.engine.extended.setdefault(key, []).append(list(tokens))

    def drop(self, keys: list[int]) -> None:
        self.keys = [k for k in self.keys if k not in keys]

    def generate(self) -> dict[int, Generated]:
        tokens = self.engine.turns[self.turn]
        self.turn += 1
        return {k: Generated(list(tokens), tokens[-1] == self.engine.eos) for k in self.keys}


class ScriptedEngine:
    """A policy that says fixed things, so the expected token layout can be written by hand. It records
    the prompts it generated from and the env tokens it was given."""

    def __init__(self, turns: list[list[int]], eos: int) -> None:
        self.turns, self.eos = turns, eos
        self.prompts: dict[int, list[int]] = {}
        self.extended: dict[int, list[list[int]]] = {}

    def session(self, prompts: dict[int, list[int]]) -> ScriptedSession:
        self.prompts = {k: list(v) for k, v in prompts.items()}
        return ScriptedSession(self, list(prompts))

    def sync(self, model, step) -> None:
        pass


def test_env_tokens_are_masked_across_three_turns(policy, pool) -> None:
    _, chat = policy
    enc = chat.encode
    eos = [chat.eos_id]
    talk = enc("Let me look.") + eos
    check = enc('<tool_call>{"name": "get_wifi_status", "arguments": {}}</tool_call>') + eos
    switch = enc('<tool_call>{"name": "set_wifi_status", "arguments": {"on": true}}</tool_call>') + eos
    engine = ScriptedEngine([talk, check, switch], chat.eos_id)
    [rollout], _ = collect_groups(engine, chat, pool, [7], 1, RolloutSettings(max_new_tokens=64, max_seq_len=2048))
    # what the chat template puts between turns, written out by hand
    user_turn = enc("\n<|im_start|>user\nPlease just switch the wifi on.<|im_end|>\n<|im_start|>assistant\n")
    tool_turn = enc('\n<|im_start|>user\n<tool_response>{"wifi": false}</tool_response><|im_end|>\n<|im_start|>assistant\n')
    assert rollout.completion_ids == talk + user_turn + check + tool_turn + switch
    assert rollout.completion_mask == [1] * len(talk) + [0] * len(user_turn) + [1] * len(check) + [0] * len(tool_turn) + [1] * len(switch)
    assert engine.extended == {0: [user_turn, tool_turn]}  # the generator saw only the new env tokens each turn
    assert (rollout.reward, rollout.turns, rollout.termination, rollout.cut_turns) == (1.0, 3, "agent_stop", 0)
    assert rollout.prompt_ids == engine.prompts[0] and chat.tokenizer.decode(rollout.prompt_ids).endswith(
        "<|im_start|>user\n" + rollout.messages[1]["content"] + "<|im_end|>\n<|im_start|>assistant\n")
    ids, mask = rollout.sequence()
    assert ids == rollout.prompt_ids + rollout.completion_ids and sum(mask) == len(talk) + len(check) + len(switch)
    # a warm start tokenises the finished conversation into the same layout
    again, again_mask, prompt_len = chat.conversation_ids(rollout.messages, rollout.tools)
    assert (again, again_mask, prompt_len) == (ids, mask, len(rollout.prompt_ids))


def test_turn_cut_at_max_new_tokens_is_counted_and_closed_by_env_tokens(policy, pool) -> None:
    _, chat = policy
    cut = chat.encode("Let me")  # no eos: the turn hit max_new_tokens
    engine = ScriptedEngine([cut, cut, cut], chat.eos_id)
    [rollout], _ = collect_groups(engine, chat, pool, [3], 1, RolloutSettings(max_new_tokens=len(cut), max_seq_len=2048))
    assert rollout.cut_turns == 2 and rollout.termination == "user_stop" and rollout.reward == 0.0
    first_env = rollout.completion_ids[len(cut):][: rollout.completion_mask[len(cut):].index(1)]
    assert first_env[0] == chat.eos_id  # the closing eos is env (masked) text, never a trained token


def test_tiny_model_rollouts_train_exactly_the_sampled_tokens(policy, pool) -> None:
    model, chat = policy
    torch.manual_seed(0)
    engine = TransformersEngine(model, chat, temperature=1.0, max_new_tokens=12)
    sampled: list[dict[int, Generated]] = []
    original = engine.session

    def recording_session(prompts):
        session = original(prompts)
        generate = session.generate
        session.generate = lambda: sampled.append(generate()) or sampled[-1]
        return session

    engine.session = recording_session
    rollouts, stats = collect_groups(engine, chat, pool, [1, 2], 3, RolloutSettings(max_new_tokens=12, max_seq_len=2048))
    assert len(rollouts) == 6 and [r.group for r in rollouts] == [0, 0, 0, 1, 1, 1]
    assert {r.seed for r in rollouts[:3]} == {1} and len({r.scenario_hash for r in rollouts[:3]}) == 1
    for key, rollout in enumerate(rollouts):
        turns = [step[key].tokens for step in sampled if key in step]
        assert len(turns) == rollout.turns >= 2  # random text: the user answers, so at least two turns
        position, generated = 0, []
        for turn in turns:  # every sampled token, in order, at a trained (mask 1) position
            assert rollout.completion_ids[position: position + len(turn)] == turn
            assert rollout.completion_mask[position: position + len(turn)] == [1] * len(turn)
            generated += turn
            position += len(turn)
            while position < len(rollout.completion_mask) and rollout.completion_mask[position] == 0:
                position += 1
        assert position == len(rollout.completion_ids) and sum(rollout.completion_mask) == len(generated)
        assert rollout.cut_turns == sum(1 for t in turns if t[-1] != chat.eos_id)
    assert stats.generated_tokens == sum(sum(r.completion_mask) for r in rollouts)


def test_kv_cache_across_turns_matches_generation_from_scratch(policy) -> None:
    model, chat = policy
    engine = TransformersEngine(model, chat, temperature=1.0, max_new_tokens=6)
    engine.config.do_sample = False  # greedy, so both paths must pick the same tokens
    prompts = {0: chat.encode("Please turn on the wifi."), 1: chat.encode("Hi"), 2: chat.encode("Switch the wifi on now, thanks")}
    session = engine.session(prompts)
    full = {k: list(v) for k, v in prompts.items()}
    for turn in range(3):
        out = session.generate()
        for key in full:
            alone = model.generate(input_ids=torch.tensor([full[key]]), attention_mask=torch.ones(1, len(full[key]), dtype=torch.long),
                                   generation_config=engine.config).sequences[0, len(full[key]):].tolist()
            if chat.eos_id in alone:
                alone = alone[: alone.index(chat.eos_id) + 1]
            assert out[key].tokens == alone, (turn, key)
            full[key] += out[key].tokens
        if turn == 0:
            session.drop([1])
            del full[1]
        for key, text in ((0, " and the tool said ok"), (2, "<|im_start|>user\nmore")):
            session.extend(key, chat.encode(text))
            full[key] += chat.encode(text)


def test_hints_reach_the_generation_prompt_and_are_stripped_before_training(policy, pool) -> None:
    _, chat = policy
    talk = chat.encode("Done.") + [chat.eos_id]
    engine = ScriptedEngine([talk, talk, talk], chat.eos_id)
    settings = RolloutSettings(max_new_tokens=16, max_seq_len=2048, hint=HintSettings(share=0.5))
    rollouts, _ = collect_groups(engine, chat, pool, [4], 4, settings, hints={4: "Hint: call set_wifi_status."})
    assert [r.hinted for r in rollouts] == [True, True, False, False]
    hinted_prompt = chat.tokenizer.decode(engine.prompts[0])
    assert "Hint: call set_wifi_status." in hinted_prompt
    assert all(r.prompt_ids == rollouts[3].prompt_ids for r in rollouts)  # trained prompts carry no hint
    assert "Hint" not in chat.tokenizer.decode(rollouts[0].prompt_ids)


def test_context_limit_and_dead_sandbox_end_only_their_episode(policy, pool) -> None:
    model, chat = policy
    engine = TransformersEngine(model, chat, temperature=1.0, max_new_tokens=8)
    first = pool.reset([0], [5])[0].reply
    prompt_len = len(chat.prompt_ids(first.messages, first.tools))
    short = RolloutSettings(max_new_tokens=8, max_seq_len=prompt_len + 9)  # room for one turn only
    rollouts, _ = collect_groups(engine, chat, pool, [5], 2, short)
    assert all(r.termination == "context_limit" and not r.trainable for r in rollouts if r.turns == 1 and r.ended_by is None)
    assert any(r.termination == "context_limit" for r in rollouts)
    pool.reset([0, 1, 2], [6, 6, 6])  # three live slots whatever ran before on this module's pool
    envs_before = list(pool.envs)
    pool.envs[1].unwrapped.runner.hosted.worker.close()  # the sandbox of episode 1 dies before its reset
    replaced = pool.replaced
    rollouts, _ = collect_groups(engine, chat, pool, [6], 3, RolloutSettings(max_new_tokens=8, max_seq_len=2048))
    assert all(r.error is None for r in rollouts) and rollouts[1].turns >= 1  # a fresh worker took over
    assert pool.replaced == replaced + 1
    assert pool.envs[0] is envs_before[0] and pool.envs[2] is envs_before[2] and pool.envs[1] is not envs_before[1]


class KillingEngine(ScriptedEngine):
    """Kills the sandbox worker of episode 0 just before turn ``when`` is generated."""

    def __init__(self, turns, eos, pool, when) -> None:
        super().__init__(turns, eos)
        self.pool, self.when = pool, when

    def session(self, prompts):
        session = super().session(prompts)
        generate = session.generate

        def killing():
            if session.turn == self.when:
                self.pool.envs[0].unwrapped.runner.hosted.worker.close()
            return generate()

        session.generate = killing
        return session


def test_a_worker_that_dies_mid_episode_is_replaced_and_the_episode_replayed(policy, pool) -> None:
    _, chat = policy
    eos = [chat.eos_id]
    turns = [chat.encode("Let me look.") + eos, chat.encode('<tool_call>{"name": "get_wifi_status", "arguments": {}}</tool_call>') + eos,
             chat.encode('<tool_call>{"name": "set_wifi_status", "arguments": {"on": true}}</tool_call>') + eos]
    settings = RolloutSettings(max_new_tokens=64, max_seq_len=2048)
    [calm], _ = collect_groups(ScriptedEngine(turns, chat.eos_id), chat, pool, [7], 1, settings)
    replayed, replaced = pool.replayed, pool.replaced
    [crashed], _ = collect_groups(KillingEngine(turns, chat.eos_id, pool, when=2), chat, pool, [7], 1, settings)
    assert (pool.replaced, pool.replayed) == (replaced + 1, replayed + 1)
    assert crashed.error is None and crashed.reward == calm.reward == 1.0
    assert crashed.completion_ids == calm.completion_ids and crashed.messages == calm.messages  # nothing lost, nothing doubled


def test_a_worker_that_keeps_dying_ends_only_its_episode(policy, wifi_env) -> None:
    import gymnasium as gym

    _, chat = policy

    class Dying(gym.Wrapper):
        kill = False

        def step(self, action):
            if self.kill:
                self.env.unwrapped.runner.hosted.worker.close()
            return self.env.step(action)

    made = []

    def make(env_id, **kwargs):
        env = Dying(gym.make(env_id, **kwargs))
        env.kill = len(made) >= 2  # the replacements of the dying worker die too
        made.append(env)
        return env

    talk = chat.encode("Done.") + [chat.eos_id]
    with EnvPool(wifi_env, sandbox="bwrap", make=make, max_replays=1) as dying:
        dying.ensure(2)
        dying.envs[0].kill = True
        rollouts, _ = collect_groups(ScriptedEngine([talk] * 3, chat.eos_id), chat, dying, [2], 2,
                                     RolloutSettings(max_new_tokens=16, max_seq_len=2048))
        assert rollouts[0].termination == "infrastructure_error" and "after 1 replays" in (rollouts[0].error or "")
        assert "WorkerCrashed" in rollouts[0].error and rollouts[1].error is None and rollouts[1].turns >= 1
        assert dying.crashes and dying.replaced == 2


def test_a_sandbox_that_dies_while_starting_is_started_again(policy, wifi_env) -> None:
    import gymnasium as gym

    from sandbox import WorkerCrashed

    calls = []

    def make(env_id, **kwargs):
        calls.append(env_id)
        if len(calls) == 1:
            raise WorkerCrashed("worker bwrap:trace_env.handler died during start (exit code -9)")
        return gym.make(env_id, **kwargs)

    with EnvPool(wifi_env, sandbox="bwrap", make=make) as flaky:
        outcomes = flaky.reset([0, 1], [3, 3])
        assert all(o.reply is not None for o in outcomes) and len(calls) == 3
        assert flaky.crashes == ["WorkerCrashed: worker bwrap:trace_env.handler died during start (exit code -9)"]
        assert outcomes[0].reply.scenario_hash == outcomes[1].reply.scenario_hash
