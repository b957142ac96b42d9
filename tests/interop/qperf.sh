#!/bin/bash
# Debian's unmodified qperf (0.4.11) over softrdma's RoCE port, as it runs on
# a ConnectX RoCE port.  qperf's verbs mode (no -cm1) builds its address
# vectors from LIDs, without a GRH, and takes no GID option; a RoCE port has
# no LIDs, so the kernel refuses them (rdma_check_ah_attr: EINVAL from
# ibv_modify_qp to RTR for RC/UC, from ibv_create_ah for UD) and so does
# softrdma.  On RoCE qperf needs -cm1 (the RDMA connection manager), which is
# a later issue here; once it exists this test runs the tests with -cm1.
#
# Until then it checks that every RDMA test fails the way it does on that
# hardware (qperf's own message, a non-zero exit, no hang), and that the
# server, which forks a child per connection, outlives those failures.
set -u
source "$(dirname "$0")/../lib.sh"
sr_setup "$1" || exit 1
port=$((20000 + (RANDOM % 20000)))
log=$(mktemp -d)
trap 'sr_cleanup; rm -rf "$log"' EXIT
sr_bg "$log/server" "$SR" run -- qperf -lp "$port"
spid=$SR_LAST_PID
sr_wait_port "$port" || { echo "FAIL: qperf server did not listen"; exit 1; }
fails=0
# refused TEST MESSAGE: the client exits non-zero and one side prints MESSAGE
refused() {
	local t=$1 msg=$2 out rc srv from
	from=$(($(stat -c %s "$log/server") + 1))
	out=$(timeout 60 "$SR" run -- qperf 127.0.0.1 -lp "$port" -i soft0:1 -t 1 "$t" 2>&1)
	rc=$?
	sleep 0.2 # the server's child prints its own failure
	srv=$(tail -c +"$from" "$log/server")
	echo "$t: client rc $rc: $out | server: $srv"
	if [ "$rc" = 0 ] || [ "$rc" = 124 ]; then
		echo "FAIL: $t: client exited $rc (want a failure, not success or a hang)"
		fails=$((fails + 1))
	elif ! grep -qF "$msg" <<<"$out$srv"; then
		echo "FAIL: $t: no \"$msg\""
		fails=$((fails + 1))
	fi
}
for t in rc_bw rc_lat uc_bw uc_lat rc_rdma_write_bw rc_rdma_write_lat rc_rdma_read_bw \
	rc_rdma_read_lat rc_compare_swap_mr rc_fetch_add_mr uc_rdma_write_bw; do
	refused "$t" "failed to modify QP to RTR"
done
for t in ud_bw ud_lat; do
	refused "$t" "failed to create address handle: Invalid argument"
done
# the server is still there and serves a socket test
if ! kill -0 "$spid" 2>/dev/null; then
	echo "FAIL: the qperf server died"
	fails=$((fails + 1))
elif ! timeout 60 "$SR" run -- qperf 127.0.0.1 -lp "$port" -t 1 tcp_lat | grep -q 'latency *='; then
	echo "FAIL: tcp_lat after the refused RDMA tests"
	fails=$((fails + 1))
fi
[ $fails = 0 ] && echo "PASS: qperf (RDMA tests refused as on a RoCE port without -cm1)"
[ $fails = 0 ]
