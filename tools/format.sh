#!/usr/bin/env bash
# Formats every C++ file git tracks with the repository's .clang-format (Google style, 100
# columns). `--check` changes nothing and exits 1 naming the files that differ; tools/check.sh
# runs it so unformatted code does not land.
set -euo pipefail
cd "$(dirname "$0")/.."
# A plain assignment, not a process substitution: a failing git (absent, or not a work tree) must
# stop the check instead of leaving it nothing to check.
listing=$(git ls-files '*.h' '*.cc')
mapfile -t files <<<"$listing"
if [ -z "$listing" ]; then
  echo "format: git lists no C++ files here; nothing would be checked" >&2
  exit 1
fi
if [ "${1:-}" = "--check" ]; then
  bad=()
  for f in "${files[@]}"; do
    clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if [ ${#bad[@]} -gt 0 ]; then
    echo "format: these files differ from .clang-format (run tools/format.sh):"
    printf '  %s\n' "${bad[@]}"
    exit 1
  fi
  echo "format: ${#files[@]} files clean"
else
  clang-format -i "${files[@]}"
fi
