"""Synchronises lint rules with the shared service."""
from .client import RuleClient

__all__ = ["RuleClient"]
