#!/bin/bash
# Connection set-up, build against build: is a change to the CM path
# faster?  On this kind of machine single cmtime runs of one build differ by
# ±20%, so medians of a few runs cannot see a 5% change; this runs PAIRS
# pairs of Debian's cmtime -c N (each pair: build A then build B, the order
# flipping every pair, fresh daemons for every run) and reports the median
# of the per-pair ratios B/A, which the machine's slow drifts cancel out of.
#   bench/cm_ab.sh BUILD_A BUILD_B [PAIRS=20] [N=1000] [twohost|onehost]
# twohost (the default; root) runs the server in one network namespace and
# the client in another (tests/lib_netns.sh, MTU 1500); onehost runs both
# against a private softrdmad over 127.0.0.1.  Prints one line per run:
#   BUILD addr ROUTE CONNECT full FULL   (ms for N connections)
# then, per step, median B/A over the pairs and how many pairs B was faster.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# BUILD_X: a build directory, or DIR:VAR=VALUE[,VAR=VALUE...] to run that
# build with those variables in the environment of its daemons and cmtime
# (an A/B of one build with a setting: build build:SOFTRDMA_CTL_SPIN_US=0)
spec() { local d=${1%%:*}; d=$(cd "$d" && pwd -P) || exit 2; [ "$1" = "${1#*:}" ] && echo "$d" || echo "$d:${1#*:}"; }
A=$(spec "$1")
B=$(spec "$2")
PAIRS=${3:-20}
N=${4:-1000}
WHERE=${5:-twohost}
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
ulimit -n 4096 2>/dev/null

# steps: the total (first figure) of cmtime's resolve addr/route and
# connect lines, and their sum
steps() {
	awk -v b="$1" '/^resolve addr/ { split($0, f, ":"); split(f[2], v, " "); a = v[1] }
	/^resolve route/ { split($0, f, ":"); split(f[2], v, " "); r = v[1] }
	/^connect / { split($0, f, ":"); split(f[2], v, " "); c = v[1] }
	END { if (c == "") print b, "fail"; else print b, a, r, c, a + r + c }'
}

# with_env SPEC: exports SPEC's variables, prints its directory
with_env() {
	local kv
	if [ "$1" != "${1#*:}" ]; then
		IFS=, read -ra kv <<<"${1#*:}"
		for v in "${kv[@]}"; do export "${v?}"; done
	fi
	BUILD_DIR=${1%%:*}
}

run_twohost() (
	source "$ROOT/tests/lib_netns.sh"
	with_env "$1"
	nn_setup "$BUILD_DIR" 1500 >/dev/null || exit 1
	p=$((20000 + RANDOM % 20000))
	nn_bg a /dev/null timeout 120 "$NN_SR" run -q -- cmtime -p "$p"
	for _ in $(seq 200); do on_a "$NN_SR" status | grep -q "LISTEN .*:$p " && break; sleep 0.02; done
	on_b timeout 120 "$NN_SR" run -q -- cmtime -s "$(addr_a)" -p "$p" -c "$N" 2>&1 | steps "$1"
	kill "$NN_LAST_PID" 2>/dev/null
	wait "$NN_LAST_PID" 2>/dev/null
)

run_onehost() (
	source "$ROOT/tests/lib.sh"
	with_env "$1"
	sr_setup "$BUILD_DIR" >/dev/null || exit 1
	trap 'sr_cleanup' EXIT
	p=$((20000 + RANDOM % 20000))
	sr_bg /dev/null timeout 120 "$SR" run -q -- cmtime -p "$p"
	for _ in $(seq 200); do "$SR" status | grep -q "LISTEN .*:$p " && break; sleep 0.02; done
	timeout 120 "$SR" run -q -- cmtime -s 127.0.0.1 -p "$p" -c "$N" 2>&1 | steps "$1"
)

case $WHERE in
twohost) [ "$(id -u)" = 0 ] || { echo "twohost needs root (network namespaces)" >&2; exit 2; } ;;
onehost) ;;
*) echo "usage: $0 BUILD_A BUILD_B [PAIRS] [N] [twohost|onehost]" >&2; exit 2 ;;
esac
for i in $(seq "$PAIRS"); do
	if [ $((i % 2)) = 1 ]; then order="$A $B"; else order="$B $A"; fi
	for b in $order; do
		"run_$WHERE" "$b" | tee -a "$OUT"
	done
done
python3 - "$OUT" "$A" "$B" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
a, b = sys.argv[2], sys.argv[3]
pairs = []
for i in range(0, len(rows) - 1, 2):
    x = {r[0]: r for r in rows[i:i + 2]}
    if a in x and b in x and 'fail' not in x[a] + x[b]:
        pairs.append((x[a], x[b]))
print(f"{len(pairs)} pairs of good runs ({len(rows)} runs); B/A, median [quartiles], B faster in:")
for k, name in ((1, 'resolve addr'), (2, 'resolve route'), (3, 'connect'), (4, 'full connect')):
    r = sorted(float(q[k]) / float(p[k]) for p, q in pairs if float(p[k]) > 0)
    if r:
        print(f"  {name:14s} {statistics.median(r):.3f} [{r[len(r) // 4]:.3f}-{r[3 * len(r) // 4]:.3f}]"
              f"  {sum(x < 1 for x in r)} of {len(r)}")
EOF
