#!/bin/bash
# fio's rdma engine (Debian's unmodified fio) between two processes, both
# under `softrdma run` (issue 35): fio_pair.sh BUILD_DIR [--twohost] VERB
# runs a receiver job (--rw=read) and a sender job (--rw=write --verb=VERB,
# VERB one of write, read, send) against it over rdma_cm.
#   one host (default): the sender connects to 127.0.0.1, the data goes over
#     softrdma's same-host path;
#   --twohost: receiver in host a, sender in host b of two network
#     namespaces (tests/lib_netns.sh, root), the data over RoCEv2.
# fio tears its job down CQ first, QP after: ibv_destroy_cq must refuse
# (EBUSY) while the QP uses the CQ, whatever events are still unacked,
# instead of waiting for them (the client used to sleep for ever in
# ibv_destroy_cq).  Passes when both exit 0 within 60 s, the sender's io=
# figure is the job's size and it issued every block, and softrdma carried
# that much at least (on one host the test daemon's byte counter, across
# hosts the bytes the two RoCEv2 engines received).  fio's receiver counts
# only the transfers it takes part in: for the one-sided verbs it reports
# nothing moved, so its io= figure is checked for send only.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$1
shift
twohost=0
if [ "${1:-}" = --twohost ]; then
	twohost=1
	shift
fi
verb=${1:?usage: fio_pair.sh BUILD_DIR [--twohost] write|read|send}
if ! command -v fio >/dev/null; then
	echo "SKIP: fio is not installed (Debian package fio; make deps installs it)"
	exit 77
fi
fio --enghelp=rdma >/dev/null 2>&1 || {
	echo "SKIP: this fio has no rdma engine"
	exit 77
}
# every process of a tree, by PID, deepest first: fio's job process is a
# session leader of its own (setsid), so neither timeout(1)'s process-group
# signal nor a parent-death signal reaches it, and one stuck in
# ibv_destroy_cq ignores SIGTERM
tree() {
	local c
	for c in $(ps -o pid= --ppid "$1"); do tree "$c"; done
	echo "$1"
}
kill_tree() {
	kill -0 "$1" 2>/dev/null || return 0
	echo "killing $(tree "$1" | wc -l) processes of $1"
	kill -KILL $(tree "$1") 2>/dev/null
}
# waits for PIDs until the deadline (seconds from now); kills what is left
reap_by() {
	local end=$(($(date +%s) + $1)) p
	shift
	for p in "$@"; do
		while kill -0 "$p" 2>/dev/null && [ "$(date +%s)" -lt $end ]; do sleep 0.1; done
	done
	for p in "$@"; do kill_tree "$p"; done
}
srv_pid= cli_pid=
kill_pair() { for p in $srv_pid $cli_pid; do kill_tree "$p"; done; }
# (first: not root, lib_netns.sh runs this script again in a user namespace)
[ $twohost = 1 ] && source "$here/../lib_netns.sh"
srv=$(mktemp) cli=$(mktemp) dir=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
if [ $twohost = 1 ]; then
	nn_setup "$build" 1500 || exit 1
	trap 'kill_pair; nn_cleanup; rm -rf "$srv" "$cli" "$dir"' EXIT
	SR=$NN_SR
	server_bg() { nn_bg a "$@" && srv_pid=$NN_LAST_PID; }
	client_bg() { nn_bg b "$@" && cli_pid=$NN_LAST_PID; }
	status() { on_a "$NN_SR" status; }
	# rx_bytes of the RoCEv2 engines of both hosts, summed
	carried() {
		local h n t=0
		for h in a b; do
			n=$(on_host $h "$SR" status | sed -n 's/^  roce v2 .* rx_bytes \([0-9]*\) .*/\1/p')
			t=$((t + ${n:-0}))
		done
		echo $t
	}
	server_addr=$(addr_a)
