"""Plugin registry: allocators and pickers found by name.

Built-ins register exactly like third-party plugins, through the ``xce.allocators``
and ``xce.pickers`` entry point groups. A second plugin claiming a taken name is
refused with :class:`PluginError` naming both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

from xce_core._errors import PluginError
from xce_core._iterators import Allocator
from xce_core._pickers import Picker

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["ALLOCATOR_GROUP", "PICKER_GROUP", "Registry", "default_registry"]

ALLOCATOR_GROUP = "xce.allocators"
PICKER_GROUP = "xce.pickers"

T = TypeVar("T")


class _Table(Generic[T]):
    def __init__(self, kind: str, base: type) -> None:
        self.kind = kind
        self.base = base
        self.items: dict[str, T] = {}
        self.origins: dict[str, str | EntryPoint] = {}

    def add(self, name: str, plugin: T, origin: str | EntryPoint) -> None:
        if not isinstance(plugin, self.base):
            origin = _origin(origin)
            raise PluginError(
                f"{self.kind} plugin {name!r} from {origin} is a {type(plugin).__name__}, "
                f"not a {self.base.__name__}"
            )
        if name in self.items:
            raise PluginError(
                f"{self.kind} plugin name {name!r} is taken by {_origin(self.origins[name])}; "
                f"refusing the second one from {_origin(origin)}"
            )
        self.items[name] = plugin
        self.origins[name] = origin

    def get(self, name: str) -> T:
        try:
            return self.items[name]
        except KeyError:
            known = ", ".join(sorted(self.items)) or "none"
            raise PluginError(f"unknown {self.kind} {name!r} (registered: {known})") from None


class Registry:
    """Allocators and pickers by name."""

    def __init__(self) -> None:
        self._allocators: _Table[Allocator] = _Table("allocator", Allocator)
        self._pickers: _Table[Picker] = _Table("picker", Picker)

    def register_allocator(self, name: str, allocator: Allocator, origin: str = "code") -> None:
        """Add an allocator; :class:`PluginError` if ``name`` is taken."""
        self._allocators.add(name, allocator, origin)

    def register_picker(self, name: str, picker: Picker, origin: str = "code") -> None:
        """Add a picker; :class:`PluginError` if ``name`` is taken."""
        self._pickers.add(name, picker, origin)

    def allocator(self, name: str) -> Allocator:
        """The allocator called ``name``; :class:`PluginError` if unknown."""
        return self._allocators.get(name)

    def picker(self, name: str) -> Picker:
        """The picker called ``name``; :class:`PluginError` if unknown."""
        return self._pickers.get(name)

    @property
    def allocator_names(self) -> list[str]:
        return sorted(self._allocators.items)

    @property
    def picker_names(self) -> list[str]:
        return sorted(self._pickers.items)

    def load_entry_points(self) -> Registry:
        """Register every installed plugin of both groups. Returns ``self``."""
        # Imported here, not at the top: importlib.metadata (with the email
        # package it imports) is about 8 ms of a command that builds no core,
        # such as `xce --help`. One scan of the installed distributions serves
        # both groups: a second `entry_points(group=...)` call scans them all
        # again (about 2 ms with the test and plot extras installed).
        from importlib.metadata import entry_points

        installed = entry_points()
        for ep in _unique(installed.select(group=ALLOCATOR_GROUP)):
            self._allocators.add(ep.name, _instantiate(ep, Allocator), ep)
        for ep in _unique(installed.select(group=PICKER_GROUP)):
            self._pickers.add(ep.name, _instantiate(ep, Picker), ep)
        return self


def _unique(eps: object) -> list[EntryPoint]:
    # The same distribution can be visible twice on sys.path (an editable install
    # plus a source checkout); that is one plugin, not a clash.
    seen: set[tuple[str, str]] = set()
    out: list[EntryPoint] = []
    for ep in eps:  # type: ignore[attr-defined]
        if (ep.name, ep.value) not in seen:
            seen.add((ep.name, ep.value))
            out.append(ep)
    return out


def _origin(origin: str | EntryPoint) -> str:
    """Where a plugin came from, for a message. An entry point's distribution is
    named only here: reading its metadata is about 17 ms of every command's
    start (`xce simulate` on a 40-job trace takes 0.3 s in all)."""
    if isinstance(origin, str):
        return origin
    ep = origin
    dist = ep.dist.name if ep.dist is not None else "unknown distribution"
    return f"{dist} ({ep.value})"


def _instantiate(ep: EntryPoint, base: type) -> Any:
    try:
        obj = ep.load()
    except Exception as exc:
        raise PluginError(f"cannot load plugin {ep.name!r} ({ep.value}): {exc}") from exc
    if isinstance(obj, type):
        obj = obj()
    if not isinstance(obj, base):
        raise PluginError(f"plugin {ep.name!r} ({ep.value}) is not a {base.__name__}")
    return obj


_default: Registry | None = None


def default_registry() -> Registry:
    """The registry of installed plugins, loaded once per process."""
    global _default
    if _default is None:
        _default = Registry().load_entry_points()
    return _default
