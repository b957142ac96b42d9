#!/bin/bash
# Runs the control-socket fuzzer (build/bin/fuzz_daemon).
#   run.sh BUILD_DIR regress        replay regress/* and the seeds once
#   run.sh BUILD_DIR fuzz SECONDS [LIBFUZZER_ARGS...]
#                                   fuzz from the seeds for SECONDS (with
#                                   -jobs=N the logs are BUILD_DIR/fuzz/fuzz-*.log)
# The corpus grows in BUILD_DIR/fuzz/corpus; a crash, leak or hang leaves
# its input in BUILD_DIR/fuzz/artifacts (copy it to regress/ with the fix).
set -u
here=$(cd "$(dirname "$0")" && pwd -P)
[ $# -ge 2 ] || { echo "usage: $0 BUILD_DIR regress|fuzz [SECONDS]" >&2; exit 2; }
build=$(cd "$1" && pwd -P)
fuzzer=$build/bin/fuzz_daemon
work=$build/fuzz
mkdir -p "$work/seeds" "$work/corpus" "$work/artifacts"
"$build/bin/fuzz_gen_seeds" "$work/seeds" || exit 1

case $2 in
regress)
	inputs=("$work"/seeds/*)
	for f in "$here"/regress/*; do
		[ -f "$f" ] && inputs+=("$f")
	done
	echo "replaying ${#inputs[@]} inputs"
	exec "$fuzzer" -timeout=10 "${inputs[@]}"
	;;
fuzz)
	secs=${3:-60}
	shift $(($# < 3 ? $# : 3))
	cd "$work" || exit 1
	# -runs bounds nothing here but keeps a run finite if the clock does not
	exec "$fuzzer" "$@" -max_total_time="$secs" -runs=100000000 -timeout=10 -rss_limit_mb=2048 \
		-max_len=4096 -dict="$here/daemon.dict" -print_final_stats=1 \
		-artifact_prefix="$work/artifacts/" "$work/corpus" "$work/seeds"
	;;
*)
	echo "$0: unknown mode $2" >&2
	exit 2
	;;
esac
