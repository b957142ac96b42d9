#!/bin/bash
# pyverbs (python3-pyverbs, rdma-core's Python binding) over softrdma, as a
# scripting user drives it (issue 13): pyverbs.sh BUILD_DIR verbs|cm
#   verbs: pyverbs_verbs.py as server and client (device, PD, MR, CQ, RC
#          SEND / RDMA WRITE / SEND_WITH_IMM and a UD datagram through an
#          AH, bytes checked; QP numbers and keys exchanged over TCP)
#   cm:    pyverbs_cm.py as server and client (pyverbs.cmid: rdma_cm over
#          127.0.0.1, a ping and a pong)
# Both under `softrdma run`, with Debian's /usr/bin/python3 (pyverbs is
# built for it).  Passes when both exit 0 after all their checks and the
# test's daemon counted the sends.
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
build=$1 what=$2
py=/usr/bin/python3
if ! "$py" -c 'import pyverbs.device' 2>/dev/null; then
	echo "SKIP: pyverbs is not installed for $py (Debian package python3-pyverbs; make deps installs it)"
	exit 77
fi
sr_setup "$build" || exit 1
port=$((20000 + RANDOM % 20000))
while ss -ltnH "sport = :$port" | grep -q .; do port=$((port + 1)); done
srv=$(mktemp) cli=$(mktemp)
trap 'sr_cleanup; rm -f "$srv" "$cli"' EXIT
case $what in
verbs) sargs=(server $port) cargs=(client $port) ;;
cm) sargs=(server 127.0.0.1 $port) cargs=(client 127.0.0.1 $port) ;;
*) echo "usage: $0 BUILD_DIR verbs|cm"; exit 2 ;;
esac
sr_bg "$srv" timeout 30 "$SR" run -q -- "$py" "$here/pyverbs_$what.py" "${sargs[@]}"
srv_pid=$SR_LAST_PID
if [ $what = cm ]; then
	# the CM server says when it listens (rdma_listen, not a TCP port)
	for _ in $(seq 200); do grep -q '^listening' "$srv" && break; sleep 0.05; done
fi
timeout 30 "$SR" run -q -- "$py" "$here/pyverbs_$what.py" "${cargs[@]}" >"$cli" 2>&1
crc=$?
wait "$srv_pid"
src=$?
SR_PIDS=()
echo "--- client (exit $crc)"
cat "$cli"
echo "--- server (exit $src)"
cat "$srv"
fail=0
[ $crc = 0 ] && grep -q '^PASS (client)' "$cli" || { echo "FAIL: the client"; fail=1; }
[ $src = 0 ] && grep -q '^PASS (server)' "$srv" || { echo "FAIL: the server"; fail=1; }
sends=$("$SR" status | grep -o 'counters: send [0-9]*' | awk '{print $3}')
echo "softrdma counters: sends ${sends:-?}"
[ "${sends:-0}" -gt 0 ] || { echo "FAIL: softrdma counted no send"; fail=1; }
[ $fail = 0 ] && echo PASS
exit $fail
