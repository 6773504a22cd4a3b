#!/usr/bin/env bash
# daos_adapter_bench.sh — the guide's IOR-like benchmark of Mooncake's DAOS adapter on MASS:
# launches daos_adapter_bench (<prefix>/bin) under MPI on one or more hosts. Every variable below
# is the guide's; docs/daos_adapter_bench.md has the details and the JSON schema.
#
#   NPROCS=4 SUMMARY=/tmp/daos-adapter.json DFS_PATH=/mnt/mooncake-vol \
#     /opt/Mooncake/scripts/daos_adapter_bench.sh
#
# Mandatory: NPROCS (MPI ranks per host), SUMMARY (JSON written by rank 0; its parent directory
# must exist on the rank-0 host, the first of HOSTS).
# Optional (default):
#   HOSTS (localhost)  DFS_PATH (/mnt/mooncake-vol)  DIR (adapterbench)  NR (512)  SIZE (16m)
#   XFER (0 = unsplit writes)  READ_XFER (8m)  CHUNK (8m)  THREADS (8)  READ_ROUNDS (1)
#   WR_ONLY (0)  RD_ONLY (0)  CLEANUP (1, or 0 with WR_ONLY=1)
#   RSH_USER (invoking user, or root when already root)
#   DAOS_AGENT_DRPC_DIR (/run/boostx-agent, or an active /tmp/boostx-agent-* directory)
#   MPIRUN (mpirun.mpich when available, otherwise mpirun)  EXTRA_ARGS (unset)  DRYRUN (0)
# Not in the guide: DAOS_ADAPTER_BENCH_BIN (the binary; default <script dir>/../bin);
#   PROGRESS (10): seconds between "[progress]" lines inside a long round (0 = off); they name
#     the ranks with failures, stopped early, or with no operation returned for a while;
#   OP_TIMEOUT (0): seconds an object write, read or remove may take before it fails (daos;
#     decimals allowed; 0 = the adapter's default, 30 s): a dead engine ends the run instead of
#     hanging it;
#   PLOT_PYTHON (unset): the interpreter for --plot (unset: python3, else /usr/bin/python3).
# Besides the JSON, rank 0 writes the same table as CSV next to it (SUMMARY with .json replaced
# by .csv, or .csv appended).
#
# Exit status: 0 every operation succeeded; 1 some failed; 2 a configuration error (of this
# script or the binary); 3 the storage stopped answering (operations past OP_TIMEOUT): the
# round stopped, later rounds and the cleanup were not run. SUMMARY is written in cases 0, 1, 3.
#
# The one argument: --plot FILE.png draws the run's throughput per round and rank and its latency
# percentiles from SUMMARY with bench/plot_daos_bench.py (needs python3-matplotlib, checked before
# the run). The plot can also be drawn later: bench/plot_daos_bench.py SUMMARY... -o FILE.png.
#
# EXTRA_ARGS is passed verbatim to the binary: --fs-type=daos|posix (default daos when the
# binary was built with -DUSE_DAOS=ON, else posix), --align=N, --iovcnt=N, --oclass=S1, ...
# (daos_adapter_bench --help lists every flag).
#
# The script validates everything first (a clear message and exit 2 on any error), re-executes
# itself with sudo -E when the current user cannot use the DAOS agent socket, DFS_PATH or
# SUMMARY's directory, launches with the launcher of the MPI the binary was built with (MPICH
# preferred; an MPIRUN of the other family is refused: an Open MPI binary under MPICH's launcher
# runs every rank as rank 0), adds --allow-run-as-root (as root) and --oversubscribe for Open MPI,
# and before a multi-host run checks ssh access, the binary, DFS_PATH and the full MPI launch
# path (a one-rank-per-host --mpi_check job) on every host. DRYRUN=1 prints those checks and the
# generated command without running anything remote (nor the benchmark).
set -euo pipefail

