#!/usr/bin/env bash
# scripts/test.sh — the README's test command: installs dependencies, checks the formatting of
# every C file, lints them with cppcheck (scripts/lint.sh), builds a Release tree and an
# ASan+UBSan tree, and runs every test (ctest: cmocka unit tests and multi-process integration
# tests) in both, plus an install check of the guide's cmake commands, then builds the libFuzzer
# targets with clang (build-fuzz/, fuzz/) and runs each for a few seconds (docs/fuzzing.md).
#
#   bash scripts/test.sh            # everything
#   MC_TEST_SKIP_ASAN=1 bash scripts/test.sh   # Release tree only (quicker local loop; no fuzzing)
#   MC_TEST_SKIP_FUZZ=1 bash scripts/test.sh   # everything but the fuzz targets
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=$(nproc 2>/dev/null || echo 2)
# ctest slots: most integration tests wait (on TTLs, stopped peers, transfer timeouts) far more
# than they compute, so ctest runs two per core, the costliest first (COST in tests/); the fuzz
# targets compute all the time and get one per core. MC_TEST_JOBS=N overrides the two per core.
# Measured on 2 cores (Release): 2 per core 375 s, 4 per core 233 s with the CPUs 87 % busy; at 3
# and 4 per core, the transfer-timeout bounds (rdma over UCX's tcp) and a 3-member etcd's 1 s
# answers were missed once each.
test_jobs=${MC_TEST_JOBS:-$((jobs * 2))}

step() { printf '\n==== %s ====\n' "$*"; }

# After a failed ctest run: the lines of each failed test's output that say why (cmocka's
# failures and errors, sanitizer reports, the support code's own diagnostics), so that the end of
# this script's output names the cause even where only its head and tail are kept.
failure_digest() {
  local log="$1/Testing/Temporary/LastTest.log"
  [ -f "$log" ] || return 0
  printf '\n==== why the failed tests failed (from %s) ====\n' "$log"
  awk '
    /^[0-9]+\/[0-9]+ Testing: / { name = $3; n = 0; m = 0; next }
    /\[  ERROR   \]|\[  FAILED  \]|: error: |ERROR: (Address|Leak)Sanitizer|runtime error:|^(FAIL|ERROR): |Error: / {
      if (n < 40) strong[n++] = $0
      next
    }
    /^etcd_cluster:|^cluster:|^test_[a-z_]*:|did not answer|SUMMARY: / { if (m < 20) weak[m++] = $0 }
    /^Test Failed/ && name != "" { failed[name] = 1 }
    /^"[^"]*" end time:/ {
      if (name in failed) {
        print "-- " name
        for (i = 0; i < n; i++) print "   " strong[i]
        for (i = 0; i < m; i++) print "   " weak[i]
      }
      name = ""
    }
  ' "$log"
}

run_ctest() { # run_ctest BUILD_DIR ARGS...: ctest, and the digest when it fails
  local dir="$1"
  shift
  ctest --test-dir "$dir" "$@" || { failure_digest "$dir"; return 1; }
}

step "dependencies"
if [ "$(id -u)" -eq 0 ]; then bash dependencies.sh; else sudo -E bash dependencies.sh; fi

step "format (clang-format --dry-run --Werror, the checked-in .clang-format)"
# Every C file of ours (generated protobuf-c files live in the build trees, not here).
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files '*.c' '*.h'
else
  find include src tests tools python bench -name '*.[ch]' 2>/dev/null
fi | grep -v '\.pb-c\.' | xargs clang-format --dry-run --Werror

step "Release configure (build/)"
# The DAOS adapter is built against the libdfs test double (tests/support/dfs_double): CI has no
# DAOS. On a host with DAOS, configure with -DUSE_DAOS=ON alone to build against the real library.
daos=(-DUSE_DAOS=ON -DDAOS_TEST_DOUBLE=ON)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DWITH_STORE=ON -DWITH_PYTHON=ON -DMC_SANITIZE=OFF \
  "${daos[@]}" >/dev/null

step "lint (call circles per folder, cppcheck over build/compile_commands.json; fails on any finding)"
# cppcheck needs the generated protobuf-c headers (mc_wire); the circle check the object files
# of every folder's libraries (built here rather than in the next step, not built twice).
cmake --build build -j"$jobs" --target mc_common mc_wire mc_storage mc_transfer mc_master_core \
  mc_master_server mc_store >/dev/null
bash scripts/lint.sh build

step "Release build (build/)"
cmake --build build -j"$jobs"

step "Release tests"
run_ctest build --output-on-failure -j"$test_jobs" --timeout 600

step "install check (the guide's cmake --install, into a scratch prefix)"
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install build --prefix "$prefix" >/dev/null
for prog in mooncake_http_metadata_server transfer_engine_bench; do
  "$prefix/bin/$prog" --help >/dev/null || { echo "installed $prog --help failed" >&2; exit 1; }
done
test -f "$prefix/include/mooncake/transfer_engine.h"
# A C program built against the installed headers and library only, as a user would.
cat > "$prefix/hello.c" <<'C'
#include <mooncake/errors.h>
#include <mooncake/store.h>
#include <mooncake/version.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
    mc_store_t *s = NULL;
    mc_store_config_t cfg = {0};
    int rc = mc_store_setup(&cfg, &s); /* no local_hostname: refused with INVALID_PARAMS */
    printf("mooncake %s: setup without a hostname -> %s\n", mc_version(), mc_error_name(rc));
    return rc == MC_ERR_INVALID_PARAMS && s == NULL && strcmp(mc_version(), "") != 0 ? 0 : 1;
}
C
cc -o "$prefix/hello" "$prefix/hello.c" -I"$prefix/include" -L"$prefix/lib" -lmooncake_store \
  -Wl,-rpath,"$prefix/lib"
"$prefix/hello"
echo "installed tree OK: $(cd "$prefix" && find bin include lib -type f | wc -l) files"

if [ "${MC_TEST_SKIP_ASAN:-0}" != 1 ]; then
  step "ASan+UBSan build (build-asan/)"
  # The Python extension too: its tests run with the ASan runtime preloaded (tests/CMakeLists.txt).
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DMC_SANITIZE=ON -DWITH_PYTHON=ON \
    "${daos[@]}" >/dev/null
  cmake --build build-asan -j"$jobs"
  step "ASan+UBSan tests"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_ctest build-asan --output-on-failure -j"$test_jobs" --timeout 900
fi

if [ "${MC_TEST_SKIP_ASAN:-0}" != 1 ] && [ "${MC_TEST_SKIP_FUZZ:-0}" != 1 ]; then
  step "fuzz targets (build-fuzz/: clang, libFuzzer + ASan/UBSan; docs/fuzzing.md)"
  # Only the fuzz targets and the libraries they drive are built; each target's ctest runs it
  # for MC_FUZZ_SECONDS (5) over a fresh copy of fuzz/corpus/<name> and fuzz/regression/<name>
  # and fails on any crash, leak, UB report, timeout or out-of-memory (the input is kept under
  # build-fuzz/fuzz/artifacts/).
  cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DMC_FUZZ=ON \
    -DMC_BUILD_TESTS=OFF -DWITH_PYTHON=OFF -DUSE_RDMA=OFF >/dev/null
  cmake --build build-fuzz -j"$jobs" --target fuzz
  # the fuzz targets' own sources, as the step above lints ours (the tree holds only the
  # libraries the targets link: its folders' call graphs were checked in build/)
  MC_LINT_SKIP_CIRCLES=1 bash scripts/lint.sh build-fuzz
  run_ctest build-fuzz --output-on-failure -j"$jobs" --timeout 300
fi
step "all tests passed"
