#!/usr/bin/env bash
# scripts/lint.sh — static analysis of every C file of ours with cppcheck (Debian package
# cppcheck), as built in a configured and built tree: the compile commands of that tree
# (compile_commands.json: our sources, tests, tools and the Python extension, with their include
# paths and definitions) and its generated protobuf-c headers. Exits non-zero on any finding.
#
#   bash scripts/lint.sh [build-dir]      # default: build (run after the Release build)
#
# Generated *.pb-c.h headers refuse to compile (#error) unless PROTOBUF_C_VERSION_NUMBER is at
# least the version of protoc-c that generated them. That macro lives in <protobuf-c/protobuf-c.h>,
# a system header cppcheck does not read, so without it cppcheck silently skipped every file that
# includes a generated header. The installed header's own values are passed as definitions.
#
# Checks: warning, portability, performance (style is left to review and clang-format). A finding
# that is wrong may be suppressed at its line with `// cppcheck-suppress <id>` and a comment
# saying why.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
db="$build/compile_commands.json"
if [ ! -f "$db" ]; then
  echo "lint.sh: $db missing: configure and build $build first" >&2
  exit 2
fi
if ! ls "$build"/src/wire/*.pb-c.h >/dev/null 2>&1; then
  echo "lint.sh: no generated protobuf-c headers under $build/src/wire: build $build first" >&2
  exit 2
fi

pbc_inc=$(pkg-config --variable=includedir libprotobuf-c 2>/dev/null || echo /usr/include)
pbc_h="$pbc_inc/protobuf-c/protobuf-c.h"
macro() { awk -v m="$1" '$1 == "#define" && $2 == m { print $3; exit }' "$pbc_h"; }
version=$(macro PROTOBUF_C_VERSION_NUMBER)
min_compiler=$(macro PROTOBUF_C_MIN_COMPILER_VERSION)
if [ -z "$version" ] || [ -z "$min_compiler" ]; then
  echo "lint.sh: cannot read the protobuf-c version macros from $pbc_h" >&2
  exit 2
fi

jobs=$(nproc 2>/dev/null || echo 2)
# -i "$build/": the generated *.pb-c.c sources are protoc-c's, not ours (their headers are still
# read by every file that includes them). System headers are not analysed.
cppcheck --project="$db" -i "$build/" \
  -DPROTOBUF_C_VERSION_NUMBER="$version" -DPROTOBUF_C_MIN_COMPILER_VERSION="$min_compiler" \
  --library=python \
  --enable=warning,portability,performance --inline-suppr \
  --suppress='*:/usr/*' \
  --error-exitcode=1 -j"$jobs" -q \
  --template='{file}:{line}: {severity} ({id}): {message}'
echo "lint.sh: cppcheck $(cppcheck --version | awk '{print $2}'): no findings"
