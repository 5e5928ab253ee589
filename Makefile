# Thin wrapper over CMake. `make test` and `make run` install what is missing
# (Debian packages as root, the Node peers from their lockfiles) first.
BUILD      ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all deps build test run bench install clean format node-deps

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

install: build
	cmake --install $(BUILD)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD)
