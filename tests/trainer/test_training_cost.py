"""The shared prompt computed once (issue 21), on the real tiny model with a real PEFT adapter, in float32:

* prefixes are found from the tokens alone (no renderer layout assumed);
* generation: prefilling each shared prefix once and copying its KV cache gives the same next-token logits
  as the whole prompt, and the same sampled tokens over several turns with episodes dropped and extended;
* the update: log-probs, gradients, GRPO losses and the weights after the optimizer steps equal those of
  the whole sequences;
* turns end at the eos, at ``</tool_call>`` and at stop strings, never later, with exactly the sampled tokens;
* the run summary reports the share of iterations that trained nothing.
"""

from __future__ import annotations

import copy
import random

import pytest
import torch
from accelerate import Accelerator
from transformers import AutoModelForCausalLM, AutoTokenizer

from trainer.chat import ChatFormat
from trainer.config import GRPOSettings, LoraSettings, RolloutSettings
from trainer.engines import (
    Generated,
    StopRule,
    TransformersEngine,
    prefill_shared,
    stop_rule,
    turn_length,
)
from trainer.envpool import EnvPool
from trainer.logprobs import TokenLogProbs
from trainer.model import attach_adapter, trainable_parameters
from trainer.prefix import MIN_SHARED, shared_prefixes
from trainer.report import IterationMetrics, summary
from trainer.rollout import collect_groups
from trainer.update import Item, PolicyUpdate, pack, pack_shared

CPU = torch.device("cpu")


def tokens(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(3, 2000) for _ in range(n)]


@pytest.fixture(scope="module")
def chat(tiny_model) -> ChatFormat:
    return ChatFormat(AutoTokenizer.from_pretrained(tiny_model))


@pytest.fixture
def peft_model(tiny_model):
    model = attach_adapter(AutoModelForCausalLM.from_pretrained(tiny_model), LoraSettings(rank=4, alpha=8), seed=0)
    with torch.no_grad():  # a non-zero adapter: its gradients and effect on the prefix are part of what is compared
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.05)
    return model


def group_prompts(seed: int = 0) -> dict[int, list[int]]:
    """Three groups of four: a common system text, a per-group part, and one member per group with an
    extra tail (a hinted prompt); plus one prompt sharing nothing."""
    rng = random.Random(seed)
    system = tokens(rng, 300)
    prompts: dict[int, list[int]] = {}
    for g in range(3):
        head = system + tokens(rng, 10 + 7 * g)
        for k in range(4):
            prompts[4 * g + k] = head + (tokens(rng, 3 + g) if k == 3 else [])
    prompts[12] = tokens(rng, 40)
    return prompts


def test_prefixes_are_found_from_the_tokens_alone() -> None:
    prompts = group_prompts()
    sequences = [prompts[k] for k in sorted(prompts)]
    clusters = shared_prefixes(sequences)
    assert sorted(i for c in clusters for i in c.members) == list(range(len(sequences)))  # each in exactly one
    alone = [c for c in clusters if 12 in c.members]
    assert alone[0].members == [12] and alone[0].length == len(sequences[12]) - 1
    shared = [c for c in clusters if len(c.members) > 1]
    assert shared and all(c.length >= 300 for c in shared)  # at least the system text, whatever the layout
    for cluster in clusters:
        first = sequences[cluster.members[0]]
        for member in cluster.members:
            assert sequences[member][: cluster.length] == first[: cluster.length]
            assert cluster.length <= len(sequences[member]) - 1  # every member keeps a token of its own
    # the same sequences in another order give the same clusters (as sets of sequences)
    order = list(reversed(range(len(sequences))))
    again = shared_prefixes([sequences[i] for i in order])
    as_sets = lambda found, index: sorted((sorted(tuple(sequences[index[m]]) for m in c.members), c.length) for c in found)  # noqa: E731
    assert as_sets(again, order) == as_sets(clusters, list(range(len(sequences))))
    # a common prefix shorter than MIN_SHARED is not shared
    rng = random.Random(1)
    head = tokens(rng, MIN_SHARED - 1)
    assert all(len(c.members) == 1 for c in shared_prefixes([head + tokens(rng, 20), head + tokens(rng, 20)]))


