"""The daemon's Redis protocol (server.resp-port; docs/resp.md) spoken by clients no one here wrote: redis-cli and
redis-benchmark (Debian's redis-tools) and the redis package (Debian's python3-redis, when importable), plus raw
sockets for what those cannot do (a client killed in the middle of a value). Each test skips, saying why, where its
client is missing."""

import hashlib
import os
import re
import shutil
import socket
import subprocess
import time
import unittest

from hicache import HiCacheClient, Namespace, Status

from .daemon_process import DaemonProcess, missing_daemon

TOKEN = "resp-test-token"


def resp_port(daemon: DaemonProcess) -> int:
    for line in daemon.output:
        match = re.search(r"Redis protocol on port (\d+)", line)
        if match:
            return int(match.group(1))
    raise AssertionError(f"the daemon did not say its Redis port: {daemon.output[:3]}")


class RespTest(unittest.TestCase):
    daemon: DaemonProcess
    port: int

    @classmethod
    def setUpClass(cls):
        why = missing_daemon()
        if why:
            raise unittest.SkipTest(why)
        cls.daemon = DaemonProcess("--server.resp-port=0").start()
        cls.port = resp_port(cls.daemon)

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def cli(self, *args: str, stdin: bytes | None = None) -> str:
        if shutil.which("redis-cli") is None:
            self.skipTest("redis-cli is not installed (Debian: redis-tools)")
        out = subprocess.run(["redis-cli", "-p", str(self.port), *args], input=stdin, capture_output=True,
                             timeout=60, check=True)
        return out.stdout.decode("utf-8", "replace").strip()

    def test_redis_cli_round_trips_every_command(self):
        k = f"k-{os.getpid()}-{time.monotonic_ns()}"
        self.assertEqual(self.cli("PING"), "PONG")
        self.assertEqual(self.cli("SET", k, "hello"), "OK")
        self.assertEqual(self.cli("GET", k), "hello")
        self.assertEqual(self.cli("STRLEN", k), "5")
        self.assertEqual(self.cli("EXISTS", k, k + "-none", k), "2")
        self.assertEqual(self.cli("SET", k, "other", "NX"), "")
        self.assertEqual(self.cli("SET", k, "other", "XX", "EX", "60"), "OK")
        self.assertEqual(self.cli("GET", k), "other", "SET replaces")
        self.assertEqual(self.cli("SET", k + "-none", "x", "XX"), "")
        self.assertEqual(self.cli("MSET", k + "a", "1", k + "b", "22"), "OK")
        self.assertEqual(self.cli("MGET", k + "a", k + "b", k + "-none").split("\n")[:2], ["1", "22"])
        self.assertEqual(self.cli("TYPE", k), "string")
        self.assertEqual(self.cli("UNLINK", k + "a"), "1")
        self.assertEqual(self.cli("DEL", k, k + "b", k + "-none"), "2")
        self.assertEqual(self.cli("GET", k), "")
        self.assertIn("db0:keys=", self.cli("INFO", "keyspace"))
        self.assertRegex(self.cli("DBSIZE"), r"^\d+$")
        self.assertRegex(self.cli("CLIENT", "ID"), r"^\d+$")
        self.assertEqual(self.cli("CLIENT", "SETNAME", "tester"), "OK")
        self.assertEqual(self.cli("SELECT", "2"), "OK")
        self.assertIn("ERR unknown command 'NOSUCH'", self.cli("NOSUCH", "x"))
        self.assertIn("ERR wrong number of arguments for 'get' command", self.cli("GET"))
        self.assertEqual(self.cli("SET", k, "v"), "OK")
        self.assertIn("WRONGTYPE", self.cli("HGET", k, "f"))
        self.assertIn("ERR", self.cli("SET", k, ""), "an empty value is refused, in words")

    def test_large_values_come_back_byte_for_byte(self):
        value = os.urandom(4 << 20)
        k = f"big-{time.monotonic_ns()}"
        self.assertEqual(self.cli("-x", "SET", k, stdin=value), "OK")
        with socket.create_connection(("127.0.0.1", self.port)) as s:
            s.sendall(b"*2\r\n$3\r\nGET\r\n$" + str(len(k)).encode() + b"\r\n" + k.encode() + b"\r\n")
            head = b""
            while not head.endswith(b"\r\n"):
                head += s.recv(1)
            self.assertEqual(head, f"${len(value)}\r\n".encode())
            body = b""
            while len(body) < len(value) + 2:
                body += s.recv(1 << 20)
            self.assertEqual(body[:-2], value)

    def test_pipelines_and_many_connections_from_redis_benchmark(self):
        if shutil.which("redis-benchmark") is None:
            self.skipTest("redis-benchmark is not installed (Debian: redis-tools)")
        out = subprocess.run(["redis-benchmark", "-p", str(self.port), "-t", "set,get", "-n", "2000", "-c", "20",
                              "-P", "8", "-d", "4096", "-r", "500", "-q"], capture_output=True, timeout=120, check=True)
        text = out.stdout.decode()
        for command in ("SET", "GET"):
            self.assertRegex(text, rf"{command}: [\d.]+ requests per second", text)
        self.assertEqual(self.cli("PING"), "PONG", "still serving")

    def test_hello_3_answers_a_resp3_map_and_nils_become_resp3_nulls(self):
        with socket.create_connection(("127.0.0.1", self.port)) as s:
            s.sendall(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n*2\r\n$3\r\nGET\r\n$7\r\nno-such\r\n")
            got = b""
            while not got.endswith(b"_\r\n"):
                got += s.recv(4096)
            self.assertTrue(got.startswith(b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n"), got[:60])
            self.assertIn(b"$5\r\nproto\r\n:3\r\n", got)

    def test_a_pipeline_is_answered_in_order(self):
        with socket.create_connection(("127.0.0.1", self.port)) as s:
            commands = b"".join(
                f"*3\r\n$3\r\nSET\r\n$5\r\npipe{i}\r\n$1\r\n{i}\r\n*2\r\n$3\r\nGET\r\n$5\r\npipe{i}\r\n".encode()
                for i in range(10))
            s.sendall(commands)
            expected = b"".join(f"+OK\r\n$1\r\n{i}\r\n".encode() for i in range(10))
            got = b""
            while len(got) < len(expected):
                got += s.recv(4096)
            self.assertEqual(got, expected)

    def test_a_client_killed_in_the_middle_of_a_value_leaves_nothing(self):
        k = f"half-{time.monotonic_ns()}"
        s = socket.create_connection(("127.0.0.1", self.port))
        s.sendall(b"*3\r\n$3\r\nSET\r\n$" + str(len(k)).encode() + b"\r\n" + k.encode() + b"\r\n$1048576\r\n"
                  + bytes(500_000))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()  # a reset, as a killed process's socket ends
        time.sleep(0.2)
        self.assertEqual(self.cli("EXISTS", k), "0", "nothing half-written is ever read")
        self.assertEqual(self.cli("PING"), "PONG")

    def test_a_value_set_over_resp_is_the_page_of_its_documented_key(self):
        k, value = f"mapped-{time.monotonic_ns()}", os.urandom(10_000)
        self.assertEqual(self.cli("-x", "SET", k, stdin=value), "OK")
        with HiCacheClient(port=self.daemon.port, local=False) as binary:
            target = bytearray(len(value))
            ns, page = Namespace("resp"), hashlib.sha256(k.encode()).digest()
            self.assertEqual(binary.get(ns, [page], [target]), [Status.OK])
            self.assertEqual(bytes(target), value)
            self.assertEqual(binary.put(ns, [hashlib.sha256(b"from-binary").digest()], [b"xyz"]), [Status.OK])
        self.assertEqual(self.cli("GET", "from-binary"), "xyz")

    def test_the_redis_package_speaks_resp2_and_resp3(self):
        try:
            import redis  # type: ignore[import-not-found]
        except ImportError:
            self.skipTest("the redis package is not importable here (Debian: python3-redis, for /usr/bin/python3)")
        major = int(redis.__version__.split(".")[0])
        for protocol in (2, 3) if major >= 5 else (2,):  # RESP3 parsing came with redis-py 5 (Debian 12 has 4.3)
            r = redis.Redis(port=self.port, protocol=protocol) if major >= 5 else redis.Redis(port=self.port)
            self.assertTrue(r.ping())
            self.assertTrue(r.set(f"py{protocol}", b"\x00\x01binary"))
            self.assertEqual(r.get(f"py{protocol}"), b"\x00\x01binary")
            self.assertIsNone(r.get("py-none"))
            pipe = r.pipeline(transaction=False)
            for i in range(20):
                pipe.set(f"pp{protocol}-{i}", str(i))
            for i in range(20):
                pipe.get(f"pp{protocol}-{i}")
            self.assertEqual(pipe.execute()[20:], [str(i).encode() for i in range(20)])
            self.assertEqual(r.delete(*[f"pp{protocol}-{i}" for i in range(20)]), 20)
            r.close()


class RespAuthTest(unittest.TestCase):
    def test_a_daemon_with_a_token_refuses_until_auth_and_names_tenants_by_user(self):
        why = missing_daemon()
        if why:
            self.skipTest(why)
        if shutil.which("redis-cli") is None:
            self.skipTest("redis-cli is not installed (Debian: redis-tools)")
        daemon = DaemonProcess("--server.resp-port=0", token=TOKEN).start()
        try:
            port = str(resp_port(daemon))

            def cli(*args: str) -> str:
                out = subprocess.run(["redis-cli", "-p", port, *args], capture_output=True, timeout=30, check=True)
                return (out.stdout + out.stderr).decode().strip()

            self.assertIn("NOAUTH", cli("GET", "x"))
            self.assertIn("WRONGPASS", cli("-a", "wrong", "--no-auth-warning", "GET", "x"))
            self.assertEqual(cli("-a", TOKEN, "--no-auth-warning", "SET", "x", "default-tenant"), "OK")
            self.assertEqual(cli("--user", "acme", "--pass", TOKEN, "--no-auth-warning", "SET", "x", "acme"), "OK")
            self.assertEqual(cli("--user", "acme", "--pass", TOKEN, "--no-auth-warning", "GET", "x"), "acme")
            self.assertEqual(cli("-a", TOKEN, "--no-auth-warning", "GET", "x"), "default-tenant", "tenants apart")
        finally:
            daemon.stop()


if __name__ == "__main__":
    unittest.main()
