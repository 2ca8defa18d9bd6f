#!/usr/bin/env python3
"""Interleaved start-up benchmark for the `retry` program.

Each round runs every command once, in a fresh random order, so that load from
other work on the machine falls on all of them alike (hyperfine runs one command's
samples after the other's, which on a shared machine can favour either). Prints,
per command, the median and 10th-percentile wall time and the median CPU time
(user + system of the command and its children, from wait4), then the ratios of
the first command to the second.

usage: interleave.py ROUNDS 'CMD ARGS' 'CMD ARGS' ...   (VAR=value prefixes allowed)
"""
import os
import random
import statistics
import sys
import time


def main():
    rounds = int(sys.argv[1])
    commands = []
    for spec in sys.argv[2:]:
        env = dict(os.environ)
        words = spec.split()
        while "=" in words[0]:
            key, value = words[0].split("=", 1)
            env[key] = value
            words = words[1:]
        commands.append((words, env, spec))
    null = os.open("/dev/null", os.O_RDWR)
    actions = [(os.POSIX_SPAWN_DUP2, null, fd) for fd in (0, 1, 2)]
    wall = [[] for _ in commands]
    cpu = [[] for _ in commands]
    warm_up = 30
    for round_number in range(rounds + warm_up):
        order = list(range(len(commands)))
        random.shuffle(order)
        for k in order:
            words, env, _ = commands[k]
            began = time.perf_counter_ns()
            pid = os.posix_spawnp(words[0], words, env, file_actions=actions)
            _, _, usage = os.wait4(pid, 0)
            took = time.perf_counter_ns() - began
            if round_number >= warm_up:
                wall[k].append(took / 1e6)
                cpu[k].append((usage.ru_utime + usage.ru_stime) * 1e3)
    summary = []
    for (_, _, spec), w, c in zip(commands, wall, cpu):
        w.sort()
        row = (statistics.median(w), w[len(w) // 10], statistics.median(c))
        summary.append(row)
        print(f"{spec:36s} wall median {row[0]:.3f} ms, p10 {row[1]:.3f} ms; cpu median {row[2]:.3f} ms")
    if len(summary) >= 2:
        a, b = summary[0], summary[1]
        print(f"first / second: wall median {a[0] / b[0]:.2f}, wall p10 {a[1] / b[1]:.2f}, cpu median {a[2] / b[2]:.2f}")


if __name__ == "__main__":
    main()
