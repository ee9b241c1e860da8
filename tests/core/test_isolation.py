"""Core isolation: the core modules and the allocators do no I/O.

Checked statically (no module of theirs imports an I/O module) and dynamically
(importing them in a fresh interpreter pulls in no socket/subprocess module of
ours). The I/O lives in ``xce_core.cli`` and ``xce_core.sim``, codecs and
transports in ``events``. The direction of imports is also enforced by
import-linter (``[tool.importlinter]`` in pyproject.toml).
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
    "xce_core.cli",
    "xce_core.sim",
}
IO_CALLS = {"open", "print", "input", "exec", "eval", "compile", "__import__"}


def core_files() -> list[Path]:
    files = list((ROOT / "xce_core").glob("*.py"))
    files += list((ROOT / "xce_core" / "resreq").glob("*.py"))
    files += list((ROOT / "allocators").glob("*.py"))
    return sorted(files)


def test_cli_and_sim_are_the_only_exempt_subpackages() -> None:
    subpackages = {p.name for p in (ROOT / "xce_core").iterdir() if (p / "__init__.py").exists()}
    assert subpackages == {"cli", "resreq", "sim"}


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


def test_importing_the_core_loads_no_cli_simulator_or_transport() -> None:
    code = (
        "import sys, xce_core, allocators.seqjob, allocators.parjob, allocators.pack;"
        "bad = [m for m in sys.modules if m.startswith(('xce_core.cli', 'xce_core.sim'))"
        " or m in ('subprocess', 'click', 'tomllib', 'gzip')];"
        "print(','.join(sorted(bad)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_import_contract_lists_every_private_core_module() -> None:
    """The "public names only" import contract names the core's private modules
    one by one (import-linter's wildcards cannot say "starts with _")."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if "use only public names" in c["name"]]
    private = {f"xce_core.{p.stem}" for p in (ROOT / "xce_core").glob("_*.py")} - {
        "xce_core.__init__"
    }
    assert private <= set(contract["forbidden_modules"])
