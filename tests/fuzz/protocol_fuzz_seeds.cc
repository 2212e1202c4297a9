// Writes the seed corpus of tests/fuzz/protocol_fuzz.cc: one valid input per frame type and per
// op (request with its arguments, completion with its results), each prefixed by the selector
// byte the fuzz target dispatches on, into the directory named by argv[1]. Each seed is also run
// through the target once, so a seed that crashes is found here, not in the fuzzer's first second.
//
//   protocol_fuzz_seeds <corpus-dir>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "client/protocol/frame_codec.h"
#include "client/protocol/record_codec.h"
#include "client/protocol/region_layout.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace kvtier::protocol {
namespace {

using Bytes = std::vector<std::byte>;

// A record followed by an arena of `arena_bytes` bytes, the arena prepared by `fill`.
template <typename Fill>
Bytes RecordSeed(uint8_t selector, const std::byte* record, uint32_t arena_bytes, Fill fill) {
  std::vector<uint64_t> arena(arena_bytes / 8);
  fill(ArenaView{reinterpret_cast<std::byte*>(arena.data()), arena_bytes});
  Bytes out{std::byte{selector}};
  out.insert(out.end(), record, record + kRecordBytes);
  const auto* a = reinterpret_cast<const std::byte*>(arena.data());
  out.insert(out.end(), a, a + arena_bytes);
  return out;
}

// Ops whose record names a tier (get: read from; put_begin and the work ops: the slots' tier).
bool NamesTier(Op op) {
  return op == Op::kGet || op == Op::kPutBegin || op == Op::kWorkTake || op == Op::kWorkPublish ||
         op == Op::kWorkFree;
}

std::vector<Bytes> OpSeeds(Op op, uint32_t count, uint8_t tier) {
  Request r{op, 1, count, tier, {0, ArgBytes(op, count)}, {}};
  const uint32_t result_offset = (r.arg.bytes + 7) / 8 * 8;
  const uint32_t result_bytes = ResultBytes(op, count);
  r.result = {result_bytes == 0 ? 0 : result_offset, result_bytes};
  const uint32_t arena_bytes = result_offset + result_bytes + 8;
  std::vector<BlockKey> keys(count);
  for (uint32_t i = 0; i < count; ++i) keys[i] = {i + 1, i * 31};
  std::byte record[kRecordBytes];
  EncodeRequest(r, record);
  Bytes request = RecordSeed(1, record, arena_bytes, [&](ArenaView arena) {
    if (op == Op::kPutBegin) {
      std::vector<PutBeginItem> items(count);
      for (uint32_t i = 0; i < count; ++i) items[i] = {keys[i], std::nullopt, 4096};
      WritePutBegin(arena, r.arg, items);
    } else if (op == Op::kPutCommit) {
      std::vector<PutCommitItem> items(count);
      for (uint32_t i = 0; i < count; ++i) items[i] = {keys[i], i};
      WritePutCommit(arena, r.arg, items);
    } else if (op == Op::kWorkPublish) {
      std::vector<WorkPublishItem> items(count);
      for (uint32_t i = 0; i < count; ++i) {
        const std::optional<BlockKey> parent = i == 0 ? std::nullopt : std::optional(keys[i - 1]);
        items[i] = {keys[i], parent, i * 0x9E3779B97F4A7C15ull, i, 4096};
      }
      WriteWorkPublish(arena, r.arg, items);
    } else if (op == Op::kWorkFree) {
      std::vector<uint32_t> slots(count);
      for (uint32_t i = 0; i < count; ++i) slots[i] = i * 3;
      WriteWorkSlots(arena, r.arg, slots);
    } else if (op == Op::kWorkTake) {
      // no arguments
    } else if (count > 0) {
      WriteKeys(arena, r.arg, keys);
    }
  });
  Completion c;
  Bytes completion = RecordSeed(2, record, arena_bytes, [&](ArenaView arena) {
    if (op == Op::kLookup) {
      c = WriteLookupResult(arena, r, count, std::vector<uint8_t>(count, 2));
    } else if (op == Op::kStats) {
      c = WriteStats(arena, r, StatsWire{});
    } else if (op == Op::kNop) {
      c = EmptyCompletion(r, RequestStatus::kOk);
    } else {
      c = WriteBlockResults(arena, r, std::vector<BlockResult>(count, BlockResult{0, 1, 2, 0}));
    }
  });
  EncodeCompletion(c, completion.data() + 1);
  return {request, completion};
}

std::vector<Bytes> FrameSeeds() {
  std::vector<Bytes> seeds;
  auto add = [&](const Bytes& frame) {
    Bytes s{std::byte{0}};
    s.insert(s.end(), frame.begin(), frame.end());
    seeds.push_back(s);
  };
  Hello h;
  h.ns.model_id = "meta-llama/Llama-3.1-8B";
  h.client_name = "seed";
  add(*EncodeHello(h));
  h.pool = "tenant-a";  // a Hello naming its pool (version 5)
  add(*EncodeHello(h));
  Welcome w{1, 1 << 20, 4096, 256, kMaxBatchKeys, *ComputeLayout(64, 64, 1 << 16)};
  add(EncodeWelcome(w));
  Welcome with_t0 = w;  // a daemon with a GPU tier: the T0 section filled in
  with_t0.t0_slot_bytes = 2 << 20;
  with_t0.t0_slots = 8;
  with_t0.t0_bytes = uint64_t{with_t0.t0_slot_bytes} * with_t0.t0_slots;
  with_t0.t0_pci_bus_id = "0000:19:00.0";
  for (size_t i = 0; i < with_t0.t0_ipc_handle.size(); ++i) with_t0.t0_ipc_handle[i] = i * 7 + 1;
  add(EncodeWelcome(with_t0));
  add(EncodeError({absl::StatusCode::kPermissionDenied, "not allowed"}));
  Bytes layout{std::byte{3}};
  const auto* l = reinterpret_cast<const std::byte*>(&w.layout);
  layout.insert(layout.end(), l, l + sizeof(RegionLayout));
  seeds.push_back(layout);
  return seeds;
}

}  // namespace
}  // namespace kvtier::protocol

int main(int argc, char** argv) {
  using namespace kvtier::protocol;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus-dir>\n", argv[0]);
    return 2;
  }
  std::vector<std::vector<std::byte>> seeds = FrameSeeds();
  for (uint8_t op = 0; op <= kMaxOp; ++op) {
    const bool keyed =
        op != static_cast<uint8_t>(Op::kNop) && op != static_cast<uint8_t>(Op::kStats);
    // Ops naming a tier get a seed for T1 and one for T0.
    const auto tiers =
        NamesTier(static_cast<Op>(op)) ? std::vector<uint8_t>{1, 0} : std::vector<uint8_t>{0};
    for (uint32_t count : keyed ? std::vector<uint32_t>{1, 64} : std::vector<uint32_t>{0}) {
      for (uint8_t tier : tiers) {
        for (auto& s : OpSeeds(static_cast<Op>(op), count, tier)) seeds.push_back(std::move(s));
      }
    }
  }
  for (size_t i = 0; i < seeds.size(); ++i) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(seeds[i].data()), seeds[i].size());
    std::ofstream(std::string(argv[1]) + "/seed-" + std::to_string(i), std::ios::binary)
        .write(reinterpret_cast<const char*>(seeds[i].data()),
               static_cast<std::streamsize>(seeds[i].size()));
  }
  std::printf("protocol_fuzz_seeds: %zu seeds in %s\n", seeds.size(), argv[1]);
  return 0;
}
