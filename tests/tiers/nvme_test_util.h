// Helpers for the T2 tests: a temporary directory, aligned buffers, deterministic payloads,
// synchronous wrappers over the asynchronous Write/Read, and small real file systems to fill up
// (LoopFs). Real files, real io_uring, real RocksDB.
#pragma once

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <vector>

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

// A fresh ext4 file system of `mib` MiB on a loop device, mounted at <dir>/mnt and unmounted (which
// frees the loop device: mount -o loop sets autoclear) at destruction. Needs root and loop devices;
// `skip_reason()` says why not when the machine does not allow it.
class LoopFs {
 public:
  LoopFs(const std::string& dir, int mib) : image_(dir + "/fs.img"), mount_(dir + "/mnt") {
    if (::geteuid() != 0) {
      skip_reason_ = "mounting a loop file system needs root";
      return;
    }
    std::filesystem::create_directories(mount_);
    const std::string cmd =
        fmt::format("truncate -s {}M {} && mkfs.ext4 -q -F {} && mount -o loop {} {}", mib, image_,
                    image_, image_, mount_);
    if (std::system((cmd + " >/dev/null 2>&1").c_str()) != 0) {
      skip_reason_ = "could not make and mount a loop ext4 (" + cmd + ")";
      return;
    }
    mounted_ = true;
  }
  ~LoopFs() {
    if (!mounted_) return;
    // io_uring lets go of its files asynchronously after the ring closes: retry while busy.
    for (int i = 0; i < 100; ++i) {
      if (std::system(("umount " + mount_ + " >/dev/null 2>&1").c_str()) == 0) return;
      ::usleep(20000);
    }
    std::fprintf(stderr, "umount %s failed; unmount it by hand\n", mount_.c_str());
  }
  const std::string& skip_reason() const { return skip_reason_; }
  const std::string& path() const { return mount_; }

 private:
  std::string image_, mount_, skip_reason_;
  bool mounted_ = false;
};

// Writes `mib` MiB of zeros to `path` and syncs it.
inline void WriteBallast(const std::string& path, int mib) {
  std::vector<char> zeros(1 << 20, 0);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  for (int i = 0; i < mib; ++i)
    ASSERT_EQ(std::fwrite(zeros.data(), 1, zeros.size(), f), zeros.size());
  ASSERT_EQ(std::fflush(f), 0);
  ASSERT_EQ(::fsync(::fileno(f)), 0);
  std::fclose(f);
}

// Lets ext4 reuse freed blocks (it does only after a journal commit).
inline void SyncFs(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::syncfs(fd), 0);
  ::close(fd);
}

// Fills the file system holding `dir` to the last block with `path` (4 KiB writes until one fails).
inline void FillUp(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  std::vector<char> zeros(4096, 0);
  while (::write(fd, zeros.data(), zeros.size()) == static_cast<ssize_t>(zeros.size())) {
  }
  ::fsync(fd);
  ::close(fd);
}

}  // namespace kvtier::testing
