"""Working slots from Python against a real kvtierd (docs/python.md "Working slots"): a T1 slot
filled through slot_view and published with its XXH3-64 is served to another client byte for
byte; a repeated or foreign slot is MISSING; a key already cached is ALREADY_PRESENT and the slot
can then be freed; closing the writer gives back its working slots and its leases.

The checksum comes from the system's libxxhash (XXH3_64bits, through ctypes), the library
kvtierd itself links; the test is skipped where it cannot be loaded. Run as test_client.py is.
"""

import ctypes
import ctypes.util
import os
import random
import time
import unittest

import kvtier
from kvtier import BlockCode, Tier

from test_client import BLOCK, MODEL, SLOT_BYTES, Daemon, random_tokens


def _xxh3() -> ctypes.CDLL:
    name = ctypes.util.find_library("xxhash")
    if name is None:
        raise unittest.SkipTest("libxxhash (XXH3_64bits) not found")
    lib = ctypes.CDLL(name)
    lib.XXH3_64bits.restype = ctypes.c_uint64
    lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return lib


def eventually(condition) -> bool:
    """Polls `condition` until true: the daemon notices a closed client on its own time. The bound
    only keeps a hang from hanging CTest."""
    deadline = time.monotonic() + 120
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class WorkingSlotsTest(unittest.TestCase):
    daemon: Daemon

    @classmethod
    def setUpClass(cls) -> None:
        cls.xxh3 = _xxh3()
        cls.daemon = Daemon()

    @classmethod
    def tearDownClass(cls) -> None:
        code = cls.daemon.stop()
        if code != 0:
            raise AssertionError(f"kvtierd exited {code} on SIGTERM:\n{cls.daemon.output()}")

    def connect(self) -> kvtier.Client:
        client = kvtier.Client(self.daemon.socket, model_id=MODEL, block_tokens=BLOCK)
        self.addCleanup(client.close)
        return client

    def fill(self, c: kvtier.Client, slot: int, key, payload: bytes, parent=None):
        """Writes payload into working slot `slot`; the item that publishes it."""
        c.slot_view(slot)[:len(payload)] = payload
        return kvtier.WorkItem(key=key, slot=slot, payload_bytes=len(payload),
                               checksum=self.xxh3.XXH3_64bits(payload, len(payload)),
                               parent=parent)

    def take(self, c: kvtier.Client, n: int) -> list:
        taken = c.take_working(Tier.T1, n)
        self.assertEqual([code for code, _ in taken], [BlockCode.OK] * n)
        return [slot for _, slot in taken]

    def test_a_published_slot_is_served_to_another_client(self) -> None:
        writer, reader = self.connect(), self.connect()
        tokens = random_tokens(3)
        keys = writer.keys(tokens)
        payloads = [os.urandom(random.randint(1, SLOT_BYTES)) for _ in keys]
        slots = self.take(writer, len(keys))
        items = [self.fill(writer, slot, key, payload, keys[i - 1] if i else None)
                 for i, (slot, key, payload) in enumerate(zip(slots, keys, payloads))]
        self.assertEqual(reader.lookup(tokens), 0)
        self.assertEqual(writer.publish_working(Tier.T1, items), [BlockCode.OK] * 3)
        self.assertEqual(reader.lookup(tokens), 3)
        self.assertEqual(reader.get(tokens), payloads)
        self.assertEqual(writer.stats()["leases_held"], 3)  # the writer's, until it lets go
        self.assertEqual(reader.drop(tokens), [BlockCode.LEASED] * 3)
        writer.close()  # the Python client has no release: closing gives the leases back
        self.assertTrue(eventually(lambda: reader.stats()["leases_held"] == 0))
        self.assertEqual(reader.get(tokens), payloads)
        self.assertEqual(reader.drop(tokens), [BlockCode.OK] * 3)

    def test_repeated_foreign_and_present_slots(self) -> None:
        c, other = self.connect(), self.connect()
        tokens = random_tokens(2)
        keys = c.keys(tokens)
        payload = os.urandom(1000)
        self.assertEqual(other.put(tokens[:BLOCK], [payload]), [BlockCode.OK])
        mine, theirs = self.take(c, 2), self.take(other, 1)
        present = self.fill(c, mine[0], keys[0], os.urandom(500))
        self.assertEqual(c.publish_working(Tier.T1, [present]), [BlockCode.ALREADY_PRESENT])
        self.assertEqual(c.get(tokens[:BLOCK]), [payload])  # the block cached first
        fresh = self.fill(c, mine[1], keys[1], os.urandom(700), keys[0])
        self.assertEqual(c.publish_working(Tier.T1, [fresh, fresh]),
                         [BlockCode.OK, BlockCode.MISSING])
        self.assertEqual(c.free_working(Tier.T1, [mine[0], mine[0], theirs[0]]),
                         [BlockCode.OK, BlockCode.MISSING, BlockCode.MISSING])
        self.assertEqual(other.free_working(Tier.T1, theirs), [BlockCode.OK])
        self.assertEqual(c.lookup(tokens), 2)

    def test_closing_the_writer_gives_back_its_working_slots(self) -> None:
        observer = self.connect()

        def used() -> int:
            stats = observer.stats()
            return stats["t1_slots_total"] - stats["t1_slots_free"]

        before = used()
        c = self.connect()
        self.take(c, 5)
        self.assertEqual(used(), before + 5)
        c.close()
        self.assertTrue(eventually(lambda: used() == before), (used(), before))


if __name__ == "__main__":
    unittest.main()
