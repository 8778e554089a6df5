"""Apply a routing decision with PEFT: every adapter is loaded once; a decision only switches between them.

- base model: adapter layers disabled (PEFT ``disable_adapter_layers``), so the output is the base model's
  exactly; nothing is unloaded.
- one adapter: ``set_adapter(name)``; nothing is merged into the base weights unless ``merge=True``.
- soft mix: PEFT ``add_weighted_adapter(..., combination_type="cat")``. Concatenating the scaled LoRA
  factors gives delta W = sum_c w_c * B_c A_c exactly (rank = the sum of the ranks), which is the paper's
  composition rule; the ``linear`` type would add cross terms B_i A_j. Mixes are kept by their weights (a
  few at a time) so a repeated decision costs nothing.

    adapters = AdapterSet.load(base_model, {"precondition_verification": "adapters/precondition_verification"})
    router = Router(adapters.model, tokenizer, menu)
    with adapters.applied(router.route(task)):
        output = adapters.model.generate(...)
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from router.errors import AdapterError
from router.frozen import merged_adapters
from router.schema import RouteDecision

MIX_PREFIX = "mix_"


def _weights_of(decision: RouteDecision | str | None) -> dict[str, float]:
    if decision is None:
        return {}
    if isinstance(decision, str):
        return {decision: 1.0}
    return dict(decision.weights)


class AdapterSet:
    """A PEFT model holding every capability's adapter, switched per decision."""

    def __init__(self, model: Any, names: list[str], merge: bool = False, max_mixes: int = 4) -> None:
        self.model = model
        self.names = list(names)
        self.merge = merge
        self.max_mixes = max_mixes
        self._mixes: OrderedDict[str, None] = OrderedDict()
        self.active: str | None = None
        self._disable()

    @classmethod
    def load(cls, base_model: Any, adapters: Mapping[str, str | Path], merge: bool = False) -> "AdapterSet":
        """Wrap ``base_model`` (in place) and load each adapter folder under its capability's name."""
        from peft import PeftModel

        if not adapters:
            raise AdapterError("no adapters to load; pass at least one PEFT adapter folder")
        items = list(adapters.items())
        try:
            name, path = items[0]
            model = PeftModel.from_pretrained(base_model, str(path), adapter_name=name, is_trainable=False)
            for name, path in items[1:]:
                model.load_adapter(str(path), adapter_name=name, is_trainable=False)
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            raise AdapterError(
                f"adapter {name!r} at {path} could not be loaded onto the base model "
                f"({type(exc).__name__}: {' '.join(str(exc).split())[:300]}); it must be a PEFT LoRA adapter "
                f"trained on this base model"
            ) from None
        model.eval()
        return cls(model, [n for n, _ in items], merge=merge)

    # -- state ----------------------------------------------------------------------------------
    def _unmerge(self) -> None:
        if merged_adapters(self.model):
            self.model.unmerge_adapter()

    def _disable(self) -> None:
        self._unmerge()
        self.model.base_model.disable_adapter_layers()
        self.active = None

    def _activate(self, name: str) -> None:
        self._unmerge()
        self.model.base_model.enable_adapter_layers()
        self.model.set_adapter(name)
        if self.merge:
            self.model.merge_adapter([name])
        self.active = name

    def _mix(self, weights: dict[str, float]) -> str:
        """The name of a ``cat`` mix of these adapters with these weights, created on first use."""
        unknown = sorted(set(weights) - set(self.names))
        if unknown:
            raise AdapterError(f"no adapter loaded for {', '.join(unknown)}; loaded: {', '.join(self.names)}")
        items = sorted((k, round(v, 6)) for k, v in weights.items())
        name = MIX_PREFIX + hashlib.sha256(json.dumps(items).encode()).hexdigest()[:12]
        if name in self._mixes:
            self._mixes.move_to_end(name)
            return name
        while len(self._mixes) >= self.max_mixes:
            old, _ = self._mixes.popitem(last=False)
            if old != self.active:
                self.model.delete_adapter(old)
        try:
            self.model.add_weighted_adapter(
                adapters=[k for k, _ in items], weights=[v for _, v in items], adapter_name=name, combination_type="cat"
            )
        except ValueError as exc:
            raise AdapterError(f"cannot mix adapters {', '.join(k for k, _ in items)}: {exc}") from None
        self._mixes[name] = None
        return name

    def apply(self, decision: RouteDecision | str | None) -> str | None:
        """Make the model follow ``decision`` (a decision, a capability name, or None for the base model).
        Returns the active PEFT adapter name (a mix's generated name in soft mode), or None."""
        weights = _weights_of(decision)
        if not weights:
            self._disable()
            return None
        if len(weights) == 1:
            (name,) = weights
            if name not in self.names:
                raise AdapterError(f"no adapter loaded for {name!r}; loaded: {', '.join(self.names)}")
            self._activate(name)
            return name
        name = self._mix(weights)
        self._activate(name)
        return name

    @contextmanager
    def applied(self, decision: RouteDecision | str | None) -> Iterator[Any]:
        """``with adapters.applied(decision) as model:`` then back to the base model."""
        self.apply(decision)
        try:
            yield self.model
        finally:
            self._disable()

    def export(self, decision: RouteDecision | str, out_dir: str | Path) -> Path:
        """Write the adapter a decision applies (a soft mix included) as a PEFT folder, e.g. for vLLM,
        which applies exactly one LoRA per request."""
        name = self.apply(decision)
        if name is None:
            raise AdapterError("a base-model decision has no adapter to export")
        out = Path(out_dir)
        self.model.save_pretrained(str(out), selected_adapters=[name])
        nested = out / name  # PEFT writes non-default adapters into a subfolder
        return nested if (nested / "adapter_config.json").exists() else out
