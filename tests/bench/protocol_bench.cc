// Client protocol round trips between two processes (docs/benchmarks.md "Protocol"), next to the
// ceiling it must beat, measured in the same run: a plain Unix-domain socket request/response
// carrying the same bytes.
//
//   BM_RingRoundTrip/<keys>/<spin>   a request record through the submission ring, a completion
//                                    back; with keys > 0 it is a lookup: the client writes keys
//                                    into the arena, the echo process decodes the record, copies
//                                    and checks the keys out (ReadKeys) and writes one tier mask
//                                    per key (WriteLookupResult), the client reads them back.
//                                    spin = 0: every wait sleeps on the eventfd doorbell at once;
//                                    spin = 4096: a wait spins up to 4096 pause instructions
//                                    first (tens of microseconds), the fast path when the
//                                    peer answers quickly, and sleeps only after that.
//   BM_SocketRoundTrip/<keys>        the same bytes (64 + 16 * keys out, 64 + keys back) as one
//                                    write and one read each way over a socketpair.
//
// The echo process is forked per benchmark run; results are real (wall-clock) time per round
// trip.
//
//   kvtier_protocol_bench [--benchmark_filter=...] [--benchmark_repetitions=N]
#include <benchmark/benchmark.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <vector>

#include "client/protocol/record_codec.h"
#include "client/protocol/shm_region.h"
#include "client/protocol/spsc_ring.h"

namespace kvtier::protocol {
namespace {

constexpr uint64_t kStopId = UINT64_MAX;

struct Session {
  std::unique_ptr<ShmRegion> region;
  std::unique_ptr<EventFd> client_bell, daemon_bell;
};

Session MakeSession() {
  Session s;
  s.region = std::move(*ShmRegion::Create(*ComputeLayout(256, 256, 1 << 20)));
  s.client_bell = std::make_unique<EventFd>(*EventFd::Create());
  s.daemon_bell = std::make_unique<EventFd>(*EventFd::Create());
  return s;
}

// The daemon's side: answers every request until the stop request. Exit status 0 when all went
// well.
int EchoRing(const Session& s, int spin) {
  RingConsumer requests(s.region->submission(), s.client_bell.get());
  RingProducer completions(s.region->completion(), s.client_bell.get());
  const ArenaView arena = s.region->arena();
  std::vector<BlockKey> keys;
  std::vector<uint8_t> masks(kMaxBatchKeys, 2);
  std::byte record[kRecordBytes];
  for (;;) {
    if (!requests.Pop(record, *s.daemon_bell, spin).ok()) return 2;
    absl::StatusOr<Request> r = DecodeRequest(record, arena.bytes);
    if (!r.ok()) return 3;
    if (r->request_id == kStopId) return 0;
    Completion c = EmptyCompletion(*r, RequestStatus::kOk);
    if (r->op == Op::kLookup) {
      if (!ReadKeys(arena, *r, &keys).ok()) return 4;
      c = WriteLookupResult(arena, *r, r->count, absl::MakeConstSpan(masks).first(r->count));
    }
    EncodeCompletion(c, record);
    if (!completions.Push(record, *s.daemon_bell, spin).ok()) return 5;
  }
}

void BM_RingRoundTrip(benchmark::State& state) {
  const uint32_t count = static_cast<uint32_t>(state.range(0));
  const int spin = static_cast<int>(state.range(1));
  Session s = MakeSession();
  const pid_t pid = fork();
  if (pid == 0) _exit(EchoRing(s, spin));
  RingProducer requests(s.region->submission(), s.daemon_bell.get());
  RingConsumer completions(s.region->completion(), s.daemon_bell.get());
  const ArenaView arena = s.region->arena();
  std::vector<BlockKey> keys(count);
  for (uint32_t i = 0; i < count; ++i) keys[i] = {i + 1, i * 7};
  std::vector<uint8_t> masks;
  Request r{count ? Op::kLookup : Op::kNop, 0, count, 0, {0, ArgBytes(Op::kLookup, count)}, {}};
  r.result = {count ? 64 * 1024u : 0, count ? ResultBytes(Op::kLookup, count) : 0};
  if (count == 0) r.arg = {};
  std::byte record[kRecordBytes];
  for (auto _ : state) {
    ++r.request_id;
    if (count) WriteKeys(arena, r.arg, keys);
    EncodeRequest(r, record);
    if (!requests.Push(record, *s.client_bell, spin).ok() ||
        !completions.Pop(record, *s.client_bell, spin).ok()) {
      state.SkipWithError("ring failed");
      break;
    }
    absl::StatusOr<Completion> c = DecodeCompletion(record, arena.bytes);
    if (!c.ok() || (count && !ReadLookupResult(arena, r, *c, &masks).ok())) {
      state.SkipWithError("bad completion");
      break;
    }
  }
  // System calls per round trip on the client's side: doorbells rung plus sleeps (each a poll and a
  // read). 0 when the daemon was always busy-polling.
  const double rounds = static_cast<double>(state.iterations());
  state.counters["client_bells"] = static_cast<double>(requests.bells_rung()) / rounds;
  state.counters["client_sleeps"] = static_cast<double>(completions.sleeps()) / rounds;
  r = Request{Op::kNop, kStopId, 0, 0, {}, {}};
  EncodeRequest(r, record);
  (void)requests.Push(record, *s.client_bell, 0);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) state.SkipWithError("echo process failed");
}
BENCHMARK(BM_RingRoundTrip)
    ->ArgsProduct({{0, 1, 64, 1024}, {0, 4096}})
    ->ArgNames({"keys", "spin"})
    ->UseRealTime();

bool ReadAll(int fd, void* buf, size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

void BM_SocketRoundTrip(benchmark::State& state) {
  const size_t count = static_cast<size_t>(state.range(0));
  const size_t out_bytes = kRecordBytes + 16 * count, back_bytes = kRecordBytes + count;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return state.SkipWithError("socketpair");
  const pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    std::vector<char> in(out_bytes), out(back_bytes, 2);
    while (ReadAll(sv[1], in.data(), in.size())) {
      if (write(sv[1], out.data(), out.size()) != static_cast<ssize_t>(out.size())) _exit(1);
    }
    _exit(0);
  }
  close(sv[1]);
  std::vector<char> out(out_bytes, 1), in(back_bytes);
  for (auto _ : state) {
    if (write(sv[0], out.data(), out.size()) != static_cast<ssize_t>(out.size()) ||
        !ReadAll(sv[0], in.data(), in.size())) {
      state.SkipWithError("socket failed");
      break;
    }
  }
  close(sv[0]);
  waitpid(pid, nullptr, 0);
}
BENCHMARK(BM_SocketRoundTrip)->Arg(0)->Arg(1)->Arg(64)->Arg(1024)->ArgName("keys")->UseRealTime();

}  // namespace
}  // namespace kvtier::protocol

BENCHMARK_MAIN();
