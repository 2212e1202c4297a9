// The T2 tier's persistent record of what its slots hold, in RocksDB beside the data (DESIGN.md
// "Tiers"). Internal to the T2 tier (nvme_tier.cc).
//
// One RocksDB entry per stored block:
//   key   = the block key's 16 canonical bytes (BlockKey::Bytes) ‖ slot as 4 big-endian bytes
//   value = version byte (1) ‖ namespace id u64 ‖ payload bytes u32 ‖ XXH3-64 u64 ‖ epoch u64 (LE)
// The slot is part of the key so that one key stored twice (two slots) gives two records and
// deleting one never deletes the other; recovery hands both to the caller, whose block index
// keeps one. One more entry, kLayoutKey, stamps the slot geometry the data was written with, so a
// restart with another slot size or directory count fails instead of misreading slots.
//
// RocksDB's own log lines (warnings and errors) go to kvtier's log, not to a LOG file beside the
// data: on a full disk that file's writer fails and the next line aborted the process.
//
// Thread-safety: every method may be called concurrently (RocksDB serialises its writers).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "tiers/storage_tier.h"

namespace rocksdb {
class DB;
}

namespace kvtier {

struct StoredRecord {
  BlockRecord record;
  SlotId slot = kNoSlot;
  uint64_t epoch = 0;  // write order: larger is newer
};

// The slot geometry the data was written with.
struct SlotLayout {
  uint32_t slot_bytes = 0;
  uint32_t directories = 0;
  uint32_t slots_per_directory = 0;
};

class NvmeMetadata {
 public:
  // Opens (creating if missing) the database in `dir`. `sync`: every write is synced (WAL fsync)
  // before it returns. Fails with FailedPrecondition naming the setting if the stored layout
  // differs from `layout`; stores `layout` on first use.
  static absl::StatusOr<std::unique_ptr<NvmeMetadata>> Open(const std::string& dir, bool sync,
                                                            const SlotLayout& layout);
  // Flushes the memtable (so the next Open replays no WAL), then closes. The flush runs on
  // RocksDB's background threads: a process forked after RocksDB ran in its parent has none and
  // would wait here forever.
  ~NvmeMetadata();
  NvmeMetadata(const NvmeMetadata&) = delete;
  NvmeMetadata& operator=(const NvmeMetadata&) = delete;

  // Puts every record in one atomic batch (one WAL write, one sync).
  absl::Status PutBatch(const std::vector<StoredRecord>& records);
  absl::Status Delete(const BlockKey& key, SlotId slot);
  // Rewrites the layout stamp with a synced put, resuming the database first when a failed write
  // stopped it: OK when the database takes writes again (after a full disk). RocksDB's own
  // recovery is off (it polled every 5 s and made a manual resume "busy" meanwhile), so this is
  // what brings it back, as soon as there is room. Counts as a put for the caller's failure
  // accounting.
  absl::Status Probe();

  // Calls `visit` (on the calling thread) for every well-formed record, in key order, without
  // reading any payload. The key space is scanned by up to 8 threads at once, since warm restart
  // is bounded by this scan. Malformed entries are deleted, logged and counted in *malformed.
  absl::Status Scan(const std::function<void(const StoredRecord&)>& visit, uint64_t* malformed);

 private:
  NvmeMetadata(rocksdb::DB* db, bool sync, std::string layout);
  // Stores layout_ on first use; FailedPrecondition if the stored stamp differs.
  absl::Status CheckLayout();
  // Appends the well-formed records whose first key byte is in [lo, hi) to *out.
  absl::Status ScanRange(int lo, int hi, std::vector<StoredRecord>* out, uint64_t* malformed);

  std::unique_ptr<rocksdb::DB> db_;
  const bool sync_;
  const std::string layout_;  // the layout stamp's value
};

}  // namespace kvtier
