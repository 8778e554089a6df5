"""Env SDK, Gymnasium wrapper and on-disk registry. Importing it registers stored envs with Gymnasium."""

from __future__ import annotations

from env_registry.registration import register_all
from env_registry.registry import IntegrityError, Registry, RegistryError, StoredEnv

__all__ = ["IntegrityError", "Registry", "RegistryError", "StoredEnv", "register_all"]

register_all()
