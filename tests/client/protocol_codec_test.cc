// Every op of the client protocol survives the trip client -> daemon -> client through the codec
// and a real arena: what the client meant is what the daemon decodes, and what the daemon answers
// is what the client reads back. Also the control-plane frames.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "client/protocol/frame_codec.h"
#include "client/protocol/record_codec.h"
#include "client/protocol/region_layout.h"

namespace kvtier::protocol {
namespace {

class CodecTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kArenaBytes = 128 * 1024;
  CodecTest()
      : storage_(kArenaBytes / 8),
        arena_{reinterpret_cast<std::byte*>(storage_.data()), kArenaBytes} {}

  // The client's side: a request of `count` items with arguments at 0 and results after them.
  Request MakeRequest(Op op, uint32_t count, uint8_t tier = 0) {
    Request r;
    r.op = op;
    r.request_id = ++next_id_;
    r.count = count;
    r.tier = tier;
    r.arg = {0, ArgBytes(op, count)};
    const uint32_t result_offset = (r.arg.bytes + 4095) / 4096 * 4096 + 4096;
    r.result = {ResultBytes(op, count) == 0 ? 0 : result_offset, ResultBytes(op, count)};
    return r;
  }
  // Record trip through the submission ring: encode, decode as the daemon does.
  Request Submit(const Request& r) {
    std::byte record[kRecordBytes];
    EncodeRequest(r, record);
    absl::StatusOr<Request> decoded = DecodeRequest(record, kArenaBytes);
    EXPECT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, r);
    return *decoded;
  }
  Completion Complete(const Completion& c) {
    std::byte record[kRecordBytes];
    EncodeCompletion(c, record);
    absl::StatusOr<Completion> decoded = DecodeCompletion(record, kArenaBytes);
    EXPECT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, c);
    return *decoded;
  }
  std::vector<BlockKey> Keys(uint32_t n) {
    std::vector<BlockKey> keys(n);
    for (uint32_t i = 0; i < n; ++i) keys[i] = {0x1000 + i, ~uint64_t{i}};
    return keys;
  }
  // Checks one keys-only op end to end with block results.
  void KeysOpRoundTrip(Op op, uint8_t tier) {
    const std::vector<BlockKey> keys = Keys(64);
    const Request sent = MakeRequest(op, 64, tier);
    WriteKeys(arena_, sent.arg, keys);
    const Request got = Submit(sent);
    std::vector<BlockKey> read;
    ASSERT_TRUE(ReadKeys(arena_, got, &read).ok());
    EXPECT_EQ(read, keys);
    std::vector<BlockResult> results(64);
    for (uint32_t i = 0; i < 64; ++i) results[i].code = i % 2 ? 0 : 3;
    if (op == Op::kGet) {
      for (uint32_t i = 0; i < 64; i += 2) results[i] = {0, i * 3, 4096 + i, 0};
    }
    const Completion c = Complete(WriteBlockResults(arena_, got, results));
    std::vector<BlockResult> back;
    ASSERT_TRUE(ReadBlockResults(arena_, sent, c, {1000, 1 << 20}, &back).ok());
    ASSERT_EQ(back.size(), results.size());
    EXPECT_EQ(0, std::memcmp(back.data(), results.data(), results.size() * sizeof(BlockResult)));
  }

  std::vector<uint64_t> storage_;  // 8-byte aligned
  ArenaView arena_;
  uint64_t next_id_ = 0;
};

TEST_F(CodecTest, LookupOfEveryBenchmarkSizeRoundTrips) {
  for (uint32_t count : {1u, 64u, 1024u}) {
    const std::vector<BlockKey> keys = Keys(count);
    const Request sent = MakeRequest(Op::kLookup, count);
    WriteKeys(arena_, sent.arg, keys);
    const Request got = Submit(sent);
    std::vector<BlockKey> read;
    ASSERT_TRUE(ReadKeys(arena_, got, &read).ok());
    EXPECT_EQ(read, keys);
    std::vector<uint8_t> masks(count, 0);
    const uint32_t n = count / 2 + 1;
    for (uint32_t i = 0; i < n; ++i) masks[i] = static_cast<uint8_t>(1 + i % 7);
    const Completion c = Complete(WriteLookupResult(arena_, got, n, masks));
    EXPECT_EQ(c.count, n);
    std::vector<uint8_t> back;
    ASSERT_TRUE(ReadLookupResult(arena_, sent, c, &back).ok());
    EXPECT_EQ(back, std::vector<uint8_t>(masks.begin(), masks.begin() + n));
  }
}

