#!/bin/bash
# Debian's unmodified qperf over softrdma: RC, UC and UD send/receive and
# RDMA tests between a qperf server and client process (the server forks a
# child per connection).  qperf waits for completions with
# ibv_get_cq_event and ends each timed test with SIGALRM, so this also checks
# that a blocked ibv_get_cq_event returns EINTR as rdma-core's does.
set -u
source "$(dirname "$0")/../lib.sh"
sr_setup "$1" || exit 1
port=$((20000 + (RANDOM % 20000)))
log=$(mktemp -d)
trap 'sr_cleanup; rm -rf "$log"' EXIT
sr_bg "$log/server" "$SR" run -- qperf -lp "$port"
sr_wait_port "$port" || { echo "FAIL: qperf server did not listen"; exit 1; }
fails=0
run() {
	local out
	out=$(timeout 120 "$SR" run -- qperf 127.0.0.1 -lp "$port" -i soft0:1 -t 1 "$@" 2>&1)
	echo "$out"
	for t in "${@}"; do
		case $t in -*|[0-9]*) continue ;; esac
		# each test prints its name and then a bw/latency/msg_rate line
		if ! awk -v t="$t:" '$1 == t {f=1; next} f && /(bw|latency|msg_rate) +=/ {ok=1} f && /^[a-z_]+:$/ {f=0} END {exit !ok}' <<<"$out"; then
			echo "FAIL: $t printed no result"
			fails=$((fails + 1))
		fi
	done
}
run rc_bw rc_lat uc_bw uc_lat rc_rdma_write_bw rc_rdma_write_lat rc_rdma_read_bw \
	rc_rdma_read_lat rc_compare_swap_mr rc_fetch_add_mr uc_rdma_write_bw
# a datagram is at most one path MTU (1024 B where a link has MTU 1500)
run -m 1024 ud_bw ud_lat
[ $fails = 0 ] && echo "PASS: qperf"
[ $fails = 0 ]
