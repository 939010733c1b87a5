#!/usr/bin/env bash
# Fuzzes the route-trace CSV through read_route_trace and RouteReplay (tests/fuzz/fuzz_route_trace.cpp) with
# libFuzzer and ASan/UBSan for FUZZ_SECONDS (default 15) over tests/fuzz/corpus/fuzz_route_trace/.
# Usage: fuzz_route_trace.sh [seedling-binary] [data-dir] (the arguments ctest passes; unused).
# shellcheck source-path=SCRIPTDIR source=lib/fuzz.bash
source "$(dirname "$0")/lib/fuzz.bash"
fuzz_build fuzz_route_trace src/experts/route_trace.cpp -lfmt
fuzz_run fuzz_route_trace 8192
