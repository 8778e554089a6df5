"""One renderer: an episode is the same token sequence in training and in evaluation, for a chat template
that renders tools (the tiny model's, Qwen-style) and one that renders neither tools nor calls (SmolLM2's),
with tools as JSON schemas or as compact signatures (``rollout.compact_tools``, recorded with the adapter and
read back by `factory rollout hf:` and every `factory eval` arm), and a text-only API reads the same Hermes
text the template-less model was trained on."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from env_registry import conversation
from env_registry.conversation import TrainedPrompt
from factory.rollout.hf import HFPolicy
from trainer.chat import ChatFormat
from trainer.checkpoint import write_adapter
from trainer.config import LoraSettings, RolloutSettings
from trainer.engines import Generated
from trainer.envpool import EnvPool
from trainer.model import attach_adapter
from trainer.rollout import collect_groups

# SmolLM2-135M-Instruct's chat template, verbatim: it renders role and content only (no tools, no calls).
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SAID = ["Let me look.", '<tool_call>{"name": "get_wifi_status", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "set_wifi_status", "arguments": {"on": true}}</tool_call>']


class Scripted:
    """An engine that says SAID, turn by turn, and records every context it was asked to continue."""

    def __init__(self, chat: ChatFormat) -> None:
        self.turns = [chat.encode(text) + [chat.eos_id] for text in SAID]
        self.contexts: list[list[int]] = []
        self.turn = 0

    def session(self, prompts: dict[int, list[int]]) -> "Scripted":
        self.live = {k: list(v) for k, v in prompts.items()}
        return self

    def extend(self, key: int, tokens: list[int]) -> None:
        self.live[key] += tokens

    def drop(self, keys: list[int]) -> None:
        for key in keys:
            self.live.pop(key, None)

    def generate(self) -> dict[int, Generated]:
        tokens = self.turns[self.turn]
        self.turn += 1
        out = {}
        for key, context in self.live.items():
            self.contexts.append(list(context))
            context += tokens
            out[key] = Generated(list(tokens), True)
        return out

    def sync(self, model, step) -> None:
        pass


@pytest.fixture(scope="module")
def pool(wifi_env: str):
    with EnvPool(wifi_env, sandbox="bwrap") as envs:
        yield envs


@pytest.fixture(scope="module", params=["renders-tools", "renders-nothing"])
def tokenizer(request, tiny_model):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    if request.param == "renders-nothing":
        tokenizer = copy.deepcopy(tokenizer)
        tokenizer.chat_template = SMOLLM2_TEMPLATE
    return tokenizer


@pytest.fixture(scope="module")
def model_dir(tokenizer, tiny_model, tmp_path_factory) -> Path:
    """The tiny model with this tokenizer (and its chat template), as a folder ``hf:`` loads."""
    folder = tmp_path_factory.mktemp("model")
    for item in Path(tiny_model).iterdir():
        if item.is_file():
            shutil.copy(item, folder)
    tokenizer.save_pretrained(folder)
    assert AutoTokenizer.from_pretrained(folder).chat_template == tokenizer.chat_template
    return folder


def trained_adapter(model_dir: Path, folder: Path, chat: ChatFormat) -> Path:
    """An adapter saved as `factory train` saves it (``trainer.checkpoint.write_adapter`` with the run's rendering)."""
    policy = attach_adapter(AutoModelForCausalLM.from_pretrained(model_dir), LoraSettings(rank=4, target_modules=["q_proj", "v_proj"]))
    return write_adapter(policy, folder, TrainedPrompt(compact_tools=chat.compact_tools))


def trained_contexts(tokenizer, pool, compact: bool) -> list[list[int]]:
    """The contexts training generates the scripted episode of seed 7 from, tools rendered as asked."""
    chat = ChatFormat(tokenizer, compact_tools=compact)
    training = Scripted(chat)
    collect_groups(training, chat, pool, [7], 1, RolloutSettings(max_new_tokens=64, max_seq_len=4096))
    return training.contexts


@pytest.mark.parametrize("compact", [False, True], ids=["schema-tools", "compact-tools"])
def test_training_and_evaluation_see_the_same_tokens(tokenizer, model_dir, pool, compact: bool, tmp_path: Path) -> None:
    chat = ChatFormat(tokenizer, compact_tools=compact)
    expect_support = tokenizer.chat_template != SMOLLM2_TEMPLATE
    assert (chat.renders_tools, chat.renders_calls) == (expect_support, expect_support)
    training = Scripted(chat)
    [rollout], _ = collect_groups(training, chat, pool, [7], 1, RolloutSettings(max_new_tokens=64, max_seq_len=4096))
    assert rollout.reward == 1.0 and rollout.turns == 3
    ids, _ = rollout.sequence()
    prompt = tokenizer.decode(training.contexts[0])
    assert ('"parameters"' in prompt) == (not compact) and ("set_wifi_status(on" in prompt) == compact

    # `factory rollout hf:MODEL@ADAPTER`: the adapter's folder says how it was trained; nothing else is passed
    policy = HFPolicy.from_spec(f"hf:{model_dir}@{trained_adapter(model_dir, tmp_path / 'adapter', chat)}")
    assert policy.compact_tools == compact and policy.warning is None
    evaluation = Scripted(policy.chat)
    policy.batcher.engine = evaluation
    env = pool.envs[0]
    _, info = env.reset(seed=7)
    messages, tools = info["messages"], info["tools"]
    act = policy.start(None, tools, seed=7)  # type: ignore[arg-type]
    for _ in SAID:
        _, reward, terminated, _, info = env.step(act(messages))
        messages = messages + [info["assistant_message"], *info["new_messages"]]
    assert terminated and reward == 1.0
    assert evaluation.contexts == training.contexts  # every turn generated from the same tokens
    assert evaluation.contexts[-1] + training.turns[-1] == ids  # ...which are the tokens trained on
    # the stateless path (messages alone) renders the same prompt for the first turn
    assert chat.conversation_ids(rollout.messages[:2], tools, generation_prompt=True)[0] == training.contexts[0]
    text = tokenizer.decode(ids)
    if not expect_support:  # the template shows neither: tools and calls are in the text, in the Hermes format
        system = text.split("<|im_end|>")[0]
        assert ("set_wifi_status(on" if compact else '"name": "set_wifi_status"') in system and "<tool_response" in text


def test_every_eval_arm_shows_an_adapter_the_prompt_it_was_trained_on(tokenizer, model_dir, pool, tmp_path: Path) -> None:
    """`factory eval --target` arms (base, each adapter alone, the routed choice) on one shared model: each
    adapter's first turn is generated from the very tokens training generated it from, in its own rendering;
    the base model keeps JSON schemas; ``--schema-tools`` overrides every arm and says which adapter it misleads."""
    from factory.evaluate.engines import open_engine
    from factory.evaluate.schema import EvalConfig, EvalTarget
    from router.loading import AdapterPrompts
    from router.schema import RouteDecision

    first = {compact: trained_contexts(tokenizer, pool, compact)[0] for compact in (False, True)}
    assert first[False] != first[True]
    adapters = {name: trained_adapter(model_dir, tmp_path / name, ChatFormat(tokenizer, compact_tools=compact))
                for name, compact in (("compact_skill", True), ("schema_skill", False))}
    _, info = pool.envs[0].reset(seed=7)
    routed = RouteDecision(choice="compact_skill", label="A", probabilities={"compact_skill": 1.0}, weights={"compact_skill": 1.0})

    def first_turns(override: bool | None) -> dict[str, list[int]]:
        config = EvalConfig(targets=[EvalTarget(name="tau2-airline")], arms=["base", "adapters"], model=str(model_dir),
                            adapters={k: str(v) for k, v in adapters.items()}, out=tmp_path / "eval", compact_tools=override)
        engine = open_engine(config, str(model_dir), adapters, tmp_path / "menu.json", log=None)
        shared = engine.make.__self__  # factory.evaluate.policies.SharedModel: one model, adapters switched per arm
        scripted = Scripted(shared.engine.chat)
        shared.engine.batcher.engine = scripted
        arms = {arm: engine.policy(arm, "tau2-airline") for arm in ("base", "adapter:compact_skill", "adapter:schema_skill")}
        arms["routed"] = engine.make(routed, "routed")  # what the routed arm plays once the router chose compact_skill
        seen = {}
        for arm, policy in arms.items():
            scripted.turn, scripted.contexts = 0, []
            policy.start(None, info["tools"], seed=7)(info["messages"])  # type: ignore[arg-type]
            seen[arm] = scripted.contexts[0]
        return seen

    assert first_turns(None) == {"base": first[False], "adapter:compact_skill": first[True], "adapter:schema_skill": first[False],
                                 "routed": first[True]}
    assert all(context == first[False] for context in first_turns(False).values())  # --schema-tools: every arm
    warnings = AdapterPrompts.read(adapters, False).warnings()
    assert len(warnings) == 1 and "compact_skill" in warnings[0] and "trained on compact signatures" in warnings[0]
    assert AdapterPrompts.read(adapters, None).warnings() == [] and AdapterPrompts.read(adapters, True).warnings()[0].startswith("adapter schema_skill")


def test_a_served_adapter_gets_the_text_it_was_trained_on(tokenizer, model_dir, pool, tmp_path: Path) -> None:
    """`factory eval --engine server`: the request for a compact-trained adapter carries its tools as signatures."""
    from factory.evaluate.engines import open_engine
    from factory.evaluate.schema import EvalConfig, EvalTarget
    from factory.testing.llm_server import ScriptedLLMServer

    adapters = {"compact_skill": trained_adapter(model_dir, tmp_path / "compact_skill", ChatFormat(tokenizer, compact_tools=True))}
    _, info = pool.envs[0].reset(seed=7)
    with ScriptedLLMServer(lambda request: "Done.") as server:
        config = EvalConfig(targets=[EvalTarget(name="tau2-airline")], arms=["base", "adapters"], model=str(model_dir),
                            adapters={k: str(v) for k, v in adapters.items()}, out=tmp_path / "eval", engine="server",
                            base_url=server.openai_base_url)
        engine = open_engine(config, str(model_dir), adapters, tmp_path / "menu.json", log=None)
        for arm in ("base", "adapter:compact_skill"):
            engine.policy(arm, "tau2-airline").start(None, info["tools"], seed=7)(info["messages"])  # type: ignore[arg-type]
        requests = [r for r in server.requests if r.path.endswith("/chat/completions")]
    systems = [next(m["content"] for m in r.body["messages"] if m["role"] == "system") for r in requests]
    assert systems == [conversation.text_dialogue(info["messages"], info["tools"], compact)[0] for compact in (False, True)]


def test_a_text_api_reads_the_text_the_template_less_model_was_trained_on(tiny_model) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    tokenizer.chat_template = SMOLLM2_TEMPLATE
    chat = ChatFormat(tokenizer)
    tools = [{"type": "function", "function": {"name": "f", "description": "F", "parameters": {"type": "object"}}}]
    messages = [
        {"role": "system", "content": "POLICY"}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Looking.", "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]},
        {"role": "tool", "tool_call_id": "1", "name": "f", "content": "R1"},
    ]
    system, dialogue = conversation.text_dialogue(messages, tools)
    as_api = tokenizer.apply_chat_template([{"role": "system", "content": system}, *dialogue], tokenize=False, add_generation_prompt=True)
    assert as_api == chat.render(messages, tools, generation_prompt=True)


