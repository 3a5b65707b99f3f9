"""What a user of the published package gets: the sdist and the wheel built
from this tree hold every file the package needs at run time (the dashboard's
static files, ``py.typed``), their metadata passes ``twine check``, and the
wheel installed (not editable) in a fresh virtualenv runs the CLI, the demo
and an import of every public module."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "campaignkit"
PUBLIC_MODULES = [
    "campaignkit",
    "campaignkit.sync",
    "campaignkit.status",
    "campaignkit.ledger",
    "campaignkit.webhooks",
    "campaignkit.dashboard",
    "campaignkit.analysis",
    "campaignkit.sandbox",
    "campaignkit.testing",
]
# Imported only with its extra: `pip install 'campaignkit[workers]'`.
WORKERS = "campaignkit.workers"
# Building fetches hatchling into an isolated environment and the fresh venv
# fetches the dependencies: slow on a cold cache, bounded all the same.
pytestmark = pytest.mark.timeout(300)


def run(*argv: str | Path, cwd: Path) -> str:
    """Run ``argv`` in ``cwd``; its stdout, or a failure showing its stderr.
    Without ``PYTHONPATH``: a tree put first there would be imported instead
    of what was installed."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    done = subprocess.run(
        [str(arg) for arg in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def package_files() -> set[str]:
    """The package's files as they lie in the tree (``campaignkit/...``)."""
    return {
        path.relative_to(ROOT).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel ``python -m build`` makes (the wheel from the sdist)."""
    out = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--outdir", out, ROOT, cwd=out)
    return out


def only(dist: Path, pattern: str) -> Path:
    [path] = dist.glob(pattern)
    return path


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel installed; its ``bin`` directory."""
    venv = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", venv, cwd=venv)
    run(venv / "bin" / "python", "-m", "pip", "install", "--quiet", only(dist, "*.whl"), cwd=venv)
    return venv / "bin"


def test_the_tree_holds_what_the_package_needs_at_run_time() -> None:
    files = package_files()
    assert "campaignkit/py.typed" in files
    assert {"campaignkit/dashboard/static/dashboard.css"} <= files
    assert {"campaignkit/dashboard/static/dashboard.js"} <= files


def test_the_wheel_holds_every_file_of_the_package(dist: Path) -> None:
    with zipfile.ZipFile(only(dist, "*.whl")) as wheel:
        names = set(wheel.namelist())
    assert package_files() <= names
    assert not {name for name in names if name.startswith(("tests/", "docs/"))}


def test_the_sdist_holds_every_file_of_the_package(dist: Path) -> None:
    sdist = only(dist, "*.tar.gz")
    with tarfile.open(sdist) as archive:
        top = sdist.name.removesuffix(".tar.gz")
        names = {name.removeprefix(f"{top}/") for name in archive.getnames()}
    assert package_files() <= names
    assert {"pyproject.toml", "README.md", "CHANGELOG.md"} <= names
    assert not {name for name in names if name.startswith((".venv", "site/"))}


def test_the_metadata_passes_twine_check(dist: Path) -> None:
    out = run(sys.executable, "-m", "twine", "check", "--strict", *sorted(dist.iterdir()), cwd=dist)
    assert out.count("PASSED") == 2


def test_the_classifiers_name_every_python_ci_runs(dist: Path) -> None:
    with zipfile.ZipFile(only(dist, "*.whl")) as wheel:
        [metadata] = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
        text = wheel.read(metadata).decode()
    classified = set(
        re.findall(r"^Classifier: Programming Language :: Python :: (3\.\d+)$", text, re.M)
    )
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    oldest = project["requires-python"].removeprefix(">=")
    others = re.search(r"^OTHER_PYTHONS \?= (.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert others is not None
    assert classified == {oldest, *others.group(1).split()}
    assert f"Requires-Python: >={oldest}" in text


def test_the_installed_wheel_runs_the_cli(installed: Path, tmp_path: Path) -> None:
    out = run(installed / "campaignkit", "--help", cwd=tmp_path)
    assert "demo" in out
    assert "dashboard" in out


def test_the_installed_wheel_imports_every_public_module(installed: Path, tmp_path: Path) -> None:
    # Run outside the tree, so that the import finds the installed package.
    probe = (
        "import importlib, importlib.resources, sys\n"
        f"for name in {PUBLIC_MODULES!r}:\n"
        "    importlib.import_module(name)\n"
        "root = importlib.resources.files('campaignkit')\n"
        "print(root)\n"
        "print((root / 'py.typed').is_file(), (root / 'dashboard/static/dashboard.js').is_file())\n"
    )
    where, found = run(installed / "python", "-c", probe, cwd=tmp_path).splitlines()
    assert Path(where).is_relative_to(installed.parent)
    assert found == "True True"


def test_the_installed_wheel_names_the_extra_the_workers_need(
    installed: Path, tmp_path: Path
) -> None:
    done = subprocess.run(
        [installed / "python", "-c", f"import {WORKERS}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "pip install 'campaignkit[workers]'" in done.stderr.splitlines()[-1]


def test_the_installed_wheel_runs_the_demo(installed: Path, tmp_path: Path) -> None:
    out = run(installed / "campaignkit", "demo", "--speed", "20", "--users", "20", cwd=tmp_path)
    assert "Done in" in out
