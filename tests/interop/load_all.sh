#!/bin/bash
# Load check for softrdma's drop-in libraries (ctest: interop_load_all).
#
# Every program shipped by Debian's ibverbs-utils, perftest, rdmacm-utils and
# qperf packages (listed with dpkg at run time, so nothing can be skipped) is
# started through `softrdma run` with LD_BIND_NOW=1, so that the dynamic
# linker must resolve every imported symbol and version node against our
# libibverbs/librdmacm/libmlx5/libefa before main() runs.  Each is asked for
# its usage text (--help, or -h when --help does not produce it); a program
# passes when it prints its own usage text, is not killed by a signal or the
# timeout, prints none of the dynamic-linker failure messages, and (for ELF
# programs) the dynamic linker's trace shows the rdma libraries resolving
# to the build tree rather than to the system's rdma-core.  The python3-pyverbs
# extension modules get the same treatment by importing them.
#
# Usage: load_all.sh BUILD_DIR    (uses BUILD_DIR/bin/softrdma and BUILD_DIR/lib)
set -u

if [ $# -ne 1 ] || [ ! -d "$1" ]; then
	echo "usage: $0 BUILD_DIR" >&2
	exit 2
fi
build=$(cd "$1" && pwd -P)
libdir=$build/lib
timeout_s=10
packages="ibverbs-utils perftest rdmacm-utils qperf"
# The libraries softrdma provides; a program that NEEDs one must get ours.
our_libs="libibverbs.so.1 librdmacm.so.1 libmlx5.so.1 libefa.so.1"
# What the dynamic linker prints when a library, symbol or version is missing.
ld_errors='symbol lookup error|version `|cannot open shared object|undefined symbol|error while loading shared libraries'

# A private daemon, stopped on exit (programs that open the device reach it).
source "$(dirname "$0")/../lib.sh"
sr_setup "$build" || exit 1

if [ -x "$build/bin/softrdma" ]; then
	runner=("$build/bin/softrdma" run --)
else
	# Until the CLI exists: what `softrdma run` does, by hand.
	echo "NOTE: $build/bin/softrdma not found; running with LD_LIBRARY_PATH=$libdir"
	runner=(env "LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
fi

passed=0
failed=0
pass() {
	echo "PASS $1${2:+ ($2)}"
	passed=$((passed + 1))
}
fail() {
	echo "FAIL $1: $2"
	failed=$((failed + 1))
}

# The first matching line of $2 for the extended regex $1, shortened.
first_match() {
	grep -m1 -E -- "$1" <<<"$2" | cut -c1-200
}

# Explain an exit status; empty when the process exited on its own.
describe_rc() {
	local rc=$1
	if [ "$rc" -eq 124 ]; then
		echo "timed out after ${timeout_s}s"
	elif [ "$rc" -eq 125 ] || [ "$rc" -eq 126 ]; then
		echo "could not be executed (status $rc)"
	elif [ "$rc" -eq 127 ]; then
		echo "could not be started (status 127)"
	elif [ "$rc" -gt 128 ] && [ "$rc" -le 192 ]; then
		echo "killed by signal $((rc - 128)) ($(kill -l $((rc - 128)) 2>/dev/null))"
	fi
}

# run_cmd CMD...: run under softrdma with LD_BIND_NOW=1, stdin from
# /dev/null and a timeout; sets $out (stdout+stderr) and $rc.
run_cmd() {
	out=$(LD_BIND_NOW=1 timeout -k 2 "$timeout_s" "${runner[@]}" "$@" \
		</dev/null 2>&1)
	rc=$?
}

is_elf() {
	[ "$(head -c 4 "$1" 2>/dev/null | od -An -c | tr -d ' \n')" = '177ELF' ]
}

# check_resolution PROG: ask the dynamic linker (as `ldd -r` does, but under
# softrdma's environment) which files PROG's libraries resolve to and
# whether every symbol binds.  Prints "OK <our libraries it uses>" or a
# description of the problem.
check_resolution() {
	local prog=$1 trace line lib path used=""
	trace=$(LD_BIND_NOW=1 timeout -k 2 "$timeout_s" "${runner[@]}" \
		/usr/bin/env LD_TRACE_LOADED_OBJECTS=1 LD_WARN=1 LD_BIND_NOW=1 \
		"$prog" </dev/null 2>&1)
	line=$(first_match "$ld_errors|not found" "$trace")
	if [ -n "$line" ]; then
		echo "dynamic linker: $line"
		return
	fi
	for lib in $our_libs; do
		path=$(awk -v l="$lib" '$1 == l && $2 == "=>" { print $3; exit }' \
			<<<"$trace")
		[ -n "$path" ] || continue
		if [ "$(readlink -f "$path")" != "$(readlink -f "$libdir/$lib")" ]; then
			echo "$lib resolves to $path, not to $libdir"
			return
		fi
		used="$used ${lib%%.so.1}"
	done
	echo "OK${used}"
}

# Per-program invocation.  Default: try --help, then -h; accept the output
# when it matches the usage regex.  Overrides for programs whose usage text
# looks different or that take no options at all.
args_for() {
	case "$1" in
	ibv_devices) echo "" ;; # takes no options; lists devices or fails
	*) echo "--help -h" ;;
	esac
}
usage_regex_for() {
	case "$1" in
	ibv_devices) echo '[Dd]evice' ;; # table header or "Failed to get IB devices list"
	rping) echo '^rping -[sc] ' ;; # its usage lines carry no "usage" word
	qperf) echo 'Synopsis|[Uu]sage' ;;
	*) echo '[Uu]sage' ;;
	esac
}

