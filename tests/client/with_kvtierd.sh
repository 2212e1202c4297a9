#!/bin/sh
# with_kvtierd.sh KVTIERD CONFIG COMMAND [ARGS...]
# Starts KVTIERD in a temporary data directory (small tiers, no metrics endpoint), waits until it
# logs that it is ready, runs COMMAND ARGS SOCKET_PATH, then stops the daemon with SIGTERM.
# Succeeds only if the command and the daemon both exit 0; otherwise prints the daemon's log.
set -u
daemon=$1
config=$2
shift 2
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvtier-c-XXXXXX")
sock=$dir/kvtierd.sock
log=$dir/kvtierd.log
"$daemon" --config "$config" --daemon.data_directory "$dir" --daemon.socket_path "$sock" \
  --t1.capacity_bytes 64MiB --t1.slot_bytes 64KiB --t1.touch_threads 1 \
  --t2.capacity_bytes 256MiB --metrics.enabled false >"$log" 2>&1 &
pid=$!
# However this script ends (CTest's timeout sends SIGTERM), the daemon and its directory go too.
trap 'kill -KILL "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
trap 'exit 1' INT TERM HUP

# The bound only keeps a hung start from hanging CTest; the daemon dying is what we look for.
tries=0
until grep -qs "kvtierd ready" "$log"; do
  if ! kill -0 "$pid" 2>/dev/null || [ "$tries" -ge 1200 ]; then
    echo "with_kvtierd.sh: kvtierd did not become ready; its log:" >&2
    cat "$log" >&2
    exit 1
  fi
  tries=$((tries + 1))
  sleep 0.1
done

"$@" "$sock"
rc=$?
kill -TERM "$pid"
wait "$pid"
daemon_rc=$?
if [ "$rc" -ne 0 ] || [ "$daemon_rc" -ne 0 ]; then
  echo "with_kvtierd.sh: command exited $rc, kvtierd exited $daemon_rc; kvtierd's log:" >&2
  cat "$log" >&2
fi
[ "$rc" -eq 0 ] && [ "$daemon_rc" -eq 0 ]
