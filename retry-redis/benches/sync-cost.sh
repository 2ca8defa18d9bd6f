#!/bin/sh
# The breaker sync script's cost per call inside Redis with N members in the
# fleet: starts a redis-server on a free loopback port, fills the fleet with N
# members (each one sync under its own id, in the current and the previous
# interval), then runs the sync script 20,000 times (redis-benchmark, one
# connection, a random member of the N each call) and prints Redis's own
# accounting: time inside the script per call (INFO commandstats) and CPU per
# call (INFO cpu, user + system, so network I/O included).
#
# Usage: retry-redis/benches/sync-cost.sh 50 200 1000
# Needs redis-server, redis-cli and redis-benchmark on PATH.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
script="$here/../src/lua/sync.lua"
calls=${SYNC_COST_CALLS:-20000}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" >/dev/null 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
cli() { redis-cli -p "$port" "$@"; }
until cli ping >/dev/null 2>&1; do sleep 0.05; done
sha=$(cli script load "$(cat "$script")")
# One bucket per hour, so that the buckets do not roll over during a run.
interval=3600000
report='1|0|0|3|0|0|0'
# The sync script's call for member $1 (this version's keys and arguments).
sync_args() {
  echo "EVALSHA $sha 1 cost:breaker:{dep}:decision $1 $report $interval cost:breaker:{dep}:"
}
cpu() { cli info cpu | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.6f", s}'; }
for n in "$@"; do
  cli flushall >/dev/null
  # Fill the previous and the current bucket (as members syncing every
  # interval do), N members each: N syncs in the current bucket, moved to
  # the previous one, then N more.
  fill() {
    i=0
    while [ $i -lt "$n" ]; do
      echo "$(sync_args "m$(printf '%012d' $i)")"
      i=$((i + 1))
    done | cli >/dev/null
  }
  fill
  b=$(( $(cli time | head -1) * 1000 / interval ))
  for k in sums reports; do
    cli rename "cost:breaker:{dep}:$k:$b" "cost:breaker:{dep}:$k:$((b - 1))" >/dev/null
  done
  fill
  cli config resetstat >/dev/null
  c0=$(cpu)
  # shellcheck disable=SC2046
  redis-benchmark -p "$port" -c 1 -n "$calls" -r "$n" $(sync_args 'm__rand_int__') >/dev/null
  c1=$(cpu)
  cli info commandstats | awk -F'[:,=]' -v n="$n" -v c0="$c0" -v c1="$c1" '
    /^cmdstat_evalsha:/ { printf "%d members: %d calls, %.1f us inside the script per call, %.1f us of redis cpu per call\n", n, $3, $5 / $3, 1e6 * (c1 - c0) / $3 }'
done
