#!/usr/bin/env bash
# The test suite: installs what is missing, builds everything, and runs every test under ctest. Under CI (CI=true)
# it then runs tools/dev/sanitize.sh: every suite but Python under ASan + UBSan with leak detection and a short
# smoke run of each fuzz target (tests/README.md); EINSTAGE_SANITIZE_STEP=1 asks for that step outside CI too.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${EINSTAGE_BUILD_DIR:-$root/build}"
"$root/tools/dev/build.sh"
(cd "$build" && ctest --output-on-failure "$@")
if [[ "${CI:-}" == true || "${EINSTAGE_SANITIZE_STEP:-}" == 1 ]]; then
  "$root/tools/dev/sanitize.sh"
fi
