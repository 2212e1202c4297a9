// Internal to daemon/config*.cc: steps of LoadConfig that live in their own files, and the list
// every step adds its problems to.
#pragma once

#include <toml++/toml.h>

#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/config.h"

namespace kvtier::config {

// Fills daemon.allowed_uids/allowed_gids from allowed_users/allowed_groups: decimal text is an id,
// anything else a name looked up with getpwnam/getgrnam. InvalidArgument naming every entry that
// does not resolve, one per line, e.g. "daemon.allowed_users[1]: no user named 'bob'".
absl::Status ResolveIds(DaemonConfig* config);

// [[pools]] (config_pools.cc): the entries of a `pools` value, e.g. "pools[1].name: ..." for a
// bad one; the value printed back as an inline array of tables; the keys an entry may have.
absl::StatusOr<std::vector<PoolSpec>> ReadPools(const toml::node& value);
std::string FormatPools(const std::vector<PoolSpec>& pools);
std::string PoolKeyNames();
// The checks across [[pools]] entries and against the tiers: names, who may use each pool,
// capacities, watermarks. Every problem, one per line, each starting with its key ("pools[1].name:
// ..." or "pools: ..."). OK without [[pools]].
absl::Status ValidatePools(const DaemonConfig& config);

// The checks of PrepareDirectories that need nothing created: every T2 directory (and the parent
// of t2.metadata_directory) that exists or lies outside daemon.data_directory must be a writable
// directory. One problem a line, as ResolveIds.
absl::Status CheckDirectories(const DaemonConfig& config);

// Every problem of one load, reported together (docs/configuration.md: "every problem at once").
// A problem is one line "<where>: <key>: <what>", where <where> is "path:line" or "--flag" (none
// for a key left at its default). Result() orders them: the file's in line order, then the
// command line's in order, then those of defaults.
class Problems {
 public:
  explicit Problems(std::string file) : file_(std::move(file)) {}

  // A problem of `key` found while reading its value at `where`. Later checks of the same key are
  // dropped (AddLocated): they would judge the default that stayed in place of the bad value.
  void AddRead(const std::string& where, const std::string& key, std::string text);
  // Each line of a failed `status` (one problem a line, each starting with the key it is about),
  // placed where its key was set (config.origins); a line about a key that is at its default is
  // placed where another key it names was set, if any.
  void AddLocated(const DaemonConfig& config, const absl::Status& status);
  bool empty() const { return problems_.empty(); }
  // OK, or the problems one per line, with the status code of the first (InvalidArgument for
  // value problems; NotFound or PermissionDenied for directories).
  absl::Status Result() const;

 private:
  struct Problem {
    int rank;     // 0: the file, 1: the command line, 2: no place
    size_t line;  // in the file (rank 0) or in order of arrival
    std::string text;
    absl::StatusCode code;
  };
  void Add(const std::string& where, std::string text, absl::StatusCode code);

  const std::string file_;
  std::vector<Problem> problems_;
  std::set<std::string> read_failed_;  // keys whose value could not be read
};

}  // namespace kvtier::config
