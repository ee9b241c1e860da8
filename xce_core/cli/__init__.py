"""The ``xce`` command line: ``xce run`` (the standalone event consumer),
``xce simulate`` and ``xce generate-trace``. It does I/O and uses only the
public names of :mod:`xce_core`, :mod:`xce_core.sim` and :mod:`events`."""

from xce_core.cli._main import main

__all__ = ["main"]
