"""ctypes declarations of the kvtier C ABI (client/kvtier_client_c.h, KVTIER_C_ABI_VERSION 8).

The structs and prototypes below mirror that header field for field; change them together.
The library is found and loaded lazily by load(), so importing the package never fails for want
of libkvtier.so: the first Client() does, naming every place it looked.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from typing import List, Optional

from ._types import LibraryNotFoundError

ABI_VERSION = 8
LIBRARY_NAME = "libkvtier.so"
KEYS_ERROR = ctypes.c_size_t(-1).value  # KVTIER_KEYS_ERROR: kvtier_keys_for failed
KEY_SOURCE_TOKENS = 0  # KVTIER_KEY_SOURCE_TOKENS


class Namespace(ctypes.Structure):
    """kvtier_namespace: NULL strings mean the C ABI's defaults."""

    _fields_ = [
        ("model_id", ctypes.c_char_p),
        ("kv_layout", ctypes.c_char_p),
        ("dtype", ctypes.c_char_p),
        ("block_tokens", ctypes.c_uint32),
        ("tp_rank", ctypes.c_uint32),
        ("tp_size", ctypes.c_uint32),
        ("lora_id", ctypes.c_char_p),
        ("cache_salt", ctypes.c_char_p),
    ]


class ConnectOptions(ctypes.Structure):
    """kvtier_connect_options: set struct_bytes to its size; zeros are the defaults."""

    _fields_ = [
        ("struct_bytes", ctypes.c_uint32),
        ("key_source", ctypes.c_uint32),
        ("timeout_ms", ctypes.c_int32),
        ("reserved", ctypes.c_uint32),
        ("pool", ctypes.c_char_p),  # ABI 8: the memory pool to use; None: the only one allowed
    ]


class Key(ctypes.Structure):
    """kvtier_key: a 128-bit block key as two little halves."""

    _fields_ = [("lo", ctypes.c_uint64), ("hi", ctypes.c_uint64)]