TEST_F(CodecTest, LookupWithAnEmptyPrefixReadsNoMasks) {  // found by tools/fuzz.sh
  const Request sent = MakeRequest(Op::kLookup, 3);
  WriteKeys(arena_, sent.arg, Keys(3));
  const Request got = Submit(sent);
  const Completion c = Complete(WriteLookupResult(arena_, got, 0, std::vector<uint8_t>(3, 0)));
  std::vector<uint8_t> back(5, 1);
  ASSERT_TRUE(ReadLookupResult(arena_, sent, c, &back).ok());
  EXPECT_TRUE(back.empty());
}

TEST_F(CodecTest, GetRoundTripsWithSlotsAndSizes) { KeysOpRoundTrip(Op::kGet, 1); }
TEST_F(CodecTest, PutAbortRoundTrips) { KeysOpRoundTrip(Op::kPutAbort, 0); }
TEST_F(CodecTest, ReleaseRoundTrips) { KeysOpRoundTrip(Op::kRelease, 0); }
TEST_F(CodecTest, DropRoundTrips) { KeysOpRoundTrip(Op::kDrop, 0); }

TEST_F(CodecTest, PutBeginRoundTripsWithAndWithoutParents) {
  std::vector<PutBeginItem> items(1024);
  const std::vector<BlockKey> keys = Keys(1024);
  for (uint32_t i = 0; i < items.size(); ++i) {
    items[i].key = keys[i];
    if (i > 0) items[i].parent = keys[i - 1];
    items[i].payload_bytes = 1 + i * 100;
  }
  const Request sent = MakeRequest(Op::kPutBegin, 1024, /*tier=*/1);  // T1 slots, as v3 clients
  WritePutBegin(arena_, sent.arg, items);
  const Request got = Submit(sent);
  std::vector<PutBeginItem> read;
  ASSERT_TRUE(ReadPutBegin(arena_, got, 1 << 20, &read).ok());
  EXPECT_EQ(read, items);
  std::vector<BlockResult> results(1024);
  for (uint32_t i = 0; i < 1024; ++i) {
    results[i] = i % 3 == 0 ? BlockResult{0, i, 0, 0} : BlockResult{1 + i % 2, 0, 0, 0};
  }
  const Completion c = Complete(WriteBlockResults(arena_, got, results));
  std::vector<BlockResult> back;
  ASSERT_TRUE(ReadBlockResults(arena_, sent, c, {1024, 1 << 20}, &back).ok());
  EXPECT_EQ(0, std::memcmp(back.data(), results.data(), results.size() * sizeof(BlockResult)));
}

TEST_F(CodecTest, PutCommitRoundTripsChecksums) {
  std::vector<PutCommitItem> items;
  for (const BlockKey& k : Keys(64)) items.push_back({k, k.lo * 0x9E3779B97F4A7C15ull});
  const Request sent = MakeRequest(Op::kPutCommit, 64);
  WritePutCommit(arena_, sent.arg, items);
  const Request got = Submit(sent);
  std::vector<PutCommitItem> read;
  ASSERT_TRUE(ReadPutCommit(arena_, got, &read).ok());
  EXPECT_EQ(read, items);
  std::vector<BlockResult> results(64, BlockResult{1, 0, 0, 0});
  const Completion c = Complete(WriteBlockResults(arena_, got, results));
  std::vector<BlockResult> back;
  ASSERT_TRUE(ReadBlockResults(arena_, sent, c, {1, 1}, &back).ok());
  EXPECT_EQ(back[63].code, 1u);
}

