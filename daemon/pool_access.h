// Which memory pool a client may use (DESIGN.md "Trust and isolation"; docs/protocol.md "Trust and
// isolation"). The server asks this twice: at accept, whether the peer (SO_PEERCRED) may use any
// pool at all, and at Hello, which pool it gets for the one its Hello names.
//
// A peer may use a pool when its uid is 0 or the daemon's own, or is in the pool's uids, or one of
// its groups (primary, or supplementary from the user database) is in the pool's gids. Root and the
// daemon's user may therefore use every pool; they name the one they want, as does anyone allowed
// in several (or get the daemon's default pool).
//
// Thread-safety: pure functions, except that GroupsOf reads the user database.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "common/status.h"

namespace kvtier {

struct PoolAccess {
  std::string name;
  std::vector<uid_t> uids;
  std::vector<gid_t> gids;
};

// The peer's groups: its primary gid and, when its uid has a user entry, its supplementary groups
// (SO_PEERCRED carries only the primary one; `usermod -aG kvtier alice` adds a supplementary one).
std::vector<gid_t> GroupsOf(const ucred& cred);

// Whether the peer `cred`, in `groups` (GroupsOf), may use `pool`.
bool MayUse(const PoolAccess& pool, const ucred& cred, const std::vector<gid_t>& groups);

// The index in `pools` of the pool a peer gets whose Hello asks for `asked`:
//  * `asked` named: that pool when the peer may use it; otherwise PermissionDenied, with the same
//    words whether the pool exists or not (a client learns no other tenant's pool name), naming
//    the pools it may use.
//  * `asked` empty: the only pool the peer may use; allowed in several, the one named
//    `default_pool` when it is one of them, else InvalidArgument asking it to name one of them.
// PermissionDenied when the peer may use no pool. Messages name the uid and the pools.
absl::StatusOr<size_t> ChoosePool(const std::vector<PoolAccess>& pools,
                                  const std::string& default_pool, const ucred& cred,
                                  const std::vector<gid_t>& groups, const std::string& asked);

}  // namespace kvtier
