"""Plugin registry: duplicates refused, unknown names explained, entry points loaded."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from importlib.metadata import EntryPoint, EntryPoints

import pytest

from allocators.parjob import ParJobAllocator
from allocators.seqjob import SeqJobAllocator
from xce_core import PluginError, Registry, SchedulerConfig, SchedulerCore
from xce_core.plugin import FcfsPicker


def test_builtins_come_from_entry_points() -> None:
    reg = Registry().load_entry_points()
    assert {"seqjob", "parjob", "parjob_pack"} <= set(reg.allocator_names)
    assert "fcfs" in reg.picker_names
    assert isinstance(reg.allocator("seqjob"), SeqJobAllocator)
    assert isinstance(reg.picker("fcfs"), FcfsPicker)


def test_duplicate_name_is_refused_naming_both() -> None:
    reg = Registry()
    reg.register_allocator("parjob", ParJobAllocator(), "first-dist")
    with pytest.raises(PluginError, match=r"'parjob' is taken by first-dist.*second-dist"):
        reg.register_allocator("parjob", ParJobAllocator(), "second-dist")


def test_unknown_name_lists_what_exists() -> None:
    reg = Registry().load_entry_points()
    with pytest.raises(PluginError, match=r"unknown allocator 'nope' \(registered: .*parjob"):
        reg.allocator("nope")
    with pytest.raises(PluginError, match="unknown picker"):
        SchedulerCore(SchedulerConfig(picker="nope"), registry=reg)
    with pytest.raises(PluginError, match="unknown allocator"):
        SchedulerCore(SchedulerConfig(parallel_allocator="nope"), registry=reg)


def test_wrong_kind_of_plugin_is_refused() -> None:
    reg = Registry()
    with pytest.raises(PluginError, match=r"not a (Allocator|Picker)"):
        reg.register_allocator("x", FcfsPicker())  # type: ignore[arg-type]


def fake_entry_points(*installed: EntryPoint) -> Callable[[], EntryPoints]:
    """Stands for ``importlib.metadata.entry_points``, which the registry calls
    once, without arguments, and selects each group from."""
    return lambda: EntryPoints(installed)


def test_third_party_entry_points_load_and_clash(monkeypatch: pytest.MonkeyPatch) -> None:
    ours = EntryPoint("seqjob", "allocators.seqjob:SeqJobAllocator", "xce.allocators")
    theirs = EntryPoint("mine", "tests.core.test_session:SpyAllocator", "xce.allocators")
    picker = EntryPoint("lifo", "tests.core.test_session:LifoPicker", "xce.pickers")
    monkeypatch.setattr(
        importlib.metadata, "entry_points", fake_entry_points(ours, theirs, picker)
    )
    reg = Registry().load_entry_points()
    assert reg.allocator_names == ["mine", "seqjob"]
    assert reg.picker_names == ["lifo"]
    clash = EntryPoint("seqjob", "tests.core.test_session:SpyAllocator", "xce.allocators")
    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points(ours, clash))
    with pytest.raises(PluginError, match="'seqjob' is taken"):
        Registry().load_entry_points()


def test_broken_entry_point_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = EntryPoint("bad", "no.such.module:Thing", "xce.allocators")
    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points(broken))
    with pytest.raises(PluginError, match="cannot load plugin 'bad'"):
        Registry().load_entry_points()
