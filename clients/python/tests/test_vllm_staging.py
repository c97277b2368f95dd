"""The vLLM connector's GPU path (pinned staging, torch) run on torch CPU tensors, against a real daemon.

A worker whose KV caches are on a GPU moves pages through host staging (``hicache.vllm.layout.DeviceMover``): a
gather of the blocks with torch, one copy out (saves) or in (loads). Here the caches are torch CPU tensors and the
workers are told to take that path anyway (``staging_on_host``), so the same code runs without a GPU; every byte is
checked as in ``test_vllm_connector``. Skipped where torch is not installed (the rest of the suite needs no torch).
``clients/python/interop/gpu_vllm.py`` runs it on a GPU.
"""

from __future__ import annotations

import unittest

from . import fake_vllm
from .test_vllm_connector import MODULE, EngineTest, prompt

try:
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    torch = None

setUpModule = MODULE.set_up
tearDownModule = MODULE.tear_down

REVERSED = list(range(63, -1, -1))


@unittest.skipIf(torch is None, "torch is not installed")
class StagingTest(EngineTest):
    def test_staged_saves_and_loads_of_every_backend_layout(self):
        tokens = prompt(100, 21)
        for backend, layout in (("flash_attn", "NHD"), ("flash_attn", "HND"), ("flashinfer", "NHD"), ("mla", "NHD")):
            with self.subTest(backend=backend, layout=layout):
                spec = fake_vllm.CacheSpec(backend, layout, head_dim=24 if backend == "mla" else 8)
                model = f"{self.model}/{backend}/{layout}"
                writer = self.engine(spec=spec, model=model, torch=torch, staging=True)
                self.assertIsNotNone(writer.runners[0].connector.worker_side.mover)
                writer.request("w", tokens, max_tokens=2)
                writer.run()
                writer.runners[0].connector.worker_side.close()  # the last put runs in the background
                self.assertEqual(writer.runners[0].connector.stats().get("blocks_saved"), 6)
                reader = self.engine(spec=spec, model=model, torch=torch, staging=True, block_order=REVERSED)
                reader.request("r", tokens, max_tokens=1)
                reader.step()
                self.assertEqual(reader.scheduler.matched["r"], 96)
                self.check_kv(reader, "r", tokens, 6)

    def test_more_blocks_than_the_staging_holds_go_in_chunks(self):
        spec = fake_vllm.CacheSpec(heads=8, head_dim=128, num_layers=4)  # 256 KiB pages: 4 fit in 1 MiB
        extra = self.extra(staging_bytes=1 << 20)
        tokens = prompt(100, 22)
        writer = self.engine(extra, spec=spec, torch=torch, staging=True)
        self.assertEqual(writer.runners[0].connector.worker_side.mover.capacity, 4)
        writer.request("w", tokens, max_tokens=1)
        writer.run()
        writer.runners[0].connector.worker_side.close()
        self.assertEqual(writer.runners[0].connector.stats().get("blocks_saved"), 6)
        reader = self.engine(extra, spec=spec, torch=torch, staging=True, block_order=REVERSED)
        reader.request("r", tokens, max_tokens=1)
        reader.step()
        self.assertEqual(reader.scheduler.matched["r"], 96)
        self.check_kv(reader, "r", tokens, 6)

    def test_torch_host_caches_move_in_place_and_share_pages_with_staged_ones(self):
        tokens = prompt(80, 23)
        writer = self.engine(torch=torch)  # torch CPU caches, no staging: pages straight from the tensors
        self.assertIsNone(writer.runners[0].connector.worker_side.mover)
        writer.request("w", tokens, max_tokens=1)
        writer.run()
        reader = self.engine(torch=torch, staging=True, block_order=REVERSED)
        reader.request("r", tokens, max_tokens=1)
        reader.step()
        self.assertEqual(reader.scheduler.matched["r"], 64)
        self.check_kv(reader, "r", tokens, 4)

    def test_a_partial_load_failure_on_the_staged_path(self):
        tokens = prompt(100, 24)
        writer = self.engine(torch=torch, staging=True)
        writer.request("w", tokens, max_tokens=1)
        writer.run()
        writer.runners[0].connector.worker_side.close()
        ns, keys = self.namespace(writer), self.keys(writer, tokens)
        reader = self.engine(torch=torch, staging=True, block_order=REVERSED)
        reader.request("r", tokens, max_tokens=2)
        output = reader.scheduler.schedule()
        self.client.delete(ns, keys[2:3])
        reader.execute(output)
        self.assertEqual(reader.scheduler.recomputed["r"], 32)
        reader.run()
        self.check_kv(reader, "r", tokens, 6)


if __name__ == "__main__":
    unittest.main()
