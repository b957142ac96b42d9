#!/bin/bash
# libfabric's msg and rxm endpoints across two hosts (issue #13), which
# fi_pingpong cannot reach (fi_xhost.c says why): fi_xhost's server in
# host a at a's veth address, its client in host b naming b's, both under
# `softrdma run` (two network namespaces, tests/lib_netns.sh; root).
#   fi_xhost.sh BUILD_DIR PROV msg|rdm ITERS
# Passes when both print PASS (every byte of every message checked) and
# name the provider asked for on soft0, and
# both hosts' RoCEv2 engines received at least the payload the client
# reports (the data went through softrdma, nothing else: the hosts have
# separate daemons).
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib_netns.sh"
build=$1 prov=$2 type=$3 iters=$4
prog=$(cd "$build" && pwd -P)/bin/fi_xhost
[ -x "$prog" ] || { echo "SKIP: fi_xhost was not built (Debian package libfabric-dev)"; exit 77; }
nn_setup "$build" 1500 || exit 1
log=$(mktemp -d)
trap 'nn_cleanup; rm -rf "$log"' EXIT
port=$((20000 + RANDOM % 20000))
cd "$log" || exit 1 # libfabric may leave a backtrace file
rx() { on_host "$1" "$NN_SR" status | sed -n 's/^  roce v2 .* rx_bytes \([0-9]*\) .*/\1/p'; }
ra0=$(rx a) rb0=$(rx b)
nn_bg a "$log/server" timeout 90 "$NN_SR" run -q -- "$prog" server "$prov" "$type" "$(addr_a)" \
	$port "$iters"
spid=$NN_LAST_PID
for _ in $(seq 300); do grep -q "fi_xhost: \(listening\|rdm endpoint ready\)" "$log/server" && break; sleep 0.05; done
on_b timeout 80 "$NN_SR" run -q -- "$prog" client "$prov" "$type" "$(addr_a)" $port "$iters" \
	"$(addr_b)" >"$log/client" 2>&1
crc=$?
wait "$spid"
src=$?
ra1=$(rx a) rb1=$(rx b)
echo "--- client in b (exit $crc)"
grep -v '^libfabric:' "$log/client"
echo "--- server in a (exit $src)"
grep -v '^libfabric:' "$log/server"
ok=1
[ $crc = 0 ] && grep -q 'fi_xhost: PASS' "$log/client" || { echo "FAIL: the client"; ok=0; }
[ $src = 0 ] && grep -q 'fi_xhost: PASS' "$log/server" || { echo "FAIL: the server"; ok=0; }
for f in client server; do
	grep -q "fi_xhost: provider $prov, domain soft0" "$log/$f" ||
		{ echo "FAIL: the $f did not run $prov on soft0"; ok=0; }
done
payload=$(sed -n 's/^fi_xhost: PASS, .* \([0-9]*\) bytes$/\1/p' "$log/client")
got=$(( ${ra1:-0} - ${ra0:-0} + ${rb1:-0} - ${rb0:-0} ))
echo "payload both ways ${payload:-?} bytes; the two engines received $got bytes"
[ -n "$payload" ] && [ "$got" -ge "$payload" ] || { echo "FAIL: softrdma did not carry it"; ok=0; }
if [ $ok = 0 ]; then
	for h in a b; do
		echo "--- host $h's RoCEv2 counters and QPs"
		on_host $h "$NN_SR" status | grep -E 'roce v2|wire qp'
	done
fi
[ $ok = 1 ] && echo PASS
[ $ok = 1 ]
