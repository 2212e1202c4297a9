// Helpers for the T2 tests: a temporary directory, aligned buffers, deterministic payloads and
// synchronous wrappers over the asynchronous Write/Read. Real files, real io_uring, real RocksDB.
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <string>

#include "tiers/nvme_tier.h"

namespace kvtier::testing {

// True if files in `dir` can be opened O_DIRECT (older tmpfs and some overlays cannot).
inline bool SupportsDirectIo(const std::string& dir) {
  const std::string probe = dir + "/.kvtier-o-direct-probe";
  const int fd = ::open(probe.c_str(), O_RDWR | O_CREAT | O_DIRECT, 0600);
  if (fd >= 0) ::close(fd);
  ::unlink(probe.c_str());
  return fd >= 0;
}

// A fresh directory, removed with its contents, under $TMPDIR if that file system takes O_DIRECT,
// else under /var/tmp (on disk where /tmp may be tmpfs).
class TempDir {
 public:
  TempDir() {
    const char* env = std::getenv("TMPDIR");
    const std::string base = env != nullptr && SupportsDirectIo(env) ? env : "/var/tmp";
    std::string tmpl = base + "/kvtier-t2-XXXXXX";
    path_ = ::mkdtemp(tmpl.data()) != nullptr ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const {
    const std::string p = path_ + "/" + name;
    std::filesystem::create_directories(p);
    return p;
  }

 private:
  std::string path_;
};

struct FreeDeleter {
  void operator()(void* p) const { ::free(p); }
};
using AlignedBuffer = std::unique_ptr<uint8_t[], FreeDeleter>;
inline AlignedBuffer Aligned(size_t bytes) {
  return AlignedBuffer(
      static_cast<uint8_t*>(::aligned_alloc(4096, (bytes + 4095) & ~size_t{4095})));
}

inline uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// Block number i's key: lo is i itself, so a recovered record names the block it claims to be.
inline BlockKey KeyOf(uint64_t i) { return BlockKey{i, SplitMix(i ^ 0x5bd1e995)}; }
// Block number i's payload bytes: deterministic, different for every block.
inline void FillPayload(uint64_t i, uint8_t* out, size_t bytes) {
  uint64_t x = SplitMix(i);
  for (size_t off = 0; off < bytes; off += 8) {
    x = SplitMix(x);
    std::memcpy(out + off, &x, std::min<size_t>(8, bytes - off));
  }
}
inline BlockRecord RecordOf(uint64_t i, const uint8_t* payload, uint32_t bytes) {
  return BlockRecord{KeyOf(i), /*namespace_id=*/7, bytes, XXH3_64bits(payload, bytes)};
}

inline absl::Status WriteSync(StorageTier& tier, SlotId slot, const BlockRecord& r,
                              const void* src) {
  std::promise<absl::Status> p;
  tier.Write(slot, r, src, [&p](absl::Status s) { p.set_value(std::move(s)); });
  return p.get_future().get();
}
inline absl::Status ReadSync(StorageTier& tier, SlotId slot, void* dst) {
  std::promise<absl::Status> p;
  tier.Read(slot, dst, [&p](absl::Status s) { p.set_value(std::move(s)); });
  return p.get_future().get();
}

inline NvmeTierOptions SmallOptions(const std::string& dir, uint32_t slot_bytes, uint32_t slots) {
  NvmeTierOptions o;
  o.directories = {dir};
  o.slot_bytes = slot_bytes;
  o.capacity_bytes = uint64_t{slot_bytes} * slots;
  o.durability = T2Durability::kNone;
  o.preallocate = false;
  return o;
}

}  // namespace kvtier::testing
