#!/usr/bin/env bash
# Lists every panic call site left in the release firmware, each with the source
# line it comes from (innermost inlined frame first), and fails if one lies in
# retry-core or retry-embassy anywhere but the check rustc puts at the head of an
# `async fn` state machine ("resumed after completion", reached only if an
# executor polls a finished future, which embassy's never does).
#
# The build is the release build with line tables, tail merging and the machine
# outliner off, so that each panic call keeps its own address and source line.
# Needs llvm-objdump and llvm-addr2line (Debian's `llvm`, or rustup's llvm-tools
# for llvm-objdump).
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd ../.. && pwd)

tools="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin"
objdump=$(command -v "$tools/llvm-objdump" || command -v llvm-objdump || true)
addr2line=$(command -v llvm-addr2line || true)
if [ -z "$objdump" ] || [ -z "$addr2line" ]; then
    echo "panic-sites: needs llvm-objdump and llvm-addr2line" >&2
    exit 2
fi

RUSTFLAGS="-C llvm-args=-enable-tail-merge=false -C llvm-args=-enable-machine-outliner=never" \
    cargo build -q --profile audit --target thumbv7em-none-eabihf --target-dir target/audit \
    --bin retry-embassy-firmware
elf=target/audit/thumbv7em-none-eabihf/audit/retry-embassy-firmware

dis=$(mktemp)
trap 'rm -f "$dis"' EXIT
"$objdump" -d --no-show-raw-insn --demangle "$elf" >"$dis"

# Source frames of an address, innermost first, as "function<TAB>file:line".
frames_of() { "$addr2line" -e "$elf" -f -i -C "0x$1" | paste - -; }

# Calls to a panic entry point, as "address<TAB>enclosing symbol". A call made
# from a function of core's own (an outlined `RefCell::borrow_mut`, say) makes
# that function a panic entry point too: its callers are the sites.
targets='core::panicking::|core::cell::panic_|core::option::|core::result::|unwrap_failed|expect_failed'
calls_to() {
    awk -v targets="$1" '
        /^[0-9a-f]+ <[^$]/ { fn = $0; sub(/^[0-9a-f]+ </, "", fn); sub(/>:$/, "", fn) }
        /\t(bl|b|b\.w)\t0x[0-9a-f]+ </ {
            callee = $0; sub(/^.*</, "", callee); sub(/>.*$/, "", callee)
            if (callee ~ targets && fn !~ targets) { addr = $1; sub(":", "", addr); print addr "\t" fn }
        }' "$dis"
}
for _round in 1 2 3 4; do
    grown=$targets
    while IFS=$'\t' read -r addr fn; do
        # Every frame in the standard library: the enclosing function panics.
        if ! frames_of "$addr" | cut -f2 | grep -qv '/library/'; then
            quoted=$(sed 's/[][\.*^$(){}+?|]/\\&/g' <<<"$fn")
            case "|$grown|" in *"|$quoted|"*) ;; *) grown="$grown|$quoted" ;; esac
        fi
    done < <(calls_to "$targets")
    [ "$grown" = "$targets" ] && break
    targets=$grown
done
sites=$(calls_to "$targets" | cut -f1)

status=0
count=0
# Whether the source line `$2` of file `$1` (or one of the eight before it) opens
# an async fn, block or closure: a site there is rustc's state check.
opens_async() {
    local first=$(($2 > 8 ? $2 - 8 : 1))
    [ "$2" -gt 0 ] && sed -n "${first},${2}p" "$1" 2>/dev/null | grep -qE 'async (fn|move|\|)|async \{'
}
for addr in $sites; do
    # Frames, innermost first: function, then file:line.
    mapfile -t frames < <("$addr2line" -e "$elf" -f -i -C "0x$addr")
    # A site inside core's own panicking helpers was replaced by its callers.
    printf '%s\n' "${frames[@]}" | grep -qv '/library/\|^[^/]' || continue
    count=$((count + 1))
    where=""
    full=""
    chain=""
    for ((i = 1; i < ${#frames[@]}; i += 2)); do
        loc=${frames[$i]}
        case "$loc" in
            *"/library/"*) continue ;; # core's own inlined helpers (RefCell::borrow_mut, ...)
        esac
        short=$(sed -E 's#^.*/registry/src/[^/]+/##; s#^'"$root"'/##' <<<"$loc")
        if [ -z "$where" ]; then
            where=$short
            full=$loc
        fi
        chain="$chain <- $short"
    done
    file=${full%:*}
    line=${full##*:}
    if opens_async "$file" "$line"; then
        kind="rustc's check that a finished async state machine is not polled again"
    else
        kind="a panic in $(cut -d/ -f1 <<<"$where")"
    fi
    echo "0x$addr  $kind"
    echo "        at ${where:-?}${chain#" <- $where"}"
    case "$where:$kind" in
        retry-core/*:a\ panic*|retry-embassy/*:a\ panic*)
            echo "    ^ a panic path in retry-core or retry-embassy"
            status=1
            ;;
    esac
done
echo "panic call sites left in the firmware: $count"
exit $status
