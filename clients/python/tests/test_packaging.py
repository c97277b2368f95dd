"""The package's in-tree build backend (clients/python/_backend/hicache_build.py): what goes into the wheel and the
sdist, reproducibly, and how it reads pyproject.toml. Installing the wheel is .ci/python-package-check's part."""

import base64
import csv
import hashlib
import importlib.util
import io
import re
import shutil
import tarfile
import tempfile
import unittest
import zipfile
from pathlib import Path

from .daemon_process import REPO_ROOT

SOURCE = REPO_ROOT / "clients" / "python"
BACKEND = Path("_backend") / "hicache_build.py"


def load_backend(root: Path):
    """The backend module of the sources at ``root`` (it builds the folder it lies in)."""
    spec = importlib.util.spec_from_file_location(f"hicache_build_{abs(hash(str(root)))}", root / BACKEND)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def copy_sources(target: Path) -> Path:
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(SOURCE / name, target / name)
    for folder in ("_backend", "hicache"):
        shutil.copytree(SOURCE / folder, target / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return target


class PackagingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not (SOURCE / BACKEND).is_file():
            raise unittest.SkipTest(f"no package sources at {SOURCE} (set HICACHE_REPO to a checkout)")
        cls.backend = load_backend(SOURCE)

    def setUp(self):
        folder = tempfile.TemporaryDirectory(prefix="hicache-packaging-")
        self.addCleanup(folder.cleanup)
        self.tmp = Path(folder.name)

    def build_wheel(self, backend=None, name="dist") -> Path:
        out = self.tmp / name
        return out / (backend or self.backend).build_wheel(str(out))

    def test_the_wheel_holds_every_module_and_py_typed_and_a_record_that_matches(self):
        wheel = self.build_wheel()
        self.assertEqual(wheel.name, "hicache-0.1.0-py3-none-any.whl")
        modules = {p.relative_to(SOURCE).as_posix() for p in (SOURCE / "hicache").rglob("*.py")
                   if "__pycache__" not in p.parts}
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            self.assertEqual(set(names), modules | {"hicache/py.typed", "hicache-0.1.0.dist-info/METADATA",
                                                    "hicache-0.1.0.dist-info/WHEEL", "hicache-0.1.0.dist-info/RECORD"})
            self.assertIn("hicache/sglang/storage.py", names)
            self.assertEqual(names[-1], "hicache-0.1.0.dist-info/RECORD")
            rows = list(csv.reader(io.StringIO(archive.read(names[-1]).decode())))
            self.assertEqual(sorted(r[0] for r in rows), sorted(names))
            for path, digest, size in rows:
                if path.endswith("/RECORD"):
                    self.assertEqual((digest, size), ("", ""))
                    continue
                data = archive.read(path)
                expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                self.assertEqual((digest, int(size)), (f"sha256={expected}", len(data)), path)
                if path.endswith(".py"):
                    self.assertEqual(data, (SOURCE / path).read_bytes(), path)
            metadata = archive.read("hicache-0.1.0.dist-info/METADATA").decode()
            wheel_file = archive.read("hicache-0.1.0.dist-info/WHEEL").decode()
        headers = metadata.split("\n\n", 1)[0].splitlines()
        self.assertIn("Name: hicache", headers)
        self.assertIn("Version: 0.1.0", headers)
        self.assertIn("Requires-Python: >=3.10", headers)
        self.assertFalse([h for h in headers if h.startswith("Requires-Dist")], "the package has no dependencies")
        self.assertIn("Tag: py3-none-any", wheel_file.splitlines())
        self.assertIn("Root-Is-Purelib: true", wheel_file.splitlines())

    def test_builds_are_reproducible_and_the_sdist_builds_the_same_wheel(self):
        first = self.build_wheel(name="one").read_bytes()
        self.assertEqual(self.build_wheel(name="two").read_bytes(), first)
        sdist = self.tmp / "sdist" / self.backend.build_sdist(str(self.tmp / "sdist"))
        self.assertEqual(sdist.name, "hicache-0.1.0.tar.gz")
        self.assertEqual((self.tmp / "sdist2" / self.backend.build_sdist(str(self.tmp / "sdist2"))).read_bytes(),
                         sdist.read_bytes())
        with tarfile.open(sdist) as archive:
            names = archive.getnames()
            self.assertTrue(all(n.startswith("hicache-0.1.0/") for n in names), names)
            for needed in ("pyproject.toml", "README.md", "PKG-INFO", "_backend/hicache_build.py",
                           "hicache/__init__.py", "hicache/py.typed", "hicache/sglang/storage.py"):
                self.assertIn(f"hicache-0.1.0/{needed}", names)
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # 3.10.12+, 3.11.4+
            archive.extractall(self.tmp / "unpacked", **safe)
        unpacked = self.tmp / "unpacked" / "hicache-0.1.0"
        self.assertEqual(self.build_wheel(load_backend(unpacked), name="from-sdist").read_bytes(), first)

    def test_an_editable_wheel_points_at_the_sources(self):
        out = self.tmp / "editable"
        wheel = out / self.backend.build_editable(str(out))
        with zipfile.ZipFile(wheel) as archive:
            self.assertEqual(archive.read("__editable__.hicache-0.1.0.pth").decode().strip(), str(SOURCE.resolve()))
            self.assertFalse([n for n in archive.namelist() if n.startswith("hicache/")])

    def test_the_versions_of_pyproject_and_the_package_must_agree(self):
        copy = copy_sources(self.tmp)
        init = copy / "hicache" / "__init__.py"
        init.write_text(re.sub(r'__version__ = "[^"]+"', '__version__ = "9.9.9"', init.read_text()))
        with self.assertRaisesRegex(ValueError, "9.9.9"):
            self.build_wheel(load_backend(copy))

    def test_pyproject_is_read_as_tomllib_reads_it(self):
        try:
            import tomllib
        except ImportError:
            self.skipTest("tomllib is Python 3.11's; nothing to compare with")
        text = (SOURCE / "pyproject.toml").read_text()
        self.assertEqual(self.backend.project_table(text), tomllib.loads(text)["project"])

    def test_pyproject_lines_the_backend_cannot_read_are_refused(self):
        for line in ('dependencies = [\n  "x",\n]', "version = 1", "name = 'single'", 'urls = { a = "b" }',
                     'name = "a" "b"'):
            with self.subTest(line), self.assertRaises(ValueError):
                self.backend.project_table(f'[project]\n{line}\n')
        with self.assertRaisesRegex(ValueError, r"\[project.urls\]"):
            self.backend.project_table('[project]\nname = "a"\n[project.urls]\nhome = "x"\n')
        self.assertEqual(self.backend.project_table('[project]\nname = "a"  # comment\n[tool.x]\nname = 1\n'),
                         {"name": "a"})


if __name__ == "__main__":
    unittest.main()
