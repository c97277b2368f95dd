"""A daemon that requires a token: the wrong one, or none, is a clear error; the right one works."""

import unittest

from hicache import ErrorCode, HiCacheAuthError, HiCacheClient, Namespace, Status

from .support import DaemonModule, random_hashes

TOKEN = "s3cret-token"
MODULE = DaemonModule(token=TOKEN)
setUpModule = MODULE.set_up
tearDownModule = MODULE.tear_down


class AuthTest(unittest.TestCase):
    def client(self, token: str) -> HiCacheClient:
        client = HiCacheClient(port=MODULE.port, token=token, local=False, timeout_s=10)
        self.addCleanup(client.close)
        return client

    def test_a_wrong_token_raises_auth_error_for_every_call(self):
        client = self.client("not-the-token")
        with self.assertRaises(HiCacheAuthError) as caught:
            client.health()
        self.assertEqual(caught.exception.code, ErrorCode.AUTH)
        self.assertIn("token", str(caught.exception))
        # Page calls raise too: a wrong token is a mistake to fix, not a page that failed.
        with self.assertRaises(HiCacheAuthError):
            client.put(Namespace("m"), random_hashes(1), [b"page"])

    def test_no_token_raises_auth_error(self):
        with self.assertRaises(HiCacheAuthError):
            self.client("").stats()

    def test_the_right_token_works(self):
        client = self.client(TOKEN)
        hashes = random_hashes(1)
        self.assertEqual(client.put(Namespace("m"), hashes, [b"page"]), [Status.OK])
        self.assertEqual(client.leading_hits(Namespace("m"), hashes), 1)


if __name__ == "__main__":
    unittest.main()
