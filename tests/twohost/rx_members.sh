#!/bin/bash
# Two processes on one host, each with its own member of the engine's
# receive socket group (docs/architecture.md, "The receive half"): two
# WRITE ping-pongs (sr_ackpp) run at once between the hosts, and host b's
# client of the first is stopped (SIGSTOP) for 300 ms in the middle, likely
# while its thread reads its member.  Checks what a user would: both pairs
# finish and pass all their checks (every WRITE completes, in order, with
# its value; the stopped one's hold on its member is taken over or given
# back), and host b's datagrams were steered to two members of its own,
# the engine's member 0 taking at most 1% (`softrdma status`,
# rx_by_member).  (No bound on the pairs' round times: with four threads
# busy-polling on two CPUs, rounds over 2 ms happen with or without it.)
#
# usage: rx_members.sh BUILD_DIR MTU [ROUNDS]
set -u
here=$(dirname "$0")
source "$here/../lib_netns.sh"
build=$1 mtu=$2 rounds=${3:-20000}
NN_DAEMON_LOG_INFO=1 # a failure shows what the daemons did (tests/intermittent.txt)
nn_setup "$build" "$mtu" || exit 1
ga=$(nn_gid_index a "$(addr_a)") && gb=$(nn_gid_index b "$(addr_b)") ||
	{ echo "FAIL: no RoCE v2 GID for the veth addresses"; exit 1; }
log=$(mktemp -d)
trap 'nn_cleanup; rm -rf "$log"' EXIT
p1=$((20000 + (RANDOM % 10000))) p2=$((30000 + (RANDOM % 10000)))
nn_bg a "$log/s1" timeout 120 "$build/bin/sr_ackpp" -g "$ga" -p "$p1"
s1=$NN_LAST_PID
nn_bg a "$log/s2" timeout 120 "$build/bin/sr_ackpp" -g "$ga" -p "$p2"
s2=$NN_LAST_PID
nn_wait_port a "$p1" && nn_wait_port a "$p2" || { echo "FAIL: servers did not listen"; exit 1; }
nn_bg b "$log/c1" timeout 120 "$build/bin/sr_ackpp" -g "$gb" -p "$p1" -n "$rounds" "$(addr_a)"
c1=$NN_LAST_PID
nn_bg b "$log/c2" timeout 120 "$build/bin/sr_ackpp" -g "$gb" -p "$p2" -n "$rounds" "$(addr_a)"
c2=$NN_LAST_PID
# once both ping-pongs run (each client has its QP), stop the first a while
for _ in $(seq 200); do
	[ "$(on_b "$NN_SR" status | grep -c ' RC RTS ')" -ge 2 ] && break
	sleep 0.02
done
ok=1
c1p=$(pgrep -P "$c1" -f sr_ackpp | head -1)
if [ -n "$c1p" ] && kill -STOP "$c1p"; then
	sleep 0.3
	kill -CONT "$c1p"
	echo "stopped the first client (pid $c1p) for 300 ms"
else
	echo "FAIL: the first client ended before it could be stopped (more ROUNDS)"
	ok=0
fi
for p in c1 c2 s1 s2; do
	wait "${!p}" || { echo "FAIL: $p exited $?"; ok=0; }
	echo "--- $p"; cat "$log/$p"
done
for p in c1 c2 s1 s2; do
	grep -q "all checks passed" "$log/$p" || { echo "FAIL: $p's checks"; ok=0; }
done
# on a failure, what each host's receive path counted (drop_qpn: no such QP;
# drop_gone: its process's life reads dead; unknown_qpn: the last QPN with
# no QP, unknown_slot: the QPN its table slot held then; tests/intermittent.txt)
[ $ok = 1 ] || for h in a b; do
	echo "host $h: $(on_host $h "$NN_SR" status | grep 'roce v2' |
		grep -oE ' (drop_[a-z-]+|retransmits|rx_[a-z_]+) [1-9][0-9]*| unknown_[a-z]+ 0x[0-9a-f]+' |
		tr -d '\n')"
done
[ $ok = 1 ] || nn_daemon_logs
v=$(on_b "$NN_SR" status | grep 'roce v2' | tr ' ' '\n' | grep -A1 -x rx_by_member | tail -1)
echo "host b: rx_by_member $v"
awk -F, '{ t = 0; own = 0; for (i = 1; i <= NF; i++) { t += $i; if (i > 1 && $i > 0) own++ }
	exit !(t > 0 && $1 * 100 <= t && own >= 2) }' <<<"$v" ||
	{ echo "FAIL: host b's datagrams not steered to two members of its processes"; ok=0; }
[ $ok = 1 ] && echo "PASS: two processes, two members, one of them stopped a while"
[ $ok = 1 ]
