"""Starts and stops a HiCache daemon for a test module: 127.0.0.1, port 0, a temporary host folder, no L3.

The command is ``$HICACHE_DAEMON_CMD`` (split with shlex) if set, else ``<repo>/hicache serve`` with
``HICACHE_SKIP_BUILD=1``; ``<repo>`` is ``$HICACHE_REPO`` if set (tests copied out of the checkout, as
.ci/python-package-check runs them against the installed package), else the checkout holding this file. The port the
daemon bound is read from its description line ("HiCache daemon on 127.0.0.1:PORT (...").

A daemon that cannot be had here (no launcher, no Java build, no JDK, a command that does not exist) skips the tests
that need it (unittest.SkipTest, saying why) rather than failing them. ``$HICACHE_TEST_TMPDIR`` is where the daemons'
temporary folders go (default: /dev/shm when writable, else the system's temporary folder).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest
from pathlib import Path

REPO_ROOT = Path(os.environ.get("HICACHE_REPO") or Path(__file__).resolve().parents[3])
STARTUP_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0
# The Java build is shared with other work: while it runs, the launcher's class path may be missing or half
# written. Such a start is retried after a pause instead of failing the tests.
BUILD_RETRY_PAUSE_S = 60.0
BUILD_RETRIES = 4
_BUILD_UNDER_WAY = re.compile(r"not built|Could not find or load main class|NoClassDefFoundError|"
                              r"ClassNotFoundException|Unable to access jarfile|ZipException|zip file|building",
                              re.IGNORECASE)
_LISTENING = re.compile(r"HiCache daemon on (\S+):(\d+) \(")
_NO_JDK = re.compile(r"no JDK \d+ found")


def _temporary_folder() -> str:
    shm = "/dev/shm"
    base = os.environ.get("HICACHE_TEST_TMPDIR") or (shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None)
    return tempfile.mkdtemp(prefix="hicache-pytest-", dir=base)


def missing_daemon() -> str | None:
    """Why no daemon can be started here, or None if the command looks runnable."""
    if os.environ.get("HICACHE_DAEMON_CMD"):
        words = shlex.split(os.environ["HICACHE_DAEMON_CMD"])
        if not words or shutil.which(words[0]) is None:
            return f"HICACHE_DAEMON_CMD names {words[0] if words else 'nothing'!r}, which cannot be run here"
        return None
    launcher = REPO_ROOT / "hicache"
    if not launcher.is_file():
        return (f"no daemon: {launcher} does not exist (the tests are not in a HiCache checkout); set HICACHE_REPO to "
                f"one, or HICACHE_DAEMON_CMD")
    classpath = REPO_ROOT / "hicache-bench" / "target" / "launcher" / "classpath"
    if not classpath.is_file():
        return (f"no daemon: the Java build is missing ({classpath}); build it with `./hicache version` or "
                f"`mvn package -DskipTests`, or set HICACHE_DAEMON_CMD")
    return None


class DaemonProcess:
    """One daemon process and its temporary folder. Not thread-safe: the test module drives it."""

    def __init__(self, *extra_args: str, token: str = "", host_size: str = "64MiB", store: str = "none",
                 metrics: bool = False):
        self.extra_args = list(extra_args)
        self.store = store  # the L3 store; "file" keeps its pages in the temporary folder (cwd)
        self.metrics = metrics
        self.token = token
        self.host_size = host_size
        self.port = 0
        self.process: subprocess.Popen | None = None
        self.folder = ""
        self.output: list[str] = []

    def command(self) -> tuple[list[str], dict]:
        env = dict(os.environ)
        if os.environ.get("HICACHE_DAEMON_CMD"):
            command = shlex.split(os.environ["HICACHE_DAEMON_CMD"])
        else:
            command = [str(REPO_ROOT / "hicache"), "serve"]
            env["HICACHE_SKIP_BUILD"] = "1"
        command += ["--server.port", "0", "--server.metrics-port", "0" if self.metrics else "-1",
                    "--server.store", self.store,
                    "--server.host-dir", os.path.join(self.folder, "host"), "--server.host-size", self.host_size]
        if self.token:
            command += ["--server.auth-token", self.token]
        return command + self.extra_args, env

    def start(self) -> "DaemonProcess":
        """Starts the daemon; raises unittest.SkipTest if none can be had here (see :func:`missing_daemon`)."""
        missing = missing_daemon()
        if missing is not None:
            raise unittest.SkipTest(missing)
        for attempt in range(BUILD_RETRIES + 1):
            self.folder = _temporary_folder()
            os.makedirs(os.path.join(self.folder, "host"))
            try:
                self._start_once()
                return self
            except _BuildUnderWay as e:
                self._cleanup()
                if attempt == BUILD_RETRIES:
                    raise RuntimeError(f"the daemon did not start; a build seemed under way each time:\n{e}")
                time.sleep(BUILD_RETRY_PAUSE_S)
            except BaseException:
                self._cleanup()
                raise
        raise AssertionError("unreachable")

    def _start_once(self) -> None:
        command, env = self.command()
        stderr_path = os.path.join(self.folder, "daemon.err")
        with open(stderr_path, "wb") as stderr:
            try:
                self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr,
                                                stdin=subprocess.DEVNULL, cwd=self.folder, env=env,
                                                start_new_session=True)
            except OSError as e:  # not found, not executable
                raise unittest.SkipTest(f"no daemon: {' '.join(command[:2])} cannot be run: {e}") from None
        self.output = []
        listening = threading.Event()

        def read_output() -> None:
            for raw in self.process.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self.output.append(line)
                match = _LISTENING.search(line)
                if match:
                    self.port = int(match.group(2))
                    listening.set()

        threading.Thread(target=read_output, name="daemon-output", daemon=True).start()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not listening.wait(0.2):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self._kill()
                with open(stderr_path, "rb") as f:
                    errors = f.read().decode("utf-8", "replace")
                text = "\n".join(self.output) + "\n" + errors
                if _NO_JDK.search(text):
                    raise unittest.SkipTest(f"no daemon: the launcher found no JDK: {text.strip()}")
                if _BUILD_UNDER_WAY.search(text):
                    raise _BuildUnderWay(text)
                raise RuntimeError(f"the daemon ({' '.join(command)}) did not start within {STARTUP_TIMEOUT_S} s; "
                                   f"it printed:\n{text}")

    def metrics_port(self) -> int:
        """The metrics (HTTP) port the start line names; the daemon must have been made with ``metrics=True``."""
        for line in self.output:
            match = re.search(r"metrics: https?://[^ ]*:(\d+)/metrics", line)
            if match:
                return int(match.group(1))
        raise AssertionError(f"the daemon did not say its metrics port: {self.output[:3]}")

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        self._kill()

    def pause(self) -> None:
        """SIGSTOP: the daemon keeps its sockets but answers nothing; returns once every thread has stopped (the
        signal takes effect asynchronously, and a test that measures a deadline must not start before)."""
        os.kill(self.process.pid, signal.SIGSTOP)
        _wait_stopped(self.process.pid)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        """SIGTERM (graceful), SIGKILL if that takes too long; then removes the folder."""
        if self.process is not None and self.process.poll() is None:
            try:
                os.kill(self.process.pid, signal.SIGCONT)
                self.process.terminate()
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._kill()
        self._cleanup()

    def _kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT_S)

    def _cleanup(self) -> None:
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = ""

    def slab_files(self) -> list[str]:
        host = os.path.join(self.folder, "host")
        return [os.path.join(host, name) for name in os.listdir(host)] if os.path.isdir(host) else []


class _BuildUnderWay(Exception):
    pass


def _wait_stopped(pid: int, timeout_s: float = 5.0) -> None:
    """Waits until every thread of a SIGSTOPped process is stopped (the signal takes effect asynchronously)."""
    deadline = time.monotonic() + timeout_s
    task_dir = f"/proc/{pid}/task"
    while time.monotonic() < deadline:
        try:
            states = []
            for tid in os.listdir(task_dir):
                with open(f"{task_dir}/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
        except OSError:
            time.sleep(0.05)
            continue
        if states and all(state in ("T", "t") for state in states):
            return
        time.sleep(0.02)
    time.sleep(0.2)  # no /proc (not Linux): give the signal a moment
