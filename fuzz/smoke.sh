#!/bin/sh
# Fuzz smoke: builds every cargo-fuzz target once, then runs each for a short
# while (default 20 s; pass another number of seconds as the first argument, or
# set FUZZ_SECONDS). For each target it prints how many inputs libFuzzer
# executed. It FAILS when it cannot fuzz: no nightly toolchain, no cargo-fuzz, a
# build error, a crash, or a target that reports no execution count.
# (.ci/run installs what is missing before calling it.)
set -eu

SECONDS_PER_TARGET="${1:-${FUZZ_SECONDS:-20}}"
cd "$(dirname "$0")"

# A whole number of seconds, at least 1 (libFuzzer reads 0 as "no time limit").
case "$SECONDS_PER_TARGET" in
    '' | *[!0-9]* | 0 | 00*)
        echo "FAIL: fuzz smoke: seconds per target must be a whole number of at least 1, got '$SECONDS_PER_TARGET'"
        exit 2
        ;;
esac
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "FAIL: fuzz smoke: no nightly toolchain (rustup toolchain install nightly --profile minimal)"
    exit 1
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "FAIL: fuzz smoke: cargo-fuzz is not installed (cargo install cargo-fuzz --locked)"
    exit 1
fi

# retry-core has no unsafe code, so the address sanitizer only slows things down;
# debug assertions stay on so that integer overflow panics. The same flags for
# the build and the runs, so that the runs do not rebuild.
flags="--release --debug-assertions --sanitizer none"

# The committed lock file must be the one the build uses: a stale one fails
# here instead of being rewritten.
cargo +nightly fetch --locked

started=$(date +%s)
echo "fuzz smoke: building every target ($(cargo +nightly fuzz --version))"
# shellcheck disable=SC2086
cargo +nightly fuzz build $flags
echo "fuzz smoke: built in $(($(date +%s) - started))s"

targets=$(cargo +nightly fuzz list)
if [ -z "$targets" ]; then
    echo "FAIL: fuzz smoke: cargo fuzz list names no target"
    exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT INT TERM
# The targets run side by side, one per core (FUZZ_JOBS to choose): each
# libFuzzer run is one thread, so two cores fuzz two targets in the time of one.
jobs="${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}"
host="$(rustc +nightly -vV | sed -n 's/^host: //p')"
bin_dir="target/$host/release"

fuzz_one() {
    target="$1"
    corpus="$work/$target"
    mkdir -p "$corpus"
    # Seed from the committed corpus without writing new finds into it.
    cp corpus/"$target"/* "$corpus"/ 2>/dev/null || true
    status=0
    "$bin_dir/$target" -artifact_prefix="artifacts/$target/" \
        -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 "$corpus" \
        >"$work/$target.log" 2>&1 || status=$?
    echo "$status" >"$work/$target.status"
}

mkdir -p artifacts
running=0
for target in $targets; do
    [ -x "$bin_dir/$target" ] || { echo "FAIL: fuzz smoke: no binary $bin_dir/$target"; exit 1; }
    mkdir -p "artifacts/$target"
    echo "fuzz smoke: $target for ${SECONDS_PER_TARGET}s"
    fuzz_one "$target" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n 2>/dev/null || wait
        running=$((running - 1))
    fi
done
wait

summary=""
for target in $targets; do
    log="$work/$target.log"
    status=$(cat "$work/$target.status" 2>/dev/null || echo missing)
    if [ "$status" != 0 ]; then
        tail -n 40 "$log"
        echo "FAIL: fuzz smoke: $target exited with $status; the crash input is in fuzz/artifacts/$target/"
        exit 1
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)
    if [ -z "$runs" ]; then
        runs=$(sed -n 's/.*Done \([0-9][0-9]*\) runs.*/\1/p' "$log" | tail -n 1)
    fi
    if [ -z "$runs" ] || [ "$runs" -eq 0 ]; then
        tail -n 40 "$log"
        echo "FAIL: fuzz smoke: $target printed no execution count; it did not fuzz"
        exit 1
    fi
    line="fuzz smoke: $target: $runs executions in ${SECONDS_PER_TARGET}s"
    summary="$summary$line
"
done
printf '%s' "$summary"
echo "fuzz smoke: ok in $(($(date +%s) - started))s (build and runs)"
