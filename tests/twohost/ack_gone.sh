#!/bin/bash
# twohost_ack_after_destroy: the ACK of a message whose target destroys its
# QP on seeing it is lost, and the requester's resend finds no QP; the
# target host's engine must answer it with the ACK the QP owed
# (src/transport/resp.c, sr_eng_resp_gone), so the requester's WRITE
# completes with IBV_WC_SUCCESS instead of RETRY_EXC_ERR (TCP's TIME_WAIT
# does the same for a lost last ACK).
#   ack_gone.sh BUILD_DIR MTU
# sr_ackpp (ackpp.c) runs its WRITE ping-pong from host b to host a; before
# its last WRITE the client holds (-H); this script then makes host b drop
# every datagram it receives (`softrdma fault dir=rx,drop=1`), lets the
# client go, waits until the server says it destroyed its QP on seeing the
# value (so that the ACK of it was dropped), and turns the fault off: the
# client's next probe must be answered.
set -u
here=$(dirname "$0")
source "$here/../lib_netns.sh"
build=$1 mtu=$2
nn_setup "$build" "$mtu" || exit 1
ga=$(nn_gid_index a "$(addr_a)") && gb=$(nn_gid_index b "$(addr_b)") ||
	{ echo "FAIL: no RoCE v2 GID for the veth addresses"; exit 1; }
port=$((20000 + (RANDOM % 20000)))
log=$(mktemp -d)
chmod 777 "$log"
trap 'nn_cleanup; rm -rf "$log"' EXIT
counter() { # HOST NAME
	on_host "$1" "$NN_SR" status | grep 'roce v2' | tr ' ' '\n' | grep -A1 -x "$2" | tail -1
}
ok=1
fail() { echo "FAIL: $*"; ok=0; }

nn_bg a "$log/server" timeout 60 "$build/bin/sr_ackpp" -g "$ga" -p "$port"
spid=$NN_LAST_PID
nn_wait_port a "$port" || { echo "FAIL: server did not listen on $port"; exit 1; }
nn_bg b "$log/client" timeout 60 "$build/bin/sr_ackpp" -g "$gb" -p "$port" -n 20 -H "$log/hold" "$(addr_a)"
cpid=$NN_LAST_PID
for _ in $(seq 1000); do [ -e "$log/hold" ] && break; sleep 0.01; done
[ -e "$log/hold" ] || fail "the client did not reach its last WRITE"
on_b "$NN_SR" fault "dir=rx,drop=1" >/dev/null || fail "softrdma fault on host b"
rm -f "$log/hold"
for _ in $(seq 1000); do grep -q "QP destroyed" "$log/server" && break; sleep 0.002; done
dropped=$(on_b "$NN_SR" status | sed -n 's/.*injected rx: matched [0-9]* drop \([0-9]*\).*/\1/p')
on_b "$NN_SR" fault off >/dev/null || fail "softrdma fault off on host b"
wait "$cpid"
crc=$?
wait "$spid"
src=$?
echo "--- client (rc $crc)"; cat "$log/client"
echo "--- server (rc $src)"; cat "$log/server"
for h in a b; do
	echo "--- host $h: $(on_host $h "$NN_SR" status | grep 'roce v2' | sed 's/ [a-z_-]* 0\b//g')"
done
[ $crc = 0 ] || fail "client exited $crc"
[ $src = 0 ] || fail "server exited $src"
grep -q "all checks passed" "$log/client" || fail "client checks"
grep -q "QP destroyed" "$log/server" || fail "the server did not destroy its QP"
[ "${dropped:-0}" -ge 1 ] || fail "host b dropped nothing (${dropped:-none}): the ACK was not lost"
v=$(counter a acks_after_destroy)
[ "${v:-0}" -ge 1 ] 2>/dev/null || fail "host a's acks_after_destroy is ${v:-absent}"
echo "host b dropped ${dropped:-0} received datagrams; host a: acks_after_destroy ${v:-absent}, drop_qpn $(counter a drop_qpn)"
[ $ok = 1 ] && echo "PASS: a lost last ACK is answered after its QP is gone"
[ $ok = 1 ]
