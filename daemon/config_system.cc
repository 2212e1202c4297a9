// The parts of loading that ask the system: user and group names, directories.
#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <system_error>

#include "daemon/config.h"
#include "daemon/config_internal.h"

namespace kvtier {
namespace {

bool IsDecimal(const std::string& s) {
  return !s.empty() && s.size() <= 10 && s.find_first_not_of("0123456789") == s.npos;
}

// Numeric text as an id, else `lookup(name)`; an error names `key[i]`.
template <typename Id, typename Lookup>
absl::Status Resolve(const std::string& key, const std::vector<std::string>& names,
                     const char* what, Lookup lookup, std::vector<Id>* ids) {
  ids->clear();
  for (size_t i = 0; i < names.size(); ++i) {
    if (IsDecimal(names[i])) {
      const unsigned long id = std::stoul(names[i]);
      if (id > UINT32_MAX - 1) {
        return absl::InvalidArgumentError(fmt::format("{}[{}]: {} is not an id", key, i, id));
      }
      ids->push_back(static_cast<Id>(id));
      continue;
    }
    const std::optional<Id> id = lookup(names[i]);
    if (!id) {
      return absl::InvalidArgumentError(
          fmt::format("{}[{}]: no {} named '{}' on this system", key, i, what, names[i]));
    }
    ids->push_back(*id);
  }
  return absl::OkStatus();
}

std::optional<uid_t> LookupUser(const std::string& name) {
  const passwd* pw = ::getpwnam(name.c_str());
  return pw == nullptr ? std::nullopt : std::optional<uid_t>(pw->pw_uid);
}

std::optional<gid_t> LookupGroup(const std::string& name) {
  const group* gr = ::getgrnam(name.c_str());
  return gr == nullptr ? std::nullopt : std::optional<gid_t>(gr->gr_gid);
}

// True when `path` is `dir` or lies under it, comparing absolute, normalised paths.
bool Inside(const std::string& path, const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path rel = fs::absolute(path).lexically_normal().lexically_relative(
      fs::absolute(dir).lexically_normal());
  return !rel.empty() && *rel.begin() != "..";
}

absl::Status MakeDirectory(const std::string& key, const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec)
    return absl::PermissionDeniedError(
        fmt::format("{}: cannot create {}: {}", key, path, ec.message()));
  ::chmod(path.c_str(), 0750);
  return absl::OkStatus();
}

}  // namespace

namespace config {

absl::Status ResolveIds(DaemonConfig* c) {
  KVTIER_RETURN_IF_ERROR(Resolve("daemon.allowed_users", c->daemon.allowed_users, "user",
                                 LookupUser, &c->daemon.allowed_uids));
  return Resolve("daemon.allowed_groups", c->daemon.allowed_groups, "group", LookupGroup,
                 &c->daemon.allowed_gids);
}

}  // namespace config

absl::Status PrepareDirectories(const DaemonConfig& c) {
  const std::string& data = c.daemon.data_directory;
  if (!std::filesystem::is_directory(data)) {
    KVTIER_RETURN_IF_ERROR(LocateError(c, MakeDirectory("daemon.data_directory", data)));
  }
  if (!c.t2_enabled) return absl::OkStatus();
  const std::vector<std::string> dirs = c.ManagerOptions().t2->directories;
  for (size_t i = 0; i < dirs.size(); ++i) {
    if (Inside(dirs[i], data) && !std::filesystem::exists(dirs[i])) {
      KVTIER_RETURN_IF_ERROR(
          LocateError(c, MakeDirectory(fmt::format("t2.directories[{}]", i), dirs[i])));
    }
  }
  return LocateError(c, c.ManagerOptions().t2->Validate());
}

}  // namespace kvtier
