#!/usr/bin/env bash
# Fuzzes the route-trace CSV (tests/fuzz/fuzz_route_trace.cpp) with libFuzzer and ASan/UBSan for FUZZ_SECONDS (default 15) over
# tests/fuzz/corpus/fuzz_route_trace/.
# Usage: fuzz_route_trace.sh [seedling-binary] [data-dir] (the arguments ctest passes; the binary's folder holds the fuzz build).
# shellcheck source-path=SCRIPTDIR source=lib/fuzz.bash
source "$(dirname "$0")/lib/fuzz.bash"
fuzz_build fuzz_route_trace
fuzz_run fuzz_route_trace
