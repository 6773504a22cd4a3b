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
# First, no call circles between the files of the folders in circle_dirs (below; nm and tsort,
# from binutils and coreutils), from the same tree's object files.
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

# ---- no circles between the files of a folder ------------------------------------------------
# For each folder listed, the file-level call graph of its library: an edge a.c -> b.c when
# a.c.o uses (nm -u) a symbol that b.c.o defines (nm --defined-only). A circle means one of its
# files is an interface waiting to be written (a table of function pointers, a callback); tsort
# (coreutils) finds them and each is reported as its files in order, with a symbol per hop.
# Calls through function pointers are not edges: that is what breaks a circle. Every folder of
# src/ is checked; MC_LINT_SKIP_CIRCLES=1 skips it (a build tree that holds only some folders'
# objects, such as the fuzz tree, whose sources the main tree's check already covered).
circle_dirs="common wire storage transfer master client"
[ "${MC_LINT_SKIP_CIRCLES:-0}" = 1 ] && circle_dirs=""
file_edges() { # build-dir folder -> "user.c definer.c symbol" lines
  local o f
  for o in $(find "$1/src/$2/CMakeFiles" -mindepth 2 -maxdepth 2 -name '*.o' | sort); do
    f=$(basename "$o" .o)
    [ -f "$root/src/$2/$f" ] || continue # a stale object of a source since removed
    nm -g --defined-only "$o" | awk -v f="$f" 'NF == 3 { print "D", $3, f }'
    nm -u "$o" | awk -v f="$f" '{ print "U", $NF, f }'
  done | awk '$1 == "D" { def[$2] = $3; next } { sym[n] = $2; user[n++] = $3 }
    END { for (i = 0; i < n; i++) if ((sym[i] in def) && def[sym[i]] != user[i])
            print user[i], def[sym[i]], sym[i] }' | sort -u
}
circles=0
for dir in $circle_dirs; do
  if ! ls "$build/src/$dir/CMakeFiles/"*/*.o >/dev/null 2>&1; then
    echo "lint.sh: no object files under $build/src/$dir: build $build first" >&2
    exit 2
  fi
  edges=$(file_edges "$build" "$dir")
  loops=$(awk '{ print $1, $2 }' <<<"$edges" | sort -u | tsort 2>&1 >/dev/null | sed -n 's/^tsort: \([^ ]*\.c\)$/\1/p;
    /input contains a loop/s/.*/--/p' || true)
  [ -z "$loops" ] && continue
  circles=1
  # tsort lists a loop's files in order: print a.c -(sym)-> b.c -(sym)-> ... -> a.c
  awk -v dir="$dir" 'NR == FNR { if (!(($1 " " $2) in via)) via[$1 " " $2] = $3; next }
    function show(   i, s) { if (!n) return; s = "src/" dir ": circle: " f[1]
      for (i = 1; i <= n; i++) s = s " -(" via[f[i] " " f[i % n + 1]] ")-> " f[i % n + 1]
      print s; n = 0 }
    $0 == "--" { show(); next } { f[++n] = $0 } END { show() }' <(echo "$edges") <(echo "$loops") | awk '!seen[$0]++'
done
if [ "$circles" -ne 0 ]; then
  echo "lint.sh: call circles between files (see above): route one direction through an ops table or a callback" >&2
  exit 1
fi
[ -n "$circle_dirs" ] && echo "lint.sh: no call circles in: $circle_dirs"

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
