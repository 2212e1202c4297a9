// libFuzzer target for every decoder of the client protocol (tools/fuzz.sh builds and runs it):
// control frames, ring records, arena arguments and results, region layouts. The first input byte
// picks the decoder; the rest is its input. Besides "never crash, never read out of bounds"
// (ASan + UBSan), it checks that whatever decodes re-encodes to something that decodes the same.
//
// protocol_fuzz_seeds.cc, linked with this file instead of libFuzzer, writes the seed corpus.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "client/protocol/frame_codec.h"
#include "client/protocol/record_codec.h"
#include "client/protocol/region_layout.h"

namespace kvtier::protocol {
namespace {

enum Selector : uint8_t { kFrame = 0, kRequest = 1, kCompletion = 2, kLayout = 3, kSelectors };

void Require(bool ok) {
  if (!ok) __builtin_trap();
}

void FuzzFrame(absl::Span<const std::byte> in) {
  if (in.size() >= sizeof(FrameHeader)) (void)DecodeFrameHeader(in.first(sizeof(FrameHeader)));
  const absl::Span<const std::byte> payload =
      in.size() >= sizeof(FrameHeader) ? in.subspan(sizeof(FrameHeader)) : in;
  if (absl::StatusOr<Hello> h = DecodeHello(payload); h.ok()) {
    absl::StatusOr<std::vector<std::byte>> again = EncodeHello(*h);
    Require(again.ok());
    absl::StatusOr<Hello> h2 = DecodeHello(absl::MakeConstSpan(*again).subspan(16));
    Require(h2.ok() && h2->ns.model_id == h->ns.model_id && h2->client_name == h->client_name &&
            h2->ns.cache_salt == h->ns.cache_salt && h2->arena_bytes == h->arena_bytes &&
            h2->pool == h->pool);
  }
  if (absl::StatusOr<Welcome> w = DecodeWelcome(payload); w.ok()) {
    Require(ValidateLayout(w->layout).ok());
    const std::vector<std::byte> again = EncodeWelcome(*w);
    Require(DecodeWelcome(absl::MakeConstSpan(again).subspan(16)).ok());
  }
  (void)DecodeError(payload);
}

// The arena: the input's bytes after the record, in 8-byte-aligned private memory.
struct Arena {
  explicit Arena(absl::Span<const std::byte> bytes) : words((bytes.size() + 7) / 8 + 1) {
    if (!bytes.empty()) std::memcpy(words.data(), bytes.data(), bytes.size());
    view = {reinterpret_cast<std::byte*>(words.data()), static_cast<uint32_t>(bytes.size())};
  }
  std::vector<uint64_t> words;
  ArenaView view;
};

void FuzzRequest(absl::Span<const std::byte> in) {
  if (in.size() < kRecordBytes) return;
  Arena arena(in.subspan(kRecordBytes));
  absl::StatusOr<Request> r = DecodeRequest(in.first(kRecordBytes), arena.view.bytes);
  if (!r.ok()) return;
  std::byte again[kRecordBytes];
  EncodeRequest(*r, again);
  absl::StatusOr<Request> r2 = DecodeRequest(again, arena.view.bytes);
  Require(r2.ok() && *r2 == *r);
  std::vector<BlockKey> keys;
  std::vector<PutBeginItem> begins;
  std::vector<PutCommitItem> commits;
  std::vector<WorkPublishItem> publishes;
  std::vector<uint32_t> slots;
  if (ReadKeys(arena.view, *r, &keys).ok()) Require(keys.size() == r->count);
  if (ReadPutBegin(arena.view, *r, 1 << 20, &begins).ok()) Require(begins.size() == r->count);
  if (ReadPutCommit(arena.view, *r, &commits).ok()) Require(commits.size() == r->count);
  if (ReadWorkPublish(arena.view, *r, 1 << 20, &publishes).ok()) {
    Require(publishes.size() == r->count);
    // What decodes re-encodes to the same bytes' meaning.
    std::vector<WorkPublishItem> again;
    WriteWorkPublish(arena.view, r->arg, publishes);
    Require(ReadWorkPublish(arena.view, *r, 1 << 20, &again).ok() && again == publishes);
  }
  if (ReadWorkSlots(arena.view, *r, &slots).ok()) Require(slots.size() == r->count);
}

void FuzzCompletion(absl::Span<const std::byte> in) {
  if (in.size() < kRecordBytes) return;
  Arena arena(in.subspan(kRecordBytes));
  absl::StatusOr<Completion> c = DecodeCompletion(in.first(kRecordBytes), arena.view.bytes);
  if (!c.ok()) return;
  std::byte again[kRecordBytes];
  EncodeCompletion(*c, again);
  absl::StatusOr<Completion> c2 = DecodeCompletion(again, arena.view.bytes);
  Require(c2.ok() && *c2 == *c);
  // The request this completion would answer, as its client sent it.
  const uint32_t count = c->op == Op::kNop || c->op == Op::kStats ? 0 : std::max(c->count, 1u);
  const auto tier = static_cast<uint8_t>(c->request_id % 2);  // slots of T0 or of T1
  const Request r{c->op, c->request_id, count, tier, {}, c->result};
  std::vector<uint8_t> tiers;
  std::vector<BlockResult> results;
  (void)ReadLookupResult(arena.view, r, *c, &tiers);
  (void)ReadBlockResults(arena.view, r, *c, SessionLimits{1000, 4096, 100, 1 << 16}, &results);
  (void)ReadStats(arena.view, r, *c);
}

void FuzzLayout(absl::Span<const std::byte> in) {
  RegionLayout l{};
  std::memcpy(&l, in.data(), std::min(in.size(), sizeof(l)));
  if (!ValidateLayout(l).ok()) return;
  Require(l.region_bytes >= uint64_t{l.arena_offset} + l.arena_bytes);
}

}  // namespace
}  // namespace kvtier::protocol

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvtier::protocol;
  if (size == 0) return 0;
  const absl::Span<const std::byte> in(reinterpret_cast<const std::byte*>(data) + 1, size - 1);
  switch (data[0] % kSelectors) {
    case kFrame:
      FuzzFrame(in);
      break;
    case kRequest:
      FuzzRequest(in);
      break;
    case kCompletion:
      FuzzCompletion(in);
      break;
    default:
      FuzzLayout(in);
  }
  return 0;
}
