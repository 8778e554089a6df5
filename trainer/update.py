"""Host side: turn rollouts into optimizer steps - GRPO's clipped objective, or supervised steps for warm starts.

Works the same in one process and under ``accelerate launch``: every rank rolls out its own groups, the
batch average is over the kept trajectories of *all* ranks (each rank scales its sum by world / total),
and every rank runs the same number of micro-batches (a rank with fewer pads with zero-weight ones), so
gradient synchronisation never waits on a rank that has nothing to say.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from trainer.config import GRPOSettings
from trainer.grpo import group_advantages, grpo_loss, per_trajectory_mean
from trainer.prefix import owners, shared_prefixes, worth_sharing
from trainer.rollout import Rollout

LossFn = Callable[[dict[str, torch.Tensor], list["Item"], torch.Tensor], tuple[torch.Tensor, dict[str, float]]]
"""(batch, items, log-probs) -> (per-trajectory losses [len(items)], statistics to add up)."""


@dataclass
class Item:
    """One trajectory to learn from: its tokens, which are trained on, and its advantage."""

    ids: list[int]
    mask: list[int]
    advantage: float = 0.0
    old_logp: torch.Tensor | None = None
    ref_logp: torch.Tensor | None = None


@dataclass
class StepStats:
    loss: float = 0.0
    tokens: int = 0
    clipped: int = 0
    kl: float = 0.0
    logprob_sum: float = 0.0
    optimizer_steps: int = 0
    trajectories: int = 0
    grad_norms: list[float] = field(default_factory=list)


def build_items(rollouts: list[Rollout], settings: GRPOSettings) -> tuple[list[Item], int, int]:
    """(kept items with advantages, groups, zero-variance groups). Advantages use a group's valid rollouts
    only (an episode cut at the context limit or broken by infrastructure has no reward to compare); a
    group with fewer than two valid rollouts, or whose rewards are all equal, is dropped and counted."""
    by_group: dict[int, list[Rollout]] = {}
    for rollout in rollouts:
        by_group.setdefault(rollout.group, []).append(rollout)
    items, flat = [], 0
    for members in by_group.values():
        valid = [r for r in members if r.trainable]
        if len(valid) < 2:
            flat += 1
            continue
        rewards = torch.tensor([[r.reward for r in valid]], dtype=torch.float64)
        advantages, informative = group_advantages(rewards, settings.advantage_eps, settings.zero_variance_tol)
        if not bool(informative[0]):
            flat += 1
            continue
        for rollout, advantage in zip(valid, advantages[0].tolist()):
            ids, mask = rollout.sequence()
            if any(mask):
                items.append(Item(ids, mask, advantage))
    return items, len(by_group), flat


def pack(items: list[Item], pad_id: int, device: torch.device) -> dict[str, torch.Tensor]:
    """Right-padded batch plus the (row, column) of every trained token."""
    width = max(len(item.ids) for item in items)
    ids = torch.full((len(items), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(items), width), dtype=torch.long)
    rows, cols = [], []
    for row, item in enumerate(items):
        ids[row, : len(item.ids)] = torch.tensor(item.ids, dtype=torch.long)
        attention[row, : len(item.ids)] = 1
        for col, trained in enumerate(item.mask):
            if trained and col > 0:
                rows.append(row)
                cols.append(col)
    return {
        "input_ids": ids.to(device),
        "attention_mask": attention.to(device),
        "rows": torch.tensor(rows, dtype=torch.long, device=device),
        "cols": torch.tensor(cols, dtype=torch.long, device=device),
    }


def pack_shared(items: list[Item], pad_id: int, device: torch.device) -> dict[str, torch.Tensor] | None:
    """The batch with every shared token prefix stored once (None when no two items share one).

    ``prefix_ids`` [C, P]: one right-padded row per prefix; ``input_ids`` [N, S]: each item's tail after
    its prefix, right-padded, with explicit ``position_ids``; ``prefix_of`` [N]: each item's prefix row;
    for every trained token in the order :func:`pack` gives them, ``rows`` (its item), ``targets`` (the
    token) and ``source`` (which hidden state predicts it, in the [C*P + N*S] table of prefix then tail
    states).
    """
    clusters = shared_prefixes([item.ids for item in items], keep=1)
    if not worth_sharing(clusters):
        return None
    owner = owners(clusters, len(items))
    width = max(c.length for c in clusters)
    tail = max(len(item.ids) - clusters[owner[i]].length for i, item in enumerate(items))
    prefix_ids = torch.full((len(clusters), width), pad_id, dtype=torch.long)
    prefix_mask = torch.zeros((len(clusters), width), dtype=torch.long)
    for row, cluster in enumerate(clusters):
        prefix_ids[row, : cluster.length] = torch.tensor(items[cluster.members[0]].ids[: cluster.length], dtype=torch.long)
        prefix_mask[row, : cluster.length] = 1
    ids = torch.full((len(items), tail), pad_id, dtype=torch.long)
    mask = torch.zeros((len(items), tail), dtype=torch.long)
    positions = torch.zeros((len(items), tail), dtype=torch.long)
    rows, source, targets = [], [], []
    for row, item in enumerate(items):
        start = clusters[owner[row]].length
        ids[row, : len(item.ids) - start] = torch.tensor(item.ids[start:], dtype=torch.long)
        mask[row, : len(item.ids) - start] = 1
        positions[row] = torch.arange(start, start + tail)
        for col, trained in enumerate(item.mask):
            if trained and col > 0:
                rows.append(row)
                targets.append(item.ids[col])
                before = col - 1  # the position whose hidden state predicts the token
                source.append(owner[row] * width + before if before < start
                              else len(clusters) * width + row * tail + before - start)
    as_tensor = lambda values: torch.tensor(values, dtype=torch.long, device=device)  # noqa: E731
    return {
        "input_ids": ids.to(device), "attention_mask": mask.to(device), "position_ids": positions.to(device),
        "prefix_ids": prefix_ids.to(device), "prefix_mask": prefix_mask.to(device), "prefix_of": as_tensor(owner),
        "rows": as_tensor(rows), "source": as_tensor(source), "targets": as_tensor(targets),
    }


class PolicyUpdate:
    """Optimizer steps on a prepared :class:`~trainer.logprobs.TokenLogProbs` module."""

    def __init__(self, accelerator: Any, module: Any, optimizer: Any, settings: GRPOSettings, pad_id: int,
                 share_prefix: bool = True) -> None:
        self.accelerator = accelerator
        self.module = module
        self.optimizer = optimizer
        self.settings = settings
        self.pad_id = pad_id
        self.share_prefix = share_prefix

    def pack(self, items: list[Item]) -> dict[str, torch.Tensor]:
        """A micro-batch: shared prefixes computed once where items share one and the module can."""
        if self.share_prefix and self.accelerator.unwrap_model(self.module).shares_prefix():
            shared = pack_shared(items, self.pad_id, self.device)
            if shared is not None:
                return shared
        return pack(items, self.pad_id, self.device)

    @property
    def device(self) -> torch.device:
        return self.accelerator.device

    def reduce(self, value: float, op: str = "sum") -> float:
        if self.accelerator.num_processes == 1:
            return float(value)
        tensor = torch.tensor([float(value)], device=self.device)
        return float(self.accelerator.reduce(tensor, reduction=op).item())

    @torch.no_grad()
    def score(self, items: list[Item], use_adapter: bool = True) -> list[torch.Tensor]:
        """Per-token log-probs of each item's trained tokens under the current (or the base) weights."""
        module = self.accelerator.unwrap_model(self.module)
        out: list[torch.Tensor] = []
        for start in range(0, len(items), self.settings.micro_batch_size):
            chunk = items[start: start + self.settings.micro_batch_size]
            batch = self.pack(chunk)
            logp = module(**batch, use_adapter=use_adapter)
            out.extend(logp[batch["rows"] == row].detach() for row in range(len(chunk)))
        return out

    def _optimizer_step(self, items: list[Item], filler: Item, loss_fn: LossFn, stats: StepStats, per_token: bool = False) -> None:
        """One optimizer step over ``items`` (this rank's share of a batch shared by all ranks). The per-trajectory
        losses are averaged over the step's trajectories, or with ``per_token`` (their token sums) over its trained
        tokens, on all ranks together (DDP averages gradients, hence the number of processes)."""
        total = self.reduce(len(items))
        if total == 0:
            return
        if per_token:
            total = self.reduce(sum(sum(1 for m in item.mask if m) for item in items))
        scale = self.accelerator.num_processes / max(total, 1)
        size = self.settings.micro_batch_size
        batches = [(items[i: i + size], 1.0) for i in range(0, len(items), size)]
        most = int(self.reduce(len(batches), "max"))
        batches += [([filler], 0.0)] * (most - len(batches))
        for index, (chunk, flag) in enumerate(batches):
            batch = self.pack(chunk)
            sync = index == len(batches) - 1
            with nullcontext() if sync else self.accelerator.no_sync(self.module):
                logp = self.module(**batch)
                per_trajectory, parts = loss_fn(batch, chunk, logp)
                loss = per_trajectory.sum() * (scale * flag)
                self.accelerator.backward(loss)
            stats.loss += float(loss.detach()) / self.accelerator.num_processes
            if flag:
                for key, value in parts.items():
                    setattr(stats, key, getattr(stats, key) + value)
        if self.settings.max_grad_norm is not None:
            norm = self.accelerator.clip_grad_norm_(self.module.parameters(), self.settings.max_grad_norm)
            stats.grad_norms.append(float(norm))
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        stats.optimizer_steps += 1
        stats.trajectories += len(items)

    def grpo(self, items: list[Item], filler: Item, generator: torch.Generator | None = None) -> StepStats:
        """Clipped-ratio GRPO on kept trajectories: ``epochs`` passes of ``steps_per_iteration`` optimizer
        steps. Old log-probs are the pre-update policy's; with a single step they are the current weights
        (detached), so the ratio is 1 and only its gradient acts."""
        s = self.settings
        multi = s.steps_per_iteration * s.epochs > 1
        if multi and items:
            for item, logp in zip(items, self.score(items)):
                item.old_logp = logp
        if s.kl_coef > 0 and items:
            for item, logp in zip(items, self.score(items, use_adapter=False)):
                item.ref_logp = logp

        def loss_fn(batch: dict[str, torch.Tensor], chunk: list[Item], logp: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
            old = torch.cat([c.old_logp for c in chunk]) if all(c.old_logp is not None for c in chunk) else logp.detach()  # type: ignore[misc]
            ref = torch.cat([c.ref_logp for c in chunk]) if s.kl_coef > 0 and all(c.ref_logp is not None for c in chunk) else None  # type: ignore[misc]
            advantages = torch.tensor([c.advantage for c in chunk], device=logp.device, dtype=logp.dtype)
            parts = grpo_loss(logp, old, batch["rows"], advantages, s.epsilon, s.clip_high, s.kl_coef, ref,
                              token_sum=s.loss_type == "dapo")
            return parts.trajectory_losses, {
                "tokens": parts.tokens, "clipped": parts.clipped_tokens, "kl": parts.kl_sum,
                "logprob_sum": float(logp.detach().sum()),
            }

        stats = StepStats()
        generator = generator or torch.Generator().manual_seed(0)
        for epoch in range(s.epochs):
            order = torch.randperm(len(items), generator=generator).tolist() if epoch > 0 else list(range(len(items)))
            shuffled = [items[i] for i in order]
            per_step = -(-len(shuffled) // s.steps_per_iteration)
            for step in range(s.steps_per_iteration):
                self._optimizer_step(shuffled[step * per_step: (step + 1) * per_step], filler, loss_fn, stats,
                                     per_token=s.loss_type == "dapo")
        return stats

    def supervised(self, items: list[Item], filler: Item) -> StepStats:
        """One optimizer step of cross-entropy on the items' trained tokens (per trajectory, then batch)."""

        def loss_fn(batch: dict[str, torch.Tensor], chunk: list[Item], logp: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
            return per_trajectory_mean(-logp, batch["rows"], len(chunk)), {
                "tokens": int(logp.numel()), "logprob_sum": float(logp.detach().sum()),
            }

        stats = StepStats()
        self._optimizer_step(items, filler, loss_fn, stats)
        return stats
