# Two softrdma hosts on one machine, for tests (source this file).
#
# A host is a network namespace (docs/architecture.md, "Discovery"), so two
# hosts are two namespaces joined by a veth pair, each with its own private
# softrdmad.  Nothing outside the two namespaces is touched: the veth is
# created straight inside them, and the addresses exist only there.
#
#   nn_setup BUILD_DIR [MTU]   create hosts a and b (MTU of the veth: 1500 by
#                              default, or 9000), start their daemons; exits
#                              77 (ctest SKIP_RETURN_CODE) if namespaces
#                              cannot be made here (not root and no user
#                              namespaces, no `ip netns`);
#                              installs nn_cleanup as the EXIT trap;
#                              NN_NO_DAEMON=1: namespaces only, no daemons
#                              (bench/link.sh); NN_DAEMON_LOG=F: the daemons'
#                              stderr goes to F.a and F.b; NN_DAEMON_LOG_DIR=D:
#                              to D/nn-daemon-<pid>.a and .b (kept);
#                              NN_DAEMON_LOG_LEVEL=N: the daemons' SOFTRDMA_LOG;
#                              NN_DAEMON_LOG_INFO=1: they log at info to a
#                              temporary file, for nn_daemon_logs;
#                              NN_PCAP=F: the veth's packets (headers) are
#                              captured into F (pcapng, for tshark)
#   nn_daemon_logs [N]         the last N (30) lines of each daemon's log,
#                              if it has one: what a failed test shows of
#                              the daemons' side (clients dropped and why,
#                              QPNs with no QP, why a QP's retries ran
#                              out), then nn_udp_report
#   nn_udp_report              each host's kernel UDP errors and its RoCEv2
#                              sockets' queues and drops
#   on_a CMD... / on_b CMD...  run CMD in host a / b with the environment of
#                              that host's daemon (LD_LIBRARY_PATH=build/lib,
#                              SOFTRDMA_SOCKET, SOFTRDMA_NO_SPAWN=1)
#   on_host a|b CMD...         the same, host named by argument
#   addr_a / addr_b [-6]       the host's veth IPv4 address (-6: its IPv6 ULA)
#   nn_gid_index a|b ADDR      index of the RoCE v2 GID of ADDR (IPv4 or
#                              IPv6 as printed by ibv_devinfo) in soft0's table
#   nn_bg a|b LOG CMD...       CMD in the background in a host, output to LOG;
#                              sets NN_LAST_PID; stopped by nn_cleanup
#   nn_wait_port a|b PORT      wait until a TCP port listens in that host
#   nn_cleanup                 stop what was started (by PID), delete both
#                              namespaces (also runs on EXIT, INT, TERM)
#   nn_sanitizer_reports       in a sanitizer build (SOFTRDMA_SANITIZE):
#                              prints the reports the two daemons wrote so
#                              far (their stderr goes to a file then) and
#                              fails if there are any
#
# Variables after nn_setup: NN_A, NN_B (namespace names, sr2h-<$$>-a/-b),
# NN_IF (the veth's name, the same in both), NN_MTU, NN_N (third byte of
# 10.99.N.0/30 and the third group of fd00:99:N::/64, from $$), NN_BUILD,
# NN_SR (the softrdma CLI), NN_SOCK_A / NN_SOCK_B, NN_DPID_A / NN_DPID_B,
# NN_SAN (the build's sanitizer: address, thread or empty).
#
# A sanitizer build's libibverbs needs its runtime loaded first: Debian's
# ibv_devinfo (nn_gid_index) then runs with it in LD_PRELOAD.
#
# Every process started here (daemons and nn_bg) carries a parent-death
# signal (setpriv --pdeathsig TERM), so even a test killed with SIGKILL (a
# ctest timeout) leaves no daemon behind; only the two namespace names stay
# (`ip netns list | grep sr2h-`), until a later run with the same PID
# removes them.

source "$(dirname "${BASH_SOURCE[0]}")/gid_index.sh"

