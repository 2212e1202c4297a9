#include "client/protocol/shm_region.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/errno_text.h"

namespace kvtier::protocol {

absl::StatusOr<std::unique_ptr<ShmRegion>> ShmRegion::Create(const RegionLayout& layout) {
  KVTIER_RETURN_IF_ERROR(ValidateLayout(layout));
  UniqueFd fd(::memfd_create("kvtier-client-region", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return absl::InternalError("memfd_create: " + ErrnoText(errno));
  if (::ftruncate(fd.get(), static_cast<off_t>(layout.region_bytes)) != 0) {
    return absl::InternalError(
        fmt::format("ftruncate to {} bytes: {}", layout.region_bytes, ErrnoText(errno)));
  }
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return absl::InternalError("sealing the region memfd: " + ErrnoText(errno));
  }
  return MapFd(std::move(fd), layout);
}

absl::StatusOr<std::unique_ptr<ShmRegion>> ShmRegion::Map(UniqueFd fd, const RegionLayout& layout) {
  KVTIER_RETURN_IF_ERROR(ValidateLayout(layout));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return absl::InternalError("fstat region: " + ErrnoText(errno));
  if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) < layout.region_bytes) {
    return absl::InvalidArgumentError(
        fmt::format("region fd of {} bytes, layout needs {}", st.st_size, layout.region_bytes));
  }
  return MapFd(std::move(fd), layout);
}

absl::StatusOr<std::unique_ptr<ShmRegion>> ShmRegion::MapFd(UniqueFd fd,
                                                            const RegionLayout& layout) {
  void* p = ::mmap(nullptr, layout.region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) {
    return absl::InternalError(
        fmt::format("mmap region of {} bytes: {}", layout.region_bytes, ErrnoText(errno)));
  }
  return std::unique_ptr<ShmRegion>(
      new ShmRegion(std::move(fd), static_cast<std::byte*>(p), layout));
}

ShmRegion::~ShmRegion() { ::munmap(base_, layout_.region_bytes); }

RingMemory ShmRegion::submission() const {
  return RingMemory{reinterpret_cast<RingControl*>(base_ + layout_.sq_control),
                    base_ + layout_.sq_records, layout_.sq_entries};
}

RingMemory ShmRegion::completion() const {
  return RingMemory{reinterpret_cast<RingControl*>(base_ + layout_.cq_control),
                    base_ + layout_.cq_records, layout_.cq_entries};
}

}  // namespace kvtier::protocol