TEST_F(CodecTest, PutBeginNamesTheTierOfItsSlots) {
  const std::vector<BlockKey> keys = Keys(2);
  const std::vector<PutBeginItem> items{{keys[0], std::nullopt, 100}, {keys[1], keys[0], 200}};
  for (uint8_t tier : {0, 1}) {
    const Request sent = MakeRequest(Op::kPutBegin, 2, tier);
    WritePutBegin(arena_, sent.arg, items);
    const Request got = Submit(sent);
    EXPECT_EQ(got.tier, tier);
    // A T0 slot number past T1's slots is fine in a tier-0 answer, and only there.
    const std::vector<BlockResult> results{{0, 40, 100, 0}, {0, 41, 200, 0}};
    const Completion c = Complete(WriteBlockResults(arena_, got, results));
    std::vector<BlockResult> back;
    const SessionLimits limits{16, 4096, 64, 4096};
    EXPECT_EQ(ReadBlockResults(arena_, sent, c, limits, &back).ok(), tier == 0);
  }
}

TEST_F(CodecTest, WorkTakeRoundTripsInBothTiers) {
  for (uint8_t tier : {0, 1}) {
    const Request sent = MakeRequest(Op::kWorkTake, 3, tier);
    EXPECT_EQ(sent.arg.bytes, 0u);  // no arguments: the count says how many slots
    EXPECT_EQ(sent.result.bytes, 3 * sizeof(BlockResult));
    const Request got = Submit(sent);
    EXPECT_EQ(got.tier, tier);
    const std::vector<BlockResult> results{{0, 7, 4096, 0},
                                           {static_cast<uint32_t>(BlockCode::kRetryLater), 0, 0, 0},
                                           {static_cast<uint32_t>(BlockCode::kOverQuota), 0, 0, 0}};
    const Completion c = Complete(WriteBlockResults(arena_, got, results));
    std::vector<BlockResult> back;
    ASSERT_TRUE(ReadBlockResults(arena_, sent, c, {8, 4096, 8, 4096}, &back).ok());
    EXPECT_EQ(0, std::memcmp(back.data(), results.data(), results.size() * sizeof(BlockResult)));
  }
}

TEST_F(CodecTest, WorkPublishRoundTripsKeysParentsChecksumsSlotsAndSizes) {
  const std::vector<BlockKey> keys = Keys(1024);
  std::vector<WorkPublishItem> items(1024);
  for (uint32_t i = 0; i < items.size(); ++i) {
    items[i].key = keys[i];
    if (i % 3 != 0) items[i].parent = keys[(i + 1) % 1024];
    items[i].checksum = uint64_t{i} * 0x9E3779B97F4A7C15ull;
    items[i].slot = 1023 - i;
    items[i].payload_bytes = 1 + i * 64;
  }
  const Request sent = MakeRequest(Op::kWorkPublish, 1024, 0);
  EXPECT_EQ(sent.arg.bytes, 1024 * sizeof(WorkPublishArg));
  WriteWorkPublish(arena_, sent.arg, items);
  const Request got = Submit(sent);
  std::vector<WorkPublishItem> read;
  ASSERT_TRUE(ReadWorkPublish(arena_, got, 1 << 16, &read).ok());
  EXPECT_EQ(read, items);
  std::vector<BlockResult> results(1024);
  for (uint32_t i = 0; i < 1024; ++i) {
    results[i] = i % 2 ? BlockResult{0, items[i].slot, items[i].payload_bytes, 0}
                       : BlockResult{static_cast<uint32_t>(BlockCode::kAlreadyPresent), 0, 0, 0};
  }
  const Completion c = Complete(WriteBlockResults(arena_, got, results));
  std::vector<BlockResult> back;
  ASSERT_TRUE(ReadBlockResults(arena_, sent, c, {1, 4096, 1024, 1 << 16}, &back).ok());
  EXPECT_EQ(0, std::memcmp(back.data(), results.data(), results.size() * sizeof(BlockResult)));
}

TEST_F(CodecTest, WorkFreeRoundTripsSlots) {
  const std::vector<uint32_t> slots{5, 0, 4000000000u, 17};
  const Request sent = MakeRequest(Op::kWorkFree, 4, 1);
  EXPECT_EQ(sent.arg.bytes, 4 * sizeof(WorkSlotArg));
  WriteWorkSlots(arena_, sent.arg, slots);
  const Request got = Submit(sent);
  std::vector<uint32_t> read{99};
  ASSERT_TRUE(ReadWorkSlots(arena_, got, &read).ok());
  EXPECT_EQ(read, slots);
  const uint32_t missing = static_cast<uint32_t>(BlockCode::kMissing);
  const std::vector<BlockResult> results{{0, 0, 0, 0}, {0, 0, 0, 0}, {missing, 0, 0, 0}, {}};
  const Completion c = Complete(WriteBlockResults(arena_, got, results));
  std::vector<BlockResult> back;
  ASSERT_TRUE(ReadBlockResults(arena_, sent, c, {16, 4096}, &back).ok());
  EXPECT_EQ(back[2].code, missing);
}