# Not root: the script that sources this file runs again, from the start and
# with its own command line (/proc/$$/cmdline), as root of a user namespace
# of the caller's own with its own mount and network namespaces, as
# scripts/two-hosts.sh does; `ip netns` then keeps its names on a tmpfs of
# that mount namespace, and everything goes when the script ends.  NN_USERNS
# says so afterwards (1); the daemons cannot raise their UDP buffers past
# net.core.rmem_max there (two-hosts.sh).  Where unprivileged user
# namespaces are off, nn_setup skips.  NN_ALWAYS_USERNS=1 takes that way
# for root as well (scripts/two-hosts.sh: nothing outlives the script).
if { [ "$(id -u)" != 0 ] || [ "${NN_ALWAYS_USERNS:-}" = 1 ]; } && [ -z "${NN_USERNS:-}" ] &&
	unshare --user --map-root-user --mount --net true 2>/dev/null; then
	mapfile -d '' nn_argv </proc/$$/cmdline
	NN_USERNS=0 exec unshare --user --map-root-user --mount --net --kill-child -- "${nn_argv[@]}"
fi
if [ "${NN_USERNS:-}" = 0 ]; then
	if [ -d /run/netns ]; then
		mount -t tmpfs -o mode=0755 sr2h /run/netns
	else
		mount -t tmpfs -o mode=0755 sr2h /run && mkdir /run/netns
	fi || { echo "nn: cannot mount a tmpfs for ip netns in the user namespace" >&2; exit 1; }
	export NN_USERNS=1
fi

NN_PIDS=()
NN_A= NN_B= NN_DPID_A= NN_DPID_B=
NN_IF=srveth

nn_skip() {
	echo "SKIP: $*"
	exit 77
}

nn_setup() {
	local i
	NN_BUILD=$(cd "$1" && pwd -P) || return 1
	NN_MTU=${2:-1500}
	NN_SR=$NN_BUILD/bin/softrdma
	NN_SAN=$(sed -n 's/^SOFTRDMA_SANITIZE:[A-Z]*=//p' "$NN_BUILD/CMakeCache.txt" 2>/dev/null)
	if [ -n "${NN_DAEMON_LOG_DIR:-}" ] && [ -z "${NN_DAEMON_LOG:-}" ]; then
		NN_DAEMON_LOG=$NN_DAEMON_LOG_DIR/nn-daemon-$$
	elif { [ -n "$NN_SAN" ] || [ -n "${NN_DAEMON_LOG_INFO:-}" ]; } && [ -z "${NN_DAEMON_LOG:-}" ]; then
		NN_DAEMON_LOG=$(mktemp -u /tmp/nn-daemon-$$.XXXXXX)
		NN_DAEMON_LOG_TMP=1
	fi
	[ -n "${NN_DAEMON_LOG_INFO:-}" ] && : "${NN_DAEMON_LOG_LEVEL:=2}"
	NN_N=$(($$ % 250 + 1))
	[ "$(id -u)" = 0 ] || nn_skip "not root, and no user namespace: cannot create network namespaces"
	# NN_NEEDS_RCVBUF=1: the test streams UC messages of megabytes, which
	# nothing resends, into the 128 MiB receive buffer the daemons ask for
	# (wire/udp.h); in a user namespace they get 2 x net.core.rmem_max
	if [ "${NN_NEEDS_RCVBUF:-}" = 1 ] && [ "${NN_USERNS:-}" = 1 ] &&
		[ $(($(cat /proc/sys/net/core/rmem_max) * 2)) -lt $((128 << 20)) ]; then
		nn_skip "not root: the daemons' UDP receive buffer is 2 x net.core.rmem_max" \
			"($(cat /proc/sys/net/core/rmem_max)), too small for this UC stream"
	fi
	command -v ip >/dev/null || nn_skip "no ip(8) (iproute2)"
	command -v setpriv >/dev/null || nn_skip "no setpriv(1) (util-linux)"

	NN_A=sr2h-$$-a
	NN_B=sr2h-$$-b
	trap nn_cleanup EXIT
	trap 'exit 130' INT TERM HUP
	# a name with our PID can only be left over from a run killed before
	# its cleanup (a ctest timeout) by an earlier process with this PID
	for i in "$NN_A" "$NN_B"; do
		[ -e "/run/netns/$i" ] && echo "nn_setup: removing stale namespace $i" && ip netns del "$i"
	done
	ip netns add "$NN_A" 2>/dev/null || { NN_A=; nn_skip "ip netns add is not permitted here"; }
	ip netns add "$NN_B" || { NN_B=; echo "nn_setup: ip netns add $NN_B failed" >&2; return 1; }
	for i in "$NN_A" "$NN_B"; do
		# no duplicate address detection: the link-local addresses are
		# usable at once, so the GID table is complete when the daemon
		# starts (it reads the addresses once)
		ip netns exec "$i" sysctl -qw net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.all.accept_dad=0 ||
			return 1
	done
	ip link add "$NN_IF" mtu "$NN_MTU" netns "$NN_A" type veth peer name "$NN_IF" mtu "$NN_MTU" netns "$NN_B" ||
		{ echo "nn_setup: cannot create the veth pair" >&2; return 1; }
	ip -n "$NN_A" addr add "$(addr_a)/30" dev "$NN_IF" &&
		ip -n "$NN_B" addr add "$(addr_b)/30" dev "$NN_IF" &&
		ip -n "$NN_A" addr add "$(addr_a -6)/64" dev "$NN_IF" nodad &&
		ip -n "$NN_B" addr add "$(addr_b -6)/64" dev "$NN_IF" nodad &&
		ip -n "$NN_A" link set lo up && ip -n "$NN_B" link set lo up &&
		ip -n "$NN_A" link set "$NN_IF" up && ip -n "$NN_B" link set "$NN_IF" up ||
		{ echo "nn_setup: cannot configure the veth pair" >&2; return 1; }
	# the kernel adds the fe80:: address when the link comes up; wait for
	# it so that both daemons see every address
	for i in $(seq 100); do
		ip -n "$NN_A" -6 -o addr show dev "$NN_IF" scope link | grep -q fe80 &&
			ip -n "$NN_B" -6 -o addr show dev "$NN_IF" scope link | grep -q fe80 && break
		sleep 0.02
	done

	if [ -n "${NN_PCAP:-}" ]; then
		# the link itself, as the kernel carries it: unlike `softrdma
		# trace`, this changes nothing of softrdma's paths; headers only
		ip netns exec "$NN_A" dumpcap -q -i "$NN_IF" -s 128 -w "$NN_PCAP" 2>/dev/null &
		NN_PIDS+=($!)
		for i in $(seq 100); do [ -s "$NN_PCAP" ] && break; sleep 0.02; done
	fi
	NN_SOCK_A=softrdma-2h-$$-a
	NN_SOCK_B=softrdma-2h-$$-b
	[ -n "${NN_NO_DAEMON:-}" ] && return 0
	nn_start_daemon a && nn_start_daemon b || return 1
	for i in a b; do
		nn_wait_daemon $i || { echo "nn_setup: softrdmad of host $i did not come up" >&2; return 1; }
	done
}

