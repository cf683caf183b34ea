"""The test kit stays out of production: no service module imports it, and no image installs it."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# Every production source tree: each member's src/ (and the native core's Python package).
SOURCES = sorted(p for p in [*ROOT.glob("lib/*/src"), *ROOT.glob("services/*/src")] if p.parent.name != "testkit")
SOURCES.append(ROOT / "lib" / "native" / "python")


def production_modules() -> list[str]:
    return sorted(
        ".".join(path.relative_to(source).with_suffix("").parts).removesuffix(".__init__")
        for source in SOURCES
        for path in source.rglob("*.py")
    )


def test_no_production_module_imports_the_test_kit_when_imported() -> None:
    """Every production module imported in a fresh process: neither the test kit nor the
    reference engine it brings (pyoxigraph) is loaded."""
    code = "\n".join(
        [
            "import importlib, sys",
            "for module in sys.argv[1:]:",
            "    importlib.import_module(module)",
            "print(sorted(m for m in sys.modules if m == 'pyoxigraph' or m.startswith('quanta.testkit')))",
        ]
    )
    modules = production_modules()
    assert {"quanta.engine.execute", "quanta.gateway.main", "quanta.worker.cli", "quanta.client.smart"} <= set(modules)
    out = subprocess.run(
        [sys.executable, "-c", code, *modules], capture_output=True, text=True, timeout=300, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout


def test_no_production_module_imports_the_test_kit_anywhere() -> None:
    """Also the imports inside functions, which importing a module does not run."""
    offenders = []
    for source in SOURCES:
        for path in source.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = [node.module or ""]
                else:
                    continue
                if any(name.split(".")[:2] == ["quanta", "testkit"] for name in names):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_no_image_installs_the_test_kit() -> None:
    """Each image syncs one member from uv.lock (the Dockerfile's `--package`): the test kit is
    not among that member's dependencies, however indirect."""
    members = set(re.findall(r"--package (quanta-[a-z]+)", (ROOT / "Dockerfile").read_text()))
    assert {"quanta-gateway", "quanta-worker", "quanta-loader", "quanta-loadtest"} <= members
    lock = {p["name"]: p for p in tomllib.loads((ROOT / "uv.lock").read_text())["package"]}
    assert "quanta-testkit" in lock
    for member in members:
        installed, todo = set(), [member]
        while todo:
            name = todo.pop()
            if name not in installed:
                installed.add(name)
                todo += [d["name"] for d in lock[name].get("dependencies", [])]
        assert "quanta-testkit" not in installed, member
