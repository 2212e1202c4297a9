"""The Python client against a real kvtierd: round trips byte for byte, prefixes shared between
clients, namespaces kept apart, errors with the library's messages, and a clean SIGTERM stop.

Run by CTest (tests/client/CMakeLists.txt) with KVTIER_DAEMON (kvtierd), KVTIER_LIB
(libkvtier.so) and PYTHONPATH (client/python) set; by hand the same way:
  KVTIER_DAEMON=build/default/daemon/kvtierd KVTIER_LIB=build/default/client/libkvtier.so \
  PYTHONPATH=client/python python3 -m unittest discover -v -s tests/client/python
"""

import array
import ctypes
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import kvtier
from kvtier import BlockCode, KvtierError, StatusCode, Tier

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))
SLOT_BYTES = 64 * 1024
BLOCK = 16
MODEL = "test-model@rev1"


def _die_with_parent() -> None:
    # If this test process crashes (a sanitizer abort, a kill), the daemon gets SIGTERM instead of
    # living on. prctl(PR_SET_PDEATHSIG = 1, SIGTERM).
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


class Daemon:
    """A kvtierd in a temporary data directory with small tiers and no metrics endpoint."""

    def __init__(self) -> None:
        binary = os.environ.get("KVTIER_DAEMON")
        if not binary:
            raise unittest.SkipTest("KVTIER_DAEMON (path of kvtierd) is not set")
        self.dir = tempfile.mkdtemp(prefix="kvtier-py-")
        self.socket = os.path.join(self.dir, "kvtierd.sock")
        self.log = open(os.path.join(self.dir, "kvtierd.log"), "w+b")
        self.proc = subprocess.Popen(
            [binary, "--config", os.path.join(REPO, "configs", "default.toml"),
             "--daemon.data_directory", self.dir, "--daemon.socket_path", self.socket,
             "--t1.capacity_bytes", "64MiB", "--t1.slot_bytes", str(SLOT_BYTES),
             "--t1.touch_threads", "1", "--t2.capacity_bytes", "256MiB",
             "--metrics.enabled", "false"],
            stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        self._wait_for_socket()

    def _wait_for_socket(self) -> None:
        # Start-up (touching T1, preallocating T2) takes a moment. The daemon dying is the failure
        # looked for; the generous bound only keeps a hung start from hanging CTest.
        deadline = time.monotonic() + 120
        while "kvtierd ready" not in self.output():
            if self.proc.poll() is not None:
                raise RuntimeError(f"kvtierd exited {self.proc.returncode}:\n{self.output()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"kvtierd did not become ready:\n{self.output()}")
            time.sleep(0.05)

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")

    def stop(self) -> int:
        """SIGTERM, then the exit code."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=120)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.log.close()
            shutil.rmtree(self.dir, ignore_errors=True)


def random_tokens(blocks: int, extra: int = 0) -> list:
    return [random.randrange(0, 2**32) for _ in range(blocks * BLOCK + extra)]


def random_payloads(blocks: int) -> list:
    return [os.urandom(random.randint(1, SLOT_BYTES)) for _ in range(blocks)]


class ClientAgainstDaemonTest(unittest.TestCase):
    daemon: Daemon

    @classmethod
    def setUpClass(cls) -> None:
        cls.daemon = Daemon()

    @classmethod
    def tearDownClass(cls) -> None:
        code = cls.daemon.stop()
        if code != 0:
            raise AssertionError(f"kvtierd exited {code} on SIGTERM:\n{cls.daemon.output()}")

    def connect(self, **kwargs) -> kvtier.Client:
        kwargs.setdefault("model_id", MODEL)
        client = kvtier.Client(self.daemon.socket, **kwargs)
        self.addCleanup(client.close)
        return client

    def test_put_then_get_returns_the_payloads_byte_for_byte(self) -> None:
        c = self.connect()
        self.assertEqual(c.slot_bytes, SLOT_BYTES)
        tokens = random_tokens(4, extra=5)  # the partial fifth block is not cached
        payloads = random_payloads(4)
        payloads[1] = bytearray(payloads[1])
        payloads[2] = memoryview(payloads[2])
        self.assertEqual(c.put(tokens, payloads), [BlockCode.OK] * 4)
        self.assertEqual(c.get(tokens), [bytes(p) for p in payloads])
        self.assertEqual(c.stats()["leases_held"], 0)

    def test_lookup_counts_the_cached_prefix_in_blocks(self) -> None:
        c = self.connect()
        tokens = random_tokens(5)
        self.assertEqual(c.lookup(tokens), 0)
        c.put(tokens[:2 * BLOCK], random_payloads(2))
        self.assertEqual(c.lookup(tokens), 2)
        self.assertEqual(c.lookup(tokens[:2 * BLOCK + 3]), 2)
        self.assertEqual(c.lookup(tokens[:BLOCK - 1]), 0)
        tiers = c.lookup_tiers(tokens)
        self.assertEqual(len(tiers), 2)
        self.assertTrue(all(Tier.T1 in t for t in tiers), tiers)
        self.assertEqual(len(c.get(tokens)), 2)  # get stops at the first missing block

    def test_lookup_many_answers_as_lookup_of_each_sequence(self) -> None:
        c = self.connect()
        # 700 sequences (more than the daemon's request window of 256): full hits, half hits,
        # a cached second block after a missing first one, misses, empty and partial-block ones;
        # then one longer than an arena part of the window and one longer than max_batch (1024).
        sequences, want = [], []
        for i in range(700):
            blocks = 0 if i % 8 == 7 else 1 + i % 4
            tokens = random_tokens(blocks, extra=i % 3)
            keys = c.keys(tokens)
            payload = bytes([i % 256]) * 64
            if i % 8 == 0:
                c.put(tokens, [payload] * blocks)
            elif i % 8 == 1:
                c.put(tokens[:blocks // 2 * BLOCK], [payload] * (blocks // 2))
            elif i % 8 == 2 and blocks >= 2:
                c.put(tokens[BLOCK:2 * BLOCK], [payload], parent=keys[0])
            sequences.append(tokens)
            want.append({0: blocks, 1: blocks // 2}.get(i % 8, 0))
        for blocks in (600, 1100):
            tokens = random_tokens(blocks)
            c.put(tokens[:10 * BLOCK], [b"long"] * 10)
            sequences.append(array.array("I", tokens))
            want.append(10)
        self.assertEqual(c.lookup_many(sequences), want)
        self.assertEqual(c.lookup_many(sequences), [c.lookup(s) for s in sequences])
        tiers = c.lookup_tiers_many(sequences)
        self.assertEqual(tiers, [c.lookup_tiers(s) for s in sequences])
        self.assertTrue(all(Tier.T1 in t for seq in tiers for t in seq))
        self.assertEqual(c.lookup_many([]), [])
        self.assertEqual(c.lookup_many([[], tokens[:BLOCK - 1]]), [0, 0])
        with self.assertRaises(ValueError):
            c.lookup_many([tokens, [-1] * BLOCK])
        c.close()
        with self.assertRaises(ValueError):
            c.lookup_many([tokens])

    def test_parent_continues_a_sequence(self) -> None:
        c = self.connect()
        tokens = random_tokens(4)
        head, tail = tokens[:2 * BLOCK], tokens[2 * BLOCK:]
        head_keys = c.keys(head)
        self.assertEqual(head_keys + c.keys(tail, parent=head_keys[-1]), c.keys(tokens))
        payloads = random_payloads(4)
        c.put(head, payloads[:2])
        self.assertEqual(c.put(tail, payloads[2:], parent=head_keys[-1]), [BlockCode.OK] * 2)
        self.assertEqual(c.get(tokens), payloads)

    def test_two_clients_share_a_prefix_stored_once(self) -> None:
        a = self.connect(client_name="engine-a")
        b = self.connect(client_name="engine-b")
        tokens = random_tokens(3)
        payloads = random_payloads(3)
        self.assertEqual(a.put(tokens, payloads), [BlockCode.OK] * 3)
        self.assertEqual(b.lookup(tokens), 3)
        self.assertEqual(b.put(tokens, random_payloads(3)), [BlockCode.ALREADY_PRESENT] * 3)
        self.assertEqual(b.get(tokens), payloads)

    def test_namespaces_see_nothing_of_each_other(self) -> None:
        a = self.connect(cache_salt="tenant-a")
        tokens = random_tokens(2)
        a.put(tokens, random_payloads(2))
        self.assertEqual(a.lookup(tokens), 2)
        for other in ({"cache_salt": "tenant-b"}, {"model_id": "other-model"},
                      {"cache_salt": "tenant-a", "tp_size": 2}):
            c = self.connect(**other)
            self.assertNotEqual(c.keys(tokens), a.keys(tokens), other)
            self.assertEqual(c.lookup(tokens), 0, other)
            self.assertEqual(c.get(tokens), [], other)
            self.assertEqual(c.drop(tokens), [BlockCode.MISSING] * 2, other)
        self.assertEqual(a.lookup(tokens), 2)

    def test_get_into_copies_into_caller_buffers(self) -> None:
        c = self.connect()
        tokens = random_tokens(3)
        payloads = [os.urandom(4096) for _ in range(3)]
        c.put(tokens, payloads)
        arena = bytearray(3 * 4096)  # views into one allocation, as an engine's pool would be
        views = [memoryview(arena)[i * 4096:(i + 1) * 4096] for i in range(3)]
        self.assertEqual(c.get_into(tokens, views), 3)
        self.assertEqual(bytes(arena), b"".join(payloads))
        small = [bytearray(4096), bytearray(100), bytearray(4096)]
        self.assertEqual(c.get_into(tokens, small), 1)  # the run stops at a too-small buffer
        self.assertEqual(bytes(small[0]), payloads[0])
        self.assertEqual(c.stats()["leases_held"], 0)
        with self.assertRaises(TypeError):
            c.get_into(tokens, [b"\0" * 4096] * 3)  # read-only

    def test_one_client_serves_several_threads(self) -> None:
        c = self.connect()
        work = [(random_tokens(2), random_payloads(2)) for _ in range(4)]
        failures = []

        def run(tokens: list, payloads: list) -> None:
            try:
                for _ in range(5):
                    c.put(tokens, payloads)
                    if c.get(tokens) != payloads:
                        failures.append("payloads differ")
            except Exception as e:  # reported below, in the test's thread
                failures.append(repr(e))

        threads = [threading.Thread(target=run, args=w) for w in work]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(failures, [])
        self.assertEqual(c.stats()["leases_held"], 0)

    def test_drop_forgets_blocks(self) -> None:
        c = self.connect()
        tokens = random_tokens(2)
        c.put(tokens, random_payloads(2))
        self.assertEqual(c.drop(tokens), [BlockCode.OK] * 2)
        self.assertEqual(c.lookup(tokens), 0)
        self.assertEqual(c.drop(tokens), [BlockCode.MISSING] * 2)

    def test_stats_count_operations(self) -> None:
        c = self.connect()
        before = c.stats()
        tokens = random_tokens(2)
        c.put(tokens, random_payloads(2))
        c.lookup(tokens)
        c.get(tokens)
        after = c.stats()
        self.assertEqual(after["puts_committed"] - before["puts_committed"], 2)
        self.assertGreaterEqual(after["lookups"] - before["lookups"], 1)
        self.assertGreaterEqual(after["lookup_hit_blocks"] - before["lookup_hit_blocks"], 2)
        self.assertGreaterEqual(after["gets"] - before["gets"], 1)
        self.assertGreater(after["t1_slots_total"], 0)

    def test_tokens_may_be_any_sequence_of_ints(self) -> None:
        c = self.connect()
        tokens = random_tokens(2)
        want = c.keys(tokens)
        for form in (tuple(tokens), array.array("I", tokens), array.array("q", tokens),
                     memoryview(array.array("L", tokens)), iter(tokens)):
            self.assertEqual(c.keys(form), want, type(form))
        try:
            import numpy
        except ImportError:
            pass
        else:
            self.assertEqual(c.keys(numpy.array(tokens, dtype=numpy.int64)), want)
        with self.assertRaises(ValueError):
            c.keys([-1] * BLOCK)
        with self.assertRaises(TypeError):
            c.keys([0.5] * BLOCK)

    def test_misuse_raises_before_reaching_the_daemon(self) -> None:
        c = self.connect()
        tokens = random_tokens(2)
        with self.assertRaisesRegex(ValueError, "2 whole blocks of tokens but 1 payloads"):
            c.put(tokens, random_payloads(1))
        with self.assertRaises(ValueError):
            self.connect(cache_salt="a\0b")
        for size in (0, SLOT_BYTES + 1):  # the daemon would close the connection for these
            with self.assertRaisesRegex(ValueError, f"payloads\\[0\\]: {size} bytes"):
                c.put(tokens[:BLOCK], [bytes(size)])
        self.assertEqual(c.put(tokens[:BLOCK], [bytes(SLOT_BYTES)]), [BlockCode.OK])
        c.close()
        c.close()
        with self.assertRaises(ValueError):
            c.lookup(tokens)

    def test_working_slot_misuse_raises_before_reaching_the_daemon(self) -> None:
        c = self.connect()
        with self.assertRaisesRegex(ValueError, "working slots are of Tier.T0 or Tier.T1"):
            c.take_working(Tier.T2, 1)
        with self.assertRaises(KvtierError) as caught:  # this daemon runs without T0
            c.take_working(Tier.T0, 1)
        self.assertEqual(caught.exception.code, StatusCode.INVALID_ARGUMENT)
        self.assertIn("has no T0", caught.exception.message)
        for n in (0, 1025):
            with self.assertRaisesRegex(KvtierError, f"n is {n}"):
                c.take_working(Tier.T1, n)
        item = kvtier.WorkItem(key=(1, 2), slot=0, payload_bytes=SLOT_BYTES + 1, checksum=0)
        with self.assertRaisesRegex(KvtierError, "items\\[0\\].payload_bytes"):
            c.publish_working(Tier.T1, [item])
        self.assertEqual(c.publish_working(Tier.T1, []), [])
        self.assertEqual(c.free_working(Tier.T1, []), [])
        with self.assertRaisesRegex(ValueError, "T1 has no slot"):
            c.slot_view(2**32 - 1)
        self.assertEqual(len(c.slot_view(0)), SLOT_BYTES)
        self.assertEqual(c.stats()["requests_invalid"], 0)  # nothing malformed reached it

    def test_a_pool_is_named_through_the_c_abi(self) -> None:
        # This daemon has one pool, "default" ([pool]): naming it works, naming another is refused
        # by the daemon with the pool's name in the message.
        self.connect(pool="default").close()
        with self.assertRaises(KvtierError) as caught:
            self.connect(pool="tenant-b")
        self.assertEqual(caught.exception.code, StatusCode.PERMISSION_DENIED)
        self.assertIn("memory pool 'tenant-b'", caught.exception.message)

    def test_bad_namespace_raises_with_the_libraries_message(self) -> None:
        with self.assertRaises(KvtierError) as caught:
            self.connect(model_id="")
        self.assertEqual(caught.exception.code, StatusCode.INVALID_ARGUMENT)
        self.assertIn("model_id", caught.exception.message)
        with self.assertRaises(KvtierError) as caught:
            self.connect(block_tokens=12)
        self.assertIn("block_tokens", str(caught.exception))


class ClientWithoutDaemonTest(unittest.TestCase):

    def test_missing_socket_raises_naming_the_path(self) -> None:
        path = os.path.join(tempfile.gettempdir(), f"kvtier-no-daemon-{os.getpid()}.sock")
        with self.assertRaises(KvtierError) as caught:
            kvtier.Client(path, model_id=MODEL)
        self.assertIn(path, str(caught.exception))
        self.assertIsInstance(caught.exception, RuntimeError)

    def test_connect_to_a_daemon_that_never_answers_times_out(self) -> None:
        # A listening socket nobody accepts on or answers: a daemon stopped (SIGSTOP) or wedged.
        import socket
        directory = tempfile.mkdtemp(prefix="kvtier-py-silent-")
        self.addCleanup(shutil.rmtree, directory, True)
        path = os.path.join(directory, "silent.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(listener.close)
        listener.bind(path)
        listener.listen(16)
        start = time.monotonic()
        with self.assertRaises(KvtierError) as caught:
            kvtier.Client(path, model_id=MODEL, timeout_ms=200)
        self.assertEqual(caught.exception.code, StatusCode.DEADLINE_EXCEEDED, caught.exception)
        self.assertIn(path, caught.exception.message)
        self.assertLess(time.monotonic() - start, 20)  # a hang guard, far above 200 ms
        with self.assertRaisesRegex(ValueError, "timeout_ms: 0"):
            kvtier.Client(path, model_id=MODEL, timeout_ms=0)

    def test_calls_after_the_daemon_stopped_raise_unavailable(self) -> None:
        daemon = Daemon()
        c = kvtier.Client(daemon.socket, model_id=MODEL)
        self.addCleanup(c.close)
        tokens = random_tokens(1)
        c.put(tokens, random_payloads(1))
        self.assertEqual(daemon.stop(), 0)
        with self.assertRaises(KvtierError) as caught:
            c.lookup(tokens)
        self.assertEqual(caught.exception.code, StatusCode.UNAVAILABLE, caught.exception)

    def test_import_needs_no_library_and_client_says_where_it_looked(self) -> None:
        script = ("import kvtier\n"
                  "try:\n"
                  "    kvtier.Client('/nonexistent.sock', model_id='m')\n"
                  "except kvtier.LibraryNotFoundError as e:\n"
                  "    print(e)\n")
        env = dict(os.environ, KVTIER_LIB="/nonexistent/libkvtier.so")
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                             text=True, check=True).stdout
        self.assertIn("/nonexistent/libkvtier.so", out)
        self.assertIn("KVTIER_LIB", out)

    def test_tier_flags_are_the_protocols_mask_bits_including_the_remote_tier(self) -> None:
        # docs/protocol.md: bit t of a lookup's tier mask is tier t; T3 is the remote tier.
        self.assertEqual([int(t) for t in (Tier.T0, Tier.T1, Tier.T2, Tier.T3)], [1, 2, 4, 8])
        self.assertEqual(Tier(0b1010), Tier.T1 | Tier.T3)


if __name__ == "__main__":
    unittest.main()
