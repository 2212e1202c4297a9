#include "tiers/nvme_metadata.h"

#include <fmt/format.h>
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/listener.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "common/log.h"

namespace kvtier {
namespace {

constexpr size_t kKeyBytes = 20;
constexpr size_t kValueBytes = 29;
constexpr uint8_t kValueVersion = 1;
constexpr char kLayoutKey[] = "kvtier.t2.layout";

template <typename T>
void PutLe(char* out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
template <typename T>
T GetLe(const char* in) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<T>(static_cast<uint8_t>(in[i])) << (8 * i);
  return v;
}

std::string EncodeKey(const BlockKey& key, SlotId slot) {
  std::string out(kKeyBytes, '\0');
  const auto bytes = key.Bytes();
  std::memcpy(out.data(), bytes.data(), bytes.size());
  for (int i = 0; i < 4; ++i) out[16 + i] = static_cast<char>((slot >> (8 * (3 - i))) & 0xff);
  return out;
}

std::string EncodeValue(const StoredRecord& r) {
  std::string out(kValueBytes, '\0');
  out[0] = static_cast<char>(kValueVersion);
  PutLe<uint64_t>(&out[1], r.record.namespace_id);
  PutLe<uint32_t>(&out[9], r.record.payload_bytes);
  PutLe<uint64_t>(&out[13], r.record.checksum);
  PutLe<uint64_t>(&out[21], r.epoch);
  return out;
}

bool Decode(const rocksdb::Slice& k, const rocksdb::Slice& v, StoredRecord* r) {
  if (k.size() != kKeyBytes || v.size() != kValueBytes || v[0] != kValueVersion) return false;
  r->record.key.lo = GetLe<uint64_t>(k.data());
  r->record.key.hi = GetLe<uint64_t>(k.data() + 8);
  r->slot = 0;
  for (int i = 0; i < 4; ++i) r->slot = (r->slot << 8) | static_cast<uint8_t>(k[16 + i]);
  r->record.namespace_id = GetLe<uint64_t>(v.data() + 1);
  r->record.payload_bytes = GetLe<uint32_t>(v.data() + 9);
  r->record.checksum = GetLe<uint64_t>(v.data() + 13);
  r->epoch = GetLe<uint64_t>(v.data() + 21);
  return true;
}

absl::Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return absl::OkStatus();
  if (s.IsNoSpace())
    return absl::ResourceExhaustedError(fmt::format("t2 metadata {}: {}", what, s.ToString()));
  return absl::InternalError(fmt::format("t2 metadata {}: {}", what, s.ToString()));
}

std::string LayoutStamp(const SlotLayout& layout) {
  return fmt::format("slot_bytes={} directories={} slots_per_directory={}", layout.slot_bytes,
                     layout.directories, layout.slots_per_directory);
}

// RocksDB's own log lines (warnings and errors) into ours. RocksDB's default is a LOG file in the
// database directory; on a full disk its writer fails and the next line written to it aborts the
// process (Debian's librocksdb keeps assertions on), so the metadata must not log to its own disk.
class RocksLogger final : public rocksdb::Logger {
 public:
  RocksLogger() : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL) {}
  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    if (level < GetInfoLogLevel() || level == rocksdb::InfoLogLevel::HEADER_LEVEL) return;
    char line[1024];
    std::vsnprintf(line, sizeof(line), format, ap);
    log::Write(level >= rocksdb::InfoLogLevel::ERROR_LEVEL ? log::Level::kError : log::Level::kWarn,
               "t2-rocksdb", line);
  }
};

// Turns RocksDB's own recovery from a full disk off, so that the tier's probe (Probe: Resume, then
// a put) is the one recovery and works as soon as room is back. RocksDB's would hand the error to
// its SstFileManager, which polls the free space every 5 s and, while it waits, answers every
// manual Resume with "Resource busy": admission came back up to 5 s after the disk had room.
class ManualRecovery final : public rocksdb::EventListener {
 public:
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason /*reason*/, rocksdb::Status bg_error,
                            bool* auto_recovery) override {
    bg_error.PermitUncheckedError();
    *auto_recovery = false;
  }
};

}  // namespace

NvmeMetadata::NvmeMetadata(rocksdb::DB* db, bool sync, std::string layout)
    : db_(db), sync_(sync), layout_(std::move(layout)) {}
NvmeMetadata::~NvmeMetadata() {
  // Flush the memtable so the next start scans table files instead of replaying up to a write
  // buffer (16 MiB, ~300 K records) of WAL into a fresh memtable first: that replay was most of a
  // warm restart (docs/benchmarks.md). Best effort: on failure the WAL still holds every record.
  const rocksdb::Status s = db_->Flush(rocksdb::FlushOptions());
  if (!s.ok()) KVTIER_LOG(kWarn, "t2", "flushing the metadata at close: {}", s.ToString());
}