# ip netns exec execs the command (setpriv, then env, then the program), so
# the PID of the background job is the program's, and its parent (for the
# parent-death signal) is this shell.
nn_start_daemon() {
	local h=$1
	# setsid: in a session of its own, as the library starts it
	# (core/daemon_link.c; tests/lib.sh, docs/decisions.md 54); a shell
	# without job control is no group leader, so setsid(1) execs, no fork
	# (NN_DAEMON_SETSID=0: in the test's session, as before, to measure it)
	local ss=setsid
	[ "${NN_DAEMON_SETSID:-1}" = 0 ] && ss=
	nn_cmd "$h" || return 1
	if [ -n "${NN_DAEMON_LOG:-}" ]; then
		"${NN_CMD[@]}" env ${NN_DAEMON_LOG_LEVEL:+SOFTRDMA_LOG=$NN_DAEMON_LOG_LEVEL} \
			$ss "$NN_BUILD/bin/softrdmad" --idle 0 </dev/null >/dev/null 2>"$NN_DAEMON_LOG.$h" &
	else
		"${NN_CMD[@]}" $ss "$NN_BUILD/bin/softrdmad" --idle 0 </dev/null >/dev/null &
	fi
	printf -v "NN_DPID_${h^^}" %s $!
}

nn_daemon_logs() {
	local h
	[ -n "${NN_DAEMON_LOG:-}" ] || return 0
	for h in a b; do
		[ -r "$NN_DAEMON_LOG.$h" ] && tail -"${1:-30}" "$NN_DAEMON_LOG.$h" | sed "s/^/[daemon $h] /"
	done
	nn_udp_report
	return 0
}

