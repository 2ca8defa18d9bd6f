#!/bin/sh
# The breaker sync script's cost per call inside Redis with N members in the
# fleet: starts a redis-server on a free loopback port, fills the fleet with N
# members (each one sync under its own id, in the current and the previous
# interval), then runs the sync script (redis-benchmark, one connection, a
# random member of the N each call) and prints Redis's own accounting: time
# inside the script per call (INFO commandstats) and CPU per call (INFO cpu,
# user + system, so network I/O included).
#
# With SYNC_COST_CALLGRIND=1 the server runs under valgrind's callgrind and the
# figure is the server's instructions per call (everything it ran while the
# calls were made: the script, the commands, the network I/O), repeatable on a
# loaded machine where times are not.
#
# With SYNC_COST_BEFORE=1 it measures the sync script as it was before it kept
# sums (commit cc1b287: every member's report in one hash per interval, the
# current and the previous one read back whole), from git.
#
# Usage: retry-redis/benches/sync-cost.sh 50 200 1000
# Needs redis-server, redis-cli and redis-benchmark (and valgrind for
# SYNC_COST_CALLGRIND) on PATH.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
if [ "${SYNC_COST_BEFORE:-0}" = 1 ]; then
  git -C "$here" show cc1b287:retry-redis/src/lua/sync.lua > "$dir/sync.lua"
  script="$dir/sync.lua"
else
  script="$here/../src/lua/sync.lua"
fi
callgrind=${SYNC_COST_CALLGRIND:-0}
if [ "$callgrind" = 1 ]; then calls=${SYNC_COST_CALLS:-3000}; else calls=${SYNC_COST_CALLS:-20000}; fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
if [ "$callgrind" = 1 ]; then
  # One background tick a second (--hz 1): the ticks' instructions depend on
  # how long the run takes under valgrind, which depends on the machine's load.
  valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out" \
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --hz 1 \
    --dir "$dir" >/dev/null 2>&1 &
else
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" >/dev/null 2>&1 &
fi
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
cli() { redis-cli -p "$port" "$@"; }
until cli ping >/dev/null 2>&1; do sleep 0.1; done
sha=$(cli script load "$(cat "$script")")
# One bucket per hour, so that the buckets do not roll over during a run.
interval=3600000
report='1|0|0|3|0|0|0'
# The sync script's call for member $1 (each version's keys and arguments).
sync_args() {
  if [ "${SYNC_COST_BEFORE:-0}" = 1 ]; then
    echo "EVALSHA $sha 1 cost:breaker:dep:decision $1 $report $interval cost:breaker:dep:members:"
  else
    echo "EVALSHA $sha 1 cost:breaker:{dep}:decision $1 $report $interval cost:breaker:{dep}:"
  fi
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
  if [ "${SYNC_COST_BEFORE:-0}" = 1 ]; then
    cli rename "cost:breaker:dep:members:$b" "cost:breaker:dep:members:$((b - 1))" >/dev/null
  else
    for k in sums reports; do
      cli rename "cost:breaker:{dep}:$k:$b" "cost:breaker:{dep}:$k:$((b - 1))" >/dev/null
    done
  fi
  fill
  cli config resetstat >/dev/null
  c0=$(cpu)
  [ "$callgrind" = 1 ] && callgrind_control -z "$pid" >/dev/null 2>&1
  # shellcheck disable=SC2046
  redis-benchmark -p "$port" -c 1 -n "$calls" -r "$n" $(sync_args 'm__rand_int__') >/dev/null
  if [ "$callgrind" = 1 ]; then
    rm -f "$dir"/callgrind.out.*
    callgrind_control -d "$pid" >/dev/null 2>&1
    sleep 0.5
    ir=$(cat "$dir"/callgrind.out.* | awk '/^(summary|totals):/ {print $2; exit}')
    echo "$n members: $calls calls, $((ir / calls)) instructions in redis-server per call"
  else
    c1=$(cpu)
    cli info commandstats | awk -F'[:,=]' -v n="$n" -v c0="$c0" -v c1="$c1" '
      /^cmdstat_evalsha:/ { printf "%d members: %d calls, %.1f us inside the script per call, %.1f us of redis cpu per call\n", n, $3, $5 / $3, 1e6 * (c1 - c0) / $3 }'
  fi
done
