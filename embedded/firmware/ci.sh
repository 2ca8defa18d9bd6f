#!/usr/bin/env bash
# The embassy side of CI, called by .ci/run: retry-embassy and the example
# firmware built for thumbv7em-none-eabihf, their code size beside the size
# probe's, the no-panic checks, and the firmware run under QEMU. Installs what it
# needs (the target, llvm-tools or Debian's llvm, qemu-system-arm).
set -euo pipefail
cd "$(dirname "$0")/../.."

echo "-- the README's firmware excerpt is the firmware's code"
excerpt=$(awk '/^## On a microcontroller/ { section = 1 } section && /^```rs$/ { on = 1; next } on && /^```$/ { exit } on' README.md)
[ -n "$excerpt" ] || { echo "README.md has no firmware excerpt (a \`\`\`rs block)"; exit 1; }
if ! tr '\n' '\r' <embedded/firmware/src/main.rs | grep -qF "$(tr '\n' '\r' <<<"$excerpt")"; then
    echo "README.md's firmware excerpt is not in embedded/firmware/src/main.rs"
    exit 1
fi
echo "ok ($(wc -l <<<"$excerpt") lines)"

target=thumbv7em-none-eabihf
if ! rustup target add "$target" >/dev/null 2>&1 \
    && ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
    echo "SKIP: could not add the $target target; the embassy builds were not checked"
    exit 0
fi

apt_updated=""
apt_install() {
    command -v apt-get >/dev/null || return 1
    if [ -z "$apt_updated" ]; then
        apt-get update -qq >/dev/null 2>&1 || true
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

echo "-- retry-embassy for $target"
cargo build --locked -p retry-embassy --target "$target"
cargo build --locked -p retry-embassy --target "$target" --release

echo "-- the example firmware, the no-panic probe and the size probe"
(cd embedded/firmware && cargo build --locked --release --target "$target")
(cd embedded/firmware && cargo build --locked --release --target "$target" \
    --features panic-never --bin panic-probe)
echo "panic-never: the probe driving retry-embassy and retry-core links with no panic path"
(cd embedded && cargo build --locked --release --target "$target")

echo "-- code size (opt-level z, LTO, panic = abort)"
rustup component add llvm-tools >/dev/null 2>&1 || true
tools="$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin"
if ! command -v llvm-addr2line >/dev/null || ! { [ -x "$tools/llvm-size" ] || command -v llvm-size >/dev/null; }; then
    apt_install llvm || true
fi
size=$(command -v "$tools/llvm-size" || command -v llvm-size)
text() { "$size" -A "$1" | awk '$1 == ".text" { print $2 }'; }
echo "llvm-size -A <elf> ($("$size" --version | sed -n 's/.*LLVM version /LLVM /p' | head -1))"
printf '  %-62s %7s bytes of .text\n' \
    "embedded/ size probe (retry-core: machine + breaker)" \
    "$(text "embedded/target/$target/release/retry-embedded-footprint")" \
    "embedded/firmware panic-probe (retry-embassy + retry-core)" \
    "$(text "embedded/firmware/target/$target/release/panic-probe")" \
    "embedded/firmware (embassy executor, time driver, 2 tasks)" \
    "$(text "embedded/firmware/target/$target/release/retry-embassy-firmware")"

# The size probe's budget: retry-core's machine and breaker in at most 8,192
# bytes of code on a Cortex-M4F (the target every performance change is held to).
probe_text=$(text "embedded/target/$target/release/retry-embedded-footprint")
if [ -z "$probe_text" ] || [ "$probe_text" -gt 8192 ]; then
    echo "FAIL: the size probe's .text is ${probe_text:-unknown} bytes, over its 8,192-byte budget"
    exit 1
fi
echo "size probe within its budget: $probe_text <= 8192 bytes"

nm=$(command -v "$tools/llvm-nm" || command -v llvm-nm)
if "$nm" "embedded/firmware/target/$target/release/retry-embassy-firmware" | grep -q '__rust_alloc\|__rdl_alloc'; then
    echo "the firmware links an allocator"
    exit 1
fi
echo "no allocator in the firmware (no __rust_alloc symbol): 0 heap"

echo "-- panic call sites left in the firmware"
bash embedded/firmware/panic-sites.sh

echo "-- the firmware under QEMU (mps2-an386, a Cortex-M4F)"
if ! command -v qemu-system-arm >/dev/null && ! apt_install qemu-system-arm; then
    echo "SKIP: qemu-system-arm could not be installed; the firmware was built, not run"
    exit 0
fi
(cd embedded/firmware && cargo build --locked --release --target "$target" --features qemu \
    --target-dir target/qemu)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! timeout 120 qemu-system-arm -M mps2-an386 -nographic \
    -semihosting-config enable=on,target=native \
    -kernel "embedded/firmware/target/qemu/$target/release/retry-embassy-firmware" \
    </dev/null >"$out" 2>&1; then
    cat "$out"
    echo "the firmware did not run to its end under QEMU"
    exit 1
fi
head -n 12 "$out"
echo "  ..."
grep -E 'breaker (open|half-open)' "$out" | head -n 3 || true
echo "  ..."
tail -n 4 "$out"
fail() { echo "QEMU run: $*"; exit 1; }
grep -q 'timed out, retry in' "$out" || fail "no attempt ran into its deadline"
grep -q 'retry.circuit_open' "$out" || fail "the breaker never turned a read away while the sensor was unplugged"
# The sensor is unplugged from 2 s to 4 s: reads succeed again afterwards.
awk '$2 == "ms" && $3 == "reader" && $1 > 4000 && /degC/ { ok = 1 } END { exit !ok }' "$out" \
    || fail "no successful read after the sensor came back"
summary=$(grep '^summary:' "$out") || fail "no summary line"
for counter in readings retries turned_away; do
    value=$(sed -E "s/.*$counter=([0-9]+).*/\1/" <<<"$summary")
    [ "$value" -gt 0 ] || fail "$counter is 0"
done
echo "QEMU run: retries, deadlines, the shared breaker opening and closing, all seen"
