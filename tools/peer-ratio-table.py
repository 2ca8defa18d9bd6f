#!/usr/bin/env python3
"""Prints the hot paths' ratios to their peers on settled workloads, from
criterion's saved estimates: ours ÷ the peer's time from the same run, for the
next delay, the retry decision, the breaker's closed path, a call guarded by
the shared breaker and the tokio success path, and the size probe's `.text`
against 8 KiB (BENCHMARKS.md, "Settled paths: three runs at 45f1e27").

Run the benchmarks first (one after the other, on a machine as quiet as you can
get), then this script from the workspace root:

    cargo bench -p retry-core --bench decision
    cargo bench -p retry-core --bench breaker
    cargo bench -p retry-std --bench breaker
    cargo bench -p retry-tokio --bench success
    python3 tools/peer-ratio-table.py [--text BYTES]

Ratios this small move from run to run on a shared machine (our rows and the
peers' both, by up to half between runs of the same binaries). To report
several runs, copy `target/criterion` aside after each run of the four
benchmarks and pass the copies:

    python3 tools/peer-ratio-table.py --runs DIR1,DIR2,DIR3 [--text BYTES]

which prints each run's ratio and the median, and judges each row by the
median ratio.

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


def estimate(bench, root=ROOT):
    group, name = bench.split("/", 1)
    path = os.path.join(root, group, name, "new", "estimates.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        data = json.load(f)
    pick = data.get("slope") or data["mean"]
    return pick["point_estimate"]


def fmt(ns):
    return "—" if ns is None else (f"{ns:,.2f} ns" if ns < 10_000 else f"{ns / 1000:,.1f} µs")


def text_row(text, runs=None):
    """The size row: `.text` against the 8 KiB aim. With `runs`, laid out in the
    runs table's columns (the size is measured once: under run 1 and median)."""
    verdict = "**met**" if text <= 8192 else "missed"
    label = "machine + breaker `.text` on thumbv7em-none-eabihf, opt-level z"
    ratio = f"{text / 8192:.2f}"
    if runs is None:
        print(f"| {label} | {text:,} B | 8,192 B | {ratio} | ≤ 1.0 | {verdict} |")
    else:
        rest = " | ".join(["—"] * (runs - 1))
        rest = f"{rest} | " if rest else ""
        print(f"| {label} ({text:,} B against 8,192 B) | {ratio} | {rest}{ratio} | ≤ 1.0 | {verdict} |")


def runs_table(roots, text):
    """One column per run (ours ÷ peer), then the median ratio and the verdict."""
    heads = " | ".join(f"run {i + 1}" for i in range(len(roots)))
    print(f"| path | {heads} | median | target | |")
    print("|---|" + "---|" * len(roots) + "---|---|---|")
    missing = 0
    for label, ours_b, peer_b, target in ROWS:
        ratios = []
        for root in roots:
            ours, peer = estimate(ours_b, root), estimate(peer_b, root)
            ratios.append(None if ours is None or peer is None else ours / peer)
        seen = sorted(r for r in ratios if r is not None)
        if not seen:
            missing += 1
            print(f"| {label} | " + "— | " * len(roots) + f"— | ≤ {target} | not measured |")
            continue
        mid = len(seen) // 2
        median = seen[mid] if len(seen) % 2 else (seen[mid - 1] + seen[mid]) / 2
        cells = " | ".join("—" if r is None else f"{r:.2f}" for r in ratios)
        verdict = "**met**" if median <= target else "missed"
        print(f"| {label} | {cells} | {median:.2f} | ≤ {target} | {verdict} |")
    if text is not None:
        text_row(text, len(roots))
    return missing


def main():
    text = None
    if "--text" in sys.argv:
        text = int(sys.argv[sys.argv.index("--text") + 1])
    if "--runs" in sys.argv:
        roots = sys.argv[sys.argv.index("--runs") + 1].split(",")
        if runs_table(roots, text):
            print("\nsome rows had no saved estimate in any run.", file=sys.stderr)
            sys.exit(1)
        return
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
        text_row(text)
    if missing:
        print(f"\n{missing} row(s) had no saved estimate: run the four benchmarks first.",
              file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