absl::StatusOr<std::unique_ptr<NvmeMetadata>> NvmeMetadata::Open(const std::string& dir, bool sync,
                                                                 const SlotLayout& layout) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.compression = rocksdb::kNoCompression;  // 49-byte records; scans should not decompress
  options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  options.info_log = std::make_shared<RocksLogger>();
  // Records are ~50 bytes: a 16 MiB memtable holds ~300 K of them. RocksDB would otherwise reserve
  // 1.1 x write_buffer_size of WAL with fallocate up front, taking room the slot files need on a
  // nearly full disk; without it, a full disk shows as a failed put, which stops admission.
  options.write_buffer_size = 16 << 20;
  options.allow_fallocate = false;
  // The probe resumes the database after a failed write (ManualRecovery above); RocksDB's own
  // retries of other retryable errors would make that Resume "busy" as well.
  options.listeners.push_back(std::make_shared<ManualRecovery>());
  options.max_bgerror_resume_count = 0;
  // RocksDB would create the directory too, but logs an error first when it is missing.
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  rocksdb::DB* db = nullptr;
  const rocksdb::Status s = rocksdb::DB::Open(options, dir, &db);
  if (!s.ok()) {
    return absl::InternalError(
        fmt::format("t2.metadata_directory: opening RocksDB at {}: {}", dir, s.ToString()));
  }
  std::unique_ptr<NvmeMetadata> meta(new NvmeMetadata(db, sync, LayoutStamp(layout)));
  KVTIER_RETURN_IF_ERROR(meta->CheckLayout());
  return meta;
}

absl::Status NvmeMetadata::CheckLayout() {
  const std::string& want = layout_;
  std::string have;
  const rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), kLayoutKey, &have);
  if (s.IsNotFound()) {
    rocksdb::WriteOptions w;
    w.sync = true;
    return FromRocks(db_->Put(w, kLayoutKey, want), "layout stamp");
  }
  KVTIER_RETURN_IF_ERROR(FromRocks(s, "layout stamp"));
  if (have != want) {
    return absl::FailedPreconditionError(fmt::format(
        "t2.slot_bytes / t2.directories / t2.capacity_bytes: the data was written with {}, the "
        "config asks for {}; restore the settings or empty the directories",
        have, want));
  }
  return absl::OkStatus();
}

absl::Status NvmeMetadata::PutBatch(const std::vector<StoredRecord>& records) {
  rocksdb::WriteBatch batch;
  for (const StoredRecord& r : records) {
    batch.Put(EncodeKey(r.record.key, r.slot), EncodeValue(r));
  }
  rocksdb::WriteOptions w;
  w.sync = sync_;
  return FromRocks(db_->Write(w, &batch), "put");
}

absl::Status NvmeMetadata::Probe() {
  rocksdb::WriteOptions w;
  w.sync = true;
  rocksdb::Status s = db_->Put(w, kLayoutKey, layout_);
  if (!s.ok()) {
    // A failed WAL write (e.g. ENOSPC) leaves RocksDB refusing writes until it is resumed.
    const rocksdb::Status resumed = db_->Resume();
    if (!resumed.ok()) return FromRocks(resumed, "probe (resume after a failed write)");
    s = db_->Put(w, kLayoutKey, layout_);
  }
  return FromRocks(s, "probe (layout stamp rewrite)");
}

absl::Status NvmeMetadata::Delete(const BlockKey& key, SlotId slot) {
  rocksdb::WriteOptions w;
  w.sync = sync_;
  return FromRocks(db_->Delete(w, EncodeKey(key, slot)), "delete");
}

absl::Status NvmeMetadata::ScanRange(int lo, int hi, std::vector<StoredRecord>* out,
                                     uint64_t* malformed) {
  // Record keys start with a hash byte, so byte ranges split the records evenly.
  const char lo_byte = static_cast<char>(lo), hi_byte = static_cast<char>(hi);
  const rocksdb::Slice lower(&lo_byte, 1), upper(&hi_byte, 1);
  rocksdb::ReadOptions r;
  r.fill_cache = false;
  r.readahead_size = 4 << 20;
  if (lo > 0) r.iterate_lower_bound = &lower;
  if (hi < 256) r.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(r));
  StoredRecord rec;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (!Decode(it->key(), it->value(), &rec)) {
      if (it->key() == rocksdb::Slice(kLayoutKey, sizeof(kLayoutKey) - 1)) continue;
      KVTIER_LOG(kWarn, "t2", "dropping malformed metadata entry ({} key bytes, {} value bytes)",
                 it->key().size(), it->value().size());
      ++*malformed;
      (void)db_->Delete(rocksdb::WriteOptions(), it->key());
      continue;
    }
    out->push_back(rec);
  }
  return FromRocks(it->status(), "scan");
}

absl::Status NvmeMetadata::Scan(const std::function<void(const StoredRecord&)>& visit,
                                uint64_t* malformed) {
  const int parts = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  std::vector<std::vector<StoredRecord>> found(parts);
  uint64_t estimate = 0;  // records, roughly: saves regrowing (and page-faulting) the vectors
  if (db_->GetIntProperty("rocksdb.estimate-num-keys", &estimate)) {
    for (auto& f : found) f.reserve(estimate / parts + estimate / parts / 8);
  }
  std::vector<absl::Status> status(parts);
  std::vector<uint64_t> bad(parts, 0);
  std::vector<std::thread> threads;
  for (int p = 0; p < parts; ++p) {
    threads.emplace_back([&, p] {
      status[p] = ScanRange(256 * p / parts, 256 * (p + 1) / parts, &found[p], &bad[p]);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int p = 0; p < parts; ++p) {
    KVTIER_RETURN_IF_ERROR(status[p]);
    *malformed += bad[p];
    for (const StoredRecord& r : found[p]) visit(r);
  }
  return absl::OkStatus();
}

}  // namespace kvtier
