#include "daemon/key_scope.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

// Inlined, not Debian's libxxhash: a lookup scopes every key it carries, and a call into the shared
// library (plus its length dispatch) cost as much as the 32-byte hash itself. Same function, same
// values: keys stored before this change stay reachable.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <bit>
#include <cstring>

#include "common/errno_text.h"
#include "common/log.h"

namespace kvtier {
namespace {

absl::Status RandomSecret(KeyScope::Secret* secret) {
  size_t filled = 0;
  while (filled < secret->size()) {
    const ssize_t n = ::getrandom(secret->data() + filled, secret->size() - filled, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError("getrandom: " + ErrnoText(errno));
    filled += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status ReadSecret(int fd, const std::string& path, KeyScope::Secret* secret) {
  const ssize_t n = ::pread(fd, secret->data(), secret->size(), 0);
  char extra;
  if (n != static_cast<ssize_t>(secret->size()) || ::pread(fd, &extra, 1, n) != 0) {
    return absl::DataLossError(fmt::format(
        "{}: not a {}-byte key-scope secret (damaged? restoring it from a backup keeps the blocks "
        "on disk reachable; deleting it makes them unreachable)",
        path, KeyScope::kSecretBytes));
  }
  return absl::OkStatus();
}

absl::Status CreateSecret(const std::string& path, KeyScope::Secret* secret) {
  KVTIER_RETURN_IF_ERROR(RandomSecret(secret));
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return absl::InternalError(fmt::format("{}: cannot create: {}", tmp, ErrnoText(errno)));
  const bool ok =
      ::write(fd, secret->data(), secret->size()) == static_cast<ssize_t>(secret->size()) &&
      ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return absl::InternalError(
        fmt::format("{}: cannot write: {}", path, ErrnoText(ok ? errno : err)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<KeyScope> KeyScope::Load(const std::string& path, bool must_exist) {
  Secret secret{};
  if (path.empty()) {
    KVTIER_RETURN_IF_ERROR(RandomSecret(&secret));
    return KeyScope(secret);
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT && must_exist) {
    return absl::NotFoundError(fmt::format(
        "{}: no such file; a shared key-scope secret is made once and copied to every daemon of "
        "the fleet, e.g. `head -c {} /dev/urandom > {}; chmod 0600 {}`",
        path, kSecretBytes, path, path));
  }
  if (fd < 0 && errno == ENOENT) {
    KVTIER_RETURN_IF_ERROR(CreateSecret(path, &secret));
    return KeyScope(secret);
  }
  if (fd < 0)
    return absl::InternalError(fmt::format("{}: cannot open: {}", path, ErrnoText(errno)));
  const absl::Status read = ReadSecret(fd, path, &secret);
  struct stat st {};
  if (read.ok() && ::fstat(fd, &st) == 0 && (st.st_mode & 077) != 0) {
    // Whoever reads it can compute the daemon key of any client key in any namespace.
    KVTIER_LOG(kWarn, "daemon",
               "{}: the key-scope secret is readable by others (mode {:04o}); chmod 0600 it", path,
               st.st_mode & 07777);
  }
  ::close(fd);
  KVTIER_RETURN_IF_ERROR(read);
  return KeyScope(secret);
}

BlockKey KeyScope::InPool(const BlockKey& root, std::string_view pool) {
  constexpr std::string_view kTag = "kvtier-pool:";
  std::string input(16, '\0');
  std::memcpy(input.data(), &root, 16);
  input.append(kTag);
  input.append(pool);
  const XXH128_hash_t h = XXH3_128bits(input.data(), input.size());
  return BlockKey{h.low64, h.high64};
}

BlockKey KeyScope::Scope(const BlockKey& root, const BlockKey& client_key) const {
  // bytes(key) is lo then hi, little-endian (block_key.h): on a little-endian CPU exactly the
  // struct's bytes, so no conversion on this per-key path.
  static_assert(std::endian::native == std::endian::little && sizeof(BlockKey) == 16);
  uint8_t input[32];
  std::memcpy(input, &client_key, 16);
  std::memcpy(input + 16, &root, 16);
  const XXH128_hash_t h =
      XXH3_128bits_withSecret(input, sizeof(input), secret_.data(), secret_.size());
  return BlockKey{h.low64, h.high64};
}

void KeyScope::ScopeAll(const BlockKey& root, absl::Span<const BlockKey> keys,
                        absl::Span<BlockKey> out) const {
  for (size_t i = 0; i < keys.size(); ++i) out[i] = Scope(root, keys[i]);
}

}  // namespace kvtier