def test_shared_prefill_gives_the_logits_of_the_whole_prompt(peft_model) -> None:
    prompts = list(group_prompts().values())
    peft_model.eval()
    with torch.no_grad():
        shared = prefill_shared(peft_model, prompts, pad_id=0)
        assert shared is not None
        ids, mask, cache, lengths = shared
        assert max(lengths) < max(map(len, prompts)) and ids.shape[0] == len(prompts)
        width = max(len(p) - n for p, n in zip(prompts, lengths))
        tail = torch.zeros((len(prompts), width), dtype=torch.long)
        tail_mask = torch.zeros_like(tail)
        for row, (prompt, n) in enumerate(zip(prompts, lengths)):  # left-padded tails, as the session appends them
            tail[row, width - len(prompt) + n:] = torch.tensor(prompt[n:])
            tail_mask[row, width - len(prompt) + n:] = 1
        full_mask = torch.cat([mask, tail_mask], dim=1)
        positions = (full_mask.cumsum(-1) - 1).clamp(min=0)[:, ids.shape[1]:]
        logits = peft_model(input_ids=tail, attention_mask=full_mask, position_ids=positions, past_key_values=cache).logits[:, -1]
        for row, prompt in enumerate(prompts):
            alone = peft_model(input_ids=torch.tensor([prompt])).logits[0, -1]
            # float32; a cached prefix sums attention in another order than the whole prompt: rtol 1e-4 is ~840 ulps
            # (eps32 1.19e-7) of each logit, atol 1e-4 the same for logits near 0 (reordered sums of numbers ~1)
            torch.testing.assert_close(logits[row], alone, rtol=1e-4, atol=1e-4)


def sample_turns(model, chat: ChatFormat, prompts: dict[int, list[int]], share: bool, seed: int = 1) -> list[dict[int, Generated]]:
    """Three turns: after each, some episodes end and the others get env tokens of different lengths."""
    torch.manual_seed(seed)
    engine = TransformersEngine(model, chat, 1.0, 16, share_prefix=share, stops=StopRule([chat.eos_id], []))
    session = engine.session(prompts)
    turns = []
    for turn in range(3):
        turns.append(session.generate())
        session.drop([k for k in turns[-1] if k % 5 == turn])
        for key in session.keys:
            session.extend(key, [5, 6, 7, 8][: key % 4 + 1])
    return turns


def test_shared_prefill_samples_the_same_tokens_over_turns(peft_model, chat) -> None:
    prompts = group_prompts()
    plain = sample_turns(peft_model, chat, prompts, share=False)
    assert sum(len(t.tokens) for turn in plain for t in turn.values()) > 100
    assert sample_turns(peft_model, chat, prompts, share=True) == plain


def items_with_shared_prompts(seed: int = 0) -> list[Item]:
    """Five rollouts of one prompt (two of them sampled the same first tokens, trained inside the shared
    part), with env tokens between turns; two of a shorter prompt; one unrelated sequence."""
    rng = random.Random(seed)
    prompt = tokens(rng, 200)
    items = []
    for k in range(5):
        first = ([7, 8, 9] if k in (1, 2) else []) + tokens(rng, 4 + 3 * k)
        env, second = tokens(rng, 6), tokens(rng, 2 + k)
        items.append(Item(prompt + first + env + second, [0] * len(prompt) + [1] * len(first) + [0] * len(env) + [1] * len(second)))
    shorter = tokens(rng, 120)  # a second, shorter shared prompt: its tails sit at other positions
    for k in range(2):
        reply = tokens(rng, 5 + 4 * k)
        items.append(Item(shorter + reply, [0] * len(shorter) + [1] * len(reply)))
    other = tokens(rng, 50)
    items.append(Item(other, [0] * 40 + [1] * 10))
    return items


def test_shared_scoring_equals_the_whole_sequences_with_gradients(peft_model) -> None:
    items = items_with_shared_prompts()
    plain, shared = pack(items, 0, CPU), pack_shared(items, 0, CPU)
    assert shared is not None and shared["prefix_ids"].shape[1] >= 200
    assert shared["input_ids"].numel() + shared["prefix_ids"].numel() < plain["input_ids"].numel() / 2
    assert torch.equal(shared["rows"], plain["rows"]) and torch.equal(shared["targets"], plain["input_ids"][plain["rows"], plain["cols"]])
    module = TokenLogProbs(peft_model, chunk=7)
    results = []
    for batch in (plain, shared):
        peft_model.zero_grad()
        logp = module(**batch)
        (logp * torch.linspace(0.5, 1.5, logp.numel())).sum().backward()  # every token's gradient weighs differently
        results.append((logp.detach(), [p.grad.clone() for p in trainable_parameters(peft_model)]))
    (logp_plain, grads_plain), (logp_shared, grads_shared) = results
    # float32 log-probs (magnitude ~1-10): the prefix's sums reordered, ~84 ulps (rtol 1e-5 / eps32 1.19e-7); the
    # gradients sum that difference again over every token of the batch, hence 10x: ~840 ulps, atol for entries near 0
    torch.testing.assert_close(logp_shared, logp_plain, rtol=1e-5, atol=1e-5)
    for mine, whole in zip(grads_shared, grads_plain):
        torch.testing.assert_close(mine, whole, rtol=1e-4, atol=1e-5)
    assert max(g.abs().max().item() for g in grads_plain) > 1e-2  # the comparison is not between zeros


