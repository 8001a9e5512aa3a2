# Kiln developer entry points. On a fresh Debian 12 machine `make test` and `make run`
# install what they need (scripts/install-deps.sh), build with CMake + Ninja, and go.

SHELL := /bin/bash
.DEFAULT_GOAL := build

NPROC := $(shell nproc 2>/dev/null || echo 2)
BUILD_DIR ?= build
ASAN_DIR ?= build-asan
CMAKE_FLAGS := -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

.PHONY: deps build test run sanitize format clean

deps:
	bash scripts/install-deps.sh

# Configure only once: later builds let Ninja re-run CMake when a CMakeLists.txt changes.
build: deps
	@test -f $(BUILD_DIR)/build.ninja || cmake -S . -B $(BUILD_DIR) $(CMAKE_FLAGS)
	ninja -C $(BUILD_DIR) -j$(NPROC)

# --no-tests=error: a run that found no tests fails instead of passing silently.
test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure --no-tests=error -j$(NPROC)

# exec: kilnd replaces the shell, so Ctrl-C and SIGTERM reach it directly.
run: build
	mkdir -p var
	exec $(BUILD_DIR)/server/kilnd --listen 127.0.0.1:50051 --data-dir var

# AddressSanitizer + UBSan build in its own folder; UBSan findings fail the test.
sanitize: deps
	@test -f $(ASAN_DIR)/build.ninja || cmake -S . -B $(ASAN_DIR) $(CMAKE_FLAGS) -DKILN_SANITIZE=ON
	ninja -C $(ASAN_DIR) -j$(NPROC)
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_DIR) --output-on-failure --no-tests=error -j$(NPROC)

format:
	git ls-files -z '*.cc' '*.h' | xargs -0 -r clang-format -i

# Build folders only: var/ holds the local cache and is left alone.
clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR)