prog=daos_adapter_bench.sh
die() {
  echo "$prog: error: $*" >&2
  exit 2
}
note() { echo "$prog: $*" >&2; }

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
orig_args=("$@")
PLOT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --plot) [ $# -ge 2 ] && [ -n "$2" ] || die "--plot needs a file name (--plot FILE.png)"
      PLOT=$2; shift 2 ;;
    --plot=*) PLOT=${1#--plot=}; [ -n "$PLOT" ] || die "--plot needs a file name (--plot FILE.png)"
      shift ;;
    *) die "unexpected argument $1: no arguments expected besides --plot FILE.png (configure with environment variables; --help)" ;;
  esac
done

# ---- mandatory variables ---------------------------------------------------------------------
[ -n "${NPROCS:-}" ] || die "NPROCS is mandatory: the number of MPI ranks per host (e.g. NPROCS=4)"
[[ $NPROCS =~ ^[1-9][0-9]*$ ]] || die "NPROCS=$NPROCS is not a positive integer"
[ -n "${SUMMARY:-}" ] ||
  die "SUMMARY is mandatory: the JSON result path written by rank 0 (e.g. SUMMARY=/tmp/daos-adapter.json)"

# ---- defaults (the guide's table) ------------------------------------------------------------
HOSTS=${HOSTS:-localhost}
DFS_PATH=${DFS_PATH:-/mnt/mooncake-vol}
DIR=${DIR:-adapterbench}
NR=${NR:-512}
SIZE=${SIZE:-16m}
XFER=${XFER:-0}
READ_XFER=${READ_XFER:-8m}
CHUNK=${CHUNK:-8m}
THREADS=${THREADS:-8}
READ_ROUNDS=${READ_ROUNDS:-1}
WR_ONLY=${WR_ONLY:-0}
RD_ONLY=${RD_ONLY:-0}
DRYRUN=${DRYRUN:-0}
PROGRESS=${PROGRESS:-10}
OP_TIMEOUT=${OP_TIMEOUT:-0}
EXTRA_ARGS=${EXTRA_ARGS:-}
if [ -z "${CLEANUP:-}" ]; then
  if [ "$WR_ONLY" = 1 ]; then CLEANUP=0; else CLEANUP=1; fi
fi
# Invoking user, or root when already root (our own sudo re-exec passes RSH_USER along).
[ -n "${RSH_USER:-}" ] || RSH_USER=$(id -un)

# ---- validation ------------------------------------------------------------------------------
bool01() { [[ ${!1} =~ ^[01]$ ]] || die "$1=${!1} must be 0 or 1"; }
posint() { [[ ${!1} =~ ^[1-9][0-9]*$ ]] || die "$1=${!1} must be a positive integer"; }
# size_bytes VAR -> echoes bytes; accepts digits with an optional k, m or g (any case).
size_bytes() {
  local v=${!1}
  [[ $v =~ ^([0-9]+)([kKmMgG]?)$ ]] ||
    die "$1=$v is not a size: use bytes or a k, m or g suffix (e.g. 16m, 1g, 4096)"
  local n=$((10#${BASH_REMATCH[1]}))
  case ${BASH_REMATCH[2]} in
    k | K) n=$((n << 10)) ;;
    m | M) n=$((n << 20)) ;;
    g | G) n=$((n << 30)) ;;
  esac
  echo "$n"
}

