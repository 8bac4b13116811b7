#!/usr/bin/env bash
# test_docs.sh <vitbench>: the documentation's links and the README's shape.
#   1. every relative link and image in README.md, docs/*.md and the other
#      Markdown files of the tree names a file that exists, and every #anchor
#      names a heading of its file (GitHub's anchors: lowercase, punctuation
#      dropped, spaces to '-', -1, -2 ... for repeated headings);
#   2. README.md has at most 300 lines;
#   3. every docs/*.md file is linked from README.md and says whom it is for
#      ("For: ...") in its first lines;
#   4. every command `vitbench help` lists is in the README's commands table.
# Links inside code blocks and code spans are not links and are skipped.
set -u

VB=${1:?usage: test_docs.sh <path-to-vitbench>}
fail() { echo "test_docs: FAIL: $*" >&2; exit 1; }
[ -x "$VB" ] || fail "not an executable: $VB"
SRC=${VB_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
[ -f "$SRC/README.md" ] || fail "no README.md in $SRC"
command -v python3 >/dev/null || fail "python3 is needed to read the Markdown"

lines=$(wc -l <"$SRC/README.md")
[ "$lines" -le 300 ] || fail "README.md has $lines lines (at most 300: move detail into docs/)"

cmds=$("$VB" help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }')
[ -n "$cmds" ] || fail "vitbench help lists no commands"
for c in $cmds; do
    grep -q "^| \`$c\`" "$SRC/README.md" || fail "README.md's commands table has no row for \`$c\`"
done

python3 - "$SRC" <<'EOF' || fail "broken links (above)"
import os, re, sys

src = sys.argv[1]
files = [os.path.join(src, "README.md")]
for d in ("docs", "bench", "tests", "scenarios", "scripts", "analysis", "core", "kernels", "tools",
          os.path.join("results", "baselines")):
    for root, _, names in os.walk(os.path.join(src, d)):
        files += [os.path.join(root, n) for n in sorted(names) if n.endswith(".md")]
if os.path.isfile(os.path.join(src, "results", "README.md")):
    files.append(os.path.join(src, "results", "README.md"))

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")

def prose(path):
    """(line number, text) of the lines outside fenced code blocks."""
    out, fenced = [], False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                out.append((n, line.rstrip("\n")))
    return out

def slug(text):
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)   # a link's text
    text = re.sub(r"<[^>]+>", "", text)                       # html tags
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")

anchors = {}
def anchors_of(path):
    if path not in anchors:
        seen, got = {}, set()
        for _, line in prose(path):
            m = re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            s = slug(m.group(1))
            k = seen.get(s, 0)
            seen[s] = k + 1
            got.add(s if k == 0 else "%s-%d" % (s, k))
        for _, line in prose(path):                           # <a name="..."> / id="..."
            got.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", line))
        anchors[path] = got
    return anchors[path]

bad = 0
for path in files:
    rel = os.path.relpath(path, src)
    for n, line in prose(path):
        line = re.sub(r"(`+).*?\1", "", line)                 # code spans
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto: ...
                continue
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(dest):
                print("%s:%d: %s: no such file %s" % (rel, n, target, os.path.relpath(dest, src)))
                bad += 1
                continue
            if anchor and dest.endswith(".md") and anchor not in anchors_of(dest):
                print("%s:%d: %s: no heading with anchor #%s in %s" % (rel, n, target, anchor,
                      os.path.relpath(dest, src)))
                bad += 1

readme = open(os.path.join(src, "README.md"), encoding="utf-8").read()
docs = os.path.join(src, "docs")
for name in sorted(os.listdir(docs)):
    if not name.endswith(".md"):
        continue
    if "](docs/%s" % name not in readme:
        print("README.md: no link to docs/%s" % name)
        bad += 1
    with open(os.path.join(docs, name), encoding="utf-8") as f:
        head = "".join(f.readline() for _ in range(6))
    if "For:" not in head:
        print("docs/%s: its first lines do not say whom it is for (\"For: ...\")" % name)
        bad += 1
sys.exit(1 if bad else 0)
EOF
echo "test_docs: OK ($lines README lines)"
