# Thin wrapper over CMake. `make test` and `make run` install what is missing
# (Debian packages as root, the Node peers from their lockfiles) first.
BUILD      ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all deps build test run bench pathemu-check lint install clean format node-deps fuzz test-asan soak

all: build

deps:
	@tools/install-deps

node-deps:
	@tools/install-node-deps

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DLUDX_WERROR=ON $(CMAKE_ARGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: build node-deps
	@tools/run-tests $(BUILD)

run: build
	$(BUILD)/ludx examples/demo.lua

bench: build node-deps
	$(BUILD)/ludx bench

# The path emulator's timing held to 1 ms and 3% (ctest checks only what a
# loaded machine cannot break); run it on an idle machine before trusting
# path figures.
pathemu-check: build
	LUDX_PATHEMU_STRICT=1 ctest --test-dir $(BUILD) --output-on-failure -R '^pathemu\.'

# libFuzzer targets (fuzz/), each for FUZZ_SECONDS over a scratch copy of its
# seed corpus; crash inputs land in $(BUILD)/fuzz-long/<target>/artifacts/.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= udx_wire udx_stream ss_read noise
fuzz: build
	@failed=""; for t in $(FUZZ_TARGETS); do \
	  echo "== fuzz_$$t ($(FUZZ_SECONDS) s)"; \
	  sh fuzz/run-fuzzer.sh $(BUILD)/fuzz-clang/fuzz_$$t $(FUZZ_SECONDS) fuzz/corpus/$$t $(BUILD)/fuzz-long/$$t; \
	  rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 77 ] || failed="$$failed $$t"; \
	done; \
	echo "== DHT decoders (Lua mutation fuzzing, $(FUZZ_SECONDS) s over 14 codecs)"; \
	mkdir -p $(BUILD)/fuzz-long; \
	LUDX_BUILD=$(BUILD) LUDX_DHT_FUZZ_SECONDS=$(FUZZ_SECONDS) busted --lua=luajit -o TAP spec/hardening_dht_fuzz_spec.lua \
	  >$(BUILD)/fuzz-long/dht.log 2>&1; rc=$$?; \
	grep -E 'dht fuzz|^not ok' $(BUILD)/fuzz-long/dht.log; [ $$rc -eq 0 ] || failed="$$failed dht"; \
	if [ -n "$$failed" ]; then echo "fuzz: crashes in:$$failed"; exit 1; fi

# Every suite (C and Lua) under ASan + UBSan in a separate build directory.
BUILD_ASAN ?= build-asan
test-asan: deps node-deps
	@JOBS=$(JOBS) tools/test-asan $(BUILD_ASAN)

# Transfers under random seeded faults for SOAK_SECONDS; fails on any loss.
SOAK_SECONDS ?= 600
SOAK_SEED ?= 1
soak: build
	@tools/soak $(BUILD) $(SOAK_SECONDS) $(SOAK_SEED)

install: build
	cmake --install $(BUILD)

lint:
	@tools/lint

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD)
