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

// Numeric text as an id, else `lookup(name)`; each entry that resolves to nothing is a line of the
// error, naming `key[i]`.
template <typename Id, typename Lookup>
absl::Status Resolve(const std::string& key, const std::vector<std::string>& names,
                     const char* what, Lookup lookup, std::vector<Id>* ids) {
  ids->clear();
  std::vector<std::string> problems;
  for (size_t i = 0; i < names.size(); ++i) {
    if (IsDecimal(names[i])) {
      const unsigned long id = std::stoul(names[i]);
      if (id > UINT32_MAX - 1) {
        problems.push_back(fmt::format("{}[{}]: {} is not an id", key, i, id));
        continue;
      }
      ids->push_back(static_cast<Id>(id));
      continue;
    }
    const std::optional<Id> id = lookup(names[i]);
    if (!id) {
      problems.push_back(
          fmt::format("{}[{}]: no {} named '{}' on this system", key, i, what, names[i]));
      continue;
    }
    ids->push_back(*id);
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format("{}", fmt::join(problems, "\n")));
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
  const absl::Status users = Resolve("daemon.allowed_users", c->daemon.allowed_users, "user",
                                     LookupUser, &c->daemon.allowed_uids);
  const absl::Status groups = Resolve("daemon.allowed_groups", c->daemon.allowed_groups, "group",
                                      LookupGroup, &c->daemon.allowed_gids);
  std::vector<std::string> problems;
  for (const absl::Status& s : {users, groups}) {
    if (!s.ok()) problems.emplace_back(s.message());
  }
  for (size_t i = 0; i < c->pools.size(); ++i) {
    PoolSpec& pool = c->pools[i];
    for (const absl::Status& s :
         {Resolve(fmt::format("pools[{}].users", i), pool.users, "user", LookupUser, &pool.uids),
          Resolve(fmt::format("pools[{}].groups", i), pool.groups, "group", LookupGroup,
                  &pool.gids)}) {
      if (!s.ok()) problems.emplace_back(s.message());
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format("{}", fmt::join(problems, "\n")));
}

absl::Status CheckDirectories(const DaemonConfig& c) {
  if (!c.t2_enabled) return absl::OkStatus();
  const std::string& data = c.daemon.data_directory;
  const NvmeTierOptions t2 = *c.ManagerOptions().t2;
  std::vector<std::string> problems;
  auto check = [&](const std::string& setting, const std::string& dir) {
    if (Inside(dir, data) && !std::filesystem::exists(dir)) return;  // made at start
    if (absl::Status s = CheckT2Directory(setting, dir); !s.ok())
      problems.emplace_back(s.message());
  };
  for (size_t i = 0; i < t2.directories.size(); ++i) {
    check(fmt::format("t2.directories[{}]", i), t2.directories[i]);
  }
  if (!t2.metadata_directory.empty()) {
    check("t2.metadata_directory (parent)", MetadataParent(t2.metadata_directory));
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format("{}", fmt::join(problems, "\n")));
}

}  // namespace config

absl::Status PrepareDirectories(const DaemonConfig& c) {
  const std::string& data = c.daemon.data_directory;
  config::Problems problems("");
  if (!std::filesystem::is_directory(data)) {
    // Without it nothing inside it can be made either: that one problem says it all.
    KVTIER_RETURN_IF_ERROR(LocateError(c, MakeDirectory("daemon.data_directory", data)));
  }
  if (!c.t2_enabled) return problems.Result();
  const std::vector<std::string> dirs = c.ManagerOptions().t2->directories;
  for (size_t i = 0; i < dirs.size(); ++i) {
    if (Inside(dirs[i], data) && !std::filesystem::exists(dirs[i])) {
      problems.AddLocated(c, MakeDirectory(fmt::format("t2.directories[{}]", i), dirs[i]));
    }
  }
  // Each pool of [[pools]] has its own directory inside each T2 directory (config.h PoolPlans).
  for (const PoolPlan& plan : c.PoolPlans()) {
    for (const std::string& dir : plan.tiers.t2->directories) {
      if (plan.pool_scoped_keys && !std::filesystem::exists(dir)) {
        problems.AddLocated(c, MakeDirectory(fmt::format("pools ('{}')", plan.name), dir));
      }
    }
    problems.AddLocated(c, plan.tiers.t2->Validate());
  }
  return problems.Result();
}

}  // namespace kvtier
