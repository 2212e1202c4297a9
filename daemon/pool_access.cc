#include "daemon/pool_access.h"

#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>

#include "common/log.h"

namespace kvtier {

std::vector<gid_t> GroupsOf(const ucred& cred) {
  std::vector<gid_t> groups = {cred.gid};
  std::vector<char> buffer(16384);
  passwd pw;
  passwd* found = nullptr;
  if (::getpwuid_r(cred.uid, &pw, buffer.data(), buffer.size(), &found) != 0 || found == nullptr) {
    return groups;
  }
  std::vector<gid_t> more(64);
  int n = static_cast<int>(more.size());  // getgrouplist's capacity in, the group count out
  if (::getgrouplist(pw.pw_name, cred.gid, more.data(), &n) < 0) {
    if (n <= 0) return groups;  // glibc sets n to the groups it found, at least cred.gid.
    more.resize(static_cast<size_t>(n));
    if (::getgrouplist(pw.pw_name, cred.gid, more.data(), &n) < 0) return groups;
  }
  groups.insert(groups.end(), more.begin(), more.begin() + n);
  return groups;
}

bool MayUse(const PoolAccess& pool, const ucred& cred, const std::vector<gid_t>& groups) {
  if (cred.uid == 0 || cred.uid == ::geteuid()) return true;
  if (std::find(pool.uids.begin(), pool.uids.end(), cred.uid) != pool.uids.end()) return true;
  return std::any_of(groups.begin(), groups.end(), [&](gid_t g) {
    return std::find(pool.gids.begin(), pool.gids.end(), g) != pool.gids.end();
  });
}

absl::StatusOr<size_t> ChoosePool(const std::vector<PoolAccess>& pools,
                                  const std::string& default_pool, const ucred& cred,
                                  const std::vector<gid_t>& groups, const std::string& asked) {
  std::vector<size_t> usable;
  std::vector<std::string> names;
  for (size_t i = 0; i < pools.size(); ++i) {
    if (!MayUse(pools[i], cred, groups)) continue;
    usable.push_back(i);
    names.push_back(pools[i].name);
  }
  if (usable.empty()) {
    return absl::PermissionDeniedError(fmt::format(
        "uid {} gid {} (pid {}) may use no memory pool of this daemon (each pool's users and "
        "groups, and daemon.allowed_users / daemon.allowed_groups, say who may)",
        cred.uid, cred.gid, cred.pid));
  }
  const std::string& wanted =
      !asked.empty() ? asked : (usable.size() == 1 ? pools[usable[0]].name : default_pool);
  for (size_t i : usable) {
    if (pools[i].name == wanted) return i;
  }
  if (asked.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("uid {} may use the memory pools {}: name one in Hello (the client's pool "
                    "option)",
                    cred.uid, fmt::join(names, ", ")));
  }
  return absl::PermissionDeniedError(
      fmt::format("memory pool '{}': uid {} may not use it, or there is no such pool; it may use "
                  "{}",
                  log::EscapeForLog(asked), cred.uid, fmt::join(names, ", ")));
}

}  // namespace kvtier
