// Malformed input of every kind named in docs/protocol.md "Errors" is refused by the decoders
// with an error that names what is wrong, and never crashes them: bad magic or version, bad
// lengths, ranges outside the arena, impossible slots, unknown ops, and plain garbage.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "client/protocol/frame_codec.h"
#include "client/protocol/record_codec.h"
#include "client/protocol/region_layout.h"

namespace kvtier::protocol {
namespace {

constexpr uint32_t kArenaBytes = 64 * 1024;

// `status` is an error whose message contains `what`.
void ExpectError(const absl::Status& status, const std::string& what) {
  EXPECT_FALSE(status.ok());
  EXPECT_NE(std::string(status.message()).find(what), std::string::npos)
      << "message: " << status.message() << "\nexpected to contain: " << what;
}

RequestRecord ValidLookup() {
  RequestRecord r{};
  r.magic = kRequestMagic;
  r.version = kProtocolVersion;
  r.op = static_cast<uint8_t>(Op::kLookup);
  r.record_bytes = kRecordBytes;
  r.request_id = 5;
  r.count = 4;
  r.arg_offset = 0;
  r.arg_bytes = 64;
  r.result_offset = 4096;
  r.result_bytes = 8;
  return r;
}

absl::Status Decode(const RequestRecord& r) {
  return DecodeRequest({reinterpret_cast<const std::byte*>(&r), sizeof(r)}, kArenaBytes).status();
}

TEST(MalformedRequestTest, EachBadFieldIsNamed) {
  ASSERT_TRUE(Decode(ValidLookup()).ok());
  struct Case {
    const char* expect;
    void (*mutate)(RequestRecord&);
  };
  const Case cases[] = {
      {"bad magic", [](RequestRecord& r) { r.magic = 0x1234; }},
      {"version 9", [](RequestRecord& r) { r.version = 9; }},
      {"record_bytes 32", [](RequestRecord& r) { r.record_bytes = 32; }},
      {"unknown op 200", [](RequestRecord& r) { r.op = 200; }},
      {"reserved", [](RequestRecord& r) { r.flags = 1; }},
      {"reserved", [](RequestRecord& r) { r.reserved1[23] = 1; }},
      {"count 0", [](RequestRecord& r) { r.count = 0; }},
      {"count 1025", [](RequestRecord& r) { r.count = 1025; }},
      {"tier 1 not allowed", [](RequestRecord& r) { r.tier = 1; }},
      {"arg range [0, +48) is 48 bytes, expected 64", [](RequestRecord& r) { r.arg_bytes = 48; }},
      {"outside the arena", [](RequestRecord& r) { r.arg_offset = kArenaBytes - 32; }},
      {"outside the arena",
       [](RequestRecord& r) { r.arg_offset = 0xFFFFFFF8; }},  // wraps in 32 bits
      {"not 8-byte aligned", [](RequestRecord& r) { r.arg_offset = 4; }},
      {"result range", [](RequestRecord& r) { r.result_bytes = 4; }},
      {"empty result range has offset",
       [](RequestRecord& r) {
         r.op = static_cast<uint8_t>(Op::kNop);
         r.count = 0;
         r.arg_bytes = 0;
         r.arg_offset = 0;
         r.result_bytes = 0;
       }},
      {"count 4 (must be 0)", [](RequestRecord& r) { r.op = static_cast<uint8_t>(Op::kStats); }},
      {"tier 4 not allowed",
       [](RequestRecord& r) {
         r.op = static_cast<uint8_t>(Op::kGet);
         r.tier = 4;
       }},
  };
  for (const Case& c : cases) {
    RequestRecord r = ValidLookup();
    c.mutate(r);
    SCOPED_TRACE(c.expect);
    ExpectError(Decode(r), c.expect);
  }
  ExpectError(DecodeRequest({}, kArenaBytes).status(), "0 bytes (expected 64)");
}

// Version 3's tier rules: get reads from any tier; put_begin and the work ops name the tier of
// their slots, T0 or T1; every other op carries tier 0.
TEST(MalformedRequestTest, TierIsCheckedPerOp) {
  auto record = [](Op op, uint8_t tier) {
    RequestRecord r = ValidLookup();
    r.op = static_cast<uint8_t>(op);
    r.tier = tier;
    r.count = 2;
    r.arg_bytes = ArgBytes(op, 2);
    r.result_bytes = ResultBytes(op, 2);
    return r;
  };
  for (uint8_t tier = 0; tier < kNumTiers; ++tier) EXPECT_TRUE(Decode(record(Op::kGet, tier)).ok());
  for (Op op : {Op::kPutBegin, Op::kWorkTake, Op::kWorkPublish, Op::kWorkFree}) {
    SCOPED_TRACE(OpName(static_cast<uint8_t>(op)));
    RequestRecord r = record(op, 0);
    if (op == Op::kWorkTake) r.arg_offset = 0;  // no arguments: an empty range at 0
    EXPECT_TRUE(Decode(r).ok()) << Decode(r);
    r.tier = 1;
    EXPECT_TRUE(Decode(r).ok()) << Decode(r);
    r.tier = 2;
    ExpectError(Decode(r), "tier 2 not allowed (at most 1)");
  }
  for (Op op : {Op::kLookup, Op::kPutCommit, Op::kPutAbort, Op::kRelease, Op::kDrop}) {
    SCOPED_TRACE(OpName(static_cast<uint8_t>(op)));
    ExpectError(Decode(record(op, 1)), "tier 1 not allowed (at most 0)");
  }
}

TEST(MalformedRequestTest, WorkOpsTakeCountsAndExactRanges) {
  RequestRecord r = ValidLookup();
  r.op = static_cast<uint8_t>(Op::kWorkTake);
  r.count = 4;
  r.tier = 1;
  r.arg_bytes = 0;
  r.result_bytes = 64;
  ASSERT_TRUE(Decode(r).ok()) << Decode(r);
  RequestRecord bad = r;
  bad.count = 0;
  ExpectError(Decode(bad), "count 0 outside [1, 1024]");
  bad = r;
  bad.count = 1025;
  ExpectError(Decode(bad), "count 1025 outside [1, 1024]");
  bad = r;
  bad.arg_bytes = 8;
  ExpectError(Decode(bad), "arg range [0, +8) is 8 bytes, expected 0");
  bad = r;
  bad.arg_offset = 8;  // no arguments, yet a place for them
  ExpectError(Decode(bad), "empty arg range has offset 8");
  bad = r;
  bad.result_bytes = 48;
  ExpectError(Decode(bad), "result range [4096, +48) is 48 bytes, expected 64");
  r.op = static_cast<uint8_t>(Op::kWorkPublish);
  r.arg_bytes = 4 * 56;
  ASSERT_TRUE(Decode(r).ok()) << Decode(r);
  r.arg_bytes = 4 * 40;
  ExpectError(Decode(r), "expected 224");
  r.op = static_cast<uint8_t>(Op::kWorkFree);
  r.arg_bytes = 4 * 8;
  ASSERT_TRUE(Decode(r).ok()) << Decode(r);
  r.arg_bytes = 4 * 16;
  ExpectError(Decode(r), "expected 32");
}

TEST(MalformedCompletionTest, EachBadFieldIsNamed) {
  Completion ok{Op::kGet, 3, RequestStatus::kOk, 2, {4096, 32}};
  std::byte rec[kRecordBytes];
  EncodeCompletion(ok, rec);
  ASSERT_TRUE(DecodeCompletion(rec, kArenaBytes).ok());
  CompletionRecord c;
  std::memcpy(&c, rec, sizeof(c));
  auto decode = [](CompletionRecord x) {
    return DecodeCompletion({reinterpret_cast<const std::byte*>(&x), sizeof(x)}, kArenaBytes)
        .status();
  };
  CompletionRecord bad = c;
  bad.magic = kRequestMagic;
  ExpectError(decode(bad), "bad magic");
  bad = c;
  bad.status = 77;
  ExpectError(decode(bad), "unknown status 77");
  bad = c;
  bad.count = 5000;
  ExpectError(decode(bad), "count 5000");
  bad = c;
  bad.result_offset = kArenaBytes;
  ExpectError(decode(bad), "outside the arena");
  bad = c;
  bad.reserved[0] = 1;
  ExpectError(decode(bad), "reserved");
}

class MalformedArenaTest : public ::testing::Test {
 protected:
  MalformedArenaTest()
      : storage_(kArenaBytes / 8),
        arena_{reinterpret_cast<std::byte*>(storage_.data()), kArenaBytes} {}
  std::vector<uint64_t> storage_;
  ArenaView arena_;
};

TEST_F(MalformedArenaTest, PutBeginArgumentsAreCheckedAfterCopying) {
  Request r{Op::kPutBegin, 1, 2, 0, {0, 80}, {4096, 32}};
  PutBeginArg args[2]{};
  args[0].payload_bytes = 100;
  args[1].payload_bytes = 0;
  std::memcpy(arena_.base, args, sizeof(args));
  std::vector<PutBeginItem> items;
  ExpectError(ReadPutBegin(arena_, r, 4096, &items), "block 1: payload_bytes 0 outside [1, 4096]");
  args[1].payload_bytes = 4097;
  std::memcpy(arena_.base, args, sizeof(args));
  ExpectError(ReadPutBegin(arena_, r, 4096, &items), "payload_bytes 4097");
  args[1].payload_bytes = 10;
  args[1].flags = 6;
  std::memcpy(arena_.base, args, sizeof(args));
  ExpectError(ReadPutBegin(arena_, r, 4096, &items), "block 1: bad flags 0x6");
  args[1].flags = 0;
  args[1].parent.hi = 1;  // a parent without the flag saying so
  std::memcpy(arena_.base, args, sizeof(args));
  ExpectError(ReadPutBegin(arena_, r, 4096, &items), "bad flags");
}

TEST_F(MalformedArenaTest, WorkPublishArgumentsAreCheckedAfterCopying) {
  const Request r{Op::kWorkPublish, 1, 2, 0, {0, 112}, {4096, 32}};
  WorkPublishArg good{};
  good.key = {1, 2};
  good.parent = {3, 4};
  good.flags = kPutHasParent;
  good.checksum = 77;
  good.slot = 9;
  good.payload_bytes = 4096;
  std::vector<WorkPublishItem> items;
  auto check = [&](void (*edit)(WorkPublishArg&), const std::string& what) {
    WorkPublishArg args[2] = {good, good};
    if (edit) edit(args[1]);
    std::memcpy(arena_.base, args, sizeof(args));
    if (what.empty()) {
      EXPECT_TRUE(ReadWorkPublish(arena_, r, 4096, &items).ok());
    } else {
      ExpectError(ReadWorkPublish(arena_, r, 4096, &items), what);
    }
  };
  check(nullptr, "");
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[1], (WorkPublishItem{{1, 2}, BlockKey{3, 4}, 77, 9, 4096}));
  check([](WorkPublishArg& a) { a.payload_bytes = 0; },
        "request 1 (work_publish): item 1: payload_bytes 0 outside [1, 4096]");
  check([](WorkPublishArg& a) { a.payload_bytes = 4097; }, "item 1: payload_bytes 4097");
  check([](WorkPublishArg& a) { a.flags = 2; }, "item 1: bad flags 0x2");
  check([](WorkPublishArg& a) { a.flags = 0; }, "item 1: bad flags 0x0");  // parent, no flag
  check([](WorkPublishArg& a) { a.reserved = 5; }, "item 1: reserved field is 5, not 0");
  check([](WorkPublishArg& a) { a.flags = 0, a.parent = {}; }, "");  // no parent
  EXPECT_FALSE(items[1].parent.has_value());
}

TEST_F(MalformedArenaTest, WorkFreeSlotsAreCheckedAfterCopying) {
  const Request r{Op::kWorkFree, 2, 2, 1, {0, 16}, {4096, 32}};
  WorkSlotArg args[2] = {{4, 0}, {5, 0}};
  std::memcpy(arena_.base, args, sizeof(args));
  std::vector<uint32_t> slots;
  ASSERT_TRUE(ReadWorkSlots(arena_, r, &slots).ok());
  EXPECT_EQ(slots, (std::vector<uint32_t>{4, 5}));
  args[1].reserved = 1;
  std::memcpy(arena_.base, args, sizeof(args));
  ExpectError(ReadWorkSlots(arena_, r, &slots),
              "request 2 (work_free): item 1: reserved field is 1, not 0");
}

TEST_F(MalformedArenaTest, ArgumentsOfTheWrongKindOrPlaceAreRefused) {
  std::vector<BlockKey> keys;
  std::vector<PutBeginItem> begins;
  std::vector<PutCommitItem> commits;
  const Request stats{Op::kStats, 1, 0, 0, {}, {0, sizeof(StatsWire)}};
  ExpectError(ReadKeys(arena_, stats, &keys), "has no key arguments");
  const Request lookup{Op::kLookup, 2, 1, 0, {0, 16}, {64, 8}};
  ExpectError(ReadPutBegin(arena_, lookup, 4096, &begins), "has no put_begin arguments");
  ExpectError(ReadPutCommit(arena_, lookup, &commits), "has no put_commit arguments");
  std::vector<WorkPublishItem> publishes;
  std::vector<uint32_t> slots;
  ExpectError(ReadWorkPublish(arena_, lookup, 4096, &publishes), "has no work_publish arguments");
  ExpectError(ReadWorkSlots(arena_, lookup, &slots), "has no work_free arguments");
  // work_take carries no arguments at all; its count is how many slots it asks for.
  const Request take{Op::kWorkTake, 4, 2, 1, {}, {0, 32}};
  ExpectError(ReadKeys(arena_, take, &keys), "has no key arguments");
  ExpectError(ReadWorkSlots(arena_, take, &slots), "has no work_free arguments");
  const Request publish{Op::kWorkPublish, 5, 1, 0, {0, 56}, {64, 16}};
  ExpectError(ReadKeys(arena_, publish, &keys), "has no key arguments");
  ExpectError(ReadWorkSlots(arena_, publish, &slots), "has no work_free arguments");
  const Request forged_free{Op::kWorkFree, 6, 2, 0, {kArenaBytes - 8, 16}, {0, 32}};
  ExpectError(ReadWorkSlots(arena_, forged_free, &slots), "outside the arena");
  // A Request that did not come from DecodeRequest still cannot make a reader leave the arena.
  const Request forged{Op::kLookup, 3, 1, 0, {kArenaBytes - 8, 16}, {0, 8}};
  ExpectError(ReadKeys(arena_, forged, &keys), "outside the arena");
}

TEST_F(MalformedArenaTest, ResultsWithImpossibleValuesAreRefused) {
  const Request get{Op::kGet, 9, 1, 1, {0, 16}, {64, 16}};
  const SessionLimits limits{100, 4096};
  std::vector<BlockResult> out;
  auto check = [&](BlockResult r, const std::string& what) {
    std::memcpy(arena_.base + 64, &r, sizeof(r));
    Completion c{Op::kGet, 9, RequestStatus::kOk, 1, {64, 16}};
    ExpectError(ReadBlockResults(arena_, get, c, limits, &out), what);
  };
  check({9, 0, 0, 0}, "unknown code 9");
  check({0, 100, 10, 0}, "slot 100 outside [0, 100)");
  check({0, 5, 5000, 0}, "payload_bytes 5000 above slot_bytes 4096");
  check({3, 5, 0, 0}, "slot or size given without a slot");
  Completion other{Op::kGet, 10, RequestStatus::kOk, 1, {64, 16}};
  ExpectError(ReadBlockResults(arena_, get, other, limits, &out), "answers request 9");

  const Request lookup{Op::kLookup, 4, 4, 0, {0, 64}, {128, 8}};
  std::vector<uint8_t> masks;
  const uint8_t bad_masks[8] = {1, 0, 0, 0};
  std::memcpy(arena_.base + 128, bad_masks, 8);
  ExpectError(
      ReadLookupResult(arena_, lookup, {Op::kLookup, 4, RequestStatus::kOk, 2, {128, 8}}, &masks),
      "block 1 of the prefix has tier mask 0x0");
  ExpectError(
      ReadLookupResult(arena_, lookup, {Op::kLookup, 4, RequestStatus::kOk, 5, {128, 8}}, &masks),
      "n = 5 above count 4");
}

// Slots in results are checked against the tier the request named: T0's slot count for tier 0.
TEST_F(MalformedArenaTest, ResultSlotsAreCheckedAgainstTheRequestsTier) {
  const SessionLimits limits{100, 4096, 10, 8192};
  std::vector<BlockResult> out;
  auto read = [&](Op op, uint8_t tier, BlockResult r) {
    const uint32_t arg = ArgBytes(op, 1);
    const Request req{op, 9, 1, tier, {0, arg}, {1024, 16}};
    std::memcpy(arena_.base + 1024, &r, sizeof(r));
    return ReadBlockResults(arena_, req, {op, 9, RequestStatus::kOk, 1, {1024, 16}}, limits, &out);
  };
  for (Op op : {Op::kGet, Op::kPutBegin, Op::kWorkTake, Op::kWorkPublish}) {
    SCOPED_TRACE(OpName(static_cast<uint8_t>(op)));
    EXPECT_TRUE(read(op, 1, {0, 99, 4096, 0}).ok());
    EXPECT_TRUE(read(op, 0, {0, 9, 8192, 0}).ok());
    ExpectError(read(op, 0, {0, 10, 100, 0}), "slot 10 outside [0, 10) of T0");
    ExpectError(read(op, 1, {0, 100, 100, 0}), "slot 100 outside [0, 100) of T1");
    ExpectError(read(op, 1, {0, 5, 8192, 0}), "payload_bytes 8192 above slot_bytes 4096 of T1");
    ExpectError(read(op, 0, {0, 5, 8193, 0}), "payload_bytes 8193 above slot_bytes 8192 of T0");
    ExpectError(read(op, 0, {7, 5, 0, 0}), "slot or size given without a slot");
  }
  EXPECT_TRUE(read(Op::kWorkTake, 0, {7, 0, 0, 0}).ok());  // kOverQuota, the newest code
  ExpectError(read(Op::kWorkTake, 0, {8, 0, 0, 0}), "unknown code 8");
  ExpectError(read(Op::kWorkFree, 1, {0, 3, 0, 0}), "work_free): block 0: slot or size given");
  EXPECT_TRUE(read(Op::kWorkFree, 1, {3, 0, 0, 0}).ok());
}

FrameHeader ValidHeader() { return {kFrameMagic, kProtocolVersion, 1, 10, 0}; }
absl::Status DecodeHeader(const FrameHeader& h) {
  return DecodeFrameHeader({reinterpret_cast<const std::byte*>(&h), sizeof(h)}).status();
}

TEST(MalformedFrameTest, HeaderFieldsAreChecked) {
  ASSERT_TRUE(DecodeHeader(ValidHeader()).ok());
  FrameHeader h = ValidHeader();
  h.magic = 0;
  ExpectError(DecodeHeader(h), "bad magic");
  h = ValidHeader();
  h.type = 9;
  ExpectError(DecodeHeader(h), "unknown frame type 9");
  h = ValidHeader();
  // Older (1, and 2: before working slots) and newer.
  for (uint16_t other : {uint16_t{1}, uint16_t{2}, uint16_t{kProtocolVersion + 1}}) {
    h = ValidHeader();
    h.version = other;
    EXPECT_EQ(DecodeHeader(h).code(), absl::StatusCode::kFailedPrecondition) << other;
    h.type = static_cast<uint16_t>(FrameType::kError);  // any version may explain itself
    EXPECT_TRUE(DecodeHeader(h).ok()) << other;
  }
  h = ValidHeader();
  h.payload_bytes = kMaxFramePayload + 1;
  ExpectError(DecodeHeader(h), "payload of 65537 bytes");
  h = ValidHeader();
  h.reserved = 1;
  ExpectError(DecodeHeader(h), "reserved");
  ExpectError(DecodeFrameHeader({}).status(), "0 bytes (expected 16)");
}

TEST(MalformedFrameTest, EveryTruncationOfAHelloIsAnError) {
  Hello h;
  h.ns.model_id = "m";
  h.client_name = "c";
  std::vector<std::byte> frame = *EncodeHello(h);
  absl::Span<const std::byte> payload = absl::MakeConstSpan(frame).subspan(sizeof(FrameHeader));
  ASSERT_TRUE(DecodeHello(payload).ok());
  for (size_t n = 0; n < payload.size(); ++n) {
    EXPECT_FALSE(DecodeHello(payload.first(n)).ok()) << n;
  }
  std::vector<std::byte> longer(payload.begin(), payload.end());
  longer.push_back(std::byte{0});
  ExpectError(DecodeHello(longer).status(), "1 trailing bytes");
  std::vector<std::byte> big(payload.begin(), payload.end());
  const uint16_t too_long = kMaxNameBytes + 1;
  std::memcpy(big.data() + sizeof(HelloFixed), &too_long, 2);
  ExpectError(DecodeHello(big).status(), "model_id of 1025 bytes");
  std::vector<std::byte> source(payload.begin(), payload.end());
  source[offsetof(HelloFixed, key_source)] = std::byte{7};
  ExpectError(DecodeHello(source).status(), "unknown key_source 7");
  h.ns.cache_salt.assign(kMaxNameBytes + 1, 'x');
  EXPECT_FALSE(EncodeHello(h).ok());
}

TEST(MalformedFrameTest, WelcomeWithAnImpossibleLayoutOrTierIsRefused) {
  Welcome w;
  w.t1_slot_bytes = 4096;
  w.t1_slots = 16;
  w.t1_bytes = 4096 * 16;
  w.layout = *ComputeLayout(4, 4, 4096);
  auto decode = [](const Welcome& x) {
    std::vector<std::byte> f = EncodeWelcome(x);
    return DecodeWelcome(absl::MakeConstSpan(f).subspan(sizeof(FrameHeader))).status();
  };
  ASSERT_TRUE(decode(w).ok());
  Welcome bad = w;
  bad.layout.cq_records = bad.layout.sq_records;
  ExpectError(decode(bad), "overlaps");
  bad = w;
  bad.layout.arena_offset += 4096;
  ExpectError(decode(bad), "outside the region");
  bad = w;
  bad.layout.sq_entries = 5;
  ExpectError(decode(bad), "power of two");
  bad = w;
  bad.t1_slots = 17;
  ExpectError(decode(bad), "cannot hold 17 slots");
  bad = w;
  bad.max_batch = 0;
  ExpectError(decode(bad), "max_batch 0");
  std::vector<std::byte> f = EncodeWelcome(w);
  f.pop_back();
  ExpectError(DecodeWelcome(absl::MakeConstSpan(f).subspan(16)).status(),
              "T0 section needs 112 bytes");
  // A version-1 Welcome (no T0 section) is too short for this version.
  f.resize(sizeof(FrameHeader) + sizeof(WelcomePayload));
  ExpectError(DecodeWelcome(absl::MakeConstSpan(f).subspan(16)).status(),
              "T0 section needs 112 bytes");
  f = EncodeWelcome(w);
  f.push_back(std::byte{0});
  ExpectError(DecodeWelcome(absl::MakeConstSpan(f).subspan(16)).status(), "1 trailing bytes");
}

TEST(MalformedFrameTest, WelcomeWithABadT0SectionIsRefused) {
  Welcome w;
  w.t1_slot_bytes = 4096;
  w.t1_slots = 16;
  w.t1_bytes = 4096 * 16;
  w.layout = *ComputeLayout(4, 4, 4096);
  w.t0_slot_bytes = 4096;
  w.t0_slots = 8;
  w.t0_bytes = 4096 * 8;
  w.t0_pci_bus_id = "0000:3b:00.0";
  // Decodes the Welcome after `edit` changed the bytes of its T0 section.
  auto decode = [](const Welcome& x, const std::function<void(WelcomeT0*)>& edit = {}) {
    std::vector<std::byte> f = EncodeWelcome(x);
    std::byte* section = f.data() + sizeof(FrameHeader) + sizeof(WelcomePayload);
    WelcomeT0 t0;
    std::memcpy(&t0, section, sizeof(t0));
    if (edit) edit(&t0);
    std::memcpy(section, &t0, sizeof(t0));
    return DecodeWelcome(absl::MakeConstSpan(f).subspan(sizeof(FrameHeader))).status();
  };
  ASSERT_TRUE(decode(w).ok()) << decode(w);
  Welcome bad = w;
  bad.t0_slots = 9;
  ExpectError(decode(bad), "T0 of 32768 bytes cannot hold 9 slots");
  bad = w;
  bad.t0_slot_bytes = 0;
  ExpectError(decode(bad), "cannot hold 8 slots of 0 bytes");
  bad = w;
  bad.t0_slots = 0;
  ExpectError(decode(bad), "cannot hold 0 slots");
  bad = w;
  bad.t0_pci_bus_id.clear();
  ExpectError(decode(bad), "PCI bus id is empty");
  ExpectError(decode(w, [](WelcomeT0* t) { std::memset(t->pci_bus_id, 'a', kPciBusIdBytes); }),
              "not NUL-terminated");
  ExpectError(decode(w, [](WelcomeT0* t) { t->pci_bus_id[20] = 'x'; }),
              "byte 0x78 at 20 (padding is not NUL)");
  ExpectError(decode(w, [](WelcomeT0* t) { t->pci_bus_id[2] = '\n'; }),
              "byte 0x0a at 2 (not printable)");
  // Without T0 every byte of the section is zero.
  Welcome none = w;
  none.t0_bytes = 0;
  ExpectError(decode(none), "no T0 (t0_bytes 0) but the T0 section is not all zero");
  none = w;
  none.t0_bytes = none.t0_slot_bytes = none.t0_slots = 0;
  none.t0_pci_bus_id.clear();
  ASSERT_TRUE(decode(none).ok());
  ExpectError(decode(none, [](WelcomeT0* t) { t->ipc_handle[63] = 1; }), "not all zero");
}

TEST(MalformedFrameTest, ErrorFrameLengthsMustAgree) {
  std::vector<std::byte> f = EncodeError({absl::StatusCode::kInternal, "boom"});
  f.pop_back();
  ExpectError(DecodeError(absl::MakeConstSpan(f).subspan(16)).status(), "message_bytes 4");
}

// Random bytes of every length up to twice a record or a frame, through every decoder.
TEST(GarbageTest, RandomBytesNeverCrashAnyDecoder) {
  std::mt19937_64 rng(12345);
  std::vector<uint64_t> storage(kArenaBytes / 8);
  for (auto& w : storage) w = rng();
  const ArenaView arena{reinterpret_cast<std::byte*>(storage.data()), kArenaBytes};
  std::vector<std::byte> buf(256);
  std::vector<BlockKey> keys;
  std::vector<PutBeginItem> begins;
  std::vector<PutCommitItem> commits;
  std::vector<WorkPublishItem> publishes;
  std::vector<uint32_t> slots;
  for (int i = 0; i < 200000; ++i) {
    for (auto& b : buf) b = static_cast<std::byte>(rng());
    const size_t n = rng() % buf.size();
    const absl::Span<const std::byte> in(buf.data(), n);
    (void)DecodeFrameHeader(in);
    (void)DecodeHello(in);
    (void)DecodeWelcome(in);
    (void)DecodeError(in);
    // Half the time make the record's header plausible so decoding goes deeper.
    if (i % 2 == 0) {
      RequestRecord r;
      std::memcpy(&r, buf.data(), sizeof(r));
      r.magic = kRequestMagic;
      r.version = kProtocolVersion;
      r.record_bytes = kRecordBytes;
      std::memcpy(buf.data(), &r, sizeof(r));
    }
    absl::StatusOr<Request> req = DecodeRequest({buf.data(), kRecordBytes}, kArenaBytes);
    if (req.ok()) {
      (void)ReadKeys(arena, *req, &keys);
      (void)ReadPutBegin(arena, *req, 4096, &begins);
      (void)ReadPutCommit(arena, *req, &commits);
      (void)ReadWorkPublish(arena, *req, 4096, &publishes);
      (void)ReadWorkSlots(arena, *req, &slots);
    }
    (void)DecodeCompletion({buf.data(), kRecordBytes}, kArenaBytes);
  }
}

}  // namespace
}  // namespace kvtier::protocol
