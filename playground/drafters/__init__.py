"""Drafters: propose tokens for the target to verify (see ``base.Drafter``)."""

from playground.drafters.base import Draft, Drafter, TargetState

__all__ = ["Draft", "Drafter", "TargetState"]
