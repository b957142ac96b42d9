#!/bin/bash
# A file copied between two processes over rsockets, and compared byte for
# byte.
#   rs_copy.sh BUILD_DIR rcopy    Debian's rcopy (its server never exits) on
#     this host, against a private daemon
#   rs_copy.sh BUILD_DIR rcopy_twohost  the same across two hosts (network
#     namespaces, tests/lib_netns.sh: server in a, client in b; root)
#   rs_copy.sh BUILD_DIR preload  Debian's librspreload under two unmodified
#     TCP programs: socat listens (accept), nc -N sends and shuts down; both
#     sockets must be rsockets: no TCP listener may exist on the port, and
#     the daemon must have seen the listener as a CM id
set -u
here=$(dirname "$0")
build=$1 mode=$2
dir=$(mktemp -d)
port=$((20000 + (RANDOM % 20000)))
if [ "$mode" = rcopy_twohost ]; then
	source "$here/../lib_netns.sh"
	nn_setup "$build" 1500 || exit 1
	trap 'nn_cleanup; rm -rf "$dir"' EXIT
	SR=$NN_SR
	server_bg() { nn_bg a "$@" && SR_LAST_PID=$NN_LAST_PID; }
	client() { on_b "$@"; }
	srv_status() { on_a "$SR" status; }
	tcp_listeners() { on_a ss -Htln "sport = :$port"; }
	server_addr=$(addr_a)
else
	source "$here/../lib.sh"
	sr_setup "$build" || exit 1
	trap 'sr_cleanup; rm -rf "$dir"' EXIT
	server_bg() { sr_bg "$@"; }
	client() { "$@"; }
	srv_status() { "$SR" status; }
	tcp_listeners() { ss -Htln "sport = :$port"; }
	server_addr=127.0.0.1
fi
# 9 MB and an odd byte: several rings' worth, a partial last piece
head -c 9000001 /dev/urandom >"$dir/src"
pre=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
case $mode in
rcopy | rcopy_twohost)
	server_bg "$dir/server.log" timeout 100 "$SR" run -- rcopy -p $port
	cli=(rcopy "$dir/src" "$server_addr:$dir/dst" -p $port)
	;;
preload)
	[ -e $pre ] || { echo "FAIL: $pre missing (package librdmacm1)"; exit 1; }
	server_bg "$dir/server.log" timeout 100 "$SR" run -- env LD_PRELOAD=$pre \
		socat -u TCP-LISTEN:$port,bind=127.0.0.1 "OPEN:$dir/dst,creat,trunc"
	cli=(env LD_PRELOAD=$pre nc -N 127.0.0.1 $port)
	;;
esac
spid=$SR_LAST_PID
for _ in $(seq 200); do
	srv_status | grep -q "LISTEN .*:$port " && break
	sleep 0.05
done
ok=1
srv_status | grep -q "LISTEN .*:$port " || { echo "FAIL: no rsocket listener"; ok=0; }
if tcp_listeners | grep -q .; then
	echo "FAIL: a TCP listener on $port: not an rsocket"
	ok=0
fi
start=$(date +%s.%N)
client timeout 100 "$SR" run -- "${cli[@]}" <"$dir/src" >"$dir/client.log" 2>&1
crc=$?
echo "--- client: ${cli[*]} (rc $crc, $(echo "$(date +%s.%N) - $start" | bc) s)"
cat "$dir/client.log"
if [ "$mode" != preload ]; then
	kill "$spid" 2>/dev/null # its server loops for ever
	wait "$spid" 2>/dev/null
else
	wait "$spid"
	src=$?
	[ $src = 0 ] || { echo "FAIL: server exited $src"; ok=0; }
fi
echo "--- server"
cat "$dir/server.log"
[ $crc = 0 ] || { echo "FAIL: client exited $crc"; ok=0; }
if cmp "$dir/src" "$dir/dst"; then
	echo "copy: $(stat -c %s "$dir/dst") bytes, identical"
else
	echo "FAIL: the copy differs"
	ok=0
fi
sleep 0.2
left=$(srv_status | grep -E '^  cm: ' || true)
echo "daemon after: $left"
echo "$left" | grep -q '^  cm: 0 ids' || { echo "FAIL: CM ids left"; ok=0; }
[ $ok = 1 ] && echo PASS
[ $ok = 1 ]
