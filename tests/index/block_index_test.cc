#include "index/block_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "index/block_index_shard.h"

namespace kvtier {
namespace {

// The entry-size contract of block_index.h, checked where the compiler can see it.
static_assert(sizeof(internal::Entry) == BlockIndex::kEntryBytes);
static_assert(sizeof(internal::Slot) * 10 / 4 == BlockIndex::kTableBytesPerEntry);  // 8 B at 40%
static_assert(BlockIndex::kEntryBytes + BlockIndex::kTableBytesPerEntry <=
              BlockIndex::kMaxBytesPerEntry);

std::unique_ptr<BlockIndex> MakeIndex(uint32_t num_shards = 64, size_t expected = 0) {
  absl::StatusOr<std::unique_ptr<BlockIndex>> index =
      BlockIndex::Create({.num_shards = num_shards, .expected_entries = expected});
  EXPECT_TRUE(index.ok()) << index.status();
  return std::move(index).value();
}

std::vector<BlockKey> RandomKeys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<BlockKey> keys(n);
  for (BlockKey& key : keys) key = BlockKey{rng(), rng()};
  return keys;
}

NewBlock InT1(uint32_t slot, BlockId parent = kNoBlock) {
  return NewBlock{.tier = Tier::kT1, .slot = slot, .payload_bytes = 4096, .parent = parent};
}

TEST(BlockIndexTest, OptionsAreValidated) {
  EXPECT_FALSE(BlockIndex::Create({.num_shards = 0}).ok());
  EXPECT_FALSE(BlockIndex::Create({.num_shards = 48}).ok());
  EXPECT_FALSE(BlockIndex::Create({.num_shards = 8192}).ok());
  EXPECT_TRUE(BlockIndex::Create({.num_shards = 1}).ok());
  EXPECT_FALSE(BlockIndex::Create({.num_shards = 1, .max_entries = 0}).ok());
  EXPECT_FALSE(
      BlockIndex::Create({.num_shards = 1, .expected_entries = 10, .max_entries = 5}).ok());
}

TEST(BlockIndexTest, ShardBeyondItsShareOfMaxEntriesRefusesInserts) {
  // One shard: it may hold max_entries + 25% + 4096 entries, then Insert is ResourceExhausted and
  // what is already there stays intact.
  absl::StatusOr<std::unique_ptr<BlockIndex>> index =
      BlockIndex::Create({.num_shards = 1, .max_entries = 100});
  ASSERT_TRUE(index.ok()) << index.status();
  const std::vector<BlockKey> keys = RandomKeys(5000, 11);
  size_t accepted = 0;
  absl::Status last;
  for (const BlockKey& key : keys) {
    absl::StatusOr<BlockIndex::InsertResult> r = (*index)->Insert(key, InT1(1));
    if (!r.ok()) {
      last = r.status();
      break;
    }
    ++accepted;
  }
  EXPECT_EQ(accepted, 100u + 25u + 4096u);
  EXPECT_EQ(last.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE((*index)->Find(keys[0]).has_value());
  EXPECT_EQ((*index)->Size(), accepted);
}

TEST(BlockIndexTest, InsertFindErase) {
  auto index = MakeIndex();
  const BlockKey key{1, 2};
  absl::StatusOr<BlockIndex::InsertResult> added = index->Insert(key, InT1(7, /*parent=*/5));
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_TRUE(added->inserted);
  EXPECT_EQ(index->Size(), 1u);

  std::optional<BlockInfo> info = index->Find(key);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->key, key);
  EXPECT_EQ(info->id, added->id);
  EXPECT_EQ(info->tiers, TierBit(Tier::kT1));
  EXPECT_EQ(info->slots[1], 7u);
  EXPECT_EQ(info->payload_bytes, 4096u);
  EXPECT_EQ(info->leases, 0u);
  EXPECT_EQ(info->parent, 5u);
  EXPECT_EQ(index->FindById(added->id)->key, key);

  absl::StatusOr<BlockInfo> erased = index->Erase(key);
  ASSERT_TRUE(erased.ok()) << erased.status();
  EXPECT_EQ(erased->slots[1], 7u);
  EXPECT_FALSE(index->Find(key).has_value());
  EXPECT_FALSE(index->FindById(added->id).has_value());
  EXPECT_EQ(index->Size(), 0u);
  EXPECT_EQ(index->Erase(key).status().code(), absl::StatusCode::kNotFound);
}

TEST(BlockIndexTest, DuplicateInsertIsSkipped) {
  auto index = MakeIndex();
  const BlockKey key{3, 4};
  const BlockId id = index->Insert(key, InT1(1))->id;
  absl::StatusOr<BlockIndex::InsertResult> again =
      index->Insert(key, NewBlock{.tier = Tier::kT0, .slot = 9, .payload_bytes = 1});
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->inserted);
  EXPECT_EQ(again->id, id);
  EXPECT_EQ(index->Find(key)->tiers, TierBit(Tier::kT1));  // unchanged
  EXPECT_EQ(index->Find(key)->slots[1], 1u);
  EXPECT_EQ(index->Size(), 1u);
}

