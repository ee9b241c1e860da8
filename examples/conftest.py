"""pytest collects ``examples/`` for the user-style tests there.

``plugins/`` is a separate installable package; its tests live in
``tests/examples/`` (they need no install), so it is not collected from here.
"""

collect_ignore = ["plugins"]
