"""The vocabulary of the C ABI in Python: status codes, block codes, tiers, the error type."""

from __future__ import annotations

import enum
from typing import NamedTuple, Optional, Tuple, Union


class StatusCode(enum.IntEnum):
    """absl::StatusCode, as the C ABI returns it (0 is success and never raised)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class BlockCode(enum.IntEnum):
    """One block's outcome (KVTIER_BLOCK_*; docs/protocol.md "Block codes"). Not an error:
    RETRY_LATER (T1 is full right now) and ALREADY_PRESENT are normal answers."""

    OK = 0
    ALREADY_PRESENT = 1
    RETRY_LATER = 2
    MISSING = 3
    LEASED = 4
    BAD_CHECKSUM = 5
    FAILED = 6
    OVER_QUOTA = 7  # take_working: this client holds its quota of working slots


class Tier(enum.IntFlag):
    """Where a block lives; lookup_tiers() gives a set of these per block (bit t: tier t)."""

    T0 = 1  # GPU HBM
    T1 = 2  # pinned host DRAM
    T2 = 4  # NVMe
    T3 = 8  # the remote tier: a store the daemons of a fleet share (lookups only; gets copy to T1)


class WorkItem(NamedTuple):
    """A filled working slot to publish (Client.publish_working): the block `key` (and its
    `parent`, the key of the block before it, or None) whose `payload_bytes` bytes are in working
    slot `slot`, with their XXH3-64 `checksum`."""

    key: Tuple[int, int]
    slot: int
    payload_bytes: int
    checksum: int
    parent: Optional[Tuple[int, int]] = None


def block_code(value: int) -> Union[BlockCode, int]:
    """A BlockCode, or the bare int for a code newer than this package (never an exception)."""
    try:
        return BlockCode(value)
    except ValueError:
        return value


def _code(value: int) -> Union[StatusCode, int]:
    try:
        return StatusCode(value)
    except ValueError:
        return value


class KvtierError(RuntimeError):
    """A call into libkvtier failed: `code` is the StatusCode, `message` the library's text
    (for connection errors it names the socket; for a refused namespace, the bad field)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(_code(code), message)
        self.code = _code(code)
        self.message = message

    def __str__(self) -> str:
        name = self.code.name if isinstance(self.code, StatusCode) else f"code {self.code}"
        return f"{name}: {self.message}"


class LibraryNotFoundError(KvtierError):
    """libkvtier.so could not be loaded; the message lists every place tried (Client() raises
    this, never `import kvtier`)."""

    def __init__(self, message: str) -> None:
        super().__init__(StatusCode.NOT_FOUND, message)
