#!/usr/bin/env bash
# The `retry` program's start-up cost and wake-ups, as BENCHMARKS.md reports them.
# Needs hyperfine, python3 and minfrin's `retry` (Debian package `retry`, which
# installs /usr/bin/retry): apt-get install -y hyperfine retry
set -euo pipefail
cd "$(dirname "$0")/../.."
host=$(rustc -vV | sed -n 's/^host: //p')

echo "== build: as the README installs it (static-pie), and as cargo run builds it (dynamic)"
cargo build -q --release -p retry-cli --target "$host" \
    --config 'build.rustflags = ["-C", "target-feature=+crt-static"]'
cargo build -q --release -p retry-cli
ours=target/$host/release/retry
dynamic=target/release/retry
minfrin=/usr/bin/retry
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Means ± standard deviations from a hyperfine JSON export, and the installed
# retry's ratio to minfrin's.
summary() {
    python3 - "$1" "$ours" "$minfrin" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
for r in results:
    print(f"{r['command']:50s} mean {r['mean'] * 1e3:.3f} ms ± {r['stddev'] * 1e3:.3f}, median {r['median'] * 1e3:.3f} ms")
ours = next(r for r in results if r["command"].startswith(sys.argv[2] + " "))
minfrin = next(r for r in results if r["command"].startswith(sys.argv[3] + " "))
print(f"ratio (installed retry / minfrin): mean {ours['mean'] / minfrin['mean']:.2f}, median {ours['median'] / minfrin['median']:.2f}")
PY
}

echo "== hyperfine: retry -- true (installed, then dynamic), minfrin retry -t 1 -- true, true"
hyperfine -N --warmup 200 --runs 3000 --export-json "$work/a.json" \
    "$ours -- true" "$minfrin -t 1 -- true" "$dynamic -- true" "true"
summary "$work/a.json"
# Load from other work on a shared machine comes in bursts of seconds, longer than
# one command's runs in a plain hyperfine: short blocks in alternating order let
# the bursts fall on both commands alike.
echo "== hyperfine interleaved in blocks: 100 runs of hyperfine (60 runs per command each),"
echo "   alternating which command goes first; means and stddevs over all 6000 runs"
for block in $(seq 1 100); do
    if [ $((block % 2)) -eq 1 ]; then
        pair=("$ours -- true" "$minfrin -t 1 -- true")
    else
        pair=("$minfrin -t 1 -- true" "$ours -- true")
    fi
    hyperfine -N --style none --warmup 5 --runs 60 --export-json "$work/block-$block.json" "${pair[@]}" >/dev/null 2>&1
done
python3 - "$ours" "$minfrin" "$work"/block-*.json <<'PY'
import json, statistics, sys
ours, minfrin, files = sys.argv[1], sys.argv[2], sys.argv[3:]
times = {}
for name in files:
    for r in json.load(open(name))["results"]:
        times.setdefault(r["command"], []).extend(r["times"])
rows = {}
for command, t in times.items():
    rows[command] = (statistics.mean(t), statistics.stdev(t), statistics.median(t), len(t))
    print(f"{command:50s} mean {rows[command][0] * 1e3:.3f} ms ± {rows[command][1] * 1e3:.3f}, median {rows[command][2] * 1e3:.3f} ms ({len(t)} runs)")
a = next(v for k, v in rows.items() if k.startswith(ours + " "))
b = next(v for k, v in rows.items() if k.startswith(minfrin + " "))
print(f"ratio (installed retry / minfrin): mean {a[0] / b[0]:.2f}, median {a[2] / b[2]:.2f}")
PY

echo "== the floor: a Rust program that only spawns true and waits"
rustc -O -o "$work/spawn-floor" retry-cli/cli-bench/spawn_floor.rs
rustc -O -C target-feature=+crt-static -o "$work/spawn-floor-static" retry-cli/cli-bench/spawn_floor.rs

echo "== interleaved rounds (python3 retry-cli/cli-bench/interleave.py)"
python3 retry-cli/cli-bench/interleave.py 3000 "$ours -- true" "$minfrin -t 1 -- true" "$dynamic -- true" "true"
python3 retry-cli/cli-bench/interleave.py 2000 "$work/spawn-floor-static" "$minfrin -t 1 -- true" "$work/spawn-floor"

echo "== context switches while the command sleeps 3 s"
echo "-- retry and its child (wait4 rusage), then sleep alone:"
/usr/bin/time -v "$ours" -- sleep 3 2>&1 | grep -E "context switches"
/usr/bin/time -v sleep 3 2>&1 | grep -E "context switches"
echo "-- retry alone, read by the command from /proc/\$PPID/status at its end:"
"$ours" -- sh -c 'sleep 3; grep ctxt /proc/$PPID/status'
echo "-- two attempts of false with a 3 s sleep between them:"
/usr/bin/time -v "$ours" -q -n 2 -d 3s --jitter none -- false 2>&1 | grep -E "context switches"
