#!/usr/bin/env bash
# Fuzzes the request bodies of the server's endpoints (tests/fuzz/fuzz_api_body.cpp) with libFuzzer and ASan/UBSan for FUZZ_SECONDS (default 15) over
# tests/fuzz/corpus/fuzz_api_body/.
# Usage: fuzz_api_body.sh [seedling-binary] [data-dir] (the arguments ctest passes; the binary's folder holds the fuzz build).
# shellcheck source-path=SCRIPTDIR source=lib/fuzz.bash
source "$(dirname "$0")/lib/fuzz.bash"
fuzz_build fuzz_api_body
fuzz_run fuzz_api_body
