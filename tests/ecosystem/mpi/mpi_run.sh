#!/bin/bash
# MPI over softrdma (issue 13): mpi_run.sh BUILD_DIR onehost|twohost [IMPL]
# runs our two-rank program (mpi_pair.c: ping-pong 1 B..1 MiB, allreduce,
# MPI_Put/MPI_Get in a window with fences, every byte checked) with one of
# Debian's MPIs, both over UCX's rc_verbs on soft0:1 (ud_verbs only as
# UCP's auxiliary transport for the wire-up: rc_verbs alone has none, "no
# auxiliary transport"):
#   openmpi (default): Open MPI 4.1, pml ucx and osc ucx, the BTLs limited
#            to self, so neither TCP nor shared memory can carry MPI data;
#   mpich:   MPICH 4.0, whose Debian build is ch4:ucx (not ch4:ofi, so
#            libfabric is not in its path), with MPIR_CVAR_NOLOCAL=1 so that
#            ranks MPICH takes for neighbours (one host; two namespaces
#            share one hostname too) may not use its shared-memory path
#            (Debian's build carried every byte through UCX without it in
#            our runs; the byte check below would see it if not).
# Modes:
#   onehost: the launcher under `softrdma run`, both ranks on this host
#            (private daemon);
#   twohost: two network namespaces joined by a veth (tests/lib_netns.sh);
#            the launcher and rank 0 in host a, rank 1 in host b, started by
#            the MPI's rsh launcher through an agent that runs the command
#            in b's namespace (ip netns exec, then `softrdma run`); the
#            launchers' own TCP goes over the veth.  MPICH's launcher
#            passes its whole environment to every rank unless told not to
#            (-genvnone): host a's SOFTRDMA_SOCKET would reach rank 1.
# Passes when the launcher exits 0 and rank 0 prints "mpi_pair: PASS", when
# UCX's log (UCX_LOG_LEVEL=info) shows every endpoint between the ranks on
# rc_verbs/soft0:1 (tag matching and RMA) and no transport but rc_verbs,
# ud_verbs on soft0:1 and self, and when softrdma carried at least the
# payload the program moved: onehost, the byte counter of `softrdma status`
# (the same-host path); twohost, the bytes the two hosts' RoCEv2 engines
# received (and rank 0 ran in host a's namespace, rank 1 in b's).
# Skips (77) without the launcher or the program (Debian: openmpi-bin and
# libopenmpi-dev; mpich and libmpich-dev), and twohost without root.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd -P)
mode=$2
impl=${3:-openmpi}
ucx_env=(UCX_TLS=rc_verbs,ud_verbs:aux,self UCX_NET_DEVICES=soft0:1 UCX_LOG_LEVEL=info)
case $impl in
openmpi)
	prog=$build/bin/mpi_pair launcher=mpirun.openmpi pkg="openmpi-bin, libopenmpi-dev"
	mpi_args=(-np 2 --bind-to none
		--mca pml ucx --mca osc ucx --mca btl self --mca coll ^sm,hcoll)
	for v in "${ucx_env[@]}"; do mpi_args+=(-x "$v"); done
	[ "$(id -u)" = 0 ] && mpi_args+=(--allow-run-as-root)
	;;
mpich)
	prog=$build/bin/mpi_pair_mpich launcher=mpiexec.mpich pkg="mpich, libmpich-dev"
	mpi_args=(-n 2)
	for v in "${ucx_env[@]}" MPIR_CVAR_NOLOCAL=1; do mpi_args+=(-genv "${v%%=*}" "${v#*=}"); done
	;;
*)
	echo "usage: $0 BUILD_DIR onehost|twohost [openmpi|mpich]" >&2
	exit 2
	;;
esac
command -v $launcher >/dev/null || { echo "SKIP: no $launcher (Debian packages $pkg)"; exit 77; }
[ -x "$prog" ] || {
	echo "SKIP: $prog was not built (no $impl compiler wrapper: Debian packages $pkg)"
	exit 77
}
tmp=$(mktemp -d)
chmod 755 "$tmp"

# bytes STATUS_FILE: the byte counter of `softrdma status`
bytes() { sed -n 's/^  counters:.* bytes \([0-9]*\)$/\1/p' "$1"; }
# rx NAME STATUS_FILE: a receive counter of the host's RoCEv2 engine
rx() { sed -n "s/^  roce v2 .* $1 \([0-9]*\) .*/\1/p" "$2"; }

fail=0
if [ "$mode" = onehost ]; then
	source "$here/../../lib.sh"
	trap 'sr_cleanup; rm -rf "$tmp"' EXIT
	sr_setup "$build" || exit 1
	"$SR" status >"$tmp/st0"
	timeout 150 "$SR" run -q -- $launcher "${mpi_args[@]}" "$prog" >"$tmp/out" 2>&1
	rc=$?
	"$SR" status >"$tmp/st1"
	cat "$tmp/out"
	b0=$(bytes "$tmp/st0") b1=$(bytes "$tmp/st1")
