#!/usr/bin/env bash
# The `retry` program's start-up cost and wake-ups, as BENCHMARKS.md reports them.
# Needs hyperfine, python3 and minfrin's `retry` (Debian package `retry`, which
# installs /usr/bin/retry): apt-get install -y hyperfine retry
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build -q --release -p retry-std --features cli
ours=target/release/retry
minfrin=/usr/bin/retry
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== hyperfine: retry -- true, minfrin retry -t 1 -- true, true"
hyperfine -N --warmup 100 --runs 2000 --export-json "$work/hyperfine.json" \
    "$ours -- true" "$minfrin -t 1 -- true" "true"
python3 - "$work/hyperfine.json" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
for r in results:
    print(f"{r['command']:34s} median {r['median'] * 1e3:.3f} ms, mean {r['mean'] * 1e3:.3f} ms")
a, b = results[0], results[1]
print(f"ratio (ours / minfrin): median {a['median'] / b['median']:.2f}, mean {a['mean'] / b['mean']:.2f}")
PY

echo "== the floor: a Rust program that only spawns true and waits"
rustc -O -o "$work/spawn-floor" retry-std/cli-bench/spawn_floor.rs
rustc -O -C target-feature=+crt-static -o "$work/spawn-floor-static" retry-std/cli-bench/spawn_floor.rs

echo "== retry statically linked"
RUSTFLAGS="-C target-feature=+crt-static" cargo build -q --release -p retry-std --features cli \
    --target x86_64-unknown-linux-gnu --target-dir target/static
static=target/static/x86_64-unknown-linux-gnu/release/retry

echo "== interleaved rounds (python3 retry-std/cli-bench/interleave.py)"
python3 retry-std/cli-bench/interleave.py 2000 "$ours -- true" "$minfrin -t 1 -- true" "true"
python3 retry-std/cli-bench/interleave.py 2000 "$work/spawn-floor" "$minfrin -t 1 -- true"
python3 retry-std/cli-bench/interleave.py 2000 "$static -- true" "$minfrin -t 1 -- true"
python3 retry-std/cli-bench/interleave.py 2000 "$work/spawn-floor-static" "$minfrin -t 1 -- true"

echo "== context switches while the command sleeps 3 s"
echo "-- retry and its child (wait4 rusage), then sleep alone:"
/usr/bin/time -v "$ours" -- sleep 3 2>&1 | grep -E "context switches"
/usr/bin/time -v sleep 3 2>&1 | grep -E "context switches"
echo "-- retry alone, read by the command from /proc/\$PPID/status at its end:"
"$ours" -- sh -c 'sleep 3; grep ctxt /proc/$PPID/status'
echo "-- two attempts of false with a 3 s sleep between them:"
/usr/bin/time -v "$ours" -q -n 2 -d 3s --jitter none -- false 2>&1 | grep -E "context switches"