for v in WR_ONLY RD_ONLY CLEANUP DRYRUN; do bool01 "$v"; done
posint NR
posint THREADS
[[ $READ_ROUNDS =~ ^[0-9]+$ ]] || die "READ_ROUNDS=$READ_ROUNDS must be a non-negative integer"
[[ $PROGRESS =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
  die "PROGRESS=$PROGRESS must be a number of seconds (0 = no progress lines)"
[[ $OP_TIMEOUT =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
  die "OP_TIMEOUT=$OP_TIMEOUT must be a number of seconds (0 = the adapter's default, 30 s)"
[ "$WR_ONLY" = 1 ] && [ "$RD_ONLY" = 1 ] &&
  die "WR_ONLY=1 and RD_ONLY=1 exclude each other (write-only, then a separate read-only run)"
[ "$RD_ONLY" = 1 ] && [ "$READ_ROUNDS" -eq 0 ] && die "RD_ONLY=1 needs READ_ROUNDS >= 1"
size_bytes_v=$(size_bytes SIZE) || exit 2
[ "$size_bytes_v" -gt 0 ] || die "SIZE=$SIZE must be larger than 0"
size_bytes XFER >/dev/null || exit 2
size_bytes READ_XFER >/dev/null || exit 2
size_bytes CHUNK >/dev/null || exit 2
[[ $DFS_PATH == /* ]] || die "DFS_PATH=$DFS_PATH must be an absolute path"
[ -n "$DIR" ] && [[ $DIR != /* ]] && [[ $DIR != *..* ]] ||
  die "DIR=$DIR must be a relative subdirectory name under DFS_PATH (no leading /, no ..)"
[[ $RSH_USER =~ ^[A-Za-z0-9._][A-Za-z0-9._-]*$ ]] || die "RSH_USER=$RSH_USER is not a user name"

IFS=, read -r -a host_list <<<"$HOSTS"
[ ${#host_list[@]} -gt 0 ] || die "HOSTS is empty"
declare -A seen_host=()
for h in "${host_list[@]}"; do
  [ -n "$h" ] || die "HOSTS=$HOSTS has an empty entry (comma-separated host names, no spaces)"
  [[ $h =~ ^[A-Za-z0-9._:-]+$ ]] || die "HOSTS entry '$h' is not a host name"
  [ -z "${seen_host[$h]:-}" ] || die "HOSTS lists $h twice (NPROCS ranks run on each host)"
  seen_host[$h]=1
done
nhosts=${#host_list[@]}
total_ranks=$((NPROCS * nhosts))

local_names=" localhost 127.0.0.1 ::1 $(hostname 2>/dev/null || true) $(hostname -s 2>/dev/null || true) $(hostname -f 2>/dev/null || true) "
is_local() { [[ $local_names == *" $1 "* ]]; }
remote_hosts=()
for h in "${host_list[@]}"; do is_local "$h" || remote_hosts+=("$h"); done
rank0_host=${host_list[0]}
single_local=0
[ "$nhosts" -eq 1 ] && is_local "$rank0_host" && single_local=1

# SUMMARY: absolute, not a directory, parent on the rank-0 host.
[[ $SUMMARY == /* ]] || SUMMARY=$PWD/$SUMMARY
summary_dir=$(dirname "$SUMMARY")
if is_local "$rank0_host"; then
  [ -d "$summary_dir" ] ||
    die "SUMMARY=$SUMMARY: its parent directory $summary_dir does not exist on the rank-0 host ($rank0_host)"
  [ ! -d "$SUMMARY" ] || die "SUMMARY=$SUMMARY is a directory; give a file path"
fi

# --plot: the plotting script and matplotlib, before anything runs.
PLOTTER=$script_dir/../bench/plot_daos_bench.py
if [ -n "$PLOT" ]; then
  [[ $PLOT == /* ]] || PLOT=$PWD/$PLOT
  [ -d "$(dirname "$PLOT")" ] || die "--plot $PLOT: its directory $(dirname "$PLOT") does not exist"
  [ -f "$PLOTTER" ] || die "--plot: $PLOTTER not found (it ships with this script)"
  # PLOT_PYTHON when set, else the first of python3 and /usr/bin/python3 (Debian's) that has
  # matplotlib.
  plot_python=""
  tried=""
  for py in ${PLOT_PYTHON:-python3 /usr/bin/python3}; do
    tried+="${tried:+, }$py"
    if command -v "$py" >/dev/null 2>&1 && "$py" -c "import matplotlib" 2>/dev/null; then
      plot_python=$(command -v "$py")
      break
    fi
  done
  [ -n "$plot_python" ] ||
    die "--plot needs matplotlib, and none of $tried imports it (Debian: apt-get install python3-matplotlib; or set PLOT_PYTHON to an interpreter that has it)"
fi

# The binary, its MPI and its fs types.
BIN=${DAOS_ADAPTER_BENCH_BIN:-$script_dir/../bin/daos_adapter_bench}
if [ ! -x "$BIN" ] && [ -z "${DAOS_ADAPTER_BENCH_BIN:-}" ] && [ -x "$script_dir/../build/tools/daos_adapter_bench" ]; then
  BIN=$script_dir/../build/tools/daos_adapter_bench # running from a source tree
fi
[ -x "$BIN" ] || die "daos_adapter_bench not found at $BIN (install Mooncake with MPI found at build time, or set DAOS_ADAPTER_BENCH_BIN)"
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
build_info=$("$BIN" --build_info) || die "$BIN --build_info failed"
info() { sed -n "s/^$1=//p" <<<"$build_info"; }
bin_family=$(info mpi_family)
bin_launcher=$(info mpi_launcher)
bin_fs_types=$(info fs_types)
daos_library=$(info daos_library)

# EXTRA_ARGS: split verbatim into words; check every flag exists; find --fs-type.
read -r -a extra <<<"$EXTRA_ARGS"
known_flags=" $("$BIN" --help | sed -n 's/^  --\([a-z_0-9]*\) (.*/\1/p' | tr '\n' ' ') "
fs_type=$(info default_fs_type)
for ((i = 0; i < ${#extra[@]}; i++)); do
  a=${extra[i]}
  [[ $a == -* ]] || continue
  name=${a#-}
  name=${name#-}
  name=${name%%=*}
  name=${name//-/_}
  bare=${name#no}
  [[ $known_flags == *" $name "* || $known_flags == *" $bare "* ]] ||
    die "EXTRA_ARGS: unknown flag $a ($BIN --help lists every flag)"
  if [ "$name" = fs_type ]; then
    if [[ $a == *=* ]]; then fs_type=${a#*=}; else fs_type=${extra[i + 1]:-}; fi
  fi
done
case "$fs_type" in
  daos | posix) ;;
  *) die "EXTRA_ARGS: --fs-type=$fs_type: expected daos or posix" ;;
esac
[[ ,$bin_fs_types, == *",$fs_type,"* ]] ||
  die "fs type $fs_type is not built into $BIN (fs types: $bin_fs_types); rebuild with -DUSE_DAOS=ON, or use EXTRA_ARGS=--fs-type=posix"
real_daos=0
[ "$fs_type" = daos ] && [ "$daos_library" = libdfs ] && real_daos=1

# DFS_PATH on this host (remote hosts are checked in the pre-flight).
if [ "$single_local" = 1 ] || { [ ${#remote_hosts[@]} -lt "$nhosts" ]; }; then
  [ -d "$DFS_PATH" ] || die "DFS_PATH=$DFS_PATH does not exist on $(hostname) (mount the MASS volume there, or set DFS_PATH)"
fi

# DAOS agent socket directory (real libdfs only): the guide's default discovery.
if [ "$real_daos" = 1 ]; then
  if [ -n "${DAOS_AGENT_DRPC_DIR:-}" ]; then
    [ -S "$DAOS_AGENT_DRPC_DIR/daos_agent.sock" ] ||
      die "DAOS_AGENT_DRPC_DIR=$DAOS_AGENT_DRPC_DIR has no daos_agent.sock (is the MASS/DAOS agent running?)"
  elif [ -S /run/boostx-agent/daos_agent.sock ]; then
    DAOS_AGENT_DRPC_DIR=/run/boostx-agent
  else
    newest=$(ls -1dt /tmp/boostx-agent-*/ 2>/dev/null | while read -r d; do
      [ -S "${d}daos_agent.sock" ] && { echo "${d%/}"; break; }; done || true)
    if [ -n "$newest" ]; then
      DAOS_AGENT_DRPC_DIR=$newest
    else
      note "warning: no daos_agent.sock in /run/boostx-agent or /tmp/boostx-agent-*; libdfs will try its default (/var/run/daos_agent)"
    fi
  fi
  [ -n "${DAOS_AGENT_DRPC_DIR:-}" ] && export DAOS_AGENT_DRPC_DIR
fi

# The launcher: the binary's MPI family; an MPIRUN of the other family is refused.
family_of() {
  local v
  v=$("$1" --version 2>&1 | head -5 || true)
  case "$v" in
    *HYDRA* | *MPICH* | *mpich*) echo mpich ;;
    *"Open MPI"* | *OpenRTE* | *open-mpi*) echo openmpi ;;
    *) echo unknown ;;
  esac
}
family_name() { case "$1" in mpich) echo MPICH ;; openmpi) echo "Open MPI" ;; *) echo "$1" ;; esac; }
if [ -n "${MPIRUN:-}" ]; then
  mpirun_path=$(command -v "$MPIRUN" || true)
  [ -n "$mpirun_path" ] || die "MPIRUN=$MPIRUN is not an executable command"
else
  mpirun_path=""
  if [ "$bin_family" = mpich ]; then
    mpirun_path=$(command -v mpirun.mpich || true)
  elif [ "$bin_family" = openmpi ]; then
    mpirun_path=$(command -v mpirun.openmpi || true)
  fi
  [ -n "$mpirun_path" ] || mpirun_path=$(command -v mpirun || true)
  [ -n "$mpirun_path" ] || [ -z "$bin_launcher" ] || mpirun_path=$bin_launcher
  [ -n "$mpirun_path" ] || die "no MPI launcher found (install mpich: sudo bash dependencies.sh)"
  MPIRUN=$mpirun_path
fi
launcher_family=$(family_of "$mpirun_path")
if [ "$launcher_family" != unknown ] && [ "$bin_family" != unknown ] && [ "$launcher_family" != "$bin_family" ]; then
  die "MPIRUN=$MPIRUN is $(family_name "$launcher_family")'s launcher, but $BIN was built with $(family_name "$bin_family"): every rank would run alone as rank 0. Use ${bin_launcher:-the $(family_name "$bin_family") launcher} (or unset MPIRUN)"
fi
[ "$launcher_family" != unknown ] || note "warning: cannot tell which MPI $MPIRUN belongs to; the binary uses $(family_name "$bin_family")"
family=$launcher_family
[ "$family" != unknown ] || family=$bin_family

# ---- sudo -E when this user cannot reach what the run needs -----------------------------------
need_root=""
if [ "$(id -u)" -ne 0 ]; then
  if [ "$real_daos" = 1 ] && [ -n "${DAOS_AGENT_DRPC_DIR:-}" ] && [ ! -w "$DAOS_AGENT_DRPC_DIR/daos_agent.sock" ]; then
    need_root="the DAOS agent socket $DAOS_AGENT_DRPC_DIR/daos_agent.sock is not writable by $(id -un)"
  elif [ "$fs_type" = posix ] && [ -d "$DFS_PATH" ] && [ ! -w "$DFS_PATH" ]; then
    need_root="DFS_PATH=$DFS_PATH is not writable by $(id -un)"
  elif is_local "$rank0_host" && [ ! -w "$summary_dir" ]; then
    need_root="SUMMARY's directory $summary_dir is not writable by $(id -un)"
  fi
fi
if [ -n "$need_root" ]; then
  if [ "$DRYRUN" = 1 ]; then
    note "DRYRUN: would re-execute with sudo -E ($need_root)"
  elif [ -n "${DAOS_ADAPTER_BENCH_REEXEC:-}" ]; then
    die "$need_root, even after sudo"
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    note "re-executing with sudo -E: $need_root"
    exec sudo -E env "PATH=$PATH" DAOS_ADAPTER_BENCH_REEXEC=1 RSH_USER="$RSH_USER" \
      NPROCS="$NPROCS" SUMMARY="$SUMMARY" CLEANUP="$CLEANUP" bash "$0" "${orig_args[@]}"
  else
    die "$need_root, and passwordless sudo is not available: run as root or configure sudo"
  fi
fi

# ---- the command -------------------------------------------------------------------------------
bench_args=(
  "--dfs_path=$DFS_PATH" "--dir=$DIR" "--nr=$NR" "--size=$SIZE" "--xfer=$XFER"
  "--read_xfer=$READ_XFER" "--chunk=$CHUNK" "--threads=$THREADS" "--read_rounds=$READ_ROUNDS"
  "--wr_only=$WR_ONLY" "--rd_only=$RD_ONLY" "--cleanup=$CLEANUP" "--summary=$SUMMARY"
  "--hosts=$HOSTS" "--nprocs_per_host=$NPROCS" "--expect_ranks=$total_ranks"
  "--progress_interval=$PROGRESS" "--op_timeout=${OP_TIMEOUT}s"
)
# Variables the DAOS client, the network layers and the double read, passed to every rank.
env_names=()
while IFS= read -r name; do env_names+=("$name"); done < <(compgen -e | grep -E '^(DAOS_|D_|UCX_|FI_|CRT_|OFI_|DFS_DOUBLE_|MC_LOG_|MOONCAKE_|LD_LIBRARY_PATH$)' || true)

ssh_opts=(-o BatchMode=yes -o ConnectTimeout=10)
[ "$RSH_USER" = "$(id -un)" ] || ssh_opts+=(-l "$RSH_USER")

# launcher_args NRANKS PPN -> the launcher's options for that shape on HOSTS.
launcher_args() {
  local n=$1 ppn=$2 h hosts_with_slots=""
  if [ "$family" = openmpi ]; then
    local a=(-np "$n" --oversubscribe)
    [ "$(id -u)" -eq 0 ] && a+=(--allow-run-as-root)
    if [ "$single_local" != 1 ]; then
      for h in "${host_list[@]}"; do hosts_with_slots+="${hosts_with_slots:+,}$h:$ppn"; done
      a+=(--host "$hosts_with_slots" --map-by "ppr:$ppn:node")
      [ "$RSH_USER" = "$(id -un)" ] || a+=(--mca plm_rsh_args "-l $RSH_USER")
    fi
    for name in "${env_names[@]}"; do a+=(-x "$name"); done
    printf '%s\n' "${a[@]}"
  else
    local a=(-np "$n" -genvall)
    [ "$single_local" = 1 ] || a+=(-hosts "$HOSTS" -ppn "$ppn" -launcher ssh)
    printf '%s\n' "${a[@]}"
  fi
}
# Hydra takes the ssh login from the environment.
hydra_env=()
if [ "$family" = mpich ] && [ "$single_local" != 1 ] && [ "$RSH_USER" != "$(id -un)" ]; then
  hydra_env=(env "HYDRA_LAUNCHER_EXTRA_ARGS=-l $RSH_USER")
fi
mapfile -t run_launch < <(launcher_args "$total_ranks" "$NPROCS")
cmd=("${hydra_env[@]}" "$MPIRUN" "${run_launch[@]}" "$BIN" "${bench_args[@]}" "${extra[@]}")
quote() { printf '%q ' "$@"; }

# ---- pre-flight ------------------------------------------------------------------------------
preflight=()
if [ "$single_local" != 1 ]; then
  for h in "${host_list[@]}"; do
    if is_local "$h"; then continue; fi
    preflight+=("ssh access to $h|ssh ${ssh_opts[*]} $h true")
    preflight+=("benchmark binary on $h|ssh ${ssh_opts[*]} $h test -x $(printf %q "$BIN")")
    preflight+=("same MPI build on $h|ssh ${ssh_opts[*]} $h $(printf %q "$BIN") --build_info | grep -qx mpi_family=$bin_family")
    preflight+=("DFS_PATH on $h|ssh ${ssh_opts[*]} $h test -d $(printf %q "$DFS_PATH")")
    if [ "$RSH_USER" != root ]; then
      preflight+=("passwordless sudo on $h|ssh ${ssh_opts[*]} $h sudo -n true")
    fi
  done
  if ! is_local "$rank0_host"; then
    preflight+=("SUMMARY directory on $rank0_host|ssh ${ssh_opts[*]} $rank0_host test -d $(printf %q "$summary_dir")")
  fi
  mapfile -t check_launch < <(launcher_args "$nhosts" 1)
  check_cmd=("${hydra_env[@]}" "$MPIRUN" "${check_launch[@]}" "$BIN" --mpi_check "--expect_ranks=$nhosts")
  preflight+=("MPI launch on every host|timeout 120 $(quote "${check_cmd[@]}")")
fi

gib=$(awk -v b="$size_bytes_v" -v n="$((total_ranks * NR))" 'BEGIN { printf "%.2f", b * n / 1073741824 }')
note "$nhosts host(s) x NPROCS=$NPROCS = $total_ranks ranks, NR=$NR objects of SIZE=$SIZE each: $gib GiB per write pass; fs type $fs_type; MPI $(family_name "$family") ($MPIRUN)"
[ -z "${DAOS_AGENT_DRPC_DIR:-}" ] || note "DAOS_AGENT_DRPC_DIR=$DAOS_AGENT_DRPC_DIR"

if [ "$DRYRUN" = 1 ]; then
  echo "DRYRUN=1: printing the checks and the command; nothing is run"
  if [ ${#preflight[@]} -eq 0 ]; then
    echo "preflight: none needed (single local host; checked here: NPROCS, SUMMARY, DFS_PATH, binary, MPI family)"
  fi
  for p in "${preflight[@]}"; do echo "preflight: ${p%%|*}: ${p#*|}"; done
  echo "command: $(quote "${cmd[@]}")"
  [ -z "$PLOT" ] || echo "plot: $(quote "$plot_python" "$PLOTTER" "$SUMMARY" -o "$PLOT")"
  exit 0
fi

for p in "${preflight[@]}"; do
  what=${p%%|*}
  if ! bash -c "${p#*|}" >/dev/null 2>&1; then
    if [[ $what == "passwordless sudo"* ]]; then
      note "warning: pre-flight: no $what (the guide expects it for the launch user)"
      continue
    fi
    die "pre-flight check failed: $what (ran: ${p#*|})"
  fi
  note "pre-flight ok: $what"
done

note "running: $(quote "${cmd[@]}")"
set +e
"${cmd[@]}"
rc=$?
set -e
if [ $rc -eq 0 ] && is_local "$rank0_host" && [ ! -s "$SUMMARY" ]; then
  die "the run ended without writing SUMMARY=$SUMMARY"
fi
if [ $rc -eq 0 ]; then
  note "summary: $SUMMARY (on $rank0_host)"
elif is_local "$rank0_host" && [ -s "$SUMMARY" ]; then
  note "the run failed (exit status $rc); its summary, with the failed operations: $SUMMARY"
else
  note "the run failed (exit status $rc)"
fi
# A failed run's summary is plotted too (it records which operations failed).
if [ -n "$PLOT" ]; then
  if ! is_local "$rank0_host"; then
    note "warning: --plot: SUMMARY is on $rank0_host; copy it here and run $PLOTTER SUMMARY -o $PLOT"
  elif [ -s "$SUMMARY" ]; then
    if "$plot_python" "$PLOTTER" "$SUMMARY" -o "$PLOT"; then
      note "plot: $PLOT"
    else
      note "error: plotting $SUMMARY failed"
      [ $rc -ne 0 ] || rc=1
    fi
  fi
fi
exit $rc