class BlockResult(ctypes.Structure):
    """kvtier_block_result: one key's outcome (KVTIER_BLOCK_*), and for get its leased slot."""

    _fields_ = [
        ("code", ctypes.c_uint32),
        ("slot", ctypes.c_uint32),
        ("payload_bytes", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
    ]


class WorkItem(ctypes.Structure):
    """kvtier_work_item: a filled working slot to publish under its key."""

    _fields_ = [
        ("key", Key),
        ("parent", Key),
        ("checksum", ctypes.c_uint64),
        ("slot", ctypes.c_uint32),
        ("payload_bytes", ctypes.c_uint32),
        ("has_parent", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
    ]


STATS_FIELDS = (
    "lookups", "lookup_keys", "lookup_hit_blocks",
    "gets", "get_blocks", "promotions",
    "puts_begun", "puts_committed", "puts_aborted", "puts_retry",
    "releases", "drops",
    "t1_slots_total", "t1_slots_free", "leases_held", "requests_invalid",
)


class Stats(ctypes.Structure):
    """kvtier_stats: the daemon's counters, all uint64."""

    _fields_ = [(name, ctypes.c_uint64) for name in STATS_FIELDS]


class KvCache(ctypes.Structure):
    """kvtier_kv_cache: an engine's paged KV cache (per-layer K/V device addresses, byte strides)."""

    _fields_ = [
        ("num_layers", ctypes.c_uint32),
        ("k_bases", ctypes.POINTER(ctypes.c_void_p)),
        ("v_bases", ctypes.POINTER(ctypes.c_void_p)),
        ("block_tokens", ctypes.c_uint32),
        ("kv_heads", ctypes.c_uint32),
        ("head_dim", ctypes.c_uint32),
        ("elem_bytes", ctypes.c_uint32),
        ("block_stride", ctypes.c_int64),
        ("token_stride", ctypes.c_int64),
        ("head_stride", ctypes.c_int64),
    ]


_P = ctypes.POINTER
_c = ctypes
# name: (restype, argtypes), in the header's order.
_PROTOTYPES = {
    "kvtier_connect": (_c.c_int, [_c.c_char_p, _P(Namespace), _c.c_char_p, _P(_c.c_void_p)]),
    "kvtier_connect_with": (_c.c_int, [
        _c.c_char_p, _P(Namespace), _c.c_char_p, _P(ConnectOptions), _P(_c.c_void_p)]),
    "kvtier_close": (None, [_c.c_void_p]),
    "kvtier_last_error": (_c.c_char_p, []),
    "kvtier_keys_for": (
        _c.c_size_t, [_c.c_void_p, _P(_c.c_uint32), _c.c_size_t, _P(Key), _P(Key), _c.c_size_t]),
    "kvtier_keys_for_engine_hashes": (
        _c.c_int, [_c.c_void_p, _P(_c.c_uint64), _c.c_size_t, _P(Key), _P(Key)]),
    "kvtier_lookup": (
        _c.c_int, [_c.c_void_p, _P(Key), _c.c_size_t, _P(_c.c_size_t), _P(_c.c_uint8)]),
    "kvtier_lookup_many": (_c.c_int, [
        _c.c_void_p, _P(Key), _P(_c.c_size_t), _c.c_size_t, _P(_c.c_size_t), _P(_c.c_uint8)]),
    "kvtier_get": (_c.c_int, [_c.c_void_p, _P(Key), _c.c_size_t, _P(BlockResult)]),
    "kvtier_release": (_c.c_int, [_c.c_void_p, _P(Key), _c.c_size_t, _P(BlockResult)]),
    "kvtier_get_into": (_c.c_int, [
        _c.c_void_p, _P(Key), _c.c_size_t, _P(_c.c_void_p), _P(_c.c_size_t), _P(_c.c_size_t)]),
    "kvtier_put": (_c.c_int, [
        _c.c_void_p, _P(Key), _c.c_size_t, _P(_c.c_void_p), _P(_c.c_size_t), _P(Key),
        _P(_c.c_uint32)]),
    "kvtier_drop": (_c.c_int, [_c.c_void_p, _P(Key), _c.c_size_t, _P(BlockResult)]),
    "kvtier_get_stats": (_c.c_int, [_c.c_void_p, _P(Stats)]),
    "kvtier_slot_data": (_c.c_void_p, [_c.c_void_p, _c.c_uint32]),
    "kvtier_mutable_slot_data": (_c.c_void_p, [_c.c_void_p, _c.c_uint32]),
    "kvtier_slot_bytes": (_c.c_uint32, [_c.c_void_p]),
    "kvtier_t0_slots": (_c.c_uint32, [_c.c_void_p]),
    "kvtier_work_take": (_c.c_int, [_c.c_void_p, _c.c_uint32, _c.c_size_t, _P(BlockResult)]),
    "kvtier_work_publish": (_c.c_int, [
        _c.c_void_p, _c.c_uint32, _P(WorkItem), _c.c_size_t, _P(_c.c_uint32)]),
    "kvtier_work_free": (_c.c_int, [
        _c.c_void_p, _c.c_uint32, _P(_c.c_uint32), _c.c_size_t, _P(_c.c_uint32)]),
    "kvtier_gpu_open": (_c.c_int, [_c.c_void_p, _c.c_int, _c.c_int, _P(_c.c_void_p)]),
    "kvtier_gpu_close": (None, [_c.c_void_p]),
    "kvtier_gpu_set_t0_reads": (_c.c_int, [_c.c_void_p, _c.c_int]),
    "kvtier_gpu_t0_mapped": (_c.c_int, [_c.c_void_p]),
    "kvtier_gpu_t0_slot": (_c.c_void_p, [_c.c_void_p, _c.c_uint32]),
    "kvtier_gpu_get": (_c.c_int, [
        _c.c_void_p, _P(Key), _c.c_size_t, _P(KvCache), _P(_c.c_int32), _c.c_void_p,
        _P(_c.c_void_p)]),
    "kvtier_gpu_put": (_c.c_int, [
        _c.c_void_p, _P(Key), _c.c_size_t, _P(KvCache), _P(_c.c_int32), _c.c_void_p, _P(Key),
        _P(_c.c_void_p)]),
    "kvtier_gpu_transfer_blocks": (_c.c_size_t, [_c.c_void_p]),
    "kvtier_gpu_transfer_event": (_c.c_void_p, [_c.c_void_p]),
    "kvtier_gpu_transfer_wait": (_c.c_int, [_c.c_void_p, _P(_c.c_uint32)]),
    "kvtier_gpu_transfer_free": (None, [_c.c_void_p]),
}


def candidates() -> List[str]:
    """Where libkvtier.so is looked for, in order.

    1. $KVTIER_LIB (the file itself, or a directory holding it) and nothing else when it is set,
       so a wrong setting fails instead of silently loading another build;
    2. next to this package (a wheel or an install may put it there);
    3. the build trees of the source checkout this package sits in (build/<preset>/client/);
    4. the system loader's search path (ctypes.util.find_library("kvtier")).
    """
    env = os.environ.get("KVTIER_LIB")
    if env:
        return [os.path.join(env, LIBRARY_NAME) if os.path.isdir(env) else env]
    out: List[str] = []
    here = os.path.dirname(os.path.abspath(__file__))
    out.append(os.path.join(here, LIBRARY_NAME))
    repo = os.path.dirname(os.path.dirname(os.path.dirname(here)))  # client/python/kvtier -> .
    for preset in ("default", "cuda", "hip"):  # not asan/tsan: python3 cannot load those
        out.append(os.path.join(repo, "build", preset, "client", LIBRARY_NAME))
    system = ctypes.util.find_library("kvtier")
    if system:
        out.append(system)
    return list(dict.fromkeys(out))  # in order, without repeats


_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None


def load() -> ctypes.CDLL:
    """The loaded library with its prototypes declared; LibraryNotFoundError when none loads."""
    global _lib
    with _lock:
        if _lib is None:
            _lib = _load_first(candidates())
        return _lib


def _load_first(paths: List[str]) -> ctypes.CDLL:
    tried = []
    for path in paths:
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} (absent)")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
            continue
        _declare(lib)
        return lib
    raise LibraryNotFoundError(
        f"kvtier: cannot load {LIBRARY_NAME}; set KVTIER_LIB to its path (build it with "
        f"`cmake --build build/default --target kvtier_client_c`). Tried: " + "; ".join(tried))


def _declare(lib: ctypes.CDLL) -> None:
    for name, (restype, argtypes) in _PROTOTYPES.items():
        fn = getattr(lib, name)  # AttributeError here means an older, incompatible library
        fn.restype = restype
        fn.argtypes = argtypes
