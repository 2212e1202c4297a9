"""kvtier.GpuClient and kvtier.KvCache: the layout arithmetic from tensor-like objects (runs
everywhere, no torch needed), and with torch and a GPU, round trips between two paged caches
through a real kvtierd with the source overwritten right after each put.

Run as test_client.py is (same environment variables).
"""

import os
import random
import unittest

import kvtier
from kvtier import BlockCode, KvtierError

from test_client import BLOCK, MODEL, Daemon


class FakeTensor:
    """What KvCache reads of a torch tensor: data_ptr(), shape, stride(), element_size()."""

    def __init__(self, ptr, shape, elem=2):
        self.ptr, self.shape, self.elem = ptr, shape, elem
        strides, acc = [], 1
        for d in reversed(shape):
            strides.append(acc)
            acc *= d
        self._stride = tuple(reversed(strides))

    def data_ptr(self):
        return self.ptr

    def stride(self):
        return self._stride

    def element_size(self):
        return self.elem


class KvCacheLayoutTest(unittest.TestCase):
    def test_vllm_finds_v_half_a_tensor_after_k(self):
        t = FakeTensor(0x10000, (2, 100, 16, 8, 128))
        c = kvtier.KvCache.from_vllm([t, FakeTensor(0x900000, t.shape)])
        row = 128 * 2
        self.assertEqual(c.c.num_layers, 2)
        self.assertEqual(c.c.v_bases[0] - c.c.k_bases[0], 100 * 16 * 8 * row)
        self.assertEqual((c.c.block_stride, c.c.token_stride, c.c.head_stride),
                         (16 * 8 * row, 8 * row, row))
        self.assertEqual(c.payload_bytes, 2 * 2 * 16 * 8 * row)

    def test_flashinfer_hnd_swaps_token_and_head_strides(self):
        t = FakeTensor(4096, (50, 2, 4, 16, 64))
        c = kvtier.KvCache.from_flashinfer([t], layout="HND")
        row = 64 * 2
        self.assertEqual(c.c.v_bases[0] - c.c.k_bases[0], 4 * 16 * row)
        self.assertEqual((c.c.token_stride, c.c.head_stride), (row, 16 * row))
        self.assertEqual(c.c.block_stride, 2 * 4 * 16 * row)

    def test_sglang_pages_are_page_size_tokens(self):
        k, v = FakeTensor(4096, (1024, 8, 128)), FakeTensor(1 << 30, (1024, 8, 128))
        c = kvtier.KvCache.from_sglang([k], [v], page_size=16)
        row = 128 * 2
        self.assertEqual((c.c.block_tokens, c.c.block_stride, c.c.token_stride, c.c.head_stride),
                         (16, 16 * 8 * row, 8 * row, row))

    def test_a_non_contiguous_head_dim_is_refused(self):
        t = FakeTensor(4096, (2, 10, 16, 8, 128))
        t._stride = t._stride[:-1] + (2,)
        with self.assertRaisesRegex(ValueError, "head_dim axis"):
            kvtier.KvCache.from_vllm([t])


class GpuClientArgumentsTest(unittest.TestCase):
    def test_an_unknown_t0_reads_mode_is_refused_before_opening(self):
        with self.assertRaisesRegex(ValueError, "t0_reads: one of"):
            kvtier.GpuClient(object(), t0_reads="sometimes")


def _torch_cuda():
    try:
        import torch  # noqa: F401 (only this test uses torch; the package never imports it)
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


class GpuClientAgainstDaemonTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.torch = _torch_cuda()
        if cls.torch is None:
            raise unittest.SkipTest("needs torch with a CUDA device")
        cls.daemon = Daemon()

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "daemon", None) is not None:
            rc = cls.daemon.stop()
            if rc != 0:
                raise AssertionError(f"kvtierd exited {rc} after SIGTERM")

    def test_put_then_get_with_source_overwritten_at_once(self):
        torch = self.torch
        layers, blocks, heads, dim = 4, 40, 2, 64  # 32 KiB payloads (SLOT_BYTES is 64 KiB)
        src = [torch.empty((2, blocks, BLOCK, heads, dim), dtype=torch.bfloat16, device="cuda")
               for _ in range(layers)]
        dst = [torch.zeros_like(t) for t in src]
        with kvtier.Client(self.daemon.socket, model_id=MODEL) as client:
            try:
                gpu = kvtier.GpuClient(client)
            except KvtierError as e:
                self.skipTest(f"libkvtier has no GPU backend: {e}")
            stream = torch.cuda.Stream()
            src_cache, dst_cache = kvtier.KvCache.from_vllm(src), kvtier.KvCache.from_vllm(dst)
            for rnd in range(20):
                n = 8
                tokens = [random.randrange(2**32) for _ in range(n * BLOCK)]
                from_blocks = random.sample(range(blocks), n)
                to_blocks = random.sample(range(blocks), n)
                with torch.cuda.stream(stream):
                    for t in src:
                        t.normal_()
                    want = [t[:, from_blocks].clone() for t in src]
                    put = gpu.put(tokens, src_cache, from_blocks, stream=stream)
                    self.assertEqual(put.wait(), [BlockCode.OK] * n)
                    for t in src:
                        t.fill_(float(rnd))  # overwrite right after the put completed
                    for t in dst:
                        t.zero_()
                    got = gpu.get(tokens, dst_cache, to_blocks, stream=stream)
                    self.assertEqual(got.blocks, n)
                    seen = [t[:, to_blocks].clone() for t in dst]  # read right after, same stream
                    self.assertEqual(got.wait(), [BlockCode.OK] * n)
                stream.synchronize()
                for layer in range(layers):
                    self.assertTrue(torch.equal(seen[layer], want[layer]),
                                    f"round {rnd}, layer {layer}")
            self.assertEqual(client.stats()["leases_held"], 0)
            gpu.close()


if __name__ == "__main__":
    unittest.main()
