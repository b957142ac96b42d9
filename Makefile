# Top-level entry points.  `make demo` and `make test` work on a fresh
# Debian 12 machine: they install what is missing, build, and run.
BUILD ?= build
JOBS ?= $(shell nproc)
# libopenmpi-dev, libmpich-dev: the compiler wrappers for the MPI test
# program (tests/ecosystem/mpi), built once for each MPI; libfabric-dev:
# our libfabric program (tests/ecosystem/fi_xhost.c)
DEB_BUILD = cmake gcc make pkg-config libibverbs-dev librdmacm-dev libisal-dev zlib1g-dev \
	libopenmpi-dev libmpich-dev libfabric-dev
DEB_RUN = ibverbs-utils perftest rdmacm-utils qperf iperf3 python3-pyverbs iproute2 strace ucx-utils \
	python3-scapy tshark ethtool socat netcat-openbsd openmpi-bin mpich libfabric-bin fio \
	infiniband-diags
# the fuzzers (tests/fuzz, whose finding replays make test runs): clang and
# its libFuzzer runtime
DEB_FUZZ = clang libclang-rt-14-dev
# `make bench` (bench/run.sh, which checks the same list when run alone):
# perftest is what softrdma runs, on one host and across two; ucx-utils
# (ucx_perftest: UCX over shared memory on one host, over TCP between two)
# and libfabric-bin (fi_pingpong: shm on one host, tcp between two) are the
# peers; python3-matplotlib draws the plots; iproute2 (ip netns, ss) and
# util-linux (setpriv) make the two hosts of the two-host section
DEB_BENCH = perftest ucx-utils libfabric-bin python3-matplotlib iproute2 util-linux
FUZZ_TIME ?= 1800
SUDO = $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build demo test test-sanitizers fuzz clean format

all: build

deps:
	@$(call deb_install,$(DEB_BUILD) $(DEB_RUN) $(DEB_FUZZ))

# deb_install PACKAGES: apt-get install those not installed yet
define deb_install
	missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  echo "wireshark-common wireshark-common/install-setuid boolean false" | \
	    $(SUDO) debconf-set-selections; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
endef

build: deps
	cmake -S . -B $(BUILD) -DSOFTRDMA_WERROR=ON >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	scripts/demo.sh $(BUILD)

# tests/run_ctest.sh: the suite in parallel, then what failed once more,
# alone; one that passes alone still fails the run unless
# tests/intermittent.txt names it with its cause and plan
test: build
	tests/run_ctest.sh $(BUILD) $(JOBS)

# AddressSanitizer+UBSan and ThreadSanitizer builds running the same suite.
# die_after_fork=0: the behaviour suite forks its agents from a process that
# has made QPs, and so has the library's life thread (src/verbs/life.c); a
# child that then makes QPs starts one of its own, which TSan refuses by
# default after a multi-threaded fork (glibc and real programs allow it).
test-sanitizers: deps
	cmake -S . -B $(BUILD)-asan -DSOFTRDMA_SANITIZE=address -DCMAKE_BUILD_TYPE=Debug >/dev/null
	cmake --build $(BUILD)-asan -j$(JOBS)
	tests/run_ctest.sh $(BUILD)-asan 1 -L sanitize
	cmake -S . -B $(BUILD)-tsan -DSOFTRDMA_SANITIZE=thread -DCMAKE_BUILD_TYPE=Debug >/dev/null
	cmake --build $(BUILD)-tsan -j$(JOBS)
	TSAN_OPTIONS="die_after_fork=0 $${TSAN_OPTIONS:-}" tests/run_ctest.sh $(BUILD)-tsan 1 -L sanitize

# The control-socket fuzzer for FUZZ_TIME seconds (default 1800), niced,
# FUZZ_ARGS passed to libFuzzer (e.g. -jobs=1); `make test` runs it for
# 60 s.  Crashes land in $(BUILD)/fuzz/artifacts.
fuzz: build
	nice -n 10 tests/fuzz/run.sh $(BUILD) fuzz $(FUZZ_TIME) $(FUZZ_ARGS)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan

# Side-by-side benchmarks (bench/run.sh): installs what is missing, builds
# build-release, writes results/<timestamp>/report.md.  As root it ends with
# the two-host section (bench/twohost.sh).  BENCH=short: 5-12 min in all;
# BENCH_ARGS: more options for bench/run.sh (--no-twohost, --twohost-only,
# --rounds N, --twohost-rounds N, --pin).
.PHONY: bench deps-bench
deps-bench:
	@$(call deb_install,$(DEB_BUILD) $(DEB_BENCH))

bench: deps-bench
	bench/run.sh --no-deps $(if $(filter short,$(BENCH)),--short,) $(BENCH_ARGS)
