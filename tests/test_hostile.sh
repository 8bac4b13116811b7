#!/usr/bin/env bash
# test_hostile.sh <vitbench>: inputs a careful attacker or a clumsy colleague
# would try, one class a section; each is refused with exit 2 and one line,
# or handled, as docs/results.md says:
#   1. an argument that is not UTF-8 (a run name, a path) is refused by every
#      command before it reaches a file
set -u

VB=${1:?usage: test_hostile.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
fail() { echo "test_hostile: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(readlink -f "$VB")
TMP=$(mktemp -d /tmp/vb_hostile.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || fail "cd $TMP"

# refused NEEDLE CMD...: exit 2 with one line naming NEEDLE
refused() {
    local needle=$1 out rc
    shift
    out=$("$VB" "$@" 2>&1 >/dev/null)
    rc=$?
    [ "$rc" = 2 ] || fail "'$*' exited $rc, want 2: $out"
    [ "$(wc -l <<<"$out")" = 1 ] || fail "'$*' printed more than one line: $out"
    grep -q -- "^vitbench: error: .*$needle" <<<"$out" || fail "'$*' does not say '$needle': $out"
}

# ---- 1. arguments that are not UTF-8 ----
refused "argument 3 '\\\\xff\\\\xfe' is not valid UTF-8 (byte 0)" run --run_name $'\xff\xfe'
refused "argument 2 'a\\\\xc3(' is not valid UTF-8 (byte 1)" report $'a\xc3('
refused "is not valid UTF-8" sweep --resume $'sw\xed\xa0\x80' # a UTF-16 surrogate
[ -z "$(ls -A)" ] || fail "a refused argument left files behind: $(ls -A)"
echo "test_hostile: OK"
