#!/usr/bin/env python3
"""The ratio table under contention and from the first retry (BENCHMARKS.md: a
long-lived breaker shared by two threads and its scaling, next delay and one
retry decision over retries 1 to 16, with the settled rows beside them) from
saved criterion runs.

`tools/contention-first-retry-runs.sh` runs the benchmarks three times, keeps a
copy of `target/criterion` after each run, measures the size probe's `.text`
and calls this script:

    python3 tools/contention-first-retry-table.py --runs DIR1,DIR2,DIR3 [--text BYTES]

Each row divides one benchmark's time by another's from the same run (ours by
the peer's; for the scaling rows, two threads by one thread), prints every
run's ratio and the median, and judges the row by the median. A time is
criterion's slope estimate when it has one, else its mean: the middle figure
of the `time:` line it prints. Exits 1 when a row has no estimate in any run.
"""

import json
import os
import statistics
import sys

# (label, numerator, denominator, target ratio)
ROWS = [
    ("two threads, one long-lived breaker, 100,000 calls each, every 5th fails: "
     "`retry_std::Retry` vs recloser",
     "long_lived_two_threads/retry_std", "long_lived_two_threads/recloser", 1.0),
    ("the same, `retry_std::Retry` vs failsafe",
     "long_lived_two_threads/retry_std", "long_lived_two_threads/failsafe", 1.0),
    ("the same, the shared breaker alone (as the driver asks it) vs recloser",
     "long_lived_two_threads/shared_breaker", "long_lived_two_threads/recloser", 1.0),
    ("scaling: `retry_std::Retry` per call, two threads ÷ one thread",
     "long_lived_two_threads/retry_std", "long_lived_one_thread/retry_std", 2.0),
    ("scaling: the shared breaker alone per call, two threads ÷ one thread",
     "long_lived_two_threads/shared_breaker", "long_lived_one_thread/shared_breaker", 2.0),
    ("scaling: the shared breaker with the default config (five in a row, no window), "
     "two threads ÷ one thread",
     "long_lived_two_threads/shared_breaker_five_in_a_row",
     "long_lived_one_thread/shared_breaker_five_in_a_row", 2.0),
    ("next delay, fibonacci (1 s, cap 60 s), retries 1–16 cycled, vs backon",
     "next_delay_retries_1_to_16/retry_core_fibonacci_none",
     "next_delay_retries_1_to_16/backon_fibonacci_none", 1.0),
    ("next delay, fibonacci + full jitter, retries 1–16, vs backon's jitter",
     "next_delay_retries_1_to_16/retry_core_fibonacci_full",
     "next_delay_retries_1_to_16/backon_fibonacci_jitter", 1.0),
    ("next delay, constant + full jitter, retries 1–16, vs backon's jitter",
     "next_delay_retries_1_to_16/retry_core_constant_full",
     "next_delay_retries_1_to_16/backon_constant_jitter", 1.0),
    ("next delay, exponential, retries 1–16, vs backon",
     "next_delay_retries_1_to_16/retry_core_exponential_none",
     "next_delay_retries_1_to_16/backon_exponential_none", 1.0),
    ("next delay, exponential + full jitter, retries 1–16, vs backon's jitter",
     "next_delay_retries_1_to_16/retry_core_exponential_full",
     "next_delay_retries_1_to_16/backon_exponential_jitter", 1.0),
    ("next delay, constant, retries 1–16, vs backon",
     "next_delay_retries_1_to_16/retry_core_constant_none",
     "next_delay_retries_1_to_16/backon_constant_none", 1.0),
    ("next delay, exponential (10 ms, cap 1 s, counting up), vs backon",
     "next_delay/retry_core_exponential_none", "next_delay/backon_exponential_none", 1.0),
    ("next delay, constant (10 ms), vs backon",
     "next_delay/retry_core_constant_none", "next_delay/backon_constant_none", 1.0),
    ("next delay, constant + full jitter (10 ms), vs backon's jitter",
     "next_delay/retry_core_constant_full", "next_delay/backon_constant_jitter", 1.0),
    ("next delay, fibonacci + full jitter (10 ms, cap 1 s), vs backon's jitter",
     "next_delay/retry_core_fibonacci_full", "next_delay/backon_fibonacci_jitter", 1.0),
    ("pure breaker closed path (request + record) vs recloser `call`",
     "breaker_closed_path/retry_core", "breaker_closed_path/recloser", 0.4),
    ("one full retry decision (fail, sleep, wake), full jitter, vs backon's jittered `next()` "
     "(10 ms, cap 1 s, counting up)",
     "retry_decision/retry_core_exponential_full", "retry_decision/backon_exponential_jitter_next",
     1.5),
    ("the same, retries 1–16 cycled (1 s, cap 60 s; a fresh machine every 16)",
     "retry_decision_retries_1_to_16/retry_core_exponential_full",
     "retry_decision_retries_1_to_16/backon_exponential_jitter_next", 1.5),
    ("one call guarded by the shared breaker: `retry_std::Retry` vs recloser `call`",
     "guarded_call/retry_std", "guarded_call/recloser", 1.5),
    ("tokio, first attempt succeeds: `retry_tokio::Retry::call` vs backon `Retryable`",
     "tokio_success_path/retry_tokio", "tokio_success_path/backon_retryable", 2.0),
]

TEXT_LIMIT = 8192


def estimate(root, bench):
    """The time criterion saved for `group/function` (the function's `/`
    becomes `_` in its directory name), or None."""
    group, function = bench.split("/", 1)
    path = os.path.join(root, group, function.replace("/", "_"), "new", "estimates.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        saved = json.load(f)
    return (saved.get("slope") or saved["mean"])["point_estimate"]


def main():
    args = sys.argv[1:]
    if "--runs" not in args:
        sys.exit(__doc__)
    roots = args[args.index("--runs") + 1].split(",")
    text = int(args[args.index("--text") + 1]) if "--text" in args else None
    heads = " | ".join(f"run {i + 1}" for i in range(len(roots)))
    print(f"| path | {heads} | median | target | |")
    print("|---|" + "---|" * len(roots) + "---|---|---|")
    unmeasured = 0
    for label, ours, peer, target in ROWS:
        ratios = []
        for root in roots:
            a, b = estimate(root, ours), estimate(root, peer)
            ratios.append(a / b if a is not None and b else None)
        seen = [r for r in ratios if r is not None]
        cells = " | ".join("—" if r is None else f"{r:.2f}" for r in ratios)
        if not seen:
            unmeasured += 1
            print(f"| {label} | {cells} | — | ≤ {target} | not measured |")
            continue
        median = statistics.median(seen)
        verdict = "**met**" if median <= target else "missed"
        print(f"| {label} | {cells} | {median:.2f} | ≤ {target} | {verdict} |")
    if text is not None:
        ratio = text / TEXT_LIMIT
        verdict = "**met**" if text <= TEXT_LIMIT else "missed"
        rest = " | ".join([f"{ratio:.2f}"] + ["—"] * (len(roots) - 1))
        print(f"| size probe `.text` ({text:,} B of {TEXT_LIMIT:,}) | {rest} | {ratio:.2f} "
              f"| ≤ 1.0 | {verdict} |")
    if unmeasured:
        print(f"\n{unmeasured} row(s) had no estimate in any run.", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
