#!/bin/bash
# The peer host disappears mid-transfer: host a's daemon (its HCA) and its
# server are killed while host b streams RDMA WRITEs to it.  b's work
# requests must complete with IBV_WC_RETRY_EXC_ERR (status 12: perftest
# prints "transport retry counter exceeded") within the ACK timeout budget,
# 4.096 us x 2^timeout x (retry_cnt + 1) (perftest: timeout 14, retry_cnt
# 7: 0.54 s), and nothing hangs.
set -u
here=$(dirname "$0")
source "$here/../lib_netns.sh"
nn_setup "$1" 9000 || exit 1
log=$(mktemp -d)
trap 'nn_cleanup; rm -rf "$log"' EXIT
ga=$(nn_gid_index a "$(addr_a)") gb=$(nn_gid_index b "$(addr_b)")
port=$((20000 + (RANDOM % 20000)))
nn_bg a "$log/server" ib_write_bw -d soft0 -x "$ga" -p "$port" -D 20
spid=$NN_LAST_PID
nn_wait_port a "$port" || { echo "FAIL: server did not listen"; exit 1; }
nn_bg b "$log/client" ib_write_bw -d soft0 -x "$gb" -p "$port" -D 20 "$(addr_a)"
cpid=$NN_LAST_PID
sleep 2
kill -KILL "$NN_DPID_A" "$spid"
t0=$(date +%s%N)
for _ in $(seq 150); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.1; done
t1=$(date +%s%N)
wait "$cpid"
crc=$?
echo "--- client (rc $crc), exited $(((t1 - t0) / 1000000)) ms after the peer host died"
cat "$log/client"
ok=1
[ "$crc" != 0 ] || { echo "FAIL: the client did not see an error"; ok=0; }
grep -Eq 'status 12|retry counter exceeded|RETRY_EXC' "$log/client" ||
	{ echo "FAIL: no RETRY_EXC_ERR completion"; ok=0; }
[ $(((t1 - t0) / 1000000)) -lt 10000 ] || { echo "FAIL: took 10 s or more"; ok=0; }
[ $ok = 1 ] && echo PASS
[ $ok = 1 ]
