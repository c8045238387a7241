"""The project's own rules, checked with the real tools: lint, types, import layers."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    path = BIN / name
    found = str(path) if path.exists() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return found


def check(*command: str) -> None:
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_lint() -> None:
    check(tool("ruff"), "check", "simsync", "tests", "bench")


def test_ruff_format() -> None:
    """The tree is formatted as `ruff format` would write it (CI holds it)."""
    check(tool("ruff"), "format", "--check", ".")


def test_mypy() -> None:
    check(tool("mypy"), "simsync")


def test_import_layers() -> None:
    """Imports flow down the layers; SimPy, rich and TensorFlow stay where they belong."""
    check(tool("lint-imports"))


def test_every_package_is_installed() -> None:
    """pyproject's list of packages names every package of the tree (setuptools installs only
    those listed: a package left out would be missing from the wheel, not from a checkout)."""
    import tomllib

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    tree = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "simsync").rglob("__init__.py")
    }
    assert tree - listed == set()
