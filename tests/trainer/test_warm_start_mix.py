"""The warm start can make a base that uses the tools but mostly lacks the capability: a share of its
episodes are the env's capability-skipping solution (kept whatever their reward), the rest its reference."""

from __future__ import annotations

import pytest


def warm_start_batches(tmp_path, env_id: str, model, monkeypatch, share: float) -> list[str]:
    """The texts of every episode the warm start trained on, with ``warm_start.reference_share = share``."""
    from trainer.config import load_config
    from trainer.loop import GRPORun
    from trainer.update import PolicyUpdate

    texts: list[str] = []
    original = PolicyUpdate.supervised

    def spy(self, batch, filler):
        texts.extend(run.chat.tokenizer.decode(item.ids) for item in batch)
        return original(self, batch, filler)

    monkeypatch.setattr(PolicyUpdate, "supervised", spy)
    settings = ["threads=1", "sandbox='bwrap'", "rollout.max_seq_len=1024", "warm_start.steps=1", "warm_start.seeds=8",
                "warm_start.batch_size=8", f"warm_start.reference_share={share}", "heldout.seeds=0"]
    run = GRPORun(env_id, load_config(None, settings, model=str(model), output_dir=str(tmp_path / f"run-{share}"),
                                      **{"grpo.iterations": 1}))
    try:
        run.setup()
        run.warm_start()
    finally:
        run.close()
    return texts


@pytest.mark.parametrize(("share", "with_call"), [(1.0, 8), (0.25, 2), (0.0, 0)])
def test_the_warm_start_mixes_reference_and_capability_skipping_episodes(tmp_path, wifi_env, tiny_model, monkeypatch,
                                                                          share: float, with_call: int) -> None:
    texts = warm_start_batches(tmp_path, wifi_env, tiny_model, monkeypatch, share)
    assert len(texts) == 8  # skipping episodes (reward 0 here) are trained on too, not dropped as failed references
    # wifi_on's reference turns wifi on; its capability-skipping solution only says it did
    called = [text for text in texts if '<tool_call>{"name": "set_wifi_status"' in text]
    assert len(called) == with_call
    assert all("Your wifi is on now." in text for text in texts if text not in called)


def test_a_share_outside_zero_to_one_is_refused_in_one_line() -> None:
    from trainer.config import load_config
    from trainer.errors import TrainError

    with pytest.raises((TrainError, ValueError)) as caught:
        load_config(None, ["warm_start.reference_share=1.5"])
    assert "reference_share" in str(caught.value) and "\n" not in str(caught.value).strip()


def test_a_skipping_solution_that_fails_is_named_in_one_line(tmp_path, trainer_registry, tiny_model) -> None:
    from tests.conftest import TEST_ENVS
    from tests.trainer.conftest import register_env_file
    from trainer.envpool import EnvPool
    from trainer.errors import TrainError

    source = (TEST_ENVS / "wifi_on.py").read_text()
    broken = source.replace('return [sdk.say("Your wifi is on now.")]', 'raise RuntimeError("no skipping turns here")')
    assert broken != source
    (tmp_path / "wifi_broken_skip.py").write_text(broken.replace('capability = "wifi_on"', 'capability = "wifi_broken_skip"'))
    env_id = register_env_file(trainer_registry, tmp_path / "wifi_broken_skip.py", validate=False)
    pool = EnvPool(env_id, sandbox="bwrap")
    try:
        assert pool.reference_episode(1, "reference")["reward"] > 0  # the reference still plays
        with pytest.raises(TrainError) as caught:
            pool.reference_episode(1, "skipping")
    finally:
        pool.close()
    message = str(caught.value)
    assert "capability-skipping episode for seed 1" in message and "no skipping turns here" in message
    assert "\n" not in message
