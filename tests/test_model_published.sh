#!/usr/bin/env bash
# test_model_published.sh <vitbench>: the tutorials' published scaling results
# (scenarios/published/tutorials.yaml) predicted beside published, as a
# standing check. What must hold:
#  - every row of the file is predicted: published.csv has one line each, with
#    the published median of the listed throughputs, a prediction inside its
#    own interval and rel_error = (predicted - published) / published (to the
#    6 significant digits the CSV keeps);
#  - docs/model.md carries exactly the table this run writes (published.md),
#    so the errors it states are the program's, not numbers typed by hand;
#  - bad files and flags exit 2 with one line naming what is wrong.
# Nothing here bounds the errors: rows far off are explained in docs/model.md,
# not tuned (the model takes no constant from these rows).
set -u

VB=${1:?usage: test_model_published.sh <path-to-vitbench>}
fail() { echo "test_model_published: FAIL: $*" >&2; exit 1; }
SRC=$(cd "$(dirname "$0")/.." && pwd)
PUB="$SRC/scenarios/published/tutorials.yaml"
TMP=$(mktemp -d /tmp/vb_model_pub.XXXXXX) || fail "mktemp"
trap 'rm -rf "$TMP"' EXIT

"$VB" model --published "$PUB" --output_dir "$TMP/p" > "$TMP/out.txt" 2>&1 || fail "exit $?: $(cat "$TMP/out.txt")"
C="$TMP/p/published.csv"
nrows=$(grep -c '^  - id:' "$PUB")
[ "$nrows" -ge 5 ] || fail "the file lists $nrows rows"
[ "$(($(wc -l < "$C") - 1))" -eq "$nrows" ] || fail "published.csv has $(($(wc -l < "$C") - 1)) rows, the file $nrows"
head -1 "$C" | grep -q '^id,machine,tp,cp,dp,order,local_batch,reference,published_samples_per_s,published_spread,predicted_samples_per_s,predicted_lo,predicted_hi,rel_error,published_in_interval,most_sensitive$' ||
    fail "header: $(head -1 "$C")"
# columns from the end (the reference column may hold quoted commas, most_sensitive never does):
# published, spread, predicted, lo, hi, rel_error, in_interval, most_sensitive
awk -F, 'NR > 1 { n = NF; pub = $(n - 7); pred = $(n - 5); lo = $(n - 4); hi = $(n - 3); e = $(n - 2)
        want = (pred - pub) / pub; d = e - want; if (d < 0) d = -d
        if (!(lo <= pred && pred <= hi)) { print "row " $1 ": predicted " pred " outside [" lo ", " hi "]"; bad = 1 }
        if (d > 2e-5 * (1 + (want < 0 ? -want : want))) { print "row " $1 ": rel_error " e ", recomputed " want; bad = 1 } }
        END { exit bad }' "$C" > "$TMP/chk.txt" || fail "$(cat "$TMP/chk.txt")"
# the published figure is the median of the README's epochs: (242.629239 + 241.336673) / 2
grep -q '^sc25-base-dp2,h100-nvl-pair,1,1,2,,16,sc25-base-1gpu,241.983,' "$C" || fail "sc25-base-dp2: $(grep sc25-base-dp2 "$C")"
grep -q "mean |error|" "$TMP/out.txt" || fail "no summary line"

# docs/model.md holds this table between its markers, byte for byte
DOC="$SRC/docs/model.md"
[ -f "$DOC" ] || fail "no docs/model.md"
awk '/<!-- published-table: begin -->/ { on = 1; next } /<!-- published-table: end -->/ { on = 0 } on' "$DOC" |
    sed '/^$/d' > "$TMP/doc_table.md"
sed '/^$/d' "$TMP/p/published.md" > "$TMP/run_table.md"
diff "$TMP/doc_table.md" "$TMP/run_table.md" > "$TMP/diff.txt" ||
    fail "docs/model.md's published table differs from what vitbench model --published writes (regenerate it): $(cat "$TMP/diff.txt")"

bad() { # bad PATTERN ARGS...: exit 2 with PATTERN in its one line
    local pat=$1
    shift
    local msg rc
    msg=$("$VB" model "$@" 2>&1)
    rc=$?
    [ $rc -eq 2 ] || fail "exit $rc (want 2) for: $* ($msg)"
    [ "$(echo "$msg" | wc -l)" -eq 1 ] || fail "more than one line for: $*: $msg"
    echo "$msg" | grep -q -- "$pat" || fail "'$pat' not in: $msg"
}
mkdir -p "$TMP/pub"
sed 's/reference: sc25-mp-dp2$/reference: sc25-mp-dp3/' "$PUB" > "$TMP/pub/noref.yaml"
cp -r "$SRC/scenarios/machines" "$TMP/machines"
bad "noref.yaml: rows\\[2\\] (sc25-mp-tp2).reference: no reference named 'sc25-mp-dp3'" --published "$TMP/pub/noref.yaml"
sed 's/^    local_batch: 32$/    local_batch: 32\n    locl_batch: 32/' "$PUB" > "$TMP/pub/typo.yaml"
bad "typo.yaml: rows\\[1\\].locl_batch" --published "$TMP/pub/typo.yaml"
sed 's/layout: {tp: 2, cp: 1, dp: 1}/layout: {tp: 3, cp: 1, dp: 1}/' "$PUB" > "$TMP/pub/tp3.yaml"
bad "tensor_parallel 3 does not divide num_heads 8" --published "$TMP/pub/tp3.yaml"
bad "--published runs alone" --published "$PUB" --world_sizes 4
echo "test_model_published: OK ($nrows rows)"