TEST(BlockIndexTest, LookupPrefixStopsAtFirstMissingBlockAndReportsTiers) {
  auto index = MakeIndex();
  const std::vector<BlockKey> keys = RandomKeys(40, 1);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i == 25) continue;  // the first hole
    ASSERT_TRUE(index->Insert(keys[i], InT1(static_cast<uint32_t>(i))).ok());
  }
  ASSERT_TRUE(index->SetTier(keys[3], Tier::kT2, 30).ok());
  ASSERT_TRUE(index->ClearTier(keys[4], Tier::kT1).ok());
  ASSERT_TRUE(index->SetTier(keys[4], Tier::kT0, 40).ok());

  std::vector<TierMask> tiers(keys.size());
  EXPECT_EQ(index->LookupPrefix(keys, absl::MakeSpan(tiers)), 25u);
  EXPECT_EQ(tiers[0], TierBit(Tier::kT1));
  EXPECT_EQ(tiers[3], TierBit(Tier::kT1) | TierBit(Tier::kT2));
  EXPECT_EQ(tiers[4], TierBit(Tier::kT0));
  EXPECT_EQ(tiers[24], TierBit(Tier::kT1));

  // A block in no tier counts as missing.
  ASSERT_TRUE(index->ClearTier(keys[10], Tier::kT1).ok());
  EXPECT_EQ(index->LookupPrefix(keys, absl::MakeSpan(tiers)), 10u);
  EXPECT_EQ(index->LookupPrefix(absl::MakeConstSpan(keys).subspan(0, 3), absl::MakeSpan(tiers)),
            3u);
  EXPECT_EQ(index->LookupPrefix({}, {}), 0u);
}