else
	source "$here/../lib.sh"
	sr_setup "$build" || exit 1
	trap 'kill_pair; sr_cleanup; rm -rf "$srv" "$cli" "$dir"' EXIT
	server_bg() { sr_bg "$@" && srv_pid=$SR_LAST_PID; }
	client_bg() { sr_bg "$@" && cli_pid=$SR_LAST_PID; }
	status() { "$SR" status; }
	# the same-host byte counter of the test's daemon
	carried() { "$SR" status | grep -o ' bytes [0-9]*' | head -1 | awk '{print $2}'; }
	server_addr=127.0.0.1
fi
cd "$dir" || exit 1
# ready once the daemon shows the receiver's rdma_cm listener
wait_listen() {
	for _ in $(seq 200); do
		status | grep -q "LISTEN .*:$1 " && return 0
		sleep 0.05
	done
	return 1
}
# 16 MiB in 64 KiB blocks, four in flight.  fio asks for no RNR retries
# (rnr_retry_count 0): a SEND finding no receive posted fails the sender,
# on any device.  As fio's rdma engine advises, the receiver posts more:
# a receive for every block, before the sender starts (it waits 0.5 s).
size=$((16 * 1024 * 1024))
blocks=$((size / 65536))
job=(--ioengine=rdma --port=$port --bs=64k --size=$size --numjobs=1)
server_bg "$srv" "$SR" run -q -- fio --name=receiver "${job[@]}" --iodepth=$blocks --rw=read
if ! wait_listen $port; then
	echo "FAIL: the receiver did not listen on port $port"
	cat "$srv"
	exit 1
fi
client_bg "$cli" "$SR" run -q -- \
	fio --name=sender "${job[@]}" --iodepth=4 --hostname="$server_addr" --rw=write --verb="$verb"
reap_by 60 "$srv_pid" "$cli_pid"
wait "$cli_pid"
crc=$?
wait "$srv_pid"
src=$?
SR_PIDS=() NN_PIDS=()
echo "--- sender (exit $crc)"
cat "$cli"
echo "--- receiver (exit $src)"
cat "$srv"
fail=0
[ $crc = 0 ] || { echo "FAIL: the sender exited $crc (137: killed at the deadline)"; fail=1; }
[ $src = 0 ] || { echo "FAIL: the receiver exited $src (137: killed at the deadline)"; fail=1; }
# "  WRITE: bw=..., io=32.0MiB (33.6MB), run=..." in the run status group,
# to three digits: within 1% of the job's size
io_bytes() { sed -n "s/^ *$2: .* io=\([0-9.]*\)\([KMG]*\)i*B .*/\1 \2/p" "$1" |
	awk '{ m = $2 == "K" ? 2^10 : $2 == "M" ? 2^20 : $2 == "G" ? 2^30 : 1; printf "%d", $1 * m }'; }
within() { [ -n "$1" ] && awk -v a="$1" -v b="$size" 'BEGIN { exit !(a >= b * 0.99 && a <= b * 1.01) }'; }
sent=$(io_bytes "$cli" WRITE)
echo "sender io= ${sent:-?} bytes (job size $size)"
within "${sent:-}" || { echo "FAIL: the sender's io= is not the job's size"; fail=1; }
# and exactly: every block issued ("issued rwts: total=READS,WRITES,...")
issued=$(sed -n 's/^ *issued rwts: total=[0-9]*,\([0-9]*\),.*/\1/p' "$cli")
[ "${issued:-0}" = $blocks ] || { echo "FAIL: the sender issued ${issued:-?} writes of $blocks"; fail=1; }
# the transport was softrdma's: it carried the job's size at least
bytes=$(carried)
echo "softrdma carried ${bytes:-?} bytes"
[ "${bytes:-0}" -ge $size ] || { echo "FAIL: softrdma did not carry the job's size"; fail=1; }
if [ "$verb" = send ]; then
	got=$(io_bytes "$srv" READ)
	echo "receiver io= ${got:-?} bytes"
	within "${got:-}" || { echo "FAIL: the receiver's io= is not the job's size"; fail=1; }
fi
[ $fail = 0 ] && echo PASS
exit $fail
