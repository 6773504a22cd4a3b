#!/usr/bin/env bash
# dependencies.sh — install every Debian/Ubuntu package mooncake-c needs to build, test and benchmark.
#
# Idempotent: packages already present are not reinstalled, and the script prints nothing but a
# one-line summary when everything is there. Run as root (or with sudo), as the guide does:
#     sudo bash dependencies.sh
# RHEL/Rocky 9 hosts: see README.md ("Hosts") for the equivalent dnf package names.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config git
  libuv1-dev libmicrohttpd-dev libcurl4-openssl-dev libjansson-dev libyaml-dev
  libssl-dev
  libprotobuf-c-dev protobuf-c-compiler libxxhash-dev libisal-dev liburing-dev libpcre2-dev
  libucx-dev ucx-utils
  libcmocka-dev
  python3-dev python3-pytest python3-numpy python3-torch
  mpich libmpich-dev openmpi-bin libopenmpi-dev
  fio procps curl iproute2 util-linux iperf3  # iperf3: bench/crosshost_bench.py's limit
  strace  # test_offload_crash's directory-fsync tests trace the holder's syscalls
  clang-format cppcheck
  clang libclang-rt-dev  # the fuzz targets (fuzz/, docs/fuzzing.md): clang and its libFuzzer runtime
  uuid-dev  # <uuid/uuid.h>: the libdfs test double's daos_types.h includes it, as DAOS's does
  etcd-server etcd-client  # master HA and etcd:// metadata (docs/ha.md); tests start their own
  python3-matplotlib  # store_kv_bench.py --plot
)

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then exec sudo -E bash "$0" "$@"; fi
  echo "dependencies.sh: must run as root (no sudo found)" >&2
  exit 1
fi

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "dependencies.sh: this script installs Debian/Ubuntu packages; see README.md for RHEL/Rocky 9" >&2
  exit 1
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "dependencies.sh: all ${#PKGS[@]} packages present"
  exit 0
fi

# etcd-server's maintainer scripts enable and start an etcd daemon on 127.0.0.1:2379 (systemd unit
# and /etc/init.d/etcd). Nothing of ours asks for one: the tests start their own members on free
# ports, and deployments run their etcd cluster as they choose. So while the packages install, a
# policy-rc.d (exit 101: "action forbidden", honoured by invoke-rc.d and deb-systemd-invoke) keeps
# the daemon from starting, and afterwards the service is disabled so that no boot starts it.
installs_etcd_server=0
for p in "${missing[@]}"; do
  if [ "$p" = etcd-server ]; then installs_etcd_server=1; fi
done
our_policy=0
if [ "$installs_etcd_server" = 1 ] && [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\n# dependencies.sh (mooncake-c): no daemon starts while packages install\nexit 101\n' \
    >/usr/sbin/policy-rc.d
  chmod 755 /usr/sbin/policy-rc.d
  our_policy=1
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi

echo "dependencies.sh: installing ${#missing[@]} package(s): ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

if [ "$installs_etcd_server" = 1 ]; then
  if [ -d /run/systemd/system ]; then
    systemctl disable --now etcd.service >/dev/null 2>&1 || true
  elif command -v deb-systemd-helper >/dev/null 2>&1; then
    deb-systemd-helper disable etcd.service >/dev/null 2>&1 || true
  fi
  if [ -x /etc/init.d/etcd ]; then
    /etc/init.d/etcd stop >/dev/null 2>&1 || true
    update-rc.d etcd disable >/dev/null 2>&1 || true
  fi
  echo "dependencies.sh: etcd-server installed with its daemon stopped and disabled"
fi
if [ "$our_policy" = 1 ]; then
  rm -f /usr/sbin/policy-rc.d
  trap - EXIT
fi
echo "dependencies.sh: done"
