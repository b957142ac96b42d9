# Top-level entry points.  `make demo` and `make test` work on a fresh
# Debian 12 machine: they install what is missing, build, and run.
BUILD ?= build
JOBS ?= $(shell nproc)
DEB_BUILD = cmake gcc make pkg-config libibverbs-dev librdmacm-dev libisal-dev zlib1g-dev
DEB_RUN = ibverbs-utils perftest rdmacm-utils qperf python3-pyverbs iproute2 strace \
	python3-scapy tshark ethtool
# the control-socket fuzzer (tests/fuzz): clang and its libFuzzer runtime
DEB_FUZZ = clang libclang-rt-14-dev
FUZZ_TIME ?= 1800
SUDO = $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build demo test test-sanitizers fuzz clean format

all: build

deps:
	@missing=""; for p in $(DEB_BUILD) $(DEB_RUN); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  echo "wireshark-common wireshark-common/install-setuid boolean false" | \
	    $(SUDO) debconf-set-selections; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

build: deps
	cmake -S . -B $(BUILD) -DSOFTRDMA_WERROR=ON >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	scripts/demo.sh $(BUILD)

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# AddressSanitizer+UBSan and ThreadSanitizer builds running the same suite.
test-sanitizers: deps
	cmake -S . -B $(BUILD)-asan -DSOFTRDMA_SANITIZE=address -DCMAKE_BUILD_TYPE=Debug >/dev/null
	cmake --build $(BUILD)-asan -j$(JOBS)
	cd $(BUILD)-asan && ctest --output-on-failure -L sanitize
	cmake -S . -B $(BUILD)-tsan -DSOFTRDMA_SANITIZE=thread -DCMAKE_BUILD_TYPE=Debug >/dev/null
	cmake --build $(BUILD)-tsan -j$(JOBS)
	cd $(BUILD)-tsan && ctest --output-on-failure -L sanitize

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
# build-release, writes results/<timestamp>/report.md.  BENCH=short: < 2 min.
.PHONY: bench
bench:
	bench/run.sh $(if $(filter short,$(BENCH)),--short,)
