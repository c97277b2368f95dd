"""The build backend of the ``hicache`` package (PEP 517, with PEP 660 editable installs): standard library only.

Why not setuptools: a build with setuptools needs setuptools, which pip fetches from PyPI into an isolated build
environment, so ``pip install clients/python`` fails on a machine without PyPI; and Python 3.12's ``venv`` no longer
bundles setuptools, so "build with --no-build-isolation in a fresh venv" stops working there too. This backend
needs nothing (``requires = []``), so pip builds the package offline, in isolation or not. The package is pure Python
(``hicache/**.py`` and ``py.typed``) and its metadata is the ``[project]`` table of pyproject.toml, so building it
is writing a zip: about 200 lines.

The build is reproducible: files in sorted order, fixed timestamps (``SOURCE_DATE_EPOCH`` if set, else
1980-01-01), fixed permissions; two builds of the same sources are the same bytes.

Also a command: ``python3 _backend/hicache_build.py wheel|sdist OUT_DIR`` prints the path of what it built.
"""

from __future__ import annotations

import base64
import csv
import gzip
import hashlib
import io
import json
import os
import re
import sys
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent  # clients/python: pyproject.toml, README.md, hicache/
PACKAGE = "hicache"
_TAG = "py3-none-any"
_FILE_MODE = 0o644
_ZIP_EPOCH = 315532800  # 1980-01-01, the earliest time a zip entry can hold

__all__ = ["build_wheel", "build_sdist", "build_editable", "get_requires_for_build_wheel",
           "get_requires_for_build_sdist", "get_requires_for_build_editable", "prepare_metadata_for_build_wheel",
           "prepare_metadata_for_build_editable"]


# ------------------------------------------------------------------------------------------------ pyproject.toml

def project_table(text: str) -> Dict[str, Any]:
    """The ``[project]`` table of pyproject.toml. Python 3.10 has no TOML reader, so this reads the small part of
    TOML the table uses: ``key = "string"`` and ``key = ["string", ...]`` on one line each, and comments. Anything
    else is refused with its line, rather than misread (tests/test_packaging.py compares with tomllib)."""
    table: Dict[str, Any] = {}
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("["):
            header = stripped.split("#", 1)[0].strip()
            if header.startswith(("[project.", "[[project")):
                raise ValueError(f"pyproject.toml line {number}: {header} is not read by the in-tree backend "
                                 f"(_backend/hicache_build.py); teach it first")
            inside = header == "[project]"
            continue
        if not inside:
            continue
        match = re.fullmatch(r"([A-Za-z0-9_-]+)\s*=\s*(.*)", stripped)
        if match is None:
            raise ValueError(f"pyproject.toml line {number}: not a `key = value` line: {line!r}")
        key, rest = match.groups()
        try:
            value, end = json.JSONDecoder().raw_decode(rest)
        except ValueError:
            value, end = None, 0
        tail = rest[end:].strip()
        good = isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))
        if not good or not (tail == "" or tail.startswith("#")) or not rest.startswith(("\"", "[")):
            raise ValueError(f"pyproject.toml line {number}: the in-tree backend (_backend/hicache_build.py) reads "
                             f"only one-line strings and lists of strings in [project]: {line!r}")
        if key in table:
            raise ValueError(f"pyproject.toml line {number}: {key} is given twice")
        table[key] = value
    return table