@pytest.mark.parametrize("steps, kl", [(1, 0.0), (2, 0.1)])
def test_grpo_update_with_shared_prefixes_equals_the_plain_update(peft_model, steps: int, kl: float) -> None:
    """Same adapter, same items: the loss, KL, log-prob sums, gradient norms and the weights after the
    optimizer steps are those of the whole sequences (two steps also score old and reference log-probs).
    Plain SGD, so the weights show the gradients: Adam divides each entry by its own running magnitude and
    turns a float32 rounding difference in a near-zero entry into a visible fraction of a step."""
    settings = GRPOSettings(lr=1.0, micro_batch_size=4, steps_per_iteration=steps, kl_coef=kl)
    outcomes = []
    for share in (False, True):
        model = copy.deepcopy(peft_model)
        accelerator = Accelerator(cpu=True)
        module, optimizer = accelerator.prepare(TokenLogProbs(model), torch.optim.SGD(trainable_parameters(model), lr=settings.lr))
        update = PolicyUpdate(accelerator, module, optimizer, settings, pad_id=0, share_prefix=share)
        items = items_with_shared_prompts()
        for item, advantage in zip(items, [1.0, -0.5, 0.7, -1.2, 0.3, 0.8, -0.8, -0.3]):
            item.advantage = advantage
        assert ("prefix_ids" in update.pack(items[:3])) == share
        stats = update.grpo(items, filler=items[0])
        outcomes.append((stats, [p.detach().clone() for p in trainable_parameters(model)]))
    (plain, weights_plain), (shared, weights_shared) = outcomes
    assert shared.tokens == plain.tokens and shared.optimizer_steps == plain.optimizer_steps == steps
    for name in ("loss", "kl", "logprob_sum"):
        assert getattr(shared, name) == pytest.approx(getattr(plain, name), rel=1e-5, abs=1e-6), name
    assert shared.grad_norms == pytest.approx(plain.grad_norms, rel=1e-4)
    moved = max((after - before).abs().max().item() for after, before in zip(weights_plain, trainable_parameters(peft_model)))
    assert moved > 1e-3
    for mine, whole, before in zip(weights_shared, weights_plain, trainable_parameters(peft_model)):
        torch.testing.assert_close(mine, whole, rtol=0, atol=sgd_tolerance(before, whole, steps))


EPS32 = torch.finfo(torch.float32).eps  # 2**-23 = 1.19e-7: the spacing of float32 numbers at 1.0
SUMMED_ORDERS = 64
"""How many float32 roundings two orders of one gradient sum may differ by, at most, here: each entry of a LoRA
gradient is a sum over the 8 items' tokens (at most 32 each), through 2 layers, and sharing a prefix changes the
order of those additions (and of the prefix's attention sums), not their terms. Each reordered addition can move
the sum by half an ulp of the largest partial sum. Measured: the worst of 20 runs (10 adapter seeds x both
parametrizations) differed by 12 ulps of the scale below; 64 per step leaves 5x room, where the old fixed atol
of 1e-7 was below 1 ulp of a weight near 1 (CI saw 1.2e-7)."""


def sgd_tolerance(before: torch.Tensor, after: torch.Tensor, steps: int) -> float:
    """Weights after ``steps`` SGD steps are ``w0 - lr * g`` summed: they agree to SUMMED_ORDERS ulps of the
    largest number in the computation (the weight or its update, per step), never to a fixed 1e-7: an entry whose
    update nearly cancels its weight ends near 0, where a fixed atol is below one ulp of the numbers that made it."""
    scale = max(before.detach().abs().max().item(), (after - before.detach()).abs().max().item())
    return steps * SUMMED_ORDERS * EPS32 * scale


# --- where a turn ends --------------------------------------------------------------------------------------


