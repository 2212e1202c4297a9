"""kvtier.Client: one connection to kvtierd over the C ABI (client/kvtier_client_c.h)."""

from __future__ import annotations

import ctypes
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _ffi
from ._buffers import Tokens, host_span, token_array, uint32_pointer
from ._types import BlockCode, KvtierError, StatusCode, Tier, WorkItem, block_code

KeyTuple = Tuple[int, int]  # (lo, hi): a 128-bit block key


def _c_string(value: str, field: str) -> bytes:
    # The C ABI takes NUL-terminated strings: an embedded NUL would silently cut the field and
    # could make two namespaces one, so it is refused here.
    if "\0" in value:
        raise ValueError(f"{field}: must not contain NUL characters")
    return value.encode("utf-8")


def _slot_tier(tier: Tier) -> int:
    """The C ABI's tier number (KVTIER_TIER_*) of Tier.T0 or Tier.T1; slots are of no other."""
    if tier == Tier.T0:
        return 0
    if tier == Tier.T1:
        return 1
    raise ValueError(f"tier: {tier!r}; working slots are of Tier.T0 or Tier.T1")


class Client:
    """A connection to kvtierd declaring one namespace (DESIGN.md "Data flow").

    Token ids are hashed into block keys by libkvtier, one key per whole block of `block_tokens`
    tokens (a partial last block is never cached), chained from this namespace's root. Every
    method taking `tokens` accepts any sequence of ints or a 1-D integer buffer.

    Errors raise KvtierError (code and the library's message); per-block outcomes are BlockCode
    values, not errors. A client may be shared by threads (requests take turns; use one client
    per thread for parallelism); close() must never race other calls.
    Closing, or the process dying, makes the daemon give back every lease and unfinished put.
    """

    def __init__(self, socket_path: str, model_id: str, block_tokens: int = 16,
                 tp_rank: int = 0, tp_size: int = 1, dtype: str = "bf16",
                 kv_layout: str = "block_major", lora_id: str = "", cache_salt: str = "",
                 client_name: str = "python", timeout_ms: int = 60000, pool: str = "") -> None:
        """Connects; `timeout_ms` bounds the handshake (a daemon that is stopped but still holds
        its socket raises KvtierError DEADLINE_EXCEEDED) and every request after it. `pool`: the
        daemon's memory pool to use; empty: the only one this process may use (a pool it may not
        use raises KvtierError PERMISSION_DENIED)."""
        self._handle: Optional[int] = None
        self._lib = _ffi.load()
        ns = _ffi.Namespace(
            model_id=_c_string(model_id, "model_id"), kv_layout=_c_string(kv_layout, "kv_layout"),
            dtype=_c_string(dtype, "dtype"), block_tokens=block_tokens, tp_rank=tp_rank,
            tp_size=tp_size, lora_id=_c_string(lora_id, "lora_id"),
            cache_salt=_c_string(cache_salt, "cache_salt"))
        if not 0 < timeout_ms < 2**31:
            raise ValueError(f"timeout_ms: {timeout_ms}, outside [1, {2**31 - 1}]")
        options = _ffi.ConnectOptions(struct_bytes=ctypes.sizeof(_ffi.ConnectOptions),
                                      key_source=_ffi.KEY_SOURCE_TOKENS, timeout_ms=timeout_ms,
                                      pool=_c_string(pool, "pool"))
        handle = ctypes.c_void_p()
        self._check(self._lib.kvtier_connect_with(
            _c_string(socket_path, "socket_path"), ctypes.byref(ns),
            _c_string(client_name, "client_name"), ctypes.byref(options), ctypes.byref(handle)))
        self._handle = handle.value
        self.block_tokens: int = block_tokens if block_tokens else 16  # 0 means 16 in the C ABI
        # The largest payload one block may have (the daemon's t1.slot_bytes).
        self.slot_bytes: int = self._lib.kvtier_slot_bytes(self._handle)

    # -- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Disconnects (idempotent); the daemon releases this client's leases."""
        handle, self._handle = self._handle, None
        if handle is not None:
            self._lib.kvtier_close(handle)

    @property
    def closed(self) -> bool:
        return self._handle is None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: ctypes may already be gone
            pass

    # -- keys and lookups -------------------------------------------------------------------

    def keys(self, tokens: Tokens, parent: Optional[KeyTuple] = None) -> List[KeyTuple]:
        """The (lo, hi) key of each whole block of `tokens`, chained from the namespace root,
        or from `parent` (the key of the block just before tokens[0]) to continue a sequence."""
        keys, n = self._keys(tokens, parent)
        return [(k.lo, k.hi) for k in keys[:n]]

    def lookup(self, tokens: Tokens) -> int:
        """How many leading blocks of `tokens` are cached (in any tier). Takes no lease."""
        return len(self.lookup_tiers(tokens))

    def lookup_tiers(self, tokens: Tokens) -> List[Tier]:
        """For each leading cached block of `tokens`, the tiers holding it."""
        keys, n = self._keys(tokens)
        if n == 0:
            return []
        hit = ctypes.c_size_t()
        tiers = (ctypes.c_uint8 * n)()
        self._check(self._lib.kvtier_lookup(self._live(), keys, n, ctypes.byref(hit), tiers))
        return [Tier(tiers[i]) for i in range(hit.value)]

    def lookup_many(self, sequences: Sequence[Tokens]) -> List[int]:
        """lookup(tokens) of each of `sequences` (a scheduler step's waiting requests), in one
        call: the requests go to the daemon back to back, one round trip per window of them
        rather than one per sequence. Takes no lease."""
        return [len(tiers) for tiers in self.lookup_tiers_many(sequences)]

    def lookup_tiers_many(self, sequences: Sequence[Tokens]) -> List[List[Tier]]:
        """lookup_tiers(tokens) of each of `sequences`, in one call as lookup_many."""
        ids = [token_array(tokens) for tokens in sequences]
        lengths = [len(a) // self.block_tokens for a in ids]
        total = sum(lengths)
        if total == 0:
            self._live()
            return [[] for _ in ids]
        keys = (_ffi.Key * total)()  # every sequence's keys, one after the other
        offset = 0
        for a, length in zip(ids, lengths):
            if length:
                at = ctypes.addressof(keys) + offset * ctypes.sizeof(_ffi.Key)
                self._hash(a, None, ctypes.cast(at, ctypes.POINTER(_ffi.Key)), length)
            offset += length
        n = len(ids)
        hits = (ctypes.c_size_t * n)()
        tiers = (ctypes.c_uint8 * total)()
        self._check(self._lib.kvtier_lookup_many(
            self._live(), keys, (ctypes.c_size_t * n)(*lengths), n, hits, tiers))
        out, offset = [], 0
        for length, hit in zip(lengths, hits):
            out.append([Tier(tiers[offset + j]) for j in range(hit)])
            offset += length
        return out

    # -- data -------------------------------------------------------------------------------

    def put(self, tokens: Tokens, payloads: Sequence[Any],
            parent: Optional[KeyTuple] = None) -> List[BlockCode]:
        """Stores one payload per whole block of `tokens` (each 1 to slot_bytes long; bytes,
        bytearray, memoryview or any buffer) and publishes it; one BlockCode per block:
        OK, ALREADY_PRESENT (someone stored it first), RETRY_LATER (T1 full right now), ..."""
        keys, n = self._keys(tokens, parent)
        if len(payloads) != n:
            raise ValueError(f"put: {n} whole blocks of tokens but {len(payloads)} payloads")
        if n == 0:
            return []
        spans = [host_span(p, False, f"payloads[{i}]") for i, p in enumerate(payloads)]
        for i, (_, size, _) in enumerate(spans):
            # The daemon treats a size outside [1, slot_bytes] as a malformed request and closes
            # the connection, so it is refused here instead.
            if not 0 < size <= self.slot_bytes:
                raise ValueError(f"payloads[{i}]: {size} bytes, outside [1, {self.slot_bytes}]")
        addrs = (ctypes.c_void_p * n)(*[s[0] for s in spans])
        sizes = (ctypes.c_size_t * n)(*[s[1] for s in spans])
        codes = (ctypes.c_uint32 * n)()
        self._check(self._lib.kvtier_put(self._live(), keys, n, addrs, sizes,
                                         self._key_ref(parent), codes))
        del spans  # the payloads' buffers may be resized again
        return [block_code(codes[i]) for i in range(n)]

    def get(self, tokens: Tokens) -> List[bytes]:
        """The payloads of the leading cached blocks of `tokens`, copied out of T1 (blocks in
        lower tiers are promoted first). Every lease taken is released before returning."""
        keys, n = self._keys(tokens)
        if n == 0:
            return []
        results = (_ffi.BlockResult * n)()
        self._check(self._lib.kvtier_get(self._live(), keys, n, results))
        leased = [i for i in range(n) if results[i].code == BlockCode.OK]
        try:
            out = []
            for i in range(n):
                if results[i].code != BlockCode.OK:
                    break
                data = self._lib.kvtier_slot_data(self._handle, results[i].slot)
                out.append(ctypes.string_at(data, results[i].payload_bytes))
        finally:
            if leased:
                release = (_ffi.Key * len(leased))(*[keys[i] for i in leased])
                self._check(self._lib.kvtier_release(self._live(), release, len(leased), None))
        return out

    def get_into(self, tokens: Tokens, buffers: Sequence[Any]) -> int:
        """Copies the leading cached blocks of `tokens` straight into `buffers` (writable,
        contiguous; one per whole block) and returns how many were copied. The run also stops at
        a buffer smaller than its block's payload. Leases are released before returning."""
        keys, n = self._keys(tokens)
        if len(buffers) != n:
            raise ValueError(f"get_into: {n} whole blocks of tokens but {len(buffers)} buffers")
        if n == 0:
            return 0
        spans = [host_span(b, True, f"buffers[{i}]") for i, b in enumerate(buffers)]
        addrs = (ctypes.c_void_p * n)(*[s[0] for s in spans])
        sizes = (ctypes.c_size_t * n)(*[s[1] for s in spans])
        copied = ctypes.c_size_t()
        self._check(self._lib.kvtier_get_into(self._live(), keys, n, addrs, sizes,
                                              ctypes.byref(copied)))
        del spans
        return copied.value

    def drop(self, tokens: Tokens) -> List[BlockCode]:
        """Removes the blocks of `tokens` from every tier; one BlockCode per block (MISSING if
        absent, LEASED if someone holds it)."""
        keys, n = self._keys(tokens)
        if n == 0:
            return []
        results = (_ffi.BlockResult * n)()
        self._check(self._lib.kvtier_drop(self._live(), keys, n, results))
        return [block_code(results[i].code) for i in range(n)]

    def stats(self) -> Dict[str, int]:
        """The daemon's counters (kvtier_stats: lookups, gets, puts_committed, leases_held...)."""
        out = _ffi.Stats()
        self._check(self._lib.kvtier_get_stats(self._live(), ctypes.byref(out)))
        return {name: getattr(out, name) for name in _ffi.STATS_FIELDS}

    # -- working slots (docs/protocol.md "Working slots") -----------------------------------

    def take_working(self, tier: Tier, n: int) -> List[Tuple[Union[BlockCode, int], int]]:
        """Takes `n` unkeyed working slots of `tier` (Tier.T1, or Tier.T0 when the daemon has
        one) leased to this client: one (code, slot) per slot wanted. OK: `slot` is the client's
        to fill (T1: slot_view(slot)); RETRY_LATER: the tier is full now; OVER_QUOTA: this
        client holds its quota of working slots."""
        results = (_ffi.BlockResult * max(n, 1))()
        self._check(self._lib.kvtier_work_take(self._live(), _slot_tier(tier), n, results))
        return [(block_code(results[i].code), results[i].slot) for i in range(n)]

    def publish_working(self, tier: Tier, items: Sequence[WorkItem]) -> List[
            Union[BlockCode, int]]:
        """Publishes filled working slots of `tier`, each under its key: one BlockCode per item.
        OK: the slot is now the cached block `key`, leased to this client until it is released;
        ALREADY_PRESENT or BAD_CHECKSUM: the slot stays a working slot; MISSING: not a working
        slot of this client (or named earlier in the same call); RETRY_LATER; FAILED."""
        n = len(items)
        c_items = (_ffi.WorkItem * max(n, 1))()
        for i, item in enumerate(items):
            c_items[i] = _ffi.WorkItem(
                key=_ffi.Key(*item.key), parent=_ffi.Key(*(item.parent or (0, 0))),
                checksum=item.checksum, slot=item.slot, payload_bytes=item.payload_bytes,
                has_parent=int(item.parent is not None))
        codes = (ctypes.c_uint32 * max(n, 1))()
        self._check(self._lib.kvtier_work_publish(self._live(), _slot_tier(tier), c_items, n,
                                                  codes))
        return [block_code(codes[i]) for i in range(n)]

    def free_working(self, tier: Tier, slots: Sequence[int]) -> List[Union[BlockCode, int]]:
        """Gives working slots of `tier` back unpublished: OK, or MISSING (not a working slot of
        this client, or named earlier in the same call)."""
        n = len(slots)
        codes = (ctypes.c_uint32 * max(n, 1))()
        self._check(self._lib.kvtier_work_free(
            self._live(), _slot_tier(tier), (ctypes.c_uint32 * max(n, 1))(*slots), n, codes))
        return [block_code(codes[i]) for i in range(n)]

    def slot_view(self, slot: int) -> memoryview:
        """A writable view of T1 slot `slot` (slot_bytes long) in this process's mapping of T1,
        valid while the client is open: where a T1 working slot is filled."""
        address = self._lib.kvtier_mutable_slot_data(self._live(), slot)
        if not address:
            raise ValueError(f"slot_view: T1 has no slot {slot}")
        return memoryview((ctypes.c_char * self.slot_bytes).from_address(address)).cast("B")

    # -- helpers ----------------------------------------------------------------------------

    def _live(self) -> int:
        if self._handle is None:
            raise ValueError("kvtier: the client is closed")
        return self._handle

    def _check(self, rc: int) -> None:
        if rc != 0:  # kvtier_last_error is per thread, valid until this thread's next call
            raise KvtierError(rc, self._lib.kvtier_last_error().decode("utf-8", "replace"))

    @staticmethod
    def _key_ref(key: Optional[KeyTuple]) -> Optional[Any]:
        return None if key is None else ctypes.byref(_ffi.Key(*key))

    def _keys(self, tokens: Tokens, parent: Optional[KeyTuple] = None) -> Tuple[Any, int]:
        """(kvtier_key array, number of whole blocks) for `tokens`. Callers make no library call
        for zero blocks: there is nothing to ask the daemon."""
        ids = token_array(tokens)
        room = len(ids) // self.block_tokens
        keys = (_ffi.Key * room)()
        if room == 0:
            self._live()
            return keys, 0
        self._hash(ids, parent, keys, room)
        return keys, room

    def _hash(self, ids: Any, parent: Optional[KeyTuple], dest: Any, room: int) -> None:
        """Writes the `room` keys of the whole blocks of token array `ids` at `dest`."""
        n = self._lib.kvtier_keys_for(self._live(), uint32_pointer(ids), len(ids),
                                      self._key_ref(parent), dest, room)
        if n == _ffi.KEYS_ERROR:
            raise KvtierError(StatusCode.INVALID_ARGUMENT,
                              self._lib.kvtier_last_error().decode("utf-8", "replace"))
        if n != room:  # the library's block size is the namespace's: never differs
            raise KvtierError(13, f"kvtier_keys_for returned {n} keys for {room} blocks")