# What each host's kernel counted of UDP: datagrams it refused or dropped
# (/proc/net/snmp), and the RoCEv2 port's sockets' queues and drops
# (/proc/net/udp*: a datagram that came and was never read waits there).
nn_udp_report() {
	local h
	for h in a b; do
		on_host "$h" awk -v h="$h" '
			FILENAME ~ /snmp/ && /^Udp:/ { if (!n++) { split($0, k); next }
				for (i = 2; i <= NF; i++) if ($i != 0 && k[i] ~ /Err|NoPorts/) e = e " " k[i] " " $i }
			FILENAME ~ /udp/ && $2 ~ /:12B7$/ { s++; split($5, q, ":")
				if (q[2] != "00000000" || $NF != 0) w = w " [inode " $10 ": rx_queue 0x" q[2] ", drops " $NF "]" }
			END { printf "[udp %s] errors:%s; port 4791: %d sockets%s\n", h, e ? e : " none", s, w ? w : ", none with datagrams queued or dropped" }
		' /proc/net/snmp /proc/net/udp /proc/net/udp6
	done
}

nn_wait_daemon() {
	for _ in $(seq 100); do
		on_host "$1" "$NN_SR" status 2>/dev/null | grep -q '^device' && return 0
		sleep 0.05
	done
	return 1
}

# nn_cmd a|b: NN_CMD=(the command prefix that runs a program in that host)
nn_cmd() {
	local ns sock
	case $1 in
	a) ns=$NN_A sock=$NN_SOCK_A ;;
	b) ns=$NN_B sock=$NN_SOCK_B ;;
	*) echo "nn: no host '$1' (a or b)" >&2; return 2 ;;
	esac
	NN_CMD=(ip netns exec "$ns" setpriv --pdeathsig TERM env
		LD_LIBRARY_PATH="$NN_BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
		SOFTRDMA_SOCKET="$sock" SOFTRDMA_NO_SPAWN=1)
}

on_host() {
	local h=$1
	shift
	nn_cmd "$h" || return 2
	"${NN_CMD[@]}" "$@"
}

on_a() { on_host a "$@"; }
on_b() { on_host b "$@"; }

addr_a() { if [ "${1:-}" = -6 ]; then echo "fd00:99:$NN_N::1"; else echo "10.99.$NN_N.1"; fi; }
addr_b() { if [ "${1:-}" = -6 ]; then echo "fd00:99:$NN_N::2"; else echo "10.99.$NN_N.2"; fi; }

nn_gid_index() {
	local pre=()

	case ${NN_SAN:-} in
	address) pre=(LD_PRELOAD="$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0) ;;
	thread) pre=(LD_PRELOAD="$(gcc -print-file-name=libtsan.so)") ;;
	esac
	on_host "$1" env "${pre[@]}" ibv_devinfo -v 2>/dev/null | gid_from_devinfo "$2"
}

nn_sanitizer_reports() {
	local n
	[ -n "${NN_SAN:-}" ] || return 0
	n=$(cat "$NN_DAEMON_LOG".a "$NN_DAEMON_LOG".b 2>/dev/null |
		grep -c -E 'ERROR: AddressSanitizer|WARNING: ThreadSanitizer|runtime error:')
	[ "$n" = 0 ] && return 0
	echo "the daemons' sanitizer ($NN_SAN) reported $n problem(s):"
	grep -h -A30 -E 'ERROR: AddressSanitizer|WARNING: ThreadSanitizer|runtime error:' \
		"$NN_DAEMON_LOG".a "$NN_DAEMON_LOG".b | head -120
	return 1
}

nn_bg() {
	local h=$1 log=$2
	shift 2
	nn_cmd "$h" || return 2
	"${NN_CMD[@]}" "$@" >"$log" 2>&1 &
	NN_LAST_PID=$!
	NN_PIDS+=("$NN_LAST_PID")
}

nn_wait_port() {
	for _ in $(seq 200); do
		on_host "$1" ss -ltnH "sport = :$2" | grep -q . && return 0
		sleep 0.05
	done
	return 1
}

nn_cleanup() {
	local p ns
	for p in "${NN_PIDS[@]}" $NN_DPID_A $NN_DPID_B; do
		kill "$p" 2>/dev/null
	done
	for p in "${NN_PIDS[@]}" $NN_DPID_A $NN_DPID_B; do
		wait "$p" 2>/dev/null
	done
	NN_PIDS=()
	NN_DPID_A= NN_DPID_B=
	for ns in "$NN_A" "$NN_B"; do
		[ -n "$ns" ] && ip netns del "$ns" 2>/dev/null
	done
	NN_A= NN_B=
	if [ -n "${NN_DAEMON_LOG_TMP:-}" ]; then
		rm -f "$NN_DAEMON_LOG".a "$NN_DAEMON_LOG".b
		NN_DAEMON_LOG_TMP=
	fi
}
