"""The validation gate: checks that decide whether an env is safe to train on and gives GRPO a signal."""
