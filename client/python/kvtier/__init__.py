"""kvtier: Python client of the kvtier KV-cache daemon, over libkvtier's C ABI (ctypes).

    import kvtier
    with kvtier.Client("kvtier-data/kvtierd.sock", model_id="llama-3.1-8b@abc") as c:
        c.put(tokens, payloads)          # one payload (bytes-like) per whole block of tokens
        hit = c.lookup(tokens)           # cached prefix, in blocks
        blocks = c.get(tokens)           # their payloads, copied out

GPU engines: kvtier.GpuClient(client).get/put(tokens, KvCache.from_vllm(layers), blocks, stream)
moves blocks between kvtier and a paged KV cache on the engine's stream (torch tensors are read
through their attributes; torch is never imported here).

Importing needs nothing but the standard library; libkvtier.so is found when the first Client is
made ($KVTIER_LIB, next to this package, the source tree's build/*/client/, the system path), and
LibraryNotFoundError lists the places tried. docs/python.md has the whole API.
"""

from ._client import Client, KeyTuple
from ._gpu import GpuClient, GpuTransfer, KvCache
from ._types import BlockCode, KvtierError, LibraryNotFoundError, StatusCode, Tier, WorkItem

__all__ = ["BlockCode", "Client", "GpuClient", "GpuTransfer", "KeyTuple", "KvCache", "KvtierError",
           "LibraryNotFoundError", "StatusCode", "Tier", "WorkItem"]
__version__ = "0.1.0"
