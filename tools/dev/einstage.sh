#!/usr/bin/env bash
# The main job: installs what is missing, builds the `einstage` command line, and runs it with the given arguments
# (no arguments: a short demonstration of the whole pipeline).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
"$root/tools/dev/build.sh" einstage_cli
exec "${EINSTAGE_BUILD_DIR:-$root/build}/tools/einstage" "$@"
