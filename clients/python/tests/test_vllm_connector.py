"""The vLLM KV connector (``hicache.vllm``) in the fake vLLM of ``tests/fake_vllm.py``, against a real daemon.

Each "vLLM instance" is a :class:`fake_vllm.Engine`: vLLM's scheduler calls and model-runner calls in vLLM's order,
with KV caches in ``ctypes`` memory shaped as vLLM's attention backends shape them, and a "model" whose KV is a
function of the whole prefix, so every byte a load writes is checked against what the model would have computed.
"""

from __future__ import annotations

import ctypes
import os
import random
import socket
import subprocess
import sys
import time
import unittest

from hicache import HiCacheClient, Status
from hicache.vllm import ConnectorSettings, EngineIdentity, HiCacheConnector, KVLayout, page_key
from hicache.vllm.config import BLOCK_HASH_TAG, block_keys

from . import fake_vllm
from .daemon_process import DaemonProcess
from .support import DaemonModule

MODULE = DaemonModule()
setUpModule = MODULE.set_up
tearDownModule = MODULE.tear_down

BLOCK = 16


def prompt(length: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(1, 30000) for _ in range(length)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EngineTest(unittest.TestCase):
    """Helpers: engines on the module's daemon, a namespace of their own per test."""

    def setUp(self) -> None:
        self.model = "test/" + self.id().rsplit(".", 1)[-1]
        self.client = HiCacheClient(port=MODULE.port, timeout_s=20)
        self.addCleanup(self.client.close)

    def extra(self, **overrides):
        extra = {"port": MODULE.port, "timeout_s": 20, "weights_revision": "rev-1"}
        extra.update(overrides)
        return extra

    def engine(self, extra=None, **kwargs) -> fake_vllm.Engine:
        kwargs.setdefault("model", self.model)
        engine = fake_vllm.Engine(self.extra() if extra is None else extra, **kwargs)
        self.addCleanup(engine.shutdown)
        return engine

    def check_kv(self, engine: fake_vllm.Engine, req_id: str, tokens: list[int], blocks: int) -> None:
        """Every byte of the request's first ``blocks`` blocks, every layer, every rank, is the model's KV."""
        for runner in engine.runners:
            block_ids = runner.block_ids[req_id]
            for index in range(blocks):
                for layer in range(runner.spec.num_layers):
                    self.assertEqual(runner.read_block(layer, block_ids[index]),
                                     runner.expected_block(tokens, index, layer),
                                     f"rank {runner.tp_rank}, block {index} (id {block_ids[index]}), layer {layer}")

    def store(self, tokens: list[int], req_id: str = "writer", **kwargs) -> fake_vllm.Engine:
        writer = self.engine(**kwargs)
        writer.request(req_id, tokens, max_tokens=2)
        writer.run()
        return writer

    def keys(self, engine: fake_vllm.Engine, tokens: list[int]) -> list[bytes]:
        request = fake_vllm.Request("probe", tokens, engine.hasher)
        return block_keys(request.block_hashes, 1)

    def namespace(self, engine: fake_vllm.Engine, rank: int = 0):
        return engine.runners[rank].connector.worker_side.namespace


class RoundTripTest(EngineTest):
    def test_a_second_instance_loads_the_prefix_into_other_blocks_every_byte_checked(self):
        tokens = prompt(100, 1)
        writer = self.store(tokens)
        self.assertEqual(self.client.leading_hits(self.namespace(writer), self.keys(writer, tokens)), 6)
        self.assertEqual(writer.runners[0].connector.stats().get("blocks_saved"), 6)
        reader = self.engine(block_order=list(range(63, -1, -1)))
        reader.request("reader", tokens, max_tokens=2)
        first = reader.step()
        self.assertEqual(reader.scheduler.matched["reader"], 96)
        self.assertEqual(first.num_scheduled_tokens["reader"], 4)  # only the tail is computed
        loaded = reader.runners[0].block_ids["reader"][:6]
        self.assertTrue(set(loaded).isdisjoint(writer.runners[0].block_ids["writer"][:6]), "other block ids")
        self.check_kv(reader, "reader", tokens, 6)
        self.assertEqual(reader.runners[0].connector.stats().get("blocks_loaded"), 6)
        reader.run()
        self.check_kv(reader, "reader", tokens, 6)
        self.assertEqual(reader.runners[0].connector.stats().get("blocks_saved", 0), 0, "stored blocks are not "
                         "stored again")

    def test_over_tcp_too(self):
        tokens = prompt(80, 2)
        self.store(tokens, extra=self.extra(local=False))
        reader = self.engine(self.extra(local=False), block_order=list(range(63, -1, -1)))
        reader.request("reader", tokens, max_tokens=1)
        reader.step()
        self.assertEqual(reader.scheduler.matched["reader"], 64)
        self.check_kv(reader, "reader", tokens, 4)

    def test_prefix_matching_follows_vllms_block_hashes(self):
        tokens = prompt(100, 3)
        self.store(tokens)
        reader = self.engine()
        shared = tokens[:50] + prompt(30, 4)  # the first 3 blocks are the same
        reader.request("shared", shared, max_tokens=1)
        reader.step()
        self.assertEqual(reader.scheduler.matched["shared"], 48)
        self.check_kv(reader, "shared", shared, 3)
        reader.run()
        # A whole-block prompt: vLLM must compute its last token, so its last block is not offered; the first 3
        # blocks are in vLLM's own prefix cache now (the request above), so 2 come from the daemon.
        exact = tokens[:96]
        reader.request("exact", exact, max_tokens=1)
        first = reader.step()
        self.assertEqual(reader.scheduler.matched["exact"], 32)
        self.assertEqual(first.scheduled_new_reqs[0].num_computed_tokens, 80)
        self.check_kv(reader, "exact", exact, 5)
        reader.run()
        # Other extra keys of vLLM's block hashes (a cache salt, a LoRA adapter) hit nothing.
        reader.request("salted", tokens, max_tokens=1, cache_salt="tenant-b")
        reader.request("lora", tokens, max_tokens=1, lora_name="adapter-1")
        reader.run()
        self.assertEqual((reader.scheduler.matched["salted"], reader.scheduler.matched["lora"]), (0, 0))

    def test_blocks_vllm_holds_itself_are_not_loaded_again(self):
        tokens = prompt(100, 5)
        self.store(tokens)
        reader = self.engine()
        reader.request("short", tokens[:40], max_tokens=1)  # caches 2 blocks of the prefix locally
        reader.run()
        self.assertEqual(reader.scheduler.matched["short"], 32)
        reader.request("long", tokens, max_tokens=1)
        first = reader.step()
        self.assertEqual(first.scheduled_new_reqs[0].num_computed_tokens, 96)
        self.assertEqual(reader.scheduler.matched["long"], 64, "blocks 2..5 from the daemon, 0..1 from vLLM")
        self.check_kv(reader, "long", tokens, 6)

    def test_a_local_prefix_ahead_of_the_daemon_still_loads_what_follows_it(self):
        tokens = prompt(100, 6)
        writer = self.store(tokens)
        ns, keys = self.namespace(writer), self.keys(writer, tokens)
        self.assertEqual(self.client.delete(ns, keys[:1]), [Status.OK])  # the daemon lost block 0
        reader = self.engine()
        reader.request("short", tokens[:40], max_tokens=1)  # vLLM computes blocks 0..1 (and stores block 0 again)
        reader.run()
        self.client.delete(ns, keys[:1])
        reader.request("long", tokens, max_tokens=1)
        reader.step()
        self.assertEqual(reader.scheduler.matched["long"], 64)
        self.check_kv(reader, "long", tokens, 6)
        reader.run()
        self.assertEqual(self.client.leading_hits(ns, keys), 6, "the blocks the daemon lacked are stored again")

    def test_chunked_prefill_and_decode_blocks_are_saved_as_they_fill(self):
        tokens = prompt(100, 7)
        writer = self.engine(max_num_batched_tokens=40)
        request = writer.request("w", tokens, max_tokens=30)
        writer.run()
        keys = block_keys(request.block_hashes, 1)
        self.assertEqual(len(keys), 8)  # 130 tokens
        self.assertEqual(self.client.leading_hits(self.namespace(writer), keys), 8)  # token 129's KV is computed
        prompt_only = self.engine(self.extra(save_decode_blocks=False), model=self.model + "/prompt-only")
        request = prompt_only.request("p", tokens, max_tokens=30)
        prompt_only.run()
        self.assertEqual(self.client.leading_hits(self.namespace(prompt_only), block_keys(request.block_hashes, 1)),
                         6)
        reader = self.engine(block_order=list(range(63, -1, -1)))
        reader.request("r", request.all_token_ids, max_tokens=1)
        reader.step()
        self.assertEqual(reader.scheduler.matched["r"], 128)
        self.check_kv(reader, "r", request.all_token_ids, 8)


class LayoutTest(EngineTest):
    def test_flashinfer_and_hnd_caches_share_pages_with_flash_attention(self):
        tokens = prompt(64, 8)
        self.store(tokens, spec=fake_vllm.CacheSpec("flash_attn", "NHD"))
        for backend, layout in (("flashinfer", "HND"), ("flash_attn", "HND"), ("flashinfer", "NHD")):
            with self.subTest(backend=backend, layout=layout):
                reader = self.engine(spec=fake_vllm.CacheSpec(backend, layout), block_order=list(range(63, -1, -1)))
                reader.request("r", tokens, max_tokens=1)
                reader.step()
                self.assertEqual(reader.scheduler.matched["r"], 48)
                self.check_kv(reader, "r", tokens, 3)

    def test_mla_pages_are_written_by_rank_0_and_read_by_every_rank(self):
        spec = fake_vllm.CacheSpec("mla", head_dim=24)
        tokens = prompt(70, 9)
        writer = self.store(tokens, spec=spec, tp_size=2)
        ns = self.namespace(writer)
        self.assertEqual((ns.tp_rank, ns.tp_size), (0, 1))
        self.assertEqual(self.namespace(writer, 1), ns)
        self.assertEqual(writer.runners[0].connector.stats().get("blocks_saved"), 4)
        self.assertEqual(writer.runners[1].connector.stats().get("blocks_saved", 0), 0)
        reader = self.engine(spec=spec, tp_size=2, block_order=list(range(63, -1, -1)))
        reader.request("r", tokens, max_tokens=1)
        reader.step()
        self.assertEqual(reader.scheduler.matched["r"], 64)
        self.check_kv(reader, "r", tokens, 4)

    def test_tensor_parallel_ranks_store_under_their_own_namespaces(self):
        tokens = prompt(100, 10)
        writer = self.store(tokens, tp_size=2)
        keys = self.keys(writer, tokens)
        ns0, ns1 = self.namespace(writer, 0), self.namespace(writer, 1)
        self.assertEqual([(ns.tp_rank, ns.tp_size) for ns in (ns0, ns1)], [(0, 2), (1, 2)])
        self.assertNotEqual(ns0.id, ns1.id)
        self.assertEqual([self.client.leading_hits(ns, keys) for ns in (ns0, ns1)], [6, 6])
        reader = self.engine(tp_size=2, block_order=list(range(63, -1, -1)))
        reader.request("r", tokens, max_tokens=1)
        reader.step()
        self.assertEqual(reader.scheduler.matched["r"], 96)
        self.check_kv(reader, "r", tokens, 6)
        single = self.engine()  # TP 1 is another namespace
        single.request("s", tokens, max_tokens=1)
        single.step()
        self.assertEqual(single.scheduler.matched["s"], 0)
        # A block only rank 1 lacks is no hit: every rank must hold it.
        self.client.delete(ns1, keys[2:3])
        partial = self.engine(tp_size=2)
        partial.request("p", tokens, max_tokens=1)
        partial.step()
        self.assertEqual(partial.scheduler.matched["p"], 32)
        self.check_kv(partial, "p", tokens, 6)

    def test_layer_order_and_page_layout(self):
        runner = fake_vllm.ModelRunner(None, fake_vllm.CacheSpec("flash_attn", "NHD", num_layers=12), 4, BLOCK)
        caches = dict(reversed(list(runner.kv_caches.items())))
        layout = KVLayout(caches, BLOCK)
        self.assertEqual(layout.layer_names, [fake_vllm.layer_name(i) for i in range(12)])
        self.assertEqual(layout.page_bytes, 2 * 12 * BLOCK * 2 * 8 * 2)
        page = layout.host_page(3)
        self.assertEqual(len(page), 24)  # K of every layer, then V of every layer
        k0 = runner.kv_caches[fake_vllm.layer_name(0)]
        self.assertEqual(page[0], (k0.address((0, 3, 0, 0, 0)), BLOCK * 2 * 8 * 2))
        self.assertEqual(page[12][0], k0.address((1, 3, 0, 0, 0)))
        hnd = fake_vllm.ModelRunner(None, fake_vllm.CacheSpec("flash_attn", "HND", num_layers=1), 4, BLOCK)
        self.assertEqual(len(KVLayout(hnd.kv_caches, BLOCK).host_page(0)), 2 * BLOCK * 2)  # a row per token, head
        flashinfer = fake_vllm.ModelRunner(None, fake_vllm.CacheSpec("flashinfer", "NHD", num_layers=2), 4, BLOCK)
        self.assertEqual(len(KVLayout(flashinfer.kv_caches, BLOCK).host_page(1)), 4)
        with self.assertRaisesRegex(ValueError, "none of"):
            KVLayout({"x": fake_vllm.allocate_kv_cache("flash_attn", "NHD", 4, 8, 2, 8, fake_vllm.BFLOAT16)}, BLOCK)
        with self.assertRaisesRegex(ValueError, "none of"):  # a 4-D view, e.g. [num_blocks, heads, block, dim]
            KVLayout({"x": fake_vllm.FakeTensor((ctypes.c_char * 4096)(), 0, (4, 2, BLOCK, 8),
                                                (2 * BLOCK * 8, BLOCK * 8, 8, 1), fake_vllm.BFLOAT16)}, BLOCK)
        with self.assertRaisesRegex(ValueError, "outside"):
            layout.host_page(4)


class FailureTest(EngineTest):
    def test_a_daemon_that_is_down_gives_zero_tokens_and_vllm_computes_everything(self):
        port = free_port()
        engine = self.engine(self.extra(port=port, timeout_s=2, lookup_timeout_s=0.5))
        tokens = prompt(100, 11)
        start = time.monotonic()
        engine.request("a", tokens, max_tokens=2)
        engine.request("b", tokens, max_tokens=2)
        engine.run()
        self.assertLess(time.monotonic() - start, 15)
        self.assertEqual(engine.scheduler.matched, {"a": 0, "b": 0})
        stats = engine.scheduler_connector.stats()
        self.assertEqual(stats.get("lookups_failed"), 1, "after a failed lookup the next ones are skipped a while")
        self.assertEqual(engine.runners[0].connector.stats().get("blocks_save_failed"), 6)
        self.check_kv(engine, "b", tokens, 6)

    def test_a_stalled_daemon_costs_the_scheduler_one_lookup_timeout(self):
        daemon = DaemonProcess().start()
        self.addCleanup(daemon.stop)
        engine = self.engine(self.extra(port=daemon.port, timeout_s=1, lookup_timeout_s=0.5, retry_after_s=60))
        daemon.pause()
        self.addCleanup(daemon.resume)
        start = time.monotonic()
        for i in range(3):
            request = fake_vllm.Request(f"r{i}", prompt(64, 12), engine.hasher)
            self.assertEqual(engine.scheduler_connector.get_num_new_matched_tokens(request, 0), (0, False))
        self.assertLess(time.monotonic() - start, 3.0)

    def test_the_daemon_dying_between_lookup_and_load_means_recomputation(self):
        daemon = DaemonProcess().start()
        self.addCleanup(daemon.stop)
        extra = self.extra(port=daemon.port, timeout_s=2)
        tokens = prompt(100, 13)
        self.store(tokens, extra=extra)
        reader = self.engine(extra, block_order=list(range(63, -1, -1)))
        reader.request("r", tokens, max_tokens=2)
        output = reader.scheduler.schedule()
        self.assertEqual(reader.scheduler.matched["r"], 96)
        daemon.kill()
        reader.execute(output)
        self.assertEqual(reader.scheduler.recomputed["r"], 0)
        self.assertEqual(reader.runners[0].connector.stats().get("blocks_load_failed"), 6)
        reader.run()
        self.check_kv(reader, "r", tokens, 6)

    def test_a_partial_load_failure_reports_exactly_the_failed_blocks(self):
        tokens = prompt(100, 14)
        writer = self.store(tokens)
        ns, keys = self.namespace(writer), self.keys(writer, tokens)
        reader = self.engine(block_order=list(range(63, -1, -1)))
        reader.request("r", tokens, max_tokens=2)
        output = reader.scheduler.schedule()
        self.assertEqual(reader.scheduler.matched["r"], 96)
        # Between the lookup and the load: block 3 is evicted, block 4 replaced by a page of another size.
        self.assertEqual(self.client.delete(ns, keys[3:5]), [Status.OK, Status.OK])
        self.assertEqual(self.client.put(ns, keys[4:5], [b"x" * 100]), [Status.OK])
        runner = reader.runners[0]
        errors = []
        original = runner.connector.get_block_ids_with_load_errors

        def spy():
            found = original()
            errors.append(found)
            return found

        runner.connector.get_block_ids_with_load_errors = spy
        reader.execute(output)
        block_ids = runner.block_ids["r"]
        self.assertEqual(errors[0], {block_ids[3], block_ids[4]})
        self.assertEqual(reader.scheduler.recomputed["r"], 48, "vLLM recomputes from the first failed block")
        self.check_kv(reader, "r", tokens, 3)
        reader.run()
        self.check_kv(reader, "r", tokens, 6)
        # The missing page is stored again as it is recomputed, and the page of the wrong size was removed at the
        # load so that its recomputed page replaces it.
        self.assertEqual(self.client.leading_hits(ns, keys), 6)
        page = bytearray(reader.runners[0].connector.worker_side.layout.page_bytes)
        self.assertEqual(self.client.get(ns, keys[3:5], [page, bytearray(len(page))]), [Status.OK, Status.OK])

    def test_a_connector_that_did_not_report_failures_would_leave_wrong_kv(self):
        """The check above can fail: the same partial failure, unreported, leaves bytes that are not the model's."""
        tokens = prompt(100, 15)
        writer = self.store(tokens)
        ns, keys = self.namespace(writer), self.keys(writer, tokens)
        reader = self.engine(block_order=list(range(63, -1, -1)))
        reader.request("r", tokens, max_tokens=1)
        output = reader.scheduler.schedule()
        self.client.delete(ns, keys[3:4])
        reader.runners[0].connector.get_block_ids_with_load_errors = lambda: set()
        reader.execute(output)
        with self.assertRaises(AssertionError):
            self.check_kv(reader, "r", tokens, 6)


class NamespaceTest(EngineTest):
    def test_revision_model_and_dtype_keep_pages_apart_and_short_hashes_work(self):
        tokens = prompt(64, 16)
        self.store(tokens)
        for name, kwargs in (("revision", {"extra": self.extra(weights_revision="rev-2")}),
                             ("model", {"model": self.model + "-other"}),
                             ("dtype", {"spec": fake_vllm.CacheSpec(dtype=fake_vllm.FLOAT16)}),
                             ("hash seed", {"seed": "1"})):
            with self.subTest(name):
                other = self.engine(**kwargs)
                other.request("r", tokens, max_tokens=1)
                other.step()
                self.assertEqual(other.scheduler.matched["r"], 0)
        self.store(tokens, hash_fn=fake_vllm.short_hash, model=self.model + "/xxhash")
        reader = self.engine(hash_fn=fake_vllm.short_hash, model=self.model + "/xxhash")
        reader.request("r", tokens, max_tokens=1)
        reader.step()
        self.assertEqual(reader.scheduler.matched["r"], 48)
        self.check_kv(reader, "r", tokens, 3)

    def test_kv_roles(self):
        tokens = prompt(64, 17)
        producer = self.engine(kv_role="kv_producer")
        producer.request("p", tokens, max_tokens=1)
        producer.run()
        producer.request("p2", tokens, max_tokens=1)  # vLLM's own cache is not the daemon: no load anyway
        producer.run()
        self.assertEqual(producer.scheduler.matched, {"p": 0, "p2": 0})
        consumer = self.engine(kv_role="kv_consumer")
        consumer.request("c", tokens, max_tokens=1)
        consumer.step()
        self.assertEqual(consumer.scheduler.matched["c"], 48)
        fresh = prompt(64, 18)
        consumer.request("c2", fresh, max_tokens=1)
        consumer.run()
        self.assertEqual(self.client.leading_hits(self.namespace(consumer), self.keys(consumer, fresh)), 0)


class ConfigTest(unittest.TestCase):
    def test_page_keys(self):
        digest = bytes(range(32))
        self.assertEqual(page_key(digest), digest)
        short = bytes(16)
        self.assertEqual(len(page_key(short)), 32)
        self.assertNotEqual(page_key(short), page_key(bytes(17)))
        import hashlib
        self.assertEqual(page_key(short), hashlib.sha256(BLOCK_HASH_TAG + b"bytes:" + short).digest())
        self.assertNotEqual(page_key(5), page_key("5"))
        with self.assertRaises(TypeError):
            page_key(1.5)
        self.assertEqual(block_keys([b"a" * 32, b"b" * 32, b"c" * 32, b"d" * 32], 2), [b"b" * 32, b"d" * 32])

    def test_settings(self):
        s = ConnectorSettings.from_extra_config({"port": "7371", "local": "false", "dtype": "bf16", "typo": 1})
        self.assertEqual((s.port, s.local, s.dtype, s.unknown_keys), (7371, False, "bfloat16", ("typo",)))
        for bad in ({"port": 0}, {"timeout_s": -1}, {"dtype": "int4"}, {"model": ""}, {"staging_bytes": 5},
                    {"save_decode_blocks": "maybe"}):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                ConnectorSettings.from_extra_config(bad)

    def test_identity(self):
        config = fake_vllm.VllmConfig(fake_vllm.ModelConfig("m", fake_vllm.BFLOAT16, revision="abc",
                                                            quantization="awq"),
                                      fake_vllm.CacheConfig(block_size=32, cache_dtype="fp8", hash_block_size=16),
                                      fake_vllm.ParallelConfig(tensor_parallel_size=2, pipeline_parallel_size=2))
        identity = EngineIdentity.from_vllm_config(config, ConnectorSettings())
        self.assertEqual((identity.dtype, identity.revision, identity.hash_stride), ("fp8_e4m3", "abc", 2))
        ns = identity.namespace(1, 1)
        self.assertEqual((ns.tp_rank, ns.tp_size, ns.page_tokens, ns.extra), (1, 2, 32, "weights-quant=awq/pp1"))
        self.assertEqual(len(identity.all_namespaces()), 4)
        config.cache_config.cache_dtype = "auto"
        self.assertEqual(EngineIdentity.from_vllm_config(config, ConnectorSettings()).dtype, "bfloat16")
        config.model_config.dtype = fake_vllm.UINT8
        with self.assertRaisesRegex(ValueError, "'dtype'"):
            EngineIdentity.from_vllm_config(config, ConnectorSettings())
        self.assertEqual(EngineIdentity.from_vllm_config(config, ConnectorSettings(dtype="fp8_e5m2")).dtype,
                         "fp8_e5m2")

    def test_the_metadata_survives_pickling(self):
        import pickle
        from hicache.vllm import BlockTransfer, HiCacheConnectorMetadata
        meta = HiCacheConnectorMetadata(loads=[BlockTransfer("r", [3, 1], [b"a" * 32, b"b" * 32])],
                                        saves=[BlockTransfer("s", [7], [b"c" * 32])])
        self.assertEqual(pickle.loads(pickle.dumps(meta)), meta)  # vLLM sends it to the workers pickled

    def test_vllms_factory_loads_it_by_module_path(self):
        cls = fake_vllm.get_connector_class(fake_vllm.KVTransferConfig())
        self.assertIs(cls, HiCacheConnector)

    def test_with_vllm_installed_it_derives_from_vllms_base_class(self):
        code = ("import sys; from tests import fake_vllm; fake_vllm.install_as_vllm(); import hicache.vllm as v; "
                "base = sys.modules['vllm.distributed.kv_transfer.kv_connector.v1.base']; "
                "assert v.VLLM_AVAILABLE and issubclass(v.HiCacheConnector, base.KVConnectorBase_V1); "
                "c = fake_vllm.create_connector(fake_vllm.VllmConfig(kv_transfer_config=fake_vllm.KVTransferConfig("
                "kv_connector_extra_config={'port': %d})), base.KVConnectorRole.SCHEDULER, None); "
                "print(type(c).__mro__[1].__module__)" % free_port())
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        root = os.path.dirname(os.path.dirname(os.path.abspath(fake_vllm.__file__)))
        result = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True,
                                timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.strip(), "vllm.distributed.kv_transfer.kv_connector.v1.base")


if __name__ == "__main__":
    unittest.main()