TEST(OpNameTest, NamesTheWorkingSlotOps) {
  EXPECT_EQ(OpName(static_cast<uint8_t>(Op::kWorkTake)), "work_take");
  EXPECT_EQ(OpName(static_cast<uint8_t>(Op::kWorkPublish)), "work_publish");
  EXPECT_EQ(OpName(static_cast<uint8_t>(Op::kWorkFree)), "work_free");
  EXPECT_EQ(OpName(kMaxOp + 1), "op(12)");
  EXPECT_EQ(ArgBytes(Op::kWorkTake, 5), 0u);
  EXPECT_EQ(ArgBytes(Op::kWorkPublish, 5), 5 * 56u);
  EXPECT_EQ(ArgBytes(Op::kWorkFree, 5), 5 * 8u);
  EXPECT_EQ(ResultBytes(Op::kWorkTake, 5), 5 * 16u);
  EXPECT_EQ(ResultBytes(Op::kWorkPublish, 5), 5 * 16u);
  EXPECT_EQ(ResultBytes(Op::kWorkFree, 5), 5 * 16u);
}

TEST_F(CodecTest, StatsRoundTrip) {
  const Request sent = MakeRequest(Op::kStats, 0);
  const Request got = Submit(sent);
  StatsWire stats{};
  stats.lookups = 7;
  stats.requests_invalid = 9;
  const Completion c = Complete(WriteStats(arena_, got, stats));
  absl::StatusOr<StatsWire> back = ReadStats(arena_, sent, c);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->lookups, 7u);
  EXPECT_EQ(back->requests_invalid, 9u);
}

TEST_F(CodecTest, NopAndFailedRequestsCompleteWithoutResults) {
  const Request nop = Submit(MakeRequest(Op::kNop, 0));
  EXPECT_EQ(Complete(EmptyCompletion(nop, RequestStatus::kOk)).result.bytes, 0u);
  const Request lookup = Submit(MakeRequest(Op::kLookup, 4));
  const Completion c = Complete(EmptyCompletion(lookup, RequestStatus::kUnavailable));
  std::vector<uint8_t> masks;
  EXPECT_FALSE(ReadLookupResult(arena_, lookup, c, &masks).ok());  // no results to read
}

TEST(FrameCodecTest, HelloRoundTripsEveryNamespaceField) {
  Hello h;
  h.ns.model_id = "meta-llama/Llama-3.1-8B-Instruct@abc";
  h.ns.kv_layout = "block_major";
  h.ns.dtype = "fp8";
  h.ns.block_tokens = 32;
  h.ns.tp_rank = 1;
  h.ns.tp_size = 4;
  h.ns.lora_id = "lora-7";
  h.ns.cache_salt = std::string("salt\0with nul", 13);
  h.ns.key_source = KeySource::kEngineHash;
  h.client_name = "vllm-worker-3";
  h.sq_entries = 512;
  h.cq_entries = 1024;
  h.arena_bytes = 1 << 22;
  absl::StatusOr<std::vector<std::byte>> frame = EncodeHello(h);
  ASSERT_TRUE(frame.ok());
  absl::StatusOr<FrameInfo> info =
      DecodeFrameHeader(absl::MakeConstSpan(*frame).first(sizeof(FrameHeader)));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->type, FrameType::kHello);
  EXPECT_EQ(info->payload_bytes, frame->size() - sizeof(FrameHeader));
  absl::StatusOr<Hello> back = DecodeHello(absl::MakeConstSpan(*frame).subspan(16));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ns.Canonical(), h.ns.Canonical());
  EXPECT_EQ(back->client_name, h.client_name);
  EXPECT_EQ(back->sq_entries, 512u);
  EXPECT_EQ(back->cq_entries, 1024u);
  EXPECT_EQ(back->arena_bytes, 1u << 22);
}

