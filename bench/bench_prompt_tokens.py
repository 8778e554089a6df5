"""Synthesis prompt size per target, in tokens, and how much of it is the worked example and the kit reference.

    PYTHONPATH=$PWD python bench/bench_prompt_tokens.py [--json out.json]

Counts with the o200k_base encoding (GPT-4o's), read offline from the ``bpe-openai`` package, pinned in the
``dev`` extra that ``bash scripts/setup.sh --dev`` installs (tiktoken itself would download the encoding
file). The product never imports it. The script uses only the public prompt API (``generation_prompt``,
``example_blueprint``), so it runs unchanged on older trees for before/after figures. The reply budget is the
synthesis loop's ``MAX_REPLY_TOKENS``. Not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from factory.synthesis import prompts  # noqa: E402
from factory.synthesis.loop import MAX_REPLY_TOKENS  # noqa: E402
from schemas.capability import Capability  # noqa: E402
from schemas.targets import load_target  # noqa: E402
from schemas.validation import ValidationConfig  # noqa: E402

TARGETS = ("tau2-airline", "tau2-retail", "toolsandbox")
CAPABILITY = Capability(name="escalation_judgment", description=(
    "Knowing when a request is outside what the agent may do and handing it to a human agent instead of acting "
    "or refusing vaguely."))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    try:
        import bpe_openai
    except ImportError:
        sys.exit("bench_prompt_tokens needs the dev extra's offline o200k_base tokenizer: bash scripts/setup.sh --dev "
                 "(or pip install -e '.[dev]')")
    encoding = bpe_openai.get_encoding("o200k_base")

    def tokens(text: str) -> int:
        return len(encoding.encode(text))

    rows = []
    for target in TARGETS:
        prompt = prompts.generation_prompt(CAPABILITY, load_target(target), ValidationConfig())
        example_name, example = prompts.example_blueprint(target)
        kit = prompts.kit_reference(target) if hasattr(prompts, "kit_reference") else ""
        rows.append({"target": target, "prompt_tokens": tokens(prompts.SYSTEM_PROMPT) + tokens(prompt),
                     "example": example_name, "example_tokens": tokens(example), "example_lines": example.count("\n"),
                     "kit_reference_tokens": tokens(kit) if kit else 0, "reply_budget": MAX_REPLY_TOKENS})
    print(f"{'target':<14} {'prompt':>7} {'example':>8} {'(lines)':>8} {'kit ref':>8}  example/budget")
    for row in rows:
        print(f"{row['target']:<14} {row['prompt_tokens']:>7} {row['example_tokens']:>8} {row['example_lines']:>8} "
              f"{row['kit_reference_tokens']:>8}  {row['example_tokens'] / row['reply_budget']:.0%}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
