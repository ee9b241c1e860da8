"""Example xce plugins, registered through entry points (see ``pyproject.toml``).

- ``spread`` (group ``xce.allocators``): :class:`SpreadAllocator`, as many hosts
  as possible per job.
- ``smallest_first`` (group ``xce.pickers``): :class:`SmallestFirstPicker`, the
  narrowest jobs first.
"""

from xce_example_plugins.smallest_first import SmallestFirstPicker
from xce_example_plugins.spread import SpreadAllocator, spread_plans

__all__ = ["SmallestFirstPicker", "SpreadAllocator", "spread_plans"]
