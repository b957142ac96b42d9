#!/bin/bash
# verbs_pidns: a pid namespace is a host of its own.
#   pidns.sh BUILD_DIR
# The arena's locks and reader slots name processes and threads by their ids,
# which mean other processes in another pid namespace (a container sharing
# the host's network, `docker run --network host`).  So:
#  1. a process in another pid namespace pointed at our daemon with
#     SOFTRDMA_SOCKET is refused: ibv_open_device fails with a message that
#     says why, the daemon logs the refusal and keeps nothing of it, and a
#     client of our own namespace still works;
#  2. with the default socket name (which carries the pid namespace), the
#     processes of a new pid namespace get a daemon of their own, started on
#     demand, and an ibv_rc_pingpong pair between them runs; the namespace's
#     end takes that daemon with it.
# Needs `unshare --pid` (root, as in CI); skipped (77) where it is refused.
set -u
here=$(cd "$(dirname "$0")" && pwd -P)
. "$here/../lib.sh"
[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }

if ! unshare --pid --fork --mount-proc true 2>/dev/null; then
	echo "SKIP: unshare --pid is not permitted here"
	exit 77
fi
tmp=$(mktemp -d)
dlog=$tmp/daemon.log
SR_DAEMON_LOG=$dlog sr_setup "$1" || exit 1
trap 'sr_cleanup; rm -rf "$tmp"' EXIT

fail() {
	echo "FAIL: $*"
	for f in "$tmp"/*; do echo "--- $f"; cat "$f"; done
	exit 1
}

echo "# 1. another pid namespace, our daemon named explicitly"
unshare --pid --fork --mount-proc "$SR" run -- ibv_devinfo >"$tmp/other.out" 2>"$tmp/other.err" &&
	fail "ibv_devinfo in another pid namespace was let in"
grep -q "another pid namespace" "$tmp/other.err" || fail "no message saying why"
grep -q "refusing ibv_devinfo" "$dlog" || fail "the daemon did not log the refusal"
"$SR" status | grep -q "^0 process(es) with resources" || fail "the refused client left something behind"
"$SR" run -- ibv_devinfo >"$tmp/same.out" 2>&1 || fail "a client of our own namespace was refused"
grep -q "hca_id:.*soft0" "$tmp/same.out" || fail "ibv_devinfo did not list soft0"
echo "refused, with: $(head -c 120 "$tmp/other.err")..."

echo "# 2. a new pid namespace with the default socket: a daemon of its own"
port=$((20000 + (RANDOM % 20000)))
# the same network namespace, so the same GID table as our daemon's
gid=$(sr_gid_index 127.0.0.1) || fail "soft0 has no GID for 127.0.0.1"
unshare --pid --fork --mount-proc env -u SOFTRDMA_SOCKET -u SOFTRDMA_NO_SPAWN \
	SR="$SR" PORT="$port" GID="$gid" T="$tmp" bash -c '
	timeout 60 "$SR" run -- ibv_rc_pingpong -g "$GID" -p "$PORT" -n 1000 >"$T/srv.out" 2>&1 &
	srv=$!
	for _ in $(seq 200); do
		ss -ltnH "sport = :$PORT" | grep -q . && break
		sleep 0.05
	done
	timeout 60 "$SR" run -- ibv_rc_pingpong -g "$GID" -p "$PORT" -n 1000 127.0.0.1 >"$T/cli.out" 2>&1
	c=$?
	wait $srv
	s=$?
	"$SR" status >"$T/inner_status.out" 2>&1
	exit $((c | s))' || fail "ibv_rc_pingpong inside the new pid namespace failed"
grep -q "iters in" "$tmp/cli.out" || fail "the client printed no result"
grep -q "^device" "$tmp/inner_status.out" || fail "no daemon was serving inside the namespace"
# the inner daemon was not ours: ours saw none of that pair
grep -q "refusing ibv_rc_pingpong" "$dlog" && fail "the pair reached our daemon"
echo "pingpong inside: $(grep 'iters in' "$tmp/cli.out")"
echo "PASS"
