#!/bin/bash
# sr_blocked (blocked.c) on one host, against a private daemon: a server
# blocked in poll(), epoll_wait(), ibv_get_cq_event() or a sleep still
# gets its messages (there through shared memory; across the hosts,
# twohost_blocked_*, through its member of the engine's socket group).
#
#   blocked_local.sh BUILD_DIR CLIENT_ARGS...
set -u
here=$(dirname "$0")
source "$here/../lib.sh"
build=$1
shift
sr_setup "$build" || exit 1
log=$(mktemp -d)
trap 'sr_cleanup; rm -rf "$log"' EXIT
g=$(sr_gid_index) || { echo "FAIL: no RoCE v2 GID of 127.0.0.1"; exit 1; }
port=$((20000 + (RANDOM % 20000)))
sr_bg "$log/server" timeout 120 "$build/bin/sr_blocked" -g "$g" -p $port
spid=$SR_LAST_PID
sr_wait_port $port || { echo "FAIL: server did not listen"; cat "$log/server"; exit 1; }
timeout 120 "$build/bin/sr_blocked" -g "$g" -p $port "$@" 127.0.0.1 >"$log/client" 2>&1
crc=$?
wait $spid
src=$?
echo "--- client (rc $crc)"; cat "$log/client"
echo "--- server (rc $src)"; cat "$log/server"
ok=1
[ $crc = 0 ] && grep -q "all checks passed" "$log/client" || { echo "FAIL: client"; ok=0; }
[ $src = 0 ] && grep -q "all checks passed" "$log/server" || { echo "FAIL: server"; ok=0; }
[ $ok = 1 ] && echo "PASS: sr_blocked $* on one host"
[ $ok = 1 ]
