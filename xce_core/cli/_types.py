"""Option types shared by the commands."""

from __future__ import annotations

import math
from typing import Any

import click

__all__ = ["FloatRange"]


class FloatRange(click.FloatRange):
    """:class:`click.FloatRange` that also refuses NaN (which compares false
    with every bound, so click's range check lets it through): a usage error,
    exit status 2, never a crash later in the run."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if isinstance(number, float) and math.isnan(number):
            self.fail(f"{value!r} is not a number.", param, ctx)
        return number
