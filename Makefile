# Seedling: the two commands of the README, and a few more for developers.
SHELL := /bin/bash
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: setup configure build run test asan format clean

setup:
	@bash scripts/setup.sh

configure: setup
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

# Everything: the binary, the tests and the benchmarks.
build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# Completes a Python prompt with the bundled default model (models/seedling-demo-moe). Builds the binary only; the
# tests and benchmarks build under `make test`.
run: configure
	@cmake --build $(BUILD) --target seedling -j $(JOBS)
	./$(BUILD)/seedling run -p $$'def fibonacci(n):\n' -n 48

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The whole suite under AddressSanitizer and UndefinedBehaviorSanitizer, in its own build folder.
asan:
	@$(MAKE) --no-print-directory test BUILD=build-asan CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSEEDLING_SANITIZE=address,undefined"

format:
	@find src tests bench -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD) build-asan
