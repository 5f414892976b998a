"""``diff`` and ``provenance``: placeholders until nodestep.history is merged."""

from __future__ import annotations

import click

__all__ = ["INSIGHT_COMMANDS"]

INSIGHT_COMMANDS: list[click.Command] = []
