#!/bin/sh
# Fails when generated files are tracked: libFuzzer's corpus entries (named by
# their SHA-1) or crash/leak/timeout artifacts. Run by CTest as repo_hygiene.
cd "$(dirname "$0")/.." || exit 2
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "not a git checkout: nothing to check"
  exit 0
fi
bad=$(git ls-files | grep -E '(^|/)([0-9a-f]{40}|(crash|leak|timeout|oom)-[^/]*)$')
if [ -n "$bad" ]; then
  echo "generated files are tracked (remove them; new fuzz inputs belong in"
  echo "the build tree):"
  echo "$bad" | head -20
  exit 1
fi
echo "no generated files tracked"