class _Project:
    """Name, version and metadata of the package, from pyproject.toml; checked against ``hicache.__version__``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        table = project_table((root / "pyproject.toml").read_text(encoding="utf-8"))
        missing = [k for k in ("name", "version", "description", "readme", "requires-python") if k not in table]
        if missing:
            raise ValueError(f"pyproject.toml [project] lacks {', '.join(missing)}")
        unknown = set(table) - {"name", "version", "description", "readme", "requires-python", "dependencies"}
        if unknown:
            raise ValueError(f"pyproject.toml [project] has {', '.join(sorted(unknown))}, which the in-tree backend "
                             f"does not write into the metadata; teach _backend/hicache_build.py first")
        self.name: str = table["name"]
        self.version: str = table["version"]
        self.table = table
        init = (root / PACKAGE / "__init__.py").read_text(encoding="utf-8")
        declared = re.search(r'^__version__ = "([^"]+)"$', init, re.M)
        if declared is None or declared.group(1) != self.version:
            raise ValueError(f"pyproject.toml says version {self.version}, {PACKAGE}/__init__.py says "
                             f"{declared.group(1) if declared else 'no __version__'}; make them agree")
        self.dist_name = re.sub(r"[-_.]+", "_", self.name).lower()
        self.dist_info = f"{self.dist_name}-{self.version}.dist-info"

    def metadata(self) -> bytes:
        """The METADATA (and sdist PKG-INFO) file, core metadata 2.1."""
        table = self.table
        lines = [
            "Metadata-Version: 2.1",
            f"Name: {self.name}",
            f"Version: {self.version}",
            f"Summary: {table['description']}",
            f"Requires-Python: {table['requires-python']}",
        ]
        lines += [f"Requires-Dist: {dependency}" for dependency in table.get("dependencies", [])]
        readme: str = table["readme"]
        content_type = "text/markdown" if readme.lower().endswith(".md") else "text/plain"
        lines.append(f"Description-Content-Type: {content_type}")
        body = (self.root / readme).read_text(encoding="utf-8")
        return ("\n".join(lines) + "\n\n" + body).encode("utf-8")

    def package_files(self) -> List[Tuple[str, Path]]:
        """(path in the archive, file) for every module of the package and its ``py.typed``, sorted."""
        found = []
        for path in sorted((self.root / PACKAGE).rglob("*")):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            if path.suffix == ".py" or path.name == "py.typed":
                found.append((path.relative_to(self.root).as_posix(), path))
        if not any(name == f"{PACKAGE}/__init__.py" for name, _ in found):
            raise ValueError(f"no {PACKAGE}/__init__.py under {self.root}")
        return found


def _timestamp() -> int:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    return max(_ZIP_EPOCH, int(epoch)) if epoch else _ZIP_EPOCH


# ------------------------------------------------------------------------------------------------------ wheels

def _wheel_file() -> bytes:
    return (f"Wheel-Version: 1.0\nGenerator: hicache_build (in-tree, clients/python/_backend)\n"
            f"Root-Is-Purelib: true\nTag: {_TAG}\n").encode("ascii")


def _dist_info_files(project: _Project) -> List[Tuple[str, bytes]]:
    return [(f"{project.dist_info}/METADATA", project.metadata()), (f"{project.dist_info}/WHEEL", _wheel_file())]


def _write_wheel(directory: str, project: _Project, contents: List[Tuple[str, bytes]]) -> str:
    """Writes ``contents`` and the dist-info (RECORD last) as a wheel; returns its file name."""
    contents = contents + _dist_info_files(project)
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for name, data in contents:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
        writer.writerow([name, f"sha256={digest}", str(len(data))])
    record_name = f"{project.dist_info}/RECORD"
    writer.writerow([record_name, "", ""])
    contents.append((record_name, record.getvalue().encode("utf-8")))

    filename = f"{project.dist_name}-{project.version}-{_TAG}.whl"
    os.makedirs(directory, exist_ok=True)
    target = os.path.join(directory, filename)
    partial = target + ".part"
    date_time = time.gmtime(_timestamp())[:6]
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in contents:
            info = zipfile.ZipInfo(name, date_time=date_time)
            info.external_attr = (0o100000 | _FILE_MODE) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    os.replace(partial, target)
    return filename


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    project = _Project(ROOT)
    contents = [(name, path.read_bytes()) for name, path in project.package_files()]
    return _write_wheel(wheel_directory, project, contents)


def build_editable(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                   metadata_directory: Optional[str] = None) -> str:
    """PEP 660: a wheel holding a .pth file that puts this source folder on ``sys.path``."""
    project = _Project(ROOT)
    pth = f"__editable__.{project.dist_name}-{project.version}.pth"
    return _write_wheel(wheel_directory, project, [(pth, (str(ROOT) + "\n").encode("utf-8"))])


def _prepare_metadata(metadata_directory: str) -> str:
    project = _Project(ROOT)
    folder = Path(metadata_directory) / project.dist_info
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in _dist_info_files(project):
        (folder / name.rsplit("/", 1)[1]).write_bytes(data)
    return project.dist_info


def prepare_metadata_for_build_wheel(metadata_directory: str,
                                     config_settings: Optional[Dict[str, Any]] = None) -> str:
    return _prepare_metadata(metadata_directory)


def prepare_metadata_for_build_editable(metadata_directory: str,
                                        config_settings: Optional[Dict[str, Any]] = None) -> str:
    return _prepare_metadata(metadata_directory)


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


# ------------------------------------------------------------------------------------------------------- sdist

def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    """A .tar.gz of what a wheel is built from: pyproject.toml, the README, this backend, the package, PKG-INFO."""
    project = _Project(ROOT)
    base = f"{project.dist_name}-{project.version}"
    sources = [("pyproject.toml", ROOT / "pyproject.toml"), (project.table["readme"], ROOT / project.table["readme"]),
               ("_backend/hicache_build.py", Path(__file__).resolve())] + project.package_files()
    contents = [(name, path.read_bytes()) for name, path in sources] + [("PKG-INFO", project.metadata())]
    filename = f"{base}.tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)
    target = os.path.join(sdist_directory, filename)
    partial = target + ".part"
    stamp = _timestamp()
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, data in sorted(contents):
            info = tarfile.TarInfo(f"{base}/{name}")
            info.size, info.mtime, info.mode = len(data), stamp, _FILE_MODE
            archive.addfile(info, io.BytesIO(data))
    with open(partial, "wb") as out:
        out.write(gzip.compress(tar.getvalue(), mtime=stamp))
    os.replace(partial, target)
    return filename


def main(argv: List[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("wheel", "sdist"):
        print("usage: hicache_build.py wheel|sdist OUT_DIR", file=sys.stderr)
        return 2
    kind, directory = argv
    name = build_wheel(directory) if kind == "wheel" else build_sdist(directory)
    print(os.path.join(directory, name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