def test_turn_length_ends_at_the_first_stop() -> None:
    rule = StopRule([2, 50], [])
    assert turn_length([5, 6, 2, 0, 0], rule, str) == (3, True, False)  # the eos: ended
    assert turn_length([5, 50, 2, 0], rule, str) == (2, False, True)  # another stop token first: stopped
    assert turn_length([5, 6, 7], rule, str) == (3, False, False)  # neither: cut
    decode = lambda ids: "".join(chr(96 + i) for i in ids)  # noqa: E731  1 -> 'a', 2 -> 'b', ...
    strings = StopRule([2], ["cde"])
    assert turn_length([1, 3, 4, 5, 6, 2, 2], strings, decode) == (4, False, True)  # 'acde' completes 'cde' at token 4
    assert turn_length([1, 2, 3, 4, 5], strings, decode) == (2, True, False)  # the eos came before the string
    assert turn_length([3, 4, 1], strings, decode) == (3, False, False)


def test_tool_call_end_is_a_stop_token_for_qwen_style_tokenizers(chat) -> None:
    rule = stop_rule(chat, declared_eos=[chat.eos_id, 0])
    assert rule.token_ids[0] == chat.eos_id and 0 in rule.token_ids
    assert chat.encode("</tool_call>")[0] in rule.token_ids and not rule.strings
    assert chat.encode("</tool_call>")[0] not in stop_rule(chat, stop_at_tool_call=False).token_ids


def test_real_generation_stops_at_a_stop_token_and_at_a_stop_string(peft_model, chat) -> None:
    """The same seed with and without a stop: the stopped turn is the free one's first tokens, up to and
    including the stop, and nothing after it."""
    prompt = {0: tokens(random.Random(3), 30)}

    def turn(stops: StopRule) -> Generated:
        torch.manual_seed(5)
        return TransformersEngine(peft_model, chat, 1.0, 24, stops=stops).session(prompt).generate()[0]

    free = turn(StopRule([chat.eos_id], []))
    assert not free.ended and not free.stopped and len(free.tokens) == 24
    stop_token = free.tokens[6]
    by_token = turn(StopRule([chat.eos_id, stop_token], []))
    assert by_token == Generated(free.tokens[: free.tokens.index(stop_token) + 1], False, True)
    text = chat.tokenizer.decode(free.tokens)
    piece = text[len(text) // 2: len(text) // 2 + 3]
    by_string = turn(StopRule([chat.eos_id], [piece]))
    assert by_string.stopped and not by_string.ended and free.tokens[: len(by_string.tokens)] == by_string.tokens
    assert piece in chat.tokenizer.decode(by_string.tokens) and piece not in chat.tokenizer.decode(by_string.tokens[:-1])


class StoppingEngine:
    """Checks the wifi, then switches it on: one tool call per turn, each ended by ``</tool_call>`` (a stopped
    turn, no eos)."""

    def __init__(self, chat: ChatFormat) -> None:
        self.turns = [chat.encode('<tool_call>{"name": "get_wifi_status", "arguments": {}}</tool_call>'),
                      chat.encode('<tool_call>{"name": "set_wifi_status", "arguments": {"on": true}}</tool_call>')]
        self.extended: list[list[int]] = []

    def session(self, prompts):
        engine = self

        class Session:
            keys, turn = list(prompts), 0

            def extend(self, key, tokens):
                engine.extended.append(list(tokens))

            def drop(self, keys):
                self.keys = [k for k in self.keys if k not in keys]

            def generate(self):
                self.turn += 1
                return {k: Generated(list(engine.turns[self.turn - 1]), False, True) for k in self.keys}

        return Session()

    def sync(self, model, step) -> None:
        pass


def test_a_stopped_turn_is_not_a_cut_turn_and_its_eos_is_env_text(chat, wifi_env) -> None:
    engine = StoppingEngine(chat)
    with EnvPool(wifi_env, sandbox="bwrap") as pool:
        [rollout], _ = collect_groups(engine, chat, pool, [2], 1, RolloutSettings(max_new_tokens=64, max_seq_len=2048))
    assert (rollout.reward, rollout.turns, rollout.cut_turns) == (1.0, 2, 0)
    check, switch = engine.turns
    [env] = engine.extended  # the tool result, opened by the eos the policy did not sample
    assert env[0] == chat.eos_id
    assert rollout.completion_ids == check + env + switch
    assert rollout.completion_mask == [1] * len(check) + [0] * len(env) + [1] * len(switch)


def test_summary_reports_the_share_of_iterations_that_trained_nothing() -> None:
    rows = [IterationMetrics(iteration=0, phase="warm_start", trained_rollouts=0)]  # warm-start rows do not count
    rows += [IterationMetrics(iteration=i, trained_rollouts=n) for i, n in enumerate([0, 12, 0, 0, 5])]
    assert summary(rows)["trained_nothing_share"] == pytest.approx(3 / 5)
    assert summary([])["trained_nothing_share"] is None
