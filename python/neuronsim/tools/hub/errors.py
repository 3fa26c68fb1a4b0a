"""The error of the hub tool."""

from __future__ import annotations


class HubError(RuntimeError):
    """A stand-in could not be written; the message says what and why."""
