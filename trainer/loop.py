"""Host side: one GRPO run on one registered env - setup, optional warm start, iterations, held-out
evaluations, checkpoints.

Each iteration draws G seeds (the same on every rank; rank r takes groups r, r + W, ...), rolls out K
episodes per seed in the pooled sandboxed envs, computes group-relative advantages, drops zero-variance
groups, and takes the clipped-ratio update. An iteration with too few rollouts with a valid reward is
rolled out again (``rollout.retries``), then marked and not trained on. Held-out seeds (never trained on)
are evaluated before the first iteration, every ``heldout.every`` and after the last. The policy is put
in train mode for every update and in eval mode for every generation, explicitly. Metrics go to
``metrics.jsonl`` (and trackers), checkpoints every iteration on small runs (``trainer.stop.CheckpointClock``),
the adapter to ``adapter/`` in PEFT's format with ``trained_prompt.json`` (how its conversations were
rendered, so ``factory rollout``/``factory eval`` render them the same way). A stop (SIGTERM, Ctrl-C) ends
the run at a safe point with a checkpoint (``trainer.stop``).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from env_registry.conversation import TrainedPrompt
from trainer import checkpoint as ckpt
from trainer.chat import ChatFormat
from trainer.config import TrainConfig
from trainer.envpool import EnvPool
from trainer.errors import TrainError
from trainer.logprobs import TokenLogProbs
from trainer.heldout import evaluate as evaluate_heldout
from trainer.model import attach_adapter, load_base, mode, trainable_parameters
from trainer.report import (
    CURVE_FILE,
    IterationMetrics,
    append_metrics,
    plot_curve,
    read_metrics,
    rewrite_metrics,
    summary,
    write_json,
)
from trainer.rollout import Rollout, collect_groups, hint_from_reference
from trainer.seeds import window
from trainer.stop import CheckpointClock, StopSignal, TrainingStopped, is_abandon
from trainer.update import Item, PolicyUpdate, StepStats, build_items
from trainer.warmstart import warm_episodes


@dataclass
class RunResult:
    env_id: str
    output_dir: str
    adapter_dir: str | None = None
    curve: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)


def make_accelerator(config: TrainConfig) -> Any:
    from accelerate import Accelerator

    trackers = list(config.trackers)
    for name, module in (("tensorboard", "tensorboard"), ("wandb", "wandb")):
        if name in trackers:
            try:
                __import__(module if name != "tensorboard" else "torch.utils.tensorboard")
            except ImportError:
                raise TrainError(f"tracker {name!r} needs the {module} package: pip install {module}") from None
    return Accelerator(log_with=trackers or None, project_dir=config.output_dir or "runs", cpu=not torch.cuda.is_available())


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value if isinstance(value, (int, float, str, bool)) else str(value)
    return out


class GRPORun:
    """Train one adapter on ``env_id``. ``on_iteration`` sees every metrics row (progress bars)."""

    def __init__(
        self, env_id: str, config: TrainConfig, accelerator: Any = None,
        on_iteration: Callable[[IterationMetrics], None] | None = None,
    ) -> None:
        self.env_id = env_id
        self.config = config
        self.out = Path(config.output_dir or Path("runs") / env_id.removeprefix("trace/").rsplit("-v", 1)[0])
        self.accelerator = accelerator or make_accelerator(config)
        self.on_iteration = on_iteration or (lambda row: None)
        self.start = 0
        self.rows: list[IterationMetrics] = []
        self.stop = StopSignal()  # replaced by an active one for the span of train()

    # --- setup --------------------------------------------------------------------------------
    def setup(self, resume: bool | str = False) -> None:
        c, acc = self.config, self.accelerator
        if c.threads:
            torch.set_num_threads(c.threads)
        found = ckpt.resume_point(self.out, self.env_id, c, resume, clear=acc.is_main_process)  # refused before the model loads
        base, tokenizer = load_base(c)
        self.policy = attach_adapter(base, c.lora, found / "adapter" if found else None, seed=c.seed)
        if c.grpo.gradient_checkpointing:
            base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            self.policy.enable_input_require_grads()
        self.chat = ChatFormat(tokenizer, c.rollout.compact_tools)
        module = TokenLogProbs(self.policy, c.grpo.logprob_chunk, c.rollout.temperature)
        optimizer = torch.optim.AdamW(trainable_parameters(self.policy), lr=c.grpo.lr, betas=c.grpo.betas,
                                      weight_decay=c.grpo.weight_decay)
        self.module, self.optimizer = acc.prepare(module, optimizer)
        self.update = PolicyUpdate(acc, self.module, self.optimizer, c.grpo, self.chat.pad_id)
        self.policy.eval()  # at rest in eval mode (enabling checkpointing or preparing may switch it): updates switch explicitly
        self.engine = self._engine()
        from trainer.engines import TransformersEngine

        self.eval_engine = TransformersEngine(self.policy, self.chat, c.heldout.temperature, c.rollout.max_new_tokens,
                                              merge_adapter=self._merge_adapter())
        self.pool = EnvPool(self.env_id, sandbox=c.sandbox, workers=c.rollout.env_workers, max_steps=c.rollout.max_steps,
                            audit_share=c.audit.share, audit_dir=str(self.out / "audit"))
        self.seeds: dict[str, list[int]] = {}  # each window's seeds, chosen once (trainer.seeds)
        self.order = torch.Generator().manual_seed(c.seed)
        if found is not None:
            state = ckpt.restore(found, self.optimizer, acc)
            self.start = int(state["iteration"]) + 1
            self.order.set_state(torch.tensor(state["order"], dtype=torch.uint8))
            self.rows = [r for r in read_metrics(self.out) if r.phase == "warm_start" or r.iteration < self.start
                         or (r.phase in ("heldout", "validation") and r.iteration <= self.start)]
        else:
            random.seed(c.seed + acc.process_index)
            torch.manual_seed(c.seed * 1009 + acc.process_index)
        if acc.is_main_process:
            self.out.mkdir(parents=True, exist_ok=True)
            rewrite_metrics(self.out, self.rows)
            write_json(self.out / ckpt.RUN_FILE, {"env_id": self.env_id, "config": c.model_dump(mode="json")})
        if c.trackers:
            acc.init_trackers(c.project, config=_flat(c.model_dump(mode="json")))

    def _engine(self) -> Any:
        r = self.config.rollout
        if r.engine == "vllm":
            from trainer.vllm_engine import VLLMEngine

            return VLLMEngine(self.config, self.chat, self.out / "vllm-adapters")
        from trainer.engines import TransformersEngine

        return TransformersEngine(self.policy, self.chat, r.temperature, r.max_new_tokens, merge_adapter=self._merge_adapter())

    def _merge_adapter(self) -> bool:
        """``rollout.merge_adapter`` (trainer.engines.merged_adapter): generate with the adapter folded in."""
        return self.config.rollout.merge_adapter

    def window(self, name: str, count: int) -> list[int]:
        """A seed window (``trainer.seeds``), chosen once per run: by variant it costs one generate per candidate."""
        if name not in self.seeds:
            self.seeds[name] = window(self.config, name, count, self.pool)
        return self.seeds[name]

    # --- warm start ---------------------------------------------------------------------------
    def warm_start(self) -> None:
        """Supervised steps on the env's reference solutions, so a policy that cannot yet write a tool
        call gets rewards with variance; with ``reference_share`` < 1 also on its capability-skipping ones; or,
        by ``warm_start.source``, on episodes that do not show the capability (``trainer.warmstart``).
        Only on a fresh run (a resumed adapter already has it)."""
        w, acc = self.config.warm_start, self.accelerator
        if not w.steps or self.start > 0:
            return
        items = []
        for played in warm_episodes(self.config, self.env_id, self.pool, self.window("warm_start", w.seeds),
                                    acc.process_index, acc.num_processes):  # which episodes: trainer.warmstart
            ids, mask, _ = self.chat.conversation_ids(played["messages"], played["tools"])
            items.append(Item(ids, mask))
        if not self.update.reduce(len(items)):
            raise TrainError(f"{self.env_id}: no reference solution reached reward "
                             f"{self.pool.success_at(self.config.rollout.success_reward):g}; "
                             "the env cannot warm-start a policy (validate it with `factory validate`)")
        optimizer = torch.optim.AdamW(trainable_parameters(self.policy), lr=w.lr, betas=self.config.grpo.betas)
        supervised = PolicyUpdate(acc, self.module, acc.prepare(optimizer), self.config.grpo, self.chat.pad_id)
        pick = random.Random(self.config.seed)
        for step in range(w.steps):
            started = time.perf_counter()
            batch = pick.sample(items, min(w.batch_size, len(items))) if items else []
            with mode(self.policy, True):
                stats = supervised.supervised(batch, self._filler([]))
            tokens = self.update.reduce(stats.tokens)
            row = IterationMetrics(iteration=step, phase="warm_start", loss=self.update.reduce(stats.loss),
                                   logprob_mean=self.update.reduce(stats.logprob_sum) / tokens if tokens else None,
                                   trained_rollouts=int(self.update.reduce(stats.trajectories)),
                                   seconds=time.perf_counter() - started)
            self._record(row)

    # --- one iteration ------------------------------------------------------------------------
    def _filler(self, rollouts: list[Rollout]) -> Item:
        """A zero-weight micro-batch for a rank with fewer micro-batches: any sequence with a trained token."""
        for rollout in rollouts:
            ids, mask = rollout.sequence()
            if any(mask):
                return Item(ids, mask)
        return Item([self.chat.pad_id, self.chat.eos_id], [0, 1])

    def iteration(self, i: int) -> IterationMetrics:
        c, acc = self.config, self.accelerator
        started = time.perf_counter()
        all_seeds = self.window("grpo", c.grpo.iterations * c.grpo.groups)[i * c.grpo.groups:(i + 1) * c.grpo.groups]
        seeds = all_seeds[acc.process_index:: acc.num_processes]
        hints = None
        if c.rollout.hint.share > 0:
            if c.rollout.hint.source == "text":
                hints = {s: c.rollout.hint.text for s in seeds}
            else:
                hints = {s: hint_from_reference(self.pool.reference_episode(s)["messages"]) for s in seeds}
        replayed, crashes = self.pool.replayed, len(self.pool.crashes)
        retries = 0
        while True:
            with mode(self.policy, False):
                rollouts, stats = collect_groups(self.engine, self.chat, self.pool, seeds, c.grpo.group_size, c.rollout, hints)
            valid = self.update.reduce(sum(r.trainable for r in rollouts))
            enough = valid >= c.rollout.min_valid_share * self.update.reduce(len(rollouts))
            if enough or retries >= c.rollout.retries:
                break
            retries += 1
        items, groups, flat = build_items(rollouts, c.grpo) if enough else ([], len(seeds), len(seeds))
        update_started = time.perf_counter()
        with self.stop.deferred():  # a stop never cuts an update in half: it waits for the iteration's end
            with mode(self.policy, True):
                step = self.update.grpo(items, self._filler(rollouts), self.order)
            update_s = time.perf_counter() - update_started
            self.engine.sync(self.policy, i)
        row = self._metrics(i, rollouts, stats, step, items, groups, flat, update_s, time.perf_counter() - started)
        row.retries, row.incomplete = retries, not enough
        row.replayed = int(self.update.reduce(self.pool.replayed - replayed))
        row.worker_failure = next(iter(self.pool.crashes[crashes:]), None)
        return row

    def heldout(self, done: int) -> IterationMetrics | None:
        """The held-out evaluation after ``done`` GRPO updates (each rank takes its share of the seeds)."""
        from accelerate.utils import gather_object

        from trainer.heldout import summarise

        c, acc = self.config, self.accelerator
        if not c.heldout.seeds and not c.validation.seeds:
            return None
        phase = "validation" if c.validation.seeds else "heldout"  # with a validation window, held-out is scored once, after the run
        seeds = self.window(phase, getattr(c, phase).seeds)[acc.process_index:: acc.num_processes]
        with mode(self.policy, False):
            result, rollouts = evaluate_heldout(self.eval_engine, self.chat, self.pool, c.heldout, c.rollout, seeds)
        if acc.num_processes > 1:
            rollouts = list(gather_object(rollouts))
            result = summarise(rollouts, self.pool.success_at(c.rollout.success_reward), self.update.reduce(result.seconds, "max"))
        return IterationMetrics(
            iteration=done, phase=phase, reward_mean=result.mean, reward_low=result.low, reward_high=result.high,
            success_rate=result.success_rate, valid_rollouts=result.valid, rollouts=result.episodes,
            infrastructure_errors=result.errors, first_error=next((r.error for r in rollouts if r.error), None),
            mean_turns=sum(r.turns for r in rollouts) / max(1, len(rollouts)), seconds=result.seconds,
            cut_turns=result.cut_turns, context_truncated=sum(r.termination == "context_limit" for r in rollouts),
        )

    def _metrics(self, i: int, rollouts: list[Rollout], stats: Any, step: StepStats, items: list[Item],
                 groups: int, flat: int, update_s: float, seconds: float) -> IterationMetrics:
        from accelerate.utils import gather_object

        def gathered(values: list[float]) -> list[float]:
            return list(gather_object(values)) if self.accelerator.num_processes > 1 else values

        valid = [r for r in rollouts if r.trainable]
        own = gathered([r.reward for r in valid if not r.hinted])
        hinted = gathered([r.reward for r in valid if r.hinted])
        red = self.update.reduce
        tokens = red(step.tokens)
        trained = red(step.trajectories)
        total_groups = int(red(groups))
        generation_s = red(stats.generation_seconds, "max")
        generated = int(red(stats.generated_tokens))
        env_s, wall_s = red(stats.env_seconds, "max"), red(seconds, "max")  # one collective each, used twice
        zero_variance, episodes = red(flat), red(len(rollouts))
        mean = sum(own) / len(own) if own else None
        return IterationMetrics(
            iteration=i,
            reward_mean=mean,
            valid_rollouts=len(own),
            reward_std=(sum((x - mean) ** 2 for x in own) / len(own)) ** 0.5 if own and mean is not None else None,
            success_rate=sum(x >= self.pool.success_at(self.config.rollout.success_reward) for x in own) / len(own) if own else None,
            hinted_reward_mean=sum(hinted) / len(hinted) if hinted else None,
            groups=total_groups,
            zero_variance_groups=int(zero_variance),
            zero_variance_share=zero_variance / total_groups if total_groups else 0.0,
            rollouts=int(episodes),
            trained_rollouts=int(red(len(items))),
            loss=red(step.loss) / max(1, step.optimizer_steps),
            clip_fraction=red(step.clipped) / tokens if tokens else 0.0,
            kl=red(step.kl) / trained if self.config.grpo.kl_coef > 0 and trained else None,
            logprob_mean=red(step.logprob_sum) / tokens if tokens else None,
            grad_norm=step.grad_norms[-1] if step.grad_norms else None,
            cut_turns=int(red(sum(r.cut_turns for r in rollouts))),
            context_truncated=int(red(sum(r.termination == "context_limit" for r in rollouts))),
            infrastructure_errors=int(red(sum(r.termination == "infrastructure_error" for r in rollouts))),
            first_error=next(iter(gathered([r.error for r in rollouts if r.error][:1])), None),
            max_steps_episodes=int(red(sum(r.termination == "max_steps" for r in rollouts))),
            mean_turns=red(sum(r.turns for r in rollouts)) / max(1, episodes),
            generated_tokens=generated,
            tokens_per_s=generated / generation_s if generation_s > 0 else 0.0,
            generation_s=generation_s,
            env_s=env_s,
            update_s=red(update_s, "max"),
            seconds=wall_s,
            env_share=env_s / wall_s if wall_s > 0 else 0.0,
        )

    def _record(self, row: IterationMetrics) -> None:
        self.rows.append(row)
        if self.accelerator.is_main_process:
            append_metrics(self.out, row)
        if self.config.trackers:
            prefix = {"warm_start": "warm_start/", "heldout": "heldout/", "validation": "validation/"}.get(row.phase, "train/")
            values = {prefix + k: v for k, v in row.model_dump(exclude={"phase", "iteration"}).items() if isinstance(v, (int, float))}
            self.accelerator.log(values, step=row.iteration if row.phase != "warm_start" else None)
        self.on_iteration(row)

    @property
    def trained_prompt(self) -> TrainedPrompt:
        """How this run rendered conversations (its ``ChatFormat``), recorded in every adapter folder it saves."""
        return TrainedPrompt(compact_tools=self.chat.compact_tools)

    def _checkpoint(self, i: int, rng: dict[str, Any] | None = None) -> None:
        ckpt.save(self.out, i, self.policy, self.optimizer, self.accelerator,
                  {"order": self.order.get_state().tolist(), "env_id": self.env_id}, self.config.keep_checkpoints, rng=rng,
                  prompt=self.trained_prompt)
        self.saved = i

    # --- the run ------------------------------------------------------------------------------
    def train(self, resume: bool | str = False, iterations: int | None = None) -> RunResult:
        """Run to ``config.grpo.iterations`` (or ``iterations`` more, for tests and benchmarks). ``resume``: see
        :func:`trainer.checkpoint.resume_point`. A signal ends it with :class:`trainer.stop.TrainingStopped`."""
        self.stop = StopSignal(abandon=self.accelerator.num_processes == 1)
        self.done = self.saved = self.current = -1
        self.rng_after_done: dict[str, Any] | None = None
        try:
            with self.stop:
                try:
                    return self._run(resume, iterations)
                except KeyboardInterrupt as exc:
                    if isinstance(exc, TrainingStopped) or not (is_abandon(exc) or self.stop.requested):
                        raise
                    self._stopped(exc, abandoned=self.current > self.done)
                    raise  # unreachable: _stopped raises
        finally:
            self.close()

    def _run(self, resume: bool | str, iterations: int | None) -> RunResult:
        self.setup(resume)
        self.done = self.saved = self.start - 1  # a resumed run's last iteration is checkpointed
        self.warm_start()
        self.engine.sync(self.policy, self.start)  # a separate engine (vLLM) samples from the adapter as it is now
        end = self.config.grpo.iterations if iterations is None else min(self.config.grpo.iterations, self.start + iterations)
        self._heldout_due(self.start, end)
        clock = CheckpointClock(self.config.save_every)
        for i in range(self.start, end):
            self.current = i
            row = self.iteration(i)
            with self.stop.deferred(half_applied_if_cut=False):  # the row is written exactly when the iteration counts as done
                self.done, self.rng_after_done = i, ckpt.rng_state()
                self._record(row)
            stopping = bool(self.update.reduce(float(self.stop.requested), "max"))  # every rank stops at the same iteration
            caught = self._audit_caught(wait=False)
            if clock.due(i, end) or stopping or caught:
                with clock.saving():
                    self._checkpoint(i)
            if caught:
                self._audit_stop(caught)
            if stopping:
                self._stopped(None, abandoned=False)
            self._heldout_due(i + 1, end)
        caught = self._audit_caught(wait=True)  # every replay under way has a verdict before the adapter is written
        if caught:
            if self.done > self.saved:
                self._checkpoint(self.done)
            self._audit_stop(caught)
        return self.finish()

    def _audit_caught(self, wait: bool) -> Exception | None:
        """The reward audit's mismatch, if any replay on a fresh worker paid otherwise (``env_registry.audit``);
        every rank learns of one on any rank, so all stop at the same iteration."""
        from env_registry.audit import AuditMismatch

        try:
            self.pool.audit_check(wait)
            found: Exception | None = None
        except AuditMismatch as exc:
            found = exc
        if self.update.reduce(float(found is not None), "max") and found is None:
            found = TrainError(f"{self.env_id}: the reward audit of another rank found a mismatch; see its message")
        return found

    def _audit_stop(self, caught: Exception) -> None:
        """Stop on an audit mismatch with its one line, saying what was kept (the last finished iteration)."""
        found = ckpt.latest(self.out)
        kept = f"; kept iteration {self.saved}'s checkpoint in {found}" if found is not None else ""
        caught.args = (f"{caught}{kept}",)
        raise caught

    def _stopped(self, exc: BaseException | None, abandoned: bool) -> None:
        """Checkpoint the last finished iteration (unless a second signal cut its update), then raise
        :class:`TrainingStopped`. Stopped before any iteration finished: the folder is left as it was found."""
        signum = self.stop.signum or getattr(exc, "signum", 2)
        if self.done > self.saved and not self.stop.cut and self.accelerator.num_processes == 1:
            self._checkpoint(self.done, rng=self.rng_after_done)
        found = ckpt.latest(self.out)
        if found is None and self.accelerator.is_main_process:
            for name in (ckpt.METRICS_FILE, ckpt.RUN_FILE):  # nothing to resume: a plain rerun must be able to start
                (self.out / name).unlink(missing_ok=True)
        raise TrainingStopped(signum, self.done, found, abandoned) from None

    def _heldout_due(self, done: int, end: int) -> None:
        """Evaluate the held-out seeds after ``done`` updates when due (first, every N, last) and not done yet."""
        every = self.config.heldout.every
        if done not in (self.start, end) and done % every:
            return
        if any(r.phase in ("heldout", "validation") and r.iteration == done for r in self.rows):
            return
        row = self.heldout(done)
        if row is not None:
            self._record(row)

    def finish(self) -> RunResult:
        result = RunResult(env_id=self.env_id, output_dir=str(self.out), summary=summary(self.rows))
        if self.accelerator.is_main_process:
            result.adapter_dir = str(ckpt.write_adapter(self.policy, self.out / "adapter", self.trained_prompt))
            curve = plot_curve(self.rows, self.out / CURVE_FILE, f"{self.env_id} - GRPO")
            result.curve = str(curve) if curve else None
            write_json(self.out / "summary.json", result.summary)
        self.accelerator.wait_for_everyone()
        return result

    def close(self) -> None:
        pool = getattr(self, "pool", None)
        if pool is not None:
            pool.close()
        if self.config.trackers:
            self.accelerator.end_training()
