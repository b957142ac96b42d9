# Shared shell helpers for softrdma's tests (source this file).
#
# Every test runs against its own softrdmad, found at a private abstract
# socket name (SOFTRDMA_SOCKET), so tests can run in parallel without
# seeing each other's resources, and each test stops exactly the daemon it
# started (by PID) when it exits.
#
#   sr_setup BUILD_DIR     start a private daemon; sets SR (the softrdma CLI);
#                          its stderr goes to $SR_DAEMON_LOG if that is set
#   sr_wait_port PORT      wait until a TCP port listens (server ready)
#   sr_cleanup             stop what sr_setup and sr_bg started (also on EXIT)
#   sr_bg LOGFILE CMD...   run CMD in the background, remembered for cleanup
#   sr_gid_index [ADDR]    index of the RoCE v2 GID of ADDR (default
#                          127.0.0.1, which every host has) in soft0's table

source "$(dirname "${BASH_SOURCE[0]}")/gid_index.sh"

SR_PIDS=()

sr_setup() {
	SR_BUILD=$(cd "$1" && pwd -P)
	SR="$SR_BUILD/bin/softrdma"
	export SOFTRDMA_SOCKET="softrdma-test-$$-$RANDOM"
	export SOFTRDMA_NO_SPAWN=1
	# in a session of its own, as the library starts it (core/daemon_link.c):
	# the scheduler then shares the CPUs between it and the test's busy
	# pollers, instead of giving it a share of their autogroup's
	# (docs/decisions.md 54); out of the test's process group, it ends
	# with the test (pdeathsig) even if the test is killed
	if [ -n "${SR_DAEMON_LOG:-}" ]; then
		setpriv --pdeathsig TERM setsid "$SR_BUILD/bin/softrdmad" --idle 0 2>"$SR_DAEMON_LOG" &
	else
		setpriv --pdeathsig TERM setsid "$SR_BUILD/bin/softrdmad" --idle 0 &
	fi
	SR_DAEMON_PID=$!
	# a caller's own EXIT trap that calls sr_cleanup stays (it also
	# removes the caller's temporary files)
	case $(trap -p EXIT) in
	*sr_cleanup*) ;;
	*) trap sr_cleanup EXIT ;;
	esac
	for _ in $(seq 100); do
		"$SR" status >/dev/null 2>&1 && "$SR" status | grep -q '^device' && return 0
		sleep 0.05
	done
	echo "softrdmad did not come up" >&2
	return 1
}

sr_bg() {
	local log=$1
	shift
	"$@" >"$log" 2>&1 &
	SR_PIDS+=($!)
	SR_LAST_PID=$!
}

sr_gid_index() {
	"$SR" run -- ibv_devinfo -v 2>/dev/null | gid_from_devinfo "${1:-127.0.0.1}"
}

sr_wait_port() {
	for _ in $(seq 200); do
		ss -ltnH "sport = :$1" | grep -q . && return 0
		sleep 0.05
	done
	return 1
}

sr_cleanup() {
	for p in "${SR_PIDS[@]}"; do
		kill "$p" 2>/dev/null
	done
	for p in "${SR_PIDS[@]}"; do
		wait "$p" 2>/dev/null
	done
	SR_PIDS=()
	if [ -n "${SR_DAEMON_PID:-}" ]; then
		kill "$SR_DAEMON_PID" 2>/dev/null
		wait "$SR_DAEMON_PID" 2>/dev/null
		SR_DAEMON_PID=
	fi
}
