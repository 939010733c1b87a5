#!/usr/bin/env bash
# Fuzzes the HTTP/1.1 request framer, fed whole and in chunks (tests/fuzz/fuzz_request_framer.cpp) with libFuzzer and ASan/UBSan for FUZZ_SECONDS (default 15) over
# tests/fuzz/corpus/fuzz_request_framer/.
# Usage: fuzz_request_framer.sh [seedling-binary] [data-dir] (the arguments ctest passes; the binary's folder holds the fuzz build).
# shellcheck source-path=SCRIPTDIR source=lib/fuzz.bash
source "$(dirname "$0")/lib/fuzz.bash"
fuzz_build fuzz_request_framer
fuzz_run fuzz_request_framer
