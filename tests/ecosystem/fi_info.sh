#!/bin/bash
# libfabric finds softrdma's device (issue 13): `fi_info -p verbs` lists soft0
# with the verbs provider's MSG endpoints (FI_EP_MSG over RC through
# rdma_cm), verbs;ofi_rxm (FI_EP_RDM over those) and verbs;ofi_rxd (FI_EP_RDM
# over the soft0-dgram domain, UD).  Checked under `softrdma run` and with
# LD_LIBRARY_PATH alone (libfabric's verbs provider needs no device node).
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../lib.sh"
if ! command -v fi_info >/dev/null; then
	echo "SKIP: fi_info is not installed (Debian package libfabric-bin; make deps installs it)"
	exit 77
fi
sr_setup "$1" || exit 1
fails=0
check() { # check NAME CONDITION-COMMAND...
	local name=$1
	shift
	if "$@"; then echo "PASS $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
# has PROVIDER DOMAIN TYPE: a block of fi_info's listing with those three
has() {
	awk -v p="$2" -v d="$3" -v t="$4" '
		$1 == "provider:" { prov = $2; dom = "" }
		$1 == "domain:" { dom = $2 }
		$1 == "type:" && prov == p && dom == d && $2 == t { found = 1 }
		END { exit !found }' <<<"$1"
}
for how in run env; do
	if [ $how = run ]; then
		out=$("$SR" run -q -- fi_info -p verbs 2>&1)
	else
		out=$(env LD_LIBRARY_PATH="$SR_BUILD/lib" fi_info -p verbs 2>&1)
	fi
	rc=$?
	echo "--- fi_info -p verbs ($how): exit $rc"
	grep -E 'provider:|domain:|type:|protocol:' <<<"$out"
	check "$how: fi_info exits 0" [ $rc = 0 ]
	check "$how: verbs, soft0, FI_EP_MSG" has "$out" verbs soft0 FI_EP_MSG
	check "$how: verbs, soft0-dgram, FI_EP_DGRAM" has "$out" verbs soft0-dgram FI_EP_DGRAM
	check "$how: verbs;ofi_rxm, soft0, FI_EP_RDM" has "$out" "verbs;ofi_rxm" soft0 FI_EP_RDM
	check "$how: verbs;ofi_rxd, soft0-dgram, FI_EP_RDM" has "$out" "verbs;ofi_rxd" soft0-dgram FI_EP_RDM
done
# and without our library, the system's libibverbs sees no device: the
# listing above is softrdma's
out=$(env -u LD_LIBRARY_PATH fi_info -p verbs 2>&1)
if ! grep -q 'domain: soft0' <<<"$out"; then
	echo "(without softrdma's libraries: no soft0, as expected)"
else
	echo "FAIL: soft0 listed without softrdma's libraries"
	fails=$((fails + 1))
fi
[ $fails = 0 ] && echo PASS
exit $((fails > 0))
