#!/bin/sh
# SPDX-License-Identifier: MIT
#
# run-fuzz.sh - run one libFuzzer harness for a bounded time.
#
#   run-fuzz.sh FUZZER SEED_DIR WORK_DIR [MAX_LEN]   (PC_FUZZ_SECONDS, default
#                                                    PC_FUZZ_DEFAULT_SECONDS, else 60;
#                                                    MAX_LEN bytes an input, default 4096)
#
# Starts from the committed seeds and the corpus kept in WORK_DIR by earlier
# runs; new inputs go to WORK_DIR/corpus, a crashing input to
# WORK_DIR/crashes/ (its path is printed). Exits 0 when nothing crashed and no
# property failed, 1 otherwise (libFuzzer's own default, 77, would read as a
# skip to meson).
set -eu
[ $# -eq 3 ] || [ $# -eq 4 ] || { echo "usage: $0 FUZZER SEED_DIR WORK_DIR [MAX_LEN]" >&2; exit 2; }
fuzzer=$1 seeds=$2 work=$3 maxlen=${4:-4096}
secs=${PC_FUZZ_SECONDS:-${PC_FUZZ_DEFAULT_SECONDS:-60}}
mkdir -p "$work/corpus" "$work/crashes"
echo "run-fuzz: $(basename "$fuzzer") for ${secs} s from $(ls "$seeds" | wc -l) seeds" \
	"and $(ls "$work/corpus" | wc -l) kept inputs"
exec "$fuzzer" -max_total_time="$secs" -max_len="$maxlen" -timeout=10 -rss_limit_mb=2048 \
	-error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 \
	-artifact_prefix="$work/crashes/" "$work/corpus" "$seeds"