TEST(FrameCodecTest, WelcomeAndErrorRoundTrip) {
  Welcome w;
  w.session_id = 42;
  w.t1_slot_bytes = 256 * 1024;
  w.t1_slots = 4096;
  w.t1_bytes = uint64_t{w.t1_slot_bytes} * w.t1_slots;
  w.layout = *ComputeLayout(256, 512, 1 << 21);
  std::vector<std::byte> frame = EncodeWelcome(w);
  absl::StatusOr<Welcome> back = DecodeWelcome(absl::MakeConstSpan(frame).subspan(16));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->session_id, 42u);
  EXPECT_EQ(back->t1_slots, 4096u);
  EXPECT_EQ(0, std::memcmp(&back->layout, &w.layout, sizeof(RegionLayout)));

  frame = EncodeError({absl::StatusCode::kPermissionDenied, "uid 1000 is not allowed"});
  absl::StatusOr<ErrorFrame> err = DecodeError(absl::MakeConstSpan(frame).subspan(16));
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_EQ(err->code, absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(err->message, "uid 1000 is not allowed");
}

TEST(FrameCodecTest, WelcomeWithoutT0SaysSoAndWithT0CarriesItsSection) {
  Welcome w;
  w.t1_slot_bytes = 64 * 1024;
  w.t1_slots = 16;
  w.t1_bytes = uint64_t{w.t1_slot_bytes} * w.t1_slots;
  w.layout = *ComputeLayout(4, 4, 4096);
  std::vector<std::byte> frame = EncodeWelcome(w);
  ASSERT_EQ(frame.size(), sizeof(FrameHeader) + kWelcomePayloadBytes);
  absl::StatusOr<Welcome> back = DecodeWelcome(absl::MakeConstSpan(frame).subspan(16));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->t0_bytes, 0u);
  EXPECT_EQ(back->t0_slots, 0u);
  EXPECT_TRUE(back->t0_pci_bus_id.empty());

  w.t0_slot_bytes = 64 * 1024;
  w.t0_slots = 1024;
  w.t0_bytes = uint64_t{w.t0_slot_bytes} * w.t0_slots;
  w.t0_pci_bus_id = "00000000:3B:00.0";
  for (size_t i = 0; i < kT0IpcHandleBytes; ++i) w.t0_ipc_handle[i] = static_cast<uint8_t>(i * 7);
  frame = EncodeWelcome(w);
  ASSERT_EQ(frame.size(), sizeof(FrameHeader) + kWelcomePayloadBytes);
  back = DecodeWelcome(absl::MakeConstSpan(frame).subspan(16));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->t0_bytes, w.t0_bytes);
  EXPECT_EQ(back->t0_slot_bytes, w.t0_slot_bytes);
  EXPECT_EQ(back->t0_slots, 1024u);
  EXPECT_EQ(back->t0_pci_bus_id, "00000000:3B:00.0");
  EXPECT_EQ(back->t0_ipc_handle, w.t0_ipc_handle);
  // The section sits at a fixed place: right after WelcomePayload.
  WelcomeT0 raw;
  std::memcpy(&raw, frame.data() + 16 + sizeof(WelcomePayload), sizeof(raw));
  EXPECT_EQ(raw.t0_slots, 1024u);
  EXPECT_STREQ(raw.pci_bus_id, "00000000:3B:00.0");
}

TEST(RegionLayoutTest, ComputedLayoutsValidateAndArePageAligned) {
  for (uint32_t entries : {2u, 256u, 65536u}) {
    absl::StatusOr<RegionLayout> l =
        ComputeLayout(entries, entries * 2 > 65536 ? entries : entries * 2, 4096);
    ASSERT_TRUE(l.ok()) << l.status();
    EXPECT_TRUE(ValidateLayout(*l).ok());
    EXPECT_EQ(l->arena_offset % 4096, 0u);
    EXPECT_EQ(l->region_bytes, uint64_t{l->arena_offset} + 4096);
  }
  EXPECT_FALSE(ComputeLayout(3, 4, 4096).ok());
  EXPECT_FALSE(ComputeLayout(4, 4, 4095).ok());
  EXPECT_FALSE(ComputeLayout(4, 1u << 17, 4096).ok());
}

}  // namespace
}  // namespace kvtier::protocol
