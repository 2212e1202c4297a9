"""GPU transfers: kvtier blocks straight into and out of an engine's paged KV cache.

Tensors are read through the attributes torch tensors have (data_ptr(), shape, stride(),
element_size()), so this module never imports torch: anything with those attributes works.
Streams are a torch.cuda.Stream (its cuda_stream), a raw cudaStream_t as an int, or None for the
default stream. See client/gpu_client.h for the ordering rules; in short, the copies run in
order on the stream you pass, and wait() must be called (or the transfer dropped) to release a
get's leases or commit a put.
"""

from __future__ import annotations

import ctypes
from typing import Any, List, Optional, Sequence

from . import _ffi
from ._buffers import Tokens
from ._types import BlockCode, KvtierError, block_code

PATHS = {"auto": 0, "dma": 1, "kernel": 2}
# KVTIER_T0_READS_*: where get() reads blocks from when kvtierd keeps a T0 on this GPU.
T0_READS = {"never": 0, "when_present": 1, "always": 2}


def _stream_handle(stream: Any) -> Optional[int]:
    if stream is None:
        return None
    if isinstance(stream, int):
        return stream or None
    handle = getattr(stream, "cuda_stream", None)  # torch.cuda.Stream / ExternalStream
    if handle is None:
        raise TypeError(f"stream: expected an int handle or an object with .cuda_stream, got "
                        f"{type(stream).__name__}")
    return int(handle) or None


def _shape(t: Any) -> tuple:
    return tuple(int(d) for d in t.shape)


class KvCache:
    """An engine's paged KV cache as kvtier_kv_cache describes it: per-layer K and V addresses of
    engine block 0, and byte strides between blocks, tokens and heads (the same for all layers).
    Build it with one of the from_* constructors; keep the tensors alive while it is used."""

    def __init__(self, k_ptrs: Sequence[int], v_ptrs: Sequence[int], block_tokens: int,
                 kv_heads: int, head_dim: int, elem_bytes: int, block_stride: int,
                 token_stride: int, head_stride: int) -> None:
        if len(k_ptrs) != len(v_ptrs) or not k_ptrs:
            raise ValueError("KvCache: one K and one V address per layer, at least one layer")
        n = len(k_ptrs)
        self._k = (ctypes.c_void_p * n)(*k_ptrs)
        self._v = (ctypes.c_void_p * n)(*v_ptrs)
        self.c = _ffi.KvCache(n, self._k, self._v, block_tokens, kv_heads, head_dim, elem_bytes,
                              block_stride, token_stride, head_stride)
        self.payload_bytes = n * 2 * block_tokens * kv_heads * head_dim * elem_bytes

    @staticmethod
    def _check_rows(t: Any, what: str) -> None:
        if int(t.stride()[-1]) != 1:
            raise ValueError(f"{what}: the head_dim axis must be contiguous (stride 1)")

    @classmethod
    def from_vllm(cls, layers: Sequence[Any]) -> "KvCache":
        """vLLM: per layer a tensor [2, num_blocks, block_size, kv_heads, head_dim]."""
        t = layers[0]
        _, _, block, heads, dim = _shape(t)
        s, e = [int(x) for x in t.stride()], int(t.element_size())
        for i, x in enumerate(layers):
            cls._check_rows(x, f"layers[{i}]")
            if _shape(x) != _shape(t) or [int(y) for y in x.stride()] != s:
                raise ValueError(f"layers[{i}]: shape and strides must match layers[0]")
        return cls([x.data_ptr() for x in layers], [x.data_ptr() + s[0] * e for x in layers],
                   block, heads, dim, e, s[1] * e, s[2] * e, s[3] * e)

    @classmethod
    def from_flashinfer(cls, layers: Sequence[Any], layout: str = "NHD") -> "KvCache":
        """FlashInfer: per layer [num_blocks, 2, block_size, kv_heads, head_dim] (NHD) or
        [num_blocks, 2, kv_heads, block_size, head_dim] (HND)."""
        t = layers[0]
        s, e = [int(x) for x in t.stride()], int(t.element_size())
        if layout == "NHD":
            _, _, block, heads, dim = _shape(t)
            token_stride, head_stride = s[2] * e, s[3] * e
        elif layout == "HND":
            _, _, heads, block, dim = _shape(t)
            token_stride, head_stride = s[3] * e, s[2] * e
        else:
            raise ValueError(f"layout: 'NHD' or 'HND', not {layout!r}")
        for i, x in enumerate(layers):
            cls._check_rows(x, f"layers[{i}]")
        return cls([x.data_ptr() for x in layers], [x.data_ptr() + s[1] * e for x in layers],
                    block, heads, dim, e, s[0] * e, token_stride, head_stride)

    @classmethod
    def from_sglang(cls, k_buffers: Sequence[Any], v_buffers: Sequence[Any],
                    page_size: int) -> "KvCache":
        """SGLang MHA pool: per layer K and V buffers [num_tokens, kv_heads, head_dim], pages of
        page_size tokens (engine block b = tokens [b * page_size, (b + 1) * page_size))."""
        t = k_buffers[0]
        _, heads, dim = _shape(t)
        s, e = [int(x) for x in t.stride()], int(t.element_size())
        for i, x in enumerate(list(k_buffers) + list(v_buffers)):
            cls._check_rows(x, f"buffers[{i}]")
        return cls([x.data_ptr() for x in k_buffers], [x.data_ptr() for x in v_buffers],
                   page_size, heads, dim, e, page_size * s[0] * e, s[0] * e, s[1] * e)


