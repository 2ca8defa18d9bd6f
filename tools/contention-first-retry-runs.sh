#!/usr/bin/env bash
# The ratio table under contention and from the first retry (BENCHMARKS.md) in
# one command: three runs of the benchmarks its rows read (each followed by a
# copy of target/criterion), the size probe's .text, then
# tools/contention-first-retry-table.py on the three copies. Run it from
# anywhere, on a machine as quiet as you can get (nothing else building: the
# two-thread rows need both cores). Takes about 25 minutes.
#
#   bash tools/contention-first-retry-runs.sh [OUT]
#
# The copies go to OUT/run1..3 (default target/contention-first-retry), with
# the table in OUT/table.md and the load averages in OUT/load.txt.
#
# RUNS=1 makes a single run (a quick look; the table then has one column).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/contention-first-retry}
runs=${RUNS:-3}
mkdir -p "$out"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/load.txt"
dirs=()
for run in $(seq 1 "$runs"); do
    echo "== run $run of $runs"
    cargo bench -p retry-core --bench decision
    cargo bench -p retry-core --bench breaker -- breaker_closed_path
    cargo bench -p retry-std --bench breaker -- 'guarded_call|long_lived'
    cargo bench -p retry-tokio --bench success
    rm -rf "$out/run$run"
    cp -r target/criterion "$out/run$run"
    dirs+=("$out/run$run")
    echo "load after run $run: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/load.txt"
done

text_arg=()
if (cd embedded && cargo build --release --target thumbv7em-none-eabihf) && command -v llvm-size >/dev/null; then
    text=$(llvm-size -A embedded/target/thumbv7em-none-eabihf/release/retry-embedded-footprint |
        awk '$1 == ".text" { print $2 }')
    text_arg=(--text "$text")
else
    echo "(no thumbv7em build or no llvm-size: the size row is left out)"
fi

python3 tools/contention-first-retry-table.py --runs "$(IFS=,; echo "${dirs[*]}")" "${text_arg[@]}" | tee "$out/table.md"
