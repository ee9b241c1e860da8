"""LSF's alternative names of its built-in load indices.

Sources (IBM Spectrum LSF 10.1 documentation):

- "Selection string" (https://www.ibm.com/docs/SSWRJV_10.1.0/lsf_admin/select_string.html):
  "The resource names swap, idle, login, and cpu are accepted as aliases for
  swp, it, ls, and r1m respectively."
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ALIASES",
    "canonical_name",
]

ALIASES: Final = {"swap": "swp", "idle": "it", "login": "ls", "cpu": "r1m"}


def canonical_name(name: str) -> str:
    """The load index an alias names (``cpu`` → ``r1m``); other names unchanged."""
    return ALIASES.get(name, name)
