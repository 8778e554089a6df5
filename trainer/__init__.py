"""Multi-turn GRPO with one LoRA adapter per capability (needs the ``train`` extra)."""
