#!/usr/bin/env bash
# The test suite: installs what is missing, builds everything, and runs every test under ctest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${EINSTAGE_BUILD_DIR:-$root/build}"
"$root/tools/dev/build.sh"
cd "$build"
exec ctest --output-on-failure "$@"
