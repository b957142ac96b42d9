#!/bin/bash
# Runs one of Debian's unmodified client/server RDMA programs as two
# processes on this host under `softrdma run`, against a private daemon, and
# checks what a user would: both sides exit 0 and print their result lines.
#
# usage: pair.sh BUILD_DIR KIND PROGRAM [ARGS...]
#   KIND pingpong: ibv_*_pingpong; passes -g GID -p PORT; expects the
#                  "bytes in ... seconds" and "iters in" lines on both sides
#   KIND xsrq:     ibv_xsrq_pingpong (XRC); as pingpong, expects "success"
#   KIND perftest: ib_*_{bw,lat}; passes -d soft0 -x GID -F -p PORT; expects
#                  the result table (a header line with #bytes and data rows)
set -u
here=$(dirname "$0")
source "$here/../lib.sh"
source "$here/../pair_check.sh"
build=$1 kind=$2 prog=$3
shift 3
sr_setup "$build" || exit 1
# GID: the index of 127.0.0.1's GID, the address the client connects to
gid=$(sr_gid_index 127.0.0.1) || { echo "FAIL: soft0 has no GID for 127.0.0.1"; exit 1; }
port=$((20000 + (RANDOM % 20000)))
case $kind in
pingpong | xsrq) common=(-g "$gid" -p "$port") ;;
perftest) common=(-d soft0 -x "$gid" -F -p "$port") ;;
*) echo "unknown kind $kind"; exit 2 ;;
esac
log=$(mktemp -d)
trap 'sr_cleanup; rm -rf "$log"' EXIT

sr_bg "$log/server" timeout 120 stdbuf -oL "$SR" run -- "$prog" "${common[@]}" "$@"
spid=$SR_LAST_PID
if ! sr_wait_port "$port"; then
	echo "FAIL: server did not listen on $port"; cat "$log/server"; exit 1
fi
timeout 120 stdbuf -oL "$SR" run -- "$prog" "${common[@]}" "$@" 127.0.0.1 >"$log/client" 2>&1
crc=$?
wait "$spid"
src=$?
echo "--- client (rc $crc)"; cat "$log/client"
echo "--- server (rc $src)"; cat "$log/server"
ok=1
pair_check "$kind" "$prog" "$log" "$crc" "$src" || ok=0
[ $ok = 1 ] && echo "PASS: $prog $*"
[ $ok = 1 ]