TEST(BlockIndexTest, TierPresenceIsSetAndCleared) {
  auto index = MakeIndex();
  const BlockKey key{5, 6};
  ASSERT_TRUE(index->Insert(key, InT1(11)).ok());
  EXPECT_EQ(index->SetTier(key, Tier::kT1, 12).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(index->SetTier(key, Tier::kT2, 21).ok());
  EXPECT_EQ(index->ClearTier(key, Tier::kT0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*index->ClearTier(key, Tier::kT1), 11u);
  EXPECT_EQ(index->Find(key)->tiers, TierBit(Tier::kT2));
  EXPECT_EQ(index->Find(key)->slots[2], 21u);
  EXPECT_EQ(index->SetTier(BlockKey{7, 8}, Tier::kT1, 1).code(), absl::StatusCode::kNotFound);
}

TEST(BlockIndexTest, LeasesBlockEraseAndEviction) {
  auto index = MakeIndex();
  const BlockKey key{9, 10};
  EXPECT_EQ(index->AcquireLease(key).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(index->Insert(key, InT1(1)).ok());
  EXPECT_EQ(index->AcquireLease(key)->leases, 1u);
  EXPECT_EQ(index->AcquireLease(key)->leases, 2u);
  EXPECT_EQ(index->Erase(key).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(index->ClearTier(key, Tier::kT1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(index->SetTier(key, Tier::kT0, 3).ok());  // promotion while leased is fine
  ASSERT_TRUE(index->ReleaseLease(key).ok());
  EXPECT_EQ(index->Erase(key).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(index->ReleaseLease(key).ok());
  // Counts never underflow.
  EXPECT_EQ(index->ReleaseLease(key).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(index->Find(key)->leases, 0u);
  EXPECT_TRUE(index->Erase(key).ok());
  EXPECT_EQ(index->ReleaseLease(key).code(), absl::StatusCode::kNotFound);
}

TEST(BlockIndexTest, DropTierRemovesALostCopyEvenWhileLeased) {
  auto index = MakeIndex();
  const BlockKey key{11, 12};
  ASSERT_TRUE(index->Insert(key, InT1(1)).ok());
  ASSERT_TRUE(index->SetTier(key, Tier::kT2, 7).ok());
  ASSERT_TRUE(index->AcquireLease(key).ok());
  EXPECT_EQ(*index->DropTier(key, Tier::kT2), 7u);
  EXPECT_EQ(index->DropTier(key, Tier::kT2).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(index->Find(key)->tiers, TierBit(Tier::kT1));
  EXPECT_EQ(index->Find(key)->leases, 1u);
  EXPECT_EQ(index->DropTier(BlockKey{1, 1}, Tier::kT1).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(BlockIndexTest, ErrorsNameTheKeyInHex) {
  auto index = MakeIndex();
  const BlockKey key{0x1122334455667788ull, 0x99aabbccddeeff00ull};
  const std::string hex = key.ToHex();
  EXPECT_NE(index->Erase(key).status().message().find(hex), std::string::npos);
  ASSERT_TRUE(index->Insert(key, InT1(1)).ok());
  ASSERT_TRUE(index->AcquireLease(key).ok());
  EXPECT_NE(index->Erase(key).status().message().find(hex), std::string::npos);
  EXPECT_NE(index->SetTier(key, Tier::kT1, 2).message().find(hex), std::string::npos);
}

TEST(BlockIndexTest, ErasedIdIsReusedBeforeNewOnes) {
  auto index = MakeIndex(/*num_shards=*/1);
  const std::vector<BlockKey> keys = RandomKeys(3, 2);
  const BlockId a = index->Insert(keys[0], InT1(0))->id;
  const BlockId b = index->Insert(keys[1], InT1(1))->id;
  ASSERT_TRUE(index->Erase(keys[0]).ok());
  EXPECT_EQ(index->Insert(keys[2], InT1(2))->id, a);
  EXPECT_EQ(index->FindById(a)->key, keys[2]);
  EXPECT_EQ(index->FindById(b)->key, keys[1]);
  EXPECT_EQ(index->IdLimit(), 2u);
}

TEST(BlockIndexTest, IdsAreDense) {
  // One shard: exactly 0..n-1.
  auto one = MakeIndex(/*num_shards=*/1);
  const std::vector<BlockKey> keys = RandomKeys(100000, 3);
  std::vector<bool> seen(keys.size());
  for (const BlockKey& key : keys) {
    const BlockId id = one->Insert(key, InT1(0))->id;
    ASSERT_LT(id, keys.size());
    EXPECT_FALSE(seen[id]);
    seen[id] = true;
  }
  EXPECT_EQ(one->IdLimit(), keys.size());
  // 64 shards: within a few percent of the size for hashed keys, and every id names its key.
  auto many = MakeIndex();
  for (const BlockKey& key : keys) ASSERT_TRUE(many->Insert(key, InT1(0)).ok());
  EXPECT_LE(many->IdLimit(), keys.size() * 115 / 100);
  for (const BlockKey& key : keys) EXPECT_EQ(many->FindById(many->Find(key)->id)->key, key);
  EXPECT_FALSE(many->FindById(many->IdLimit()).has_value());
  EXPECT_FALSE(many->FindById(kNoBlock).has_value());
}

TEST(BlockIndexTest, MemoryStaysUnder64BytesPerEntry) {
  auto index = MakeIndex();
  const std::vector<BlockKey> keys = RandomKeys(1 << 20, 4);
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(index->Insert(keys[i], InT1(0)).ok());
    // Check often enough to catch every shard right after it doubles (its worst moment).
    if (i >= (1 << 17) && i % 8192 == 0) {
      ASSERT_LE(index->MemoryBytes(), BlockIndex::kMaxBytesPerEntry * (i + 1)) << "at " << i + 1;
    }
  }
  const double per_entry = static_cast<double>(index->MemoryBytes()) / index->Size();
  EXPECT_LE(per_entry, BlockIndex::kMaxBytesPerEntry);
  EXPECT_GE(per_entry, BlockIndex::kEntryBytes + 10);  // accounting counts the table too
  // Presized: no rehash on the way, and the same bound once full.
  auto presized = MakeIndex(64, keys.size());
  for (const BlockKey& key : keys) ASSERT_TRUE(presized->Insert(key, InT1(0)).ok());
  EXPECT_LE(presized->MemoryBytes(), BlockIndex::kMaxBytesPerEntry * keys.size());
}

// Many keys share a tag and a home position (one shard, equal low bits): probing, full-key
// confirmation and backward-shift deletion, checked against std::map under random churn.
TEST(BlockIndexTest, ChurnWithCollidingTagsMatchesReference) {
  auto index = MakeIndex(/*num_shards=*/1);
  std::mt19937_64 rng(5);
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> reference;  // (lo, hi) -> slot
  for (int step = 0; step < 100000; ++step) {
    // Tags 0..3 cluster at the table's start, tags ~0..~3 at its end and wrap around.
    const uint64_t tag = rng() % 2 == 0 ? rng() % 4 : 0xffffffffull - rng() % 4;
    const BlockKey key{(rng() % 8) << 32 | tag, rng() % 64};
    const auto ref_key = std::make_pair(key.lo, key.hi);
    const bool present = reference.count(ref_key) != 0;
    if (rng() % 3 == 0) {
      EXPECT_EQ(index->Erase(key).ok(), present);
      reference.erase(ref_key);
    } else if (rng() % 2 == 0) {
      const uint32_t slot = static_cast<uint32_t>(step);
      EXPECT_EQ(index->Insert(key, InT1(slot))->inserted, !present);
      reference.emplace(ref_key, slot);
    } else {
      const std::optional<BlockInfo> info = index->Find(key);
      ASSERT_EQ(info.has_value(), present);
      if (present) {
        EXPECT_EQ(info->slots[1], reference[ref_key]);
      }
    }
  }
  EXPECT_EQ(index->Size(), reference.size());
}

// Lock-free lookups racing a writer that grows the table (in-place rehash) and churns its clusters
// (backward shift) in the same shard: every stable key is always found, with its tiers. Repeated on
// fresh indexes so that many rehashes happen while the readers run.
TEST(BlockIndexTest, LockFreeLookupsSeeStableKeysThroughRehashAndErase) {
  const std::vector<BlockKey> stable = RandomKeys(64, 7);
  const std::vector<BlockKey> churn = RandomKeys(20000, 8);
  for (int cycle = 0; cycle < 20; ++cycle) {
    auto index = MakeIndex(/*num_shards=*/1);
    for (const BlockKey& key : stable) ASSERT_TRUE(index->Insert(key, InT1(1)).ok());
    std::atomic<bool> done{false};
    std::thread writer([&] {
      for (const BlockKey& key : churn) ASSERT_TRUE(index->Insert(key, InT1(2)).ok());
      for (const BlockKey& key : churn) ASSERT_TRUE(index->Erase(key).ok());
      done = true;
    });
    std::vector<TierMask> tiers(stable.size());
    bool all_found = true;
    for (int round = 0; all_found && (!done || round < 10); ++round) {
      all_found = index->LookupPrefix(stable, absl::MakeSpan(tiers)) == stable.size() &&
                  tiers[round % stable.size()] == TierBit(Tier::kT1);
    }
    writer.join();
    ASSERT_TRUE(all_found) << "cycle " << cycle;
    EXPECT_EQ(index->Size(), stable.size());
  }
}

// Several threads at once, with rehashes under way (small start, few shards). Each thread grows and
// shrinks its own chain of keys, which nobody else touches, and races the others on a shared set.
// Invariants: a thread's chain is exactly as it left it; a leased block stays put until released;
// at the end every present key's id names it, ids are unique, no lease is left.
class ConcurrentWorker {
 public:
  ConcurrentWorker(BlockIndex* index, uint32_t id, const std::vector<BlockKey>& shared)
      : index_(index), id_(id), own_(RandomKeys(500, 100 + id)), shared_(shared), rng_(id) {}

  void Run(int steps) {
    std::vector<TierMask> tiers(own_.size());
    for (int step = 0; step < steps; ++step) {
      switch (rng_() % 4) {
        case 0:
          GrowOrShrinkChain();
          break;
        case 1:
          LeaseShared();
          break;
        case 2:
          ChurnShared();
          break;
        default:
          ASSERT_EQ(index_->LookupPrefix(own_, absl::MakeSpan(tiers)), chain_length_);
          index_->LookupPrefix(shared_, absl::MakeSpan(tiers));
      }
    }
  }
  size_t chain_length() const { return chain_length_; }
  const std::vector<BlockKey>& own() const { return own_; }

 private:
  void GrowOrShrinkChain() {
    if (chain_length_ < own_.size() && (chain_length_ == 0 || rng_() % 3 != 0)) {
      const BlockKey& key = own_[chain_length_];
      absl::StatusOr<BlockIndex::InsertResult> added = index_->Insert(key, InT1(id_));
      ASSERT_TRUE(added.ok() && added->inserted);
      ASSERT_EQ(index_->FindById(added->id)->key, key);
      ++chain_length_;
    } else if (chain_length_ > 0) {
      --chain_length_;
      ASSERT_TRUE(index_->Erase(own_[chain_length_]).ok());
    }
  }
  void LeaseShared() {
    const BlockKey& key = shared_[rng_() % shared_.size()];
    absl::StatusOr<BlockInfo> leased = index_->AcquireLease(key);
    if (!leased.ok()) {
      ASSERT_EQ(leased.status().code(), absl::StatusCode::kNotFound);
      return;
    }
    EXPECT_EQ(index_->Erase(key).status().code(), absl::StatusCode::kFailedPrecondition);
    const std::optional<BlockInfo> info = index_->Find(key);
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(info->id, leased->id);
    EXPECT_GE(info->leases, 1u);
    ASSERT_TRUE(index_->ReleaseLease(key).ok());
  }
  void ChurnShared() {
    const BlockKey& key = shared_[rng_() % shared_.size()];
    switch (rng_() % 3) {
      case 0:
        ASSERT_TRUE(index_->Insert(key, InT1(id_)).ok());
        break;
      case 1:
        (void)index_->Erase(key);
        break;
      default:
        (void)index_->SetTier(key, Tier::kT2, id_);
        (void)index_->ClearTier(key, Tier::kT1);
    }
  }

  BlockIndex* index_;
  uint32_t id_;
  std::vector<BlockKey> own_;
  const std::vector<BlockKey>& shared_;
  std::mt19937_64 rng_;
  size_t chain_length_ = 0;  // own_[0, chain_length_) are in the index
};

TEST(BlockIndexTest, ConcurrentUseKeepsInvariants) {
  auto index = MakeIndex(/*num_shards=*/8);
  const std::vector<BlockKey> shared = RandomKeys(64, 99);
  std::vector<std::unique_ptr<ConcurrentWorker>> workers;
  for (uint32_t t = 0; t < 4; ++t)
    workers.push_back(std::make_unique<ConcurrentWorker>(index.get(), t, shared));
  std::vector<std::thread> threads;
  for (auto& worker : workers) threads.emplace_back([&worker] { worker->Run(20000); });
  for (std::thread& thread : threads) thread.join();

  std::set<BlockId> ids;
  size_t present = 0;
  auto check = [&](const BlockKey& key) {
    const std::optional<BlockInfo> info = index->Find(key);
    if (!info.has_value()) return;
    ++present;
    EXPECT_EQ(info->leases, 0u);
    EXPECT_TRUE(ids.insert(info->id).second) << "id " << info->id << " named twice";
    EXPECT_EQ(index->FindById(info->id)->key, key);
  };
  for (const auto& worker : workers) {
    for (size_t i = 0; i < worker->own().size(); ++i) {
      EXPECT_EQ(index->Find(worker->own()[i]).has_value(), i < worker->chain_length());
      check(worker->own()[i]);
    }
  }
  for (const BlockKey& key : shared) check(key);
  EXPECT_EQ(index->Size(), present);
  EXPECT_LE(*ids.rbegin(), index->IdLimit() - 1);
}

}  // namespace
}  // namespace kvtier
