#!/usr/bin/env bash
# test_history_otava.sh <vitbench>: `vitbench history` against Apache Otava
# itself (PyPI apache-otava 0.8.0), whose method it follows, on the same
# CSVs (tests/py/check_otava.py has the series, the comparisons and Otava's
# quirks): whether and where a change is, on 60 synthetic histories with and
# without steps, and a history `vitbench history append` wrote, read by Otava
# as it is.
# Otava is installed from PyPI into a virtual environment in the build
# directory ($VB_BINARY_DIR/otava-venv; VB_OTAVA_VENV overrides), made once
# and reused: about 330 MB (its command line imports its BigQuery, Postgres
# and Slack clients too) and a minute the first time, then the test takes
# about half a minute. Skipped (77) only when the package cannot be installed
# because PyPI is out of reach, with pip's reason; python3 -m venv must work
# (Debian: python3-venv).
set -u

VB=${1:?usage: test_history_otava.sh <path-to-vitbench>}
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
fail() { echo "test_history_otava: FAIL: $*" >&2; exit 1; }
skip() { echo "test_history_otava: SKIPPED: $*"; exit 77; }
[ -x "$VB" ] || fail "not an executable: $VB"
VB=$(cd "$(dirname "$VB")" && pwd)/$(basename "$VB")
command -v python3 >/dev/null || fail "python3 is needed"

OTAVA_VERSION=0.8.0
VENV=${VB_OTAVA_VENV:-${VB_BINARY_DIR:-$(dirname "$VB")}/otava-venv}

TMP=$(mktemp -d /tmp/vb_otava.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT

# ---- Otava in its own virtual environment ----
otava_ready() {
    "$1/bin/python" -c "import importlib.metadata as m, otava.main
assert m.version('apache-otava') == '$OTAVA_VERSION'" >/dev/null 2>&1
}
if ! otava_ready "$VENV"; then
    # made beside it and renamed into place: a run killed half-way, or two
    # runs at once, never leave a half-installed environment that looks ready
    NEW=$VENV.new.$$
    rm -rf "$NEW"
    python3 -m venv "$NEW" >"$TMP/venv.log" 2>&1 ||
        { rm -rf "$NEW"; fail "python3 -m venv failed (Debian: the python3-venv package): $(tail -n 1 "$TMP/venv.log")"; }
    echo "test_history_otava: installing apache-otava==$OTAVA_VERSION from PyPI into $VENV"
    if ! "$NEW/bin/python" -m pip install --disable-pip-version-check --no-input --timeout 30 --retries 1 \
        "apache-otava==$OTAVA_VERSION" >"$TMP/pip.log" 2>&1; then
        rm -rf "$NEW"
        why=$(grep -m1 -E 'ERROR|error' "$TMP/pip.log" || tail -n 1 "$TMP/pip.log")
        # only a registry out of reach is a reason to skip; any other
        # failure to install is a failure
        grep -qiE 'NewConnectionError|ConnectTimeout|ReadTimeout|timed out|name resolution|Name or service not known|Network is unreachable|Connection refused|No route to host|ProxyError|Max retries exceeded' \
            "$TMP/pip.log" || fail "pip could not install apache-otava==$OTAVA_VERSION: $why"
        skip "apache-otava==$OTAVA_VERSION cannot be installed: PyPI is out of reach ($why)"
    fi
    otava_ready "$NEW" || { rm -rf "$NEW"; fail "Otava installed but does not import: $("$NEW/bin/python" -c 'import otava.main' 2>&1 | tail -n 1)"; }
    if otava_ready "$VENV"; then
        rm -rf "$NEW" # another run got there first
    else
        rm -rf "$VENV" && mv "$NEW" "$VENV" || fail "cannot move $NEW to $VENV"
    fi
fi
echo "test_history_otava: $("$VENV/bin/python" -c 'import importlib.metadata as m; print("Otava", m.version("apache-otava"), "numpy", m.version("numpy"), "scipy", m.version("scipy"))')"

# Otava's command line as `python -m otava.main` (its `otava` script is that
# module's main): the venv's scripts name the directory it was made in
"$VENV/bin/python" "$SRC/tests/py/check_otava.py" "$VB" "$TMP" || fail "vitbench history and Otava (above)"
echo "test_history_otava: ok"
