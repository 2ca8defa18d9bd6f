#!/bin/sh
# Runs every fuzz target for a short while (default 30 s each; pass another
# number of seconds as the first argument). Skips, successfully, when the
# nightly toolchain or cargo-fuzz is missing, so CI can call it unconditionally.
set -eu

SECONDS_PER_TARGET="${1:-30}"
cd "$(dirname "$0")"

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "SKIP: fuzz smoke: no nightly toolchain (rustup toolchain install nightly)"
    exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "SKIP: fuzz smoke: cargo-fuzz is not installed (cargo install cargo-fuzz)"
    exit 0
fi

# retry-core has no unsafe code, so the address sanitizer only slows things down;
# debug assertions stay on so that integer overflow panics.
for target in $(cargo +nightly fuzz list); do
    echo "fuzz smoke: $target for ${SECONDS_PER_TARGET}s"
    work="$(mktemp -d)"
    # Seed from the committed corpus without writing new finds into it.
    cp corpus/"$target"/* "$work"/ 2>/dev/null || true
    log="$work.log"
    status=0
    cargo +nightly fuzz run --release --debug-assertions --sanitizer none "$target" "$work" -- \
        -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 >"$log" 2>&1 || status=$?
    grep -E 'Done [0-9]+ runs|stat::number_of_executed_units|panicked|invariant broken' "$log" || true
    rm -rf "$work" "$log"
    if [ "$status" -ne 0 ]; then
        echo "FAIL: fuzz smoke: $target exited with $status; the crash input is in fuzz/artifacts/$target/"
        exit 1
    fi
done
echo "fuzz smoke: ok"