elif [ "$mode" = twohost ]; then
	source "$here/../../lib_netns.sh"
	nn_setup "$build" 1500 || exit 1
	trap 'nn_cleanup; rm -rf "$tmp"' EXIT
	# the rsh launchers run AGENT HOST COMMAND... as they would run ssh: the
	# command is one shell line; host b's address means host b (MPICH's
	# starts host a's proxy itself)
	nn_cmd b
	printf '%s\n' '#!/bin/bash' \
		"# the MPI launcher's rsh agent for this test: HOST CMD... in host b" \
		"[ \"\$1\" = $(addr_b) ] || { echo \"agent: unknown host \$1\" >&2; exit 1; }" \
		'shift' \
		"exec $(printf '%q ' "${NN_CMD[@]}") $(printf '%q' "$NN_SR") run -q -- /bin/sh -c \"\$*\"" \
		>"$tmp/agent"
	chmod 755 "$tmp/agent"
	on_a "$NN_SR" status >"$tmp/st0.a"
	on_b "$NN_SR" status >"$tmp/st0.b"
	if [ $impl = openmpi ]; then
		mpi_args+=(--host "localhost:1,$(addr_b):1" --mca plm_rsh_agent "$tmp/agent"
			--mca oob_tcp_if_include "$NN_IF")
	else
		mpi_args+=(-ppn 1 -hosts "$(addr_a),$(addr_b)" -launcher rsh
			-launcher-exec "$tmp/agent" -iface "$NN_IF" -genvnone)
	fi
	on_a timeout 150 "$NN_SR" run -q -- $launcher "${mpi_args[@]}" "$prog" >"$tmp/out" 2>&1
	rc=$?
	on_a "$NN_SR" status >"$tmp/st1.a"
	on_b "$NN_SR" status >"$tmp/st1.b"
	cat "$tmp/out"
	b0=0 b1=0
	for h in a b; do
		p0=$(rx rx_pkts "$tmp/st0.$h") p1=$(rx rx_pkts "$tmp/st1.$h")
		r0=$(rx rx_bytes "$tmp/st0.$h") r1=$(rx rx_bytes "$tmp/st1.$h")
		echo "host $h's engine received $((${p1:-0} - ${p0:-0})) RoCEv2 datagrams, $((${r1:-0} - ${r0:-0})) bytes"
		[ $((${p1:-0} - ${p0:-0})) -gt 0 ] || { echo "FAIL: nothing reached host $h over RoCEv2"; fail=1; }
		b0=$((b0 + ${r0:-0})) b1=$((b1 + ${r1:-0}))
	done
	for r in 0 1; do
		ns=$NN_A
		[ $r = 1 ] && ns=$NN_B
		want=$(ip netns exec "$ns" readlink /proc/self/ns/net)
		grep "^mpi_pair: rank $r of 2 on " "$tmp/out" | grep -qF ", $want" ||
			{ echo "FAIL: rank $r did not run in $ns ($want)"; fail=1; }
	done
else
	echo "usage: $0 BUILD_DIR onehost|twohost [openmpi|mpich]" >&2
	exit 2
fi

echo "--- checks"
[ "$rc" = 0 ] || { echo "FAIL: $launcher exited $rc"; fail=1; }
grep -q '^mpi_pair: PASS$' "$tmp/out" || { echo "FAIL: rank 0 did not print mpi_pair: PASS"; fail=1; }
# UCX's endpoint configurations: those to the peer (not self) name
# rc_verbs on soft0:1 for tag matching (pml ucx) and for RMA (osc ucx)
grep 'ep_cfg\[' "$tmp/out" >"$tmp/eps"
grep -v 'self/memory[0-9]*)' "$tmp/eps" | grep -q 'tag(rc_verbs/soft0:1)' ||
	{ echo "FAIL: no endpoint with tag matching on rc_verbs/soft0:1"; fail=1; }
grep -v 'self/memory[0-9]*)' "$tmp/eps" | grep -q 'rma(rc_verbs/soft0:1)' ||
	{ echo "FAIL: no endpoint with RMA on rc_verbs/soft0:1"; fail=1; }
others=$(grep -o '[a-z_0-9]*/[a-z_0-9:]*' "$tmp/eps" | sort -u |
	grep -vx -e 'rc_verbs/soft0:1' -e 'ud_verbs/soft0:1' -e 'self/memory[0-9]*')
[ -z "$others" ] || { echo "FAIL: endpoints on other transports: $others"; fail=1; }
echo "UCX endpoints: $(grep -o 'ep_cfg.*' "$tmp/eps" | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
payload=$(sed -n 's/^payload bytes \([0-9]*\)$/\1/p' "$tmp/out")
echo "payload moved by the program: ${payload:-?} bytes; softrdma carried $((${b1:-0} - ${b0:-0}))"
[ -n "$payload" ] && [ $((${b1:-0} - ${b0:-0})) -ge "$payload" ] ||
	{ echo "FAIL: softrdma carried less than the program's payload"; fail=1; }
[ $fail = 0 ] && echo PASS
exit $fail