def test_an_adapters_record_is_read_back_and_an_older_runs_run_json_stands_in(tmp_path: Path) -> None:
    import json

    adapter = tmp_path / "run" / "adapter"
    adapter.mkdir(parents=True)
    assert conversation.trained_prompt(adapter) is None  # an adapter from elsewhere: the default rendering
    (tmp_path / "run" / "run.json").write_text(json.dumps({"env_id": "trace/x-v1", "config": {"rollout": {"compact_tools": True}}}))
    assert conversation.trained_prompt(adapter) == TrainedPrompt(compact_tools=True)  # saved before the record existed
    conversation.write_trained_prompt(adapter, TrainedPrompt(compact_tools=False))
    assert conversation.trained_prompt(adapter) == TrainedPrompt(compact_tools=False)  # the record beside the weights wins
    (adapter / conversation.PROMPT_FILE).write_text('{"compact_tools": "sometimes"}')
    with pytest.raises(conversation.PromptRecordError) as bad:
        conversation.trained_prompt(adapter)
    assert str(adapter / conversation.PROMPT_FILE) in str(bad.value) and "compact_tools" in str(bad.value) and "\n" not in str(bad.value)
    assert conversation.tools_mode(TrainedPrompt(compact_tools=True), None) == (True, None)
    assert conversation.tools_mode(None, None) == (False, None) and conversation.tools_mode(None, True) == (True, None)
    compact, warning = conversation.tools_mode(TrainedPrompt(compact_tools=True), False, "x")
    assert not compact and warning == ("adapter x is shown its tools as JSON schemas but was trained on compact signatures: "
                                       "it runs on a prompt it was not trained on")
