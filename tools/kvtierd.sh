#!/usr/bin/env bash
# kvtierd alone, in the foreground: builds kvtierd and the kvtier tool, then runs kvtierd with
# configs/default.toml (1 GiB of T1, 4 GiB of T2 under ./kvtier-data, metrics on
# 127.0.0.1:9464). Ctrl-C (SIGINT) or SIGTERM stops it cleanly; T2 survives for the next start.
# Extra arguments go to kvtierd, e.g. `tools/kvtierd.sh --t1.capacity_bytes 8GiB`.
# (tools/demo.sh is the end-to-end demo: kvtierd and `kvtier serve` with a model.)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset default >/dev/null
cmake --build --preset default --target kvtierd kvtier kvtier_client_c
echo "== kvtierd: socket ./kvtier-data/kvtierd.sock, metrics http://127.0.0.1:9464/metrics"
echo "== point an engine at it with the C++/C/Python client (docs/protocol.md, docs/python.md);"
echo "== watch it from another shell: build/default/tools/kvtier stat --socket kvtier-data/kvtierd.sock"
exec build/default/daemon/kvtierd --config configs/default.toml "$@"