check_program() {
	local prog=$1 name args usage_re arg tried="" why line extra=""
	name=$(basename "$prog")
	args=$(args_for "$name")
	usage_re=$(usage_regex_for "$name")

	if [ ! -x "$prog" ]; then
		fail "$name" "$prog is not an executable file"
		return
	fi
	if is_elf "$prog"; then
		why=$(check_resolution "$prog")
		case "$why" in
		"OK") extra="links no softrdma library" ;;
		"OK "*) extra="libs from build:${why#OK}" ;;
		*)
			fail "$name" "$why"
			return
			;;
		esac
	else
		extra="script"
	fi

	# An empty argument list means "run with no arguments" (one attempt).
	for arg in ${args:-"<none>"}; do
		if [ "$arg" = "<none>" ]; then
			run_cmd "$prog"
			tried="$tried (no args)"
		else
			run_cmd "$prog" "$arg"
			tried="$tried $arg"
		fi
		line=$(first_match "$ld_errors" "$out")
		if [ -n "$line" ]; then
			fail "$name" "dynamic linker: $line"
			return
		fi
		why=$(describe_rc "$rc")
		if [ -n "$why" ]; then
			fail "$name" "${tried# }: $why"
			return
		fi
		if grep -qE -- "$usage_re" <<<"$out"; then
			pass "$name" "${tried# }: printed /$usage_re/, exit $rc; $extra"
			return
		fi
	done
	fail "$name" "no usage text for${tried}; output: $(head -c 200 <<<"$out" | tr '\n' ' ')"
}

# check_python LABEL CODE: run /usr/bin/python3 -c CODE under softrdma; CODE
# prints LOADED=<path of each mapped rdma library> and finally PYVERBS_OK.
check_python() {
	local label=$1 code=$2 line why lib path bad="" used=""
	run_cmd /usr/bin/python3 -c "$code"
	line=$(first_match "$ld_errors" "$out")
	if [ -n "$line" ]; then
		fail "$label" "dynamic linker: $line"
		return
	fi
	why=$(describe_rc "$rc")
	if [ -n "$why" ]; then
		fail "$label" "$why"
		return
	fi
	if [ "$rc" -ne 0 ] || ! grep -q '^PYVERBS_OK' <<<"$out"; then
		fail "$label" "import failed (exit $rc): $(tail -n 3 <<<"$out" | tr '\n' ' ')"
		return
	fi
	# Mapped files carry their real names (libibverbs.so.1.14.44.0 for the
	# system one), so match on the "libX.so" prefix and compare real paths.
	while read -r path; do
		for lib in $our_libs; do
			case "$(basename "$path")" in
			"${lib%.1}"*) ;;
			*) continue ;;
			esac
			if [ "$(readlink -f "$path")" = "$(readlink -f "$libdir/$lib")" ]; then
				used="$used ${lib%%.so.1}"
			else
				bad="$bad $path"
			fi
		done
	done < <(sed -n 's/^LOADED=//p' <<<"$out")
	if [ -n "$bad" ]; then
		fail "$label" "rdma libraries loaded from outside $libdir:$bad"
		return
	fi
	case "$used" in
	*libibverbs*) ;;
	*)
		fail "$label" "libibverbs.so.1 from $libdir was not loaded"
		return
		;;
	esac
	pass "$label" "$(grep '^PYVERBS_OK' <<<"$out" | cut -d' ' -f2-); libs from build:$used"
}

# ---------------------------------------------------------------- programs

if ! command -v dpkg >/dev/null; then
	fail "programs" "dpkg not available: cannot list the Debian packages' programs"
else
	for pkg in $packages; do
		if ! dpkg -L "$pkg" >/dev/null 2>&1; then
			fail "$pkg" "package not installed"
		fi
	done
	# dpkg -L exits non-zero if any package is missing; still use the rest.
	programs=$(dpkg -L $packages 2>/dev/null | grep '^/usr/bin/' | sort -u)
	if [ -z "$programs" ]; then
		fail "programs" "dpkg -L $packages lists no /usr/bin programs"
	fi
	for prog in $programs; do
		check_program "$prog"
	done
fi

# ---------------------------------------------------------------- pyverbs

# Prints the rdma libraries mapped into the interpreter, then PYVERBS_OK.
py_report='
def _report(n):
    libs = set()
    with open("/proc/self/maps") as f:
        for l in f:
            p = l.split()[-1]
            if "/lib" in p and (".so" in p) and any(k in p for k in ("libibverbs", "librdmacm", "libmlx5", "libefa")):
                libs.add(p)
    for p in sorted(libs):
        print("LOADED=" + p)
    print("PYVERBS_OK %d modules imported" % n)
'

check_python "pyverbs (core modules)" "$py_report
import pyverbs.device, pyverbs.qp, pyverbs.cq, pyverbs.mr, pyverbs.pd, pyverbs.srq, pyverbs.addr, pyverbs.cmid
_report(8)"

# Every pyverbs extension module, providers included (these NEED libmlx5 and
# libefa), found at test time.
check_python "pyverbs (all extension modules)" "$py_report
import importlib, pathlib
root = pathlib.Path('/usr/lib/python3/dist-packages')
mods = sorted('.'.join(p.relative_to(root).parts).split('.cpython-')[0]
              for p in (root / 'pyverbs').rglob('*.so'))
if not mods:
    raise SystemExit('no pyverbs extension modules found under %s' % root)
for m in mods:
    importlib.import_module(m)
_report(len(mods))"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
