"""Core isolation: the core modules and the allocators do no I/O.

Checked statically (no module of theirs imports an I/O module) and dynamically
(importing them in a fresh interpreter pulls in no socket/subprocess module of
ours). Drivers live in ``xce_core.drivers``, codecs and transports in ``events``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IO_MODULES = {
    "socket",
    "ssl",
    "subprocess",
    "asyncio.subprocess",
    "os",
    "io",
    "sys",
    "pathlib",
    "shutil",
    "tempfile",
    "select",
    "selectors",
    "signal",
    "http",
    "urllib",
    "mmap",
    "fcntl",
    "gzip",
    "tomllib",
    "logging",
    "builtins",
    "anyio.streams.file",
    "events._codecs",
    "events._framing",
    "xce_core.drivers",
}
IO_CALLS = {"open", "print", "input", "exec", "eval", "compile", "__import__"}


def core_files() -> list[Path]:
    files = [p for p in (ROOT / "xce_core").glob("*.py")]
    files += list((ROOT / "allocators").glob("*.py"))
    return sorted(files)


def test_drivers_are_the_only_exempt_subpackage() -> None:
    subpackages = [p.name for p in (ROOT / "xce_core").iterdir() if (p / "__init__.py").exists()]
    assert subpackages == ["drivers"]


@pytest.mark.parametrize("path", core_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_core_module_imports_no_io(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            hit = {m for m in IO_MODULES if name == m or name.startswith(m + ".")}
            assert not hit, f"{path.name}:{node.lineno} imports {name} (I/O)"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in IO_CALLS, (
                f"{path.name}:{node.lineno} calls {node.func.id}()"
            )


def test_importing_the_core_loads_no_driver_or_transport() -> None:
    code = (
        "import sys, xce_core, allocators.seqjob, allocators.parjob, allocators.pack;"
        "bad = [m for m in sys.modules if m.startswith('xce_core.drivers')"
        " or m in ('subprocess', 'click', 'tomllib', 'gzip')];"
        "print(','.join(sorted(bad)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
