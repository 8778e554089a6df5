"""Issue 35's protocol and warm start: a validation window apart from every other seed window (choices are made
on it, held-out seeds are scored once, at the end), and warm starts that do not show the capability -
'skipping' never plays a reference solution, 'other' plays only the OTHER capabilities' envs on the same target."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import TEST_ENVS

WINDOWS = ("grpo", "warm_start", "heldout", "validation")


@settings(max_examples=200, deadline=None)
@given(firsts=st.lists(st.integers(0, 400), min_size=4, max_size=4), counts=st.lists(st.integers(0, 60), min_size=4, max_size=4))
def test_an_accepted_config_never_lets_the_validation_window_meet_another(firsts: list[int], counts: list[int]) -> None:
    from trainer.config import load_config
    from trainer.errors import TrainError
    from trainer.seeds import window

    values = [f"first_env_seed={firsts[0]}", "grpo.groups=1", f"grpo.iterations={max(1, counts[0])}",
              f"warm_start.first_seed={firsts[1]}", f"warm_start.seeds={max(1, counts[1])}",
              f"heldout.first_seed={firsts[2]}", f"heldout.seeds={counts[2]}",
              f"validation.first_seed={firsts[3]}", f"validation.seeds={counts[3]}"]
    try:
        config = load_config(None, values)
    except (TrainError, ValueError) as exc:
        assert "overlap" in str(exc) and "\n" not in str(exc).strip()
        return
    sizes = {"grpo": config.grpo.iterations, "warm_start": config.warm_start.seeds,
             "heldout": config.heldout.seeds, "validation": config.validation.seeds}
    seen = {name: set(window(config, name, sizes[name])) for name in WINDOWS}
    assert len(seen["validation"]) == config.validation.seeds
    for other in ("grpo", "warm_start", "heldout"):
        assert not seen["validation"] & seen[other], other


def test_the_default_validation_window_is_apart_and_names_the_overlap() -> None:
    from trainer.config import load_config
    from trainer.errors import TrainError

    config = load_config(None, ["validation.seeds=16"])
    assert config.validation.first_seed not in range(config.heldout.first_seed, config.heldout.first_seed + config.heldout.seeds)
    with pytest.raises((TrainError, ValueError)) as caught:
        load_config(None, ["validation.seeds=16", "validation.first_seed=2000004"])
    assert "heldout seeds" in str(caught.value) and "validation seeds" in str(caught.value)


def test_the_plan_of_each_source() -> None:
    from trainer.errors import TrainError
    from trainer.warmstart import plan

    seeds = list(range(10))
    skipping = plan("skipping", 1.0, seeds, "trace/a-v0", ["trace/b-v0"])
    assert [p.policy for p in skipping] == ["skipping"] * 10 and {p.env_id for p in skipping} == {"trace/a-v0"}
    other = plan("other", 0.5, seeds, "trace/a-v0", ["trace/b-v0", "trace/c-v0"])
    shown = [p for p in other if p.policy == "reference"]
    assert len(shown) == 5 and [p.env_id for p in shown] == ["trace/b-v0", "trace/c-v0"] * 2 + ["trace/b-v0"]
    assert all(p.env_id == "trace/a-v0" for p in other if p.policy == "skipping")
    reference = plan("reference", 0.3, seeds, "trace/a-v0")
    assert sum(p.policy == "reference" for p in reference) == 3 and {p.env_id for p in reference} == {"trace/a-v0"}
    with pytest.raises(TrainError, match="no other capability"):
        plan("other", 1.0, seeds, "trace/a-v0", [])


def _variant(tmp_path, root, capability: str, target: str, prompt: str) -> str:
    from tests.trainer.conftest import register_env_file

    source = (TEST_ENVS / "wifi_on.py").read_text()
    changed = (source.replace('capability = "wifi_on"', f'capability = "{capability}"')
               .replace('target = "toolsandbox"', f'target = "{target}"')
               .replace('return "You operate the user\'s phone with tools."', f'return "{prompt}"'))
    assert changed.count(capability) == 1 and changed.count(prompt) == 1
    path = tmp_path / f"{capability}.py"
    path.write_text(changed)
    return register_env_file(root, path, validate=False)


@pytest.fixture(scope="module")
def domain(tmp_path_factory, trainer_registry, cancel_env) -> dict[str, str]:
    """A target and a sibling wifi env on toolsandbox; tiny_cancel is on another target (tau2-airline)."""
    tmp = tmp_path_factory.mktemp("domain35")
    return {
        "target": _variant(tmp, trainer_registry, "warm_target_thirtyfive", "toolsandbox", "TARGET operates the phone."),
        "sibling": _variant(tmp, trainer_registry, "warm_sibling_thirtyfive", "toolsandbox", "SIBLING operates the phone."),
        "far": cancel_env,
    }


def _text(episode: dict) -> str:
    return " ".join(str(m.get("content", "")) + str(m.get("tool_calls", "")) for m in episode["messages"])


def test_other_plays_only_the_other_capabilities_on_the_same_target(domain) -> None:
    from env_registry.registry import Registry
    from trainer.config import load_config
    from trainer.envpool import EnvPool
    from trainer.warmstart import other_capability_envs, play, plan, warm_episodes

    others = other_capability_envs(domain["target"])
    assert domain["sibling"] in others and domain["target"] not in others and domain["far"] not in others
    targets = {m.gym_id: m.target for m in Registry().manifests()}
    assert {targets[o] for o in others} == {"toolsandbox"}
    config = load_config(None, ["sandbox='bwrap'", "warm_start.source='other'", "warm_start.reference_share=0.5"])
    with EnvPool(domain["target"], sandbox="bwrap") as pool:
        kept = warm_episodes(config, domain["target"], pool, list(range(4)))  # the registry's own others
        assert {e["env_id"] for e in kept if e["policy"] == "reference"} <= set(others)
        kept = play(plan("other", 0.5, list(range(6)), domain["target"], [domain["sibling"]]), pool, 0.99, "bwrap")
    assert len(kept) == 6
    shown = [e for e in kept if e["policy"] == "reference"]
    assert len(shown) == 3 and all(e["env_id"] == domain["sibling"] and "SIBLING" in _text(e) for e in shown)
    assert all("set_wifi_status" in _text(e) for e in shown)  # the sibling's reference did play
    own = [e for e in kept if e["policy"] == "skipping"]
    assert len(own) == 3 and all(e["env_id"] == domain["target"] and "TARGET" in _text(e) for e in own)
    assert not any("set_wifi_status" in _text(e) for e in own)  # the target's capability is never shown


def test_a_skipping_warm_start_never_trains_on_a_reference_episode(tmp_path, domain, tiny_model, monkeypatch) -> None:
    """The whole run's warm start: with source 'skipping' and reference_share 1.0 (ignored) every episode it
    trains on is the capability-skipping one."""
    from trainer.config import load_config
    from trainer.loop import GRPORun
    from trainer.update import PolicyUpdate

    texts: list[str] = []
    original = PolicyUpdate.supervised

    def spy(self, batch, filler):
        texts.extend(run.chat.tokenizer.decode(item.ids) for item in batch)
        return original(self, batch, filler)

    monkeypatch.setattr(PolicyUpdate, "supervised", spy)
    settings_ = ["threads=1", "sandbox='bwrap'", "rollout.max_seq_len=1024", "warm_start.steps=1", "warm_start.seeds=6",
                 "warm_start.batch_size=6", "warm_start.reference_share=1.0", "warm_start.source='skipping'", "heldout.seeds=0"]
    run = GRPORun(domain["target"], load_config(None, settings_, model=str(tiny_model), output_dir=str(tmp_path / "run"),
                                                **{"grpo.iterations": 1}))
    try:
        run.setup()
        run.warm_start()
    finally:
        run.close()
    assert len(texts) == 6
    assert not any('<tool_call>{"name": "set_wifi_status"' in t for t in texts)
    assert all("Your wifi is on now." in t for t in texts)
