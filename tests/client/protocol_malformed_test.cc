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
      {"tier 3 not allowed",
       [](RequestRecord& r) {
         r.op = static_cast<uint8_t>(Op::kGet);
         r.tier = 3;
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

TEST_F(MalformedArenaTest, ArgumentsOfTheWrongKindOrPlaceAreRefused) {
  std::vector<BlockKey> keys;
  std::vector<PutBeginItem> begins;
  std::vector<PutCommitItem> commits;
  const Request stats{Op::kStats, 1, 0, 0, {}, {0, sizeof(StatsWire)}};
  ExpectError(ReadKeys(arena_, stats, &keys), "has no key arguments");
  const Request lookup{Op::kLookup, 2, 1, 0, {0, 16}, {64, 8}};
  ExpectError(ReadPutBegin(arena_, lookup, 4096, &begins), "has no put_begin arguments");
  ExpectError(ReadPutCommit(arena_, lookup, &commits), "has no put_commit arguments");
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
  for (uint16_t other : {uint16_t{1}, uint16_t{kProtocolVersion + 1}}) {  // older and newer
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
    }
    (void)DecodeCompletion({buf.data(), kRecordBytes}, kArenaBytes);
  }
}

}  // namespace
}  // namespace kvtier::protocol
