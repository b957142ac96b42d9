#!/bin/bash
# verbs_trust: one account gets nothing from another's softrdmad.
#   trust.sh BUILD_DIR SR_HOLD SR_TRUST
# A private daemon runs as root (this script's uid) with a process holding
# MRs, QPs... (sr_hold).  Then, as a second uid (65534, "nobody", through
# setpriv: nothing is created system-wide), with SOFTRDMA_SOCKET naming
# root's daemon:
#  1. ibv_devices, ibv_devinfo and sr_trust (ibv_get_device_list +
#     ibv_open_device) are refused with a one-line message saying whose
#     daemon it is: the list is NULL with errno EACCES, nothing of the device;
#  2. `softrdma status` is refused the same way and prints none of the
#     daemon's state (no device, process, MR, rkey, address);
#  3. speaking the protocol by hand (sr_trust probe, none of the library's
#     checks): whatever the first request, the reply is the refusal record
#     (EACCES, reason "uid", no descriptor), and the daemon has hung up: a
#     second request gets nothing; a connection that says nothing is closed
#     within about two seconds; root's daemon kept nothing of any of it;
#  4. that uid's own daemon serves it, and opening root's device from there
#     still fails with EACCES;
#  5. the other way round: a "daemon" of that uid squatting a name (it
#     answers HELLO with success and an arena) is not used by root's
#     library or CLI, and gets no further request (no memory of ours).
# Needs root and setpriv; skipped (77) otherwise.  The binaries are copied
# to a private temp directory the second uid can read, so the build tree's
# permissions are left alone.
set -u
here=$(cd "$(dirname "$0")" && pwd -P)
. "$here/../lib.sh"
[ $# -eq 3 ] || { echo "usage: $0 BUILD_DIR SR_HOLD SR_TRUST" >&2; exit 2; }
other=65534
if [ "$(id -u)" != 0 ]; then
	echo "SKIP: needs root to act as a second uid"
	exit 77
fi
setpriv=(setpriv --reuid=$other --regid=$other --clear-groups)
as_other() { "${setpriv[@]}" "$@"; }
if ! as_other true 2>/dev/null; then
	echo "SKIP: cannot switch to uid $other (setpriv)"
	exit 77
fi

tmp=$(mktemp -d)
dlog=$tmp/daemon.log
SR_DAEMON_LOG=$dlog sr_setup "$1" || exit 1
trap 'sr_cleanup; rm -rf "$tmp"' EXIT
hold=$2
build=$SR_BUILD
mine=$SOFTRDMA_SOCKET

fail() {
	echo "FAIL: $*"
	for f in "$tmp"/*.out "$tmp"/*.err "$dlog"; do echo "--- $f"; cat "$f"; done
	exit 1
}

# What the second uid runs: a copy it can read and execute.
mkdir -p "$tmp/bin" "$tmp/lib" "$tmp/other"
cp "$build/bin/softrdma" "$build/bin/softrdmad" "$3" "$tmp/bin/"
cp -P "$build"/lib/*.so* "$tmp/lib/"
chmod -R a+rX "$tmp"
chown $other:$other "$tmp/other"
trust=$tmp/bin/sr_trust
export LD_LIBRARY_PATH=$tmp/lib

sr_bg "$tmp/hold.out" "$hold"
for _ in $(seq 200); do
	grep -q '^ready' "$tmp/hold.out" && break
	sleep 0.05
done
grep -q '^ready' "$tmp/hold.out" || fail "sr_hold did not get ready"
"$SR" status >"$tmp/root_status.out" 2>&1
grep -q 'rkey 0x' "$tmp/root_status.out" || fail "root's own status shows no MR"
before=$(grep -c . "$tmp/root_status.out")

refusal="belongs to uid 0, you are uid $other: refused"

echo "# 1. the verbs, as uid $other"
as_other ibv_devices >"$tmp/devices.out" 2>"$tmp/devices.err" && fail "ibv_devices succeeded"
grep -q "$refusal" "$tmp/devices.err" || fail "ibv_devices: no refusal message"
grep -q "Permission denied" "$tmp/devices.err" || fail "ibv_devices: not EACCES"
as_other ibv_devinfo >"$tmp/devinfo.out" 2>"$tmp/devinfo.err" && fail "ibv_devinfo succeeded"
grep -q "$refusal" "$tmp/devinfo.err" || fail "ibv_devinfo: no refusal message"
grep -q "soft0\|hca_id\|node_guid" "$tmp/devinfo.out" "$tmp/devinfo.err" &&
	fail "ibv_devinfo learnt something of the device"
as_other "$trust" list >"$tmp/list.out" 2>"$tmp/list.err" || fail "sr_trust list failed"
grep -qx "list: NULL errno EACCES" "$tmp/list.out" || fail "ibv_get_device_list was not refused"
grep -q "$refusal" "$tmp/list.err" || fail "sr_trust list: no refusal message"
echo "refused, with: $(head -n 1 "$tmp/list.err")"

echo "# 2. softrdma status, as uid $other"
as_other "$tmp/bin/softrdma" status >"$tmp/status.out" 2>"$tmp/status.err" &&
	fail "softrdma status succeeded"
grep -q "$refusal" "$tmp/status.err" || fail "softrdma status: no refusal message"
[ -s "$tmp/status.out" ] && fail "softrdma status printed something on stdout"
grep -Eiq 'rkey|lkey|mr |addr|0x[0-9a-f]|device|process|qp |gid' "$tmp/status.out" "$tmp/status.err" &&
	fail "softrdma status let some state through"
echo "refused, with: $(cat "$tmp/status.err")"

echo "# 3. the protocol by hand, as uid $other"
for op in hello monitor status get_fd mr_map; do
	as_other "$trust" probe $op >"$tmp/probe_$op.out" 2>&1 || fail "sr_trust probe $op failed"
	grep -qx "reply: status -13 reason 1 fds 0" "$tmp/probe_$op.out" ||
		fail "probe $op: not refused with the uid reason, or got a descriptor"
	grep -qx "then: closed" "$tmp/probe_$op.out" || fail "probe $op: the daemon kept the connection"
	echo "$op: $(tr '\n' ' ' <"$tmp/probe_$op.out")"
done
as_other "$trust" silent >"$tmp/silent.out" 2>&1 || fail "sr_trust silent failed"
ms=$(sed -n 's/^silent: closed after \([0-9]*\) ms$/\1/p' "$tmp/silent.out")
[ -n "$ms" ] && [ "$ms" -le 3000 ] || fail "a silent connection of uid $other was kept open"
cat "$tmp/silent.out"
[ "$(grep -c "refusing .*uid $other" "$dlog")" -ge 9 ] || fail "the daemon did not log every refusal"
"$SR" status >"$tmp/root_status2.out" 2>&1 || fail "root's status failed afterwards"
grep -q "^1 process(es) with resources" "$tmp/root_status2.out" ||
	fail "a refused client left something behind"
[ "$(grep -c . "$tmp/root_status2.out")" = "$before" ] || fail "root's status changed"

echo "# 4. uid $other's own daemon serves it; root's device still refused"
theirs=softrdma-trust-$$-other
# (simple commands, not as_other, in the background: $! is then the
# process itself, which sr_cleanup stops by PID)
env SOFTRDMA_SOCKET=$theirs "${setpriv[@]}" "$tmp/bin/softrdmad" --idle 0 2>"$tmp/other/daemon.log" &
SR_PIDS+=($!)
for _ in $(seq 100); do
	SOFTRDMA_SOCKET=$theirs as_other "$tmp/bin/softrdma" status 2>/dev/null | grep -q '^device' && break
	sleep 0.05
done
SOFTRDMA_SOCKET=$theirs as_other "$trust" list >"$tmp/own.out" 2>&1 || fail "sr_trust list failed"
grep -qx "open: ok" "$tmp/own.out" || fail "uid $other's own daemon did not serve it"
SOFTRDMA_SOCKET=$theirs as_other "$trust" open-at "$mine" >"$tmp/open_at.out" 2>"$tmp/open_at.err" ||
	fail "sr_trust open-at failed"
grep -qx "open: errno EACCES" "$tmp/open_at.out" || fail "ibv_open_device at root's daemon not EACCES"
grep -q "$refusal" "$tmp/open_at.err" || fail "ibv_open_device: no refusal message"
echo "own daemon: $(tr '\n' ' ' <"$tmp/own.out"); root's: $(cat "$tmp/open_at.out")"

echo "# 5. a daemon of uid $other squatting a name is not used by root"
fake=softrdma-trust-$$-fake
"${setpriv[@]}" "$trust" fake-daemon "$fake" >"$tmp/fake.out" 2>&1 &
fpid=$!
SR_PIDS+=($fpid)
for _ in $(seq 100); do
	grep -q '^fake: ready' "$tmp/fake.out" && break
	sleep 0.05
done
SOFTRDMA_SOCKET=$fake "$trust" list >"$tmp/squat.out" 2>"$tmp/squat.err" || fail "sr_trust list failed"
grep -qx "list: NULL errno EACCES" "$tmp/squat.out" || fail "root's library used uid $other's daemon"
grep -q "runs as uid $other, you are uid 0: not using it" "$tmp/squat.err" ||
	fail "no message about the squatter"
wait $fpid
grep -q "client sent op" "$tmp/fake.out" && fail "the squatter got a request beyond HELLO"
grep -qx "fake: client closed" "$tmp/fake.out" || fail "the squatter's client did not hang up"
echo "not used, with: $(cat "$tmp/squat.err")"
echo "PASS"
