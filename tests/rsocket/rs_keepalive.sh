#!/bin/bash
# rsockets keepalive across two hosts (network namespaces, tests/lib_netns.sh;
# root), with unmodified TCP programs under Debian's librspreload: socat
# listens in host a with its `keepalive,keepidle=1` options (SO_KEEPALIVE,
# TCP_KEEPIDLE 1 s, which the preload turns into rsetsockopt) and reads;
# nc in host b connects and sends nothing, so the connection is idle.
# Then every process of host b is SIGKILLed, its daemon with them, as when
# a machine loses power.  Nothing tells the reader the peer is gone but a
# keepalive probe, which fails once the QP's retries run out (rdma_cm's ack
# timeout 18 x 8 tries, 8.6 s): socat's read fails (ETIMEDOUT) and it exits
# with an error.  Passes when that comes within 1 s idle + 1 s of the
# keepalive thread's tick + 8.6 s + 3 s of slack, and host a's daemon holds
# no CM id afterwards.  KEEPALIVE=0 runs socat without the options: it must
# then still be waiting after that budget (what keepalive is for).
# usage: rs_keepalive.sh BUILD_DIR
set -u
here=$(dirname "$0")
source "$here/../lib_netns.sh"
build=$1
nn_setup "$build" 1500 || exit 1
log=$(mktemp -d)
trap 'exec 8>&-; nn_cleanup; rm -rf "$log"' EXIT
port=$((20000 + RANDOM % 20000))
pre=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
[ -e $pre ] || { echo "SKIP: $pre missing (package librdmacm1)"; exit 77; }
command -v socat >/dev/null && command -v nc >/dev/null || { echo "SKIP: no socat or nc"; exit 77; }
opts=",keepalive,keepidle=1"
[ "${KEEPALIVE:-1}" = 0 ] && opts=
budget=$(echo "2 + 8 * 4.096 * 2^18 / 1000000 + 3" | bc -l)
nn_bg a "$log/server" "$NN_SR" run -q -- env LD_PRELOAD=$pre \
	socat -u "TCP-LISTEN:$port,bind=$(addr_a)$opts" STDOUT
spid=$NN_LAST_PID
for _ in $(seq 200); do
	on_a "$NN_SR" status | grep -q "LISTEN .*:$port " && break
	sleep 0.05
done
# nc sends nothing: its stdin is a pipe nobody writes
mkfifo "$log/in"
exec 8<>"$log/in"
nn_bg b "$log/client" "$NN_SR" run -q -- env LD_PRELOAD=$pre nc "$(addr_a)" $port <&8
for _ in $(seq 100); do
	on_a "$NN_SR" status | grep -qE "cm id .*ESTABLISHED" && break
	sleep 0.05
done
sleep 1
est=$(on_a "$NN_SR" status | grep -cE "cm id .*ESTABLISHED")
echo "host a: $est established CM id(s) before host b went"
t0=$(date +%s.%N)
kill -9 $(ip netns pids "$NN_B") 2>/dev/null
ok=1
rc=none
for _ in $(seq $(printf '%.0f' "$(echo "$budget * 10" | bc)")); do
	if ! kill -0 "$spid" 2>/dev/null; then
		wait "$spid"
		rc=$?
		break
	fi
	sleep 0.1
done
secs=$(echo "$(date +%s.%N) - $t0" | bc)
echo "--- server in a (exit $rc after $secs s; budget $budget s)"
cat "$log/server"
[ "$est" -gt 0 ] || { echo "FAIL: no connection"; ok=0; }
if [ "${KEEPALIVE:-1}" = 0 ]; then
	[ "$rc" = none ] || { echo "FAIL: without keepalive the server ended ($rc)"; ok=0; }
else
	[ "$rc" != none ] && [ "$rc" != 0 ] ||
		{ echo "FAIL: the server did not fail its read within $budget s"; ok=0; }
	grep -qi "timed out" "$log/server" || { echo "FAIL: no 'timed out' error from socat"; ok=0; }
	sleep 0.5
	line=$(on_a "$NN_SR" status | grep -E '^  cm: ')
	echo "host a's daemon after: $line"
	echo "$line" | grep -q '^  cm: 0 ids' || { echo "FAIL: CM ids left on host a"; ok=0; }
fi
[ $ok = 1 ] && echo PASS
[ $ok = 1 ]
