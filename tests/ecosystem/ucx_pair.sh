#!/bin/bash
# One ucx_perftest test between two processes on this host, both under
# `softrdma run` (issue 13): ucx_pair.sh BUILD_DIR [VAR=VALUE...] -- ARGS...
# runs `ucx_perftest ARGS` as the server, then as the client against
# localhost (the perftest's own TCP exchange; the data goes over softrdma).
# Passes when both exit 0 and the client prints its final figures; for
# UCP tests (UCX_TLS set) the client must also report that its endpoint
# used the requested transport on soft0:1.
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
build=$1
shift
envs=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	envs+=("$1")
	shift
done
shift
if ! command -v ucx_perftest >/dev/null; then
	echo "SKIP: ucx_perftest is not installed (Debian package ucx-utils; make deps installs it)"
	exit 77
fi
sr_setup "$build" || exit 1
port=$((20000 + RANDOM % 20000))
while ss -ltnH "sport = :$port" | grep -q .; do port=$((port + 1)); done
srv=$(mktemp) cli=$(mktemp)
trap 'sr_cleanup; rm -f "$srv" "$cli"' EXIT
# UCX's info log names the transports a UCP endpoint uses
ucp_log=()
for e in "${envs[@]}"; do
	case $e in UCX_TLS=*) ucp_log=(UCX_LOG_LEVEL=info) ;; esac
done
sr_bg "$srv" env "${envs[@]}" "${ucp_log[@]}" timeout 240 "$SR" run -q -- ucx_perftest "$@" -p $port
srv_pid=$SR_LAST_PID
if ! sr_wait_port $port; then
	echo "FAIL: the server did not listen on port $port"
	cat "$srv"
	exit 1
fi
env "${envs[@]}" "${ucp_log[@]}" timeout 200 "$SR" run -q -- ucx_perftest "$@" -p $port localhost \
	>"$cli" 2>&1
crc=$?
wait "$srv_pid"
src=$?
SR_PIDS=()
echo "--- client (exit $crc)"
cat "$cli"
echo "--- server (exit $src)"
cat "$srv"
fail=0
[ $crc = 0 ] || { echo "FAIL: the client exited $crc"; fail=1; }
[ $src = 0 ] || { echo "FAIL: the server exited $src"; fail=1; }
grep -q '^Final:' "$cli" || { echo "FAIL: no final figures"; fail=1; }
for e in "${envs[@]}"; do
	case $e in
	UCX_TLS=*)
		tl=${e#UCX_TLS=}
		tl=${tl%%,*}
		if ! grep -Eq "ep_cfg\[[0-9]+\]:.*$tl/soft0:1" "$cli"; then
			echo "FAIL: the client's endpoint does not say it uses $tl on soft0:1"
			fail=1
		fi
		;;
	esac
done
[ $fail = 0 ] && echo PASS
exit $fail
