"""Hypothesis strategies and properties for validating envs."""
