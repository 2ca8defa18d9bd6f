#!/usr/bin/env python3
"""Prints the issue-14 table of BENCHMARKS.md from criterion's saved estimates.

Run the benchmarks first (one after the other, on a machine as quiet as you can
get), then this script from the workspace root:

    cargo bench -p retry-core --bench decision
    cargo bench -p retry-core --bench breaker
    cargo bench -p retry-std --bench breaker
    cargo bench -p retry-tokio --bench success
    python3 tools/issue14-table.py [--text BYTES]

Each row divides our time by the peer's, both read from the same criterion
run (`target/criterion/<group>/<function>/new/estimates.json`, the slope
estimate when criterion has one, else the mean: the middle figure of the
`time:` line criterion prints). `--text` adds the size row (bytes of `.text`
of the embedded size probe, measured as BENCHMARKS.md says).
"""

import json
import os
import sys

ROOT = os.path.join("target", "criterion")

# (label, our bench, peer bench, target ratio)
ROWS = [
    ("next delay, exponential, no jitter", "next_delay/retry_core_exponential_none",
     "next_delay/backon_exponential_none", 1.0),
    ("next delay, exponential + `Add(1.0)` (backon's jitter)", "next_delay/retry_core_exponential_add_1",
     "next_delay/backon_exponential_jitter", 1.0),
    ("next delay, exponential + full jitter", "next_delay/retry_core_exponential_full",
     "next_delay/backon_exponential_jitter", 1.0),
    ("next delay, constant, no jitter", "next_delay/retry_core_constant_none",
     "next_delay/backon_constant_none", 1.0),
    ("next delay, constant + `Add(1.0)`", "next_delay/retry_core_constant_add_1",
     "next_delay/backon_constant_jitter", 1.0),
    ("next delay, constant + full jitter", "next_delay/retry_core_constant_full",
     "next_delay/backon_constant_jitter", 1.0),
    ("next delay, fibonacci, no jitter", "next_delay/retry_core_fibonacci_none",
     "next_delay/backon_fibonacci_none", 1.0),
    ("next delay, fibonacci + `Add(1.0)`", "next_delay/retry_core_fibonacci_add_1",
     "next_delay/backon_fibonacci_jitter", 1.0),
    ("next delay, fibonacci + full jitter", "next_delay/retry_core_fibonacci_full",
     "next_delay/backon_fibonacci_jitter", 1.0),
    ("full decision (Failed→Sleep, Woke→Attempt), full jitter, vs backon jittered `next()`",
     "retry_decision/retry_core_exponential_full", "retry_decision/backon_exponential_jitter_next", 2.0),
    ("full decision, no jitter, vs backon jittered `next()`",
     "retry_decision/retry_core_exponential_none", "retry_decision/backon_exponential_jitter_next", 2.0),
    ("breaker closed path, pure machine (request + record) vs recloser `call`",
     "breaker_closed_path/retry_core", "breaker_closed_path/recloser", 0.5),
    ("one call guarded by the shared breaker: `retry_std::Retry` (1 attempt, `SharedBreaker`) vs recloser `call`",
     "guarded_call/retry_std", "guarded_call/recloser", 1.5),
    ("the same breaker alone, as the driver asks it, vs recloser `call`",
     "guarded_call/shared_breaker", "guarded_call/recloser", 1.5),
    ("two threads sharing it, 200,000 calls, every 5th fails, per call: `retry_std::Retry` vs recloser",
     "two_threads_mix/retry_std", "two_threads_mix/recloser", 1.0),
    ("the same, the breaker alone as the driver asks it, vs recloser",
     "two_threads_mix/shared_breaker", "two_threads_mix/recloser", 1.0),
    ("tokio, first attempt succeeds: `retry_tokio::Retry::call` vs backon `Retryable`",
     "tokio_success_path/retry_tokio", "tokio_success_path/backon_retryable", 2.0),
]


def estimate(bench):
    group, name = bench.split("/", 1)
    path = os.path.join(ROOT, group, name, "new", "estimates.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        data = json.load(f)
    pick = data.get("slope") or data["mean"]
    return pick["point_estimate"]


def fmt(ns):
    return "—" if ns is None else (f"{ns:,.2f} ns" if ns < 10_000 else f"{ns / 1000:,.1f} µs")


def main():
    text = None
    if "--text" in sys.argv:
        text = int(sys.argv[sys.argv.index("--text") + 1])
    print("| path | ours | peer | ratio | target | |")
    print("|---|---|---|---|---|---|")
    missing = 0
    for label, ours_b, peer_b, target in ROWS:
        ours, peer = estimate(ours_b), estimate(peer_b)
        if ours is None or peer is None:
            missing += 1
            print(f"| {label} | {fmt(ours)} | {fmt(peer)} | — | ≤ {target} | not measured |")
            continue
        ratio = ours / peer
        verdict = "**met**" if ratio <= target else "missed"
        print(f"| {label} | {fmt(ours)} | {fmt(peer)} | {ratio:.2f} | ≤ {target} | {verdict} |")
    if text is not None:
        verdict = "**met**" if text <= 8192 else "missed"
        print(f"| machine + breaker `.text` on thumbv7em-none-eabihf, opt-level z | {text:,} B "
              f"| 8,192 B | {text / 8192:.2f} | ≤ 1.0 | {verdict} |")
    if missing:
        print(f"\n{missing} row(s) had no saved estimate: run the four benchmarks first.",
              file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