class GpuTransfer:
    """A get or put whose copies are in flight on the engine's stream."""

    def __init__(self, lib: ctypes.CDLL, handle: int, n: int) -> None:
        self._lib, self._handle, self._n = lib, handle, n
        self._codes: Optional[List[BlockCode]] = None

    @property
    def blocks(self) -> int:
        """Blocks whose copies were enqueued (for a get, the leading run of hits)."""
        return self._lib.kvtier_gpu_transfer_blocks(self._handle)

    @property
    def event(self) -> int:
        """The cudaEvent_t recorded after the copies (for another stream to wait on)."""
        return self._lib.kvtier_gpu_transfer_event(self._handle) or 0

    def wait(self) -> List[BlockCode]:
        """Blocks until the copies landed; releases a get's leases or commits a put. One
        BlockCode per key given."""
        if self._codes is None:
            codes = (ctypes.c_uint32 * max(self._n, 1))()
            rc = self._lib.kvtier_gpu_transfer_wait(self._handle, codes)
            if rc != 0:
                raise KvtierError(rc, self._lib.kvtier_last_error().decode("utf-8", "replace"))
            self._codes = [block_code(codes[i]) for i in range(self._n)]
        return self._codes

    def __del__(self) -> None:
        try:
            self._lib.kvtier_gpu_transfer_free(self._handle)
        except Exception:  # interpreter shutdown
            pass


class GpuClient:
    """GPU transfers for one kvtier.Client on one device (path: 'auto', 'dma' or 'kernel').

    t0_reads, when kvtierd keeps a T0 on this same GPU: 'when_present' (default) copies blocks
    already in T0 device-to-device and the rest from T1; 'always' has kvtierd promote every block
    into T0 first; 'never' reads T1 only. Without a T0 on this GPU, every mode reads T1."""

    def __init__(self, client: Any, device: int = 0, path: str = "auto",
                 t0_reads: str = "when_present") -> None:
        if path not in PATHS:
            raise ValueError(f"path: one of {sorted(PATHS)}, not {path!r}")
        if t0_reads not in T0_READS:
            raise ValueError(f"t0_reads: one of {sorted(T0_READS)}, not {t0_reads!r}")
        self._client, self._lib = client, client._lib
        handle = ctypes.c_void_p()
        client._check(self._lib.kvtier_gpu_open(client._live(), device, PATHS[path],
                                                ctypes.byref(handle)))
        self._handle = handle.value
        self.t0_reads = t0_reads

    @property
    def t0_reads(self) -> str:
        """Where get() reads from (see the class docstring); settable."""
        return self._t0_reads

    @t0_reads.setter
    def t0_reads(self, mode: str) -> None:
        if mode not in T0_READS:
            raise ValueError(f"t0_reads: one of {sorted(T0_READS)}, not {mode!r}")
        if self._handle is None:
            raise ValueError("kvtier: the GPU client is closed")
        self._client._check(self._lib.kvtier_gpu_set_t0_reads(self._handle, T0_READS[mode]))
        self._t0_reads = mode

    @property
    def t0_mapped(self) -> bool:
        """True when kvtierd's T0 is on this GPU and mapped here (gets may read it)."""
        return self._handle is not None and self._lib.kvtier_gpu_t0_mapped(self._handle) == 1

    def close(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            self._lib.kvtier_gpu_close(handle)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def get(self, tokens: Tokens, cache: KvCache, engine_blocks: Sequence[int],
            stream: Any = None) -> GpuTransfer:
        """Copies the leading cached blocks of `tokens` into engine_blocks[i] of `cache`."""
        return self._transfer("kvtier_gpu_get", tokens, cache, engine_blocks, stream, None)

    def put(self, tokens: Tokens, cache: KvCache, engine_blocks: Sequence[int],
            stream: Any = None, parent: Any = None) -> GpuTransfer:
        """Stores engine_blocks[i] of `cache` as block i of `tokens`; wait() commits."""
        return self._transfer("kvtier_gpu_put", tokens, cache, engine_blocks, stream, parent)

    def _transfer(self, fn: str, tokens: Tokens, cache: KvCache, engine_blocks: Sequence[int],
                  stream: Any, parent: Any) -> GpuTransfer:
        if self._handle is None:
            raise ValueError("kvtier: the GPU client is closed")
        keys, n = self._client._keys(tokens, parent)
        if len(engine_blocks) != n:
            raise ValueError(f"{n} whole blocks of tokens but {len(engine_blocks)} engine blocks")
        blocks = (ctypes.c_int32 * max(n, 1))(*engine_blocks)
        out = ctypes.c_void_p()
        args = [self._handle, keys, n, ctypes.byref(cache.c), blocks, _stream_handle(stream)]
        if fn == "kvtier_gpu_put":
            args.append(self._client._key_ref(parent))
        args.append(ctypes.byref(out))
        self._client._check(getattr(self._lib, fn)(*args))
        return GpuTransfer(self._lib, out.value, n)
