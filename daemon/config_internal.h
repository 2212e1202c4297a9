// Internal to daemon/config*.cc: steps of LoadConfig that live in their own files.
#pragma once

#include "common/status.h"
#include "daemon/config.h"

namespace kvtier::config {

// Fills daemon.allowed_uids/allowed_gids from allowed_users/allowed_groups: decimal text is an id,
// anything else a name looked up with getpwnam/getgrnam. InvalidArgument naming the entry, e.g.
// "daemon.allowed_users[1]: no user named 'bob'".
absl::Status ResolveIds(DaemonConfig* config);

}  // namespace kvtier::config
