#!/bin/bash
# The peer host gone under an established connection (issue #11's error
# case): cm_gone's server in host a and its client in host b (two network
# namespaces, tests/lib_netns.sh, root) connect; then host a's softrdmad and
# the server are killed (SIGKILL), as when a machine loses power, and the
# client sends.  Host b hears nothing more: the SEND is retried until the
# local ACK timeout rdma_cm sets for RoCE (ack timeout 18, 1.07 s) has run
# out 8 times, and completes with IBV_WC_RETRY_EXC_ERR (cm_gone.c checks
# the status and the time).  Passes when the client says so and exits 0,
# and host b's daemon is still up and holds no CM id afterwards (the DREQ
# the client's exit sends goes on retrying inside the daemon).
# usage: cm_twohost_gone.sh BUILD_DIR
set -u
here=$(dirname "$0")
source "$here/../lib_netns.sh"
build=$1
nn_setup "$build" 1500 || exit 1
log=$(mktemp -d)
trap 'nn_cleanup; rm -rf "$log"' EXIT
prog=$NN_BUILD/bin/cm_gone
port=$((20000 + RANDOM % 20000))
mkfifo "$log/go"
chmod 666 "$log/go"
nn_bg a "$log/server" timeout 60 "$NN_SR" run -q -- "$prog" server $port
spid=$NN_LAST_PID
for _ in $(seq 200); do
	on_a "$NN_SR" status | grep -q "LISTEN .*:$port " && break
	sleep 0.05
done
nn_bg b "$log/client" timeout 60 "$NN_SR" run -q -- "$prog" client "$(addr_a)" $port "$log/go"
cpid=$NN_LAST_PID
ok=1
for _ in $(seq 200); do
	grep -q ESTABLISHED "$log/client" && grep -q ESTABLISHED "$log/server" && break
	sleep 0.05
done
grep -q ESTABLISHED "$log/client" || { echo "FAIL: the connection was not established"; ok=0; }
# the server's own pid: $spid is the wrapper's (timeout forks it)
pid=$(sed -n 's/^ESTABLISHED pid \([0-9]*\)$/\1/p' "$log/server")
kill -9 "$NN_DPID_A" ${pid:+"$pid"}
wait "$NN_DPID_A" "$spid" 2>/dev/null
echo "host a's daemon and the server killed; the client sends"
echo go >"$log/go"
wait "$cpid"
crc=$?
echo "--- client in b (exit $crc)"
cat "$log/client"
echo "--- server in a"
cat "$log/server"
[ $crc = 0 ] || { echo "FAIL: the client exited $crc"; ok=0; }
line=$(on_b "$NN_SR" status | grep -E '^  cm: ')
echo "host b's daemon after: $line"
echo "$line" | grep -q '^  cm: 0 ids' || { echo "FAIL: CM ids left on host b"; ok=0; }
[ $ok = 1 ] && echo PASS
[ $ok = 1 ]
