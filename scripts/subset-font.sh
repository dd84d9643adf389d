#!/usr/bin/env bash
# Regenerates assets/fonts/NotoSansCJKsc-Subset.otf, the font `incharacter plot` embeds so a figure
# renders the same on every machine (no system font lookup) and Chinese names are not tofu.
#
# Source: Noto Sans CJK SC Regular (SIL OFL 1.1) from Debian's `fonts-noto-cjk` package, subset with
# fonttools' pyftsubset to: Latin, Greek and common punctuation and symbols; every character of the
# bundled scales and characters (assets/scales, assets/characters); GB 2312's symbol rows and its
# level-1 hanzi (the 3,755 most frequently used Chinese characters).
#
# No layout features: figures place glyphs by their advances and never shape text (and `locl`/`vert`
# alone would pull in ~6,000 alternate glyphs, doubling the file). No hinting: rasterised by outline.
#
# Needs apt-get (root) and python3 with venv. Usage: scripts/subset-font.sh [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
work=${1:-$(mktemp -d)}
mkdir -p "$work"
cd "$work"

FONTTOOLS_VERSION=4.68.0
PACKAGE_VERSION=1:20220127+repack1-1
# Noto Sans CJK SC is face 2 of the collection (JP, KR, SC, TC, HK, then the Mono faces).
FACE=2

if [ ! -f x/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc ]; then
    apt-get download "fonts-noto-cjk=$PACKAGE_VERSION"
    dpkg -x fonts-noto-cjk_*.deb x
fi
if [ ! -x venv/bin/pyftsubset ]; then
    python3 -m venv venv
    venv/bin/pip install -q "fonttools==$FONTTOOLS_VERSION"
fi

venv/bin/python - "$repo" > chars.txt <<'PY'
import pathlib, sys
repo = pathlib.Path(sys.argv[1])
chars = set()
# Latin (Basic, Latin-1, Extended-A), Greek, general punctuation, arrows, maths, ✓ ✗.
for lo, hi in [(0x20, 0x7E), (0xA0, 0x17F), (0x370, 0x3FF), (0x2010, 0x205E),
               (0x2190, 0x2193), (0x2212, 0x2212), (0x2260, 0x2265), (0x2713, 0x2717)]:
    chars.update(map(chr, range(lo, hi + 1)))
# GB 2312 rows 1-9 (CJK punctuation, full-width forms) and 16-55 (level-1 hanzi).
for row in list(range(1, 10)) + list(range(16, 56)):
    for cell in range(1, 95):
        try:
            chars.add(bytes([0xA0 + row, 0xA0 + cell]).decode("gb2312"))
        except UnicodeDecodeError:
            pass
for folder in ["assets/scales", "assets/characters"]:
    for f in sorted((repo / folder).glob("*.toml")):
        chars.update(f.read_text(encoding="utf-8"))
chars = sorted(c for c in chars if c.isprintable() and not c.isspace() or c == " ")
sys.stdout.write("".join(chars))
PY

venv/bin/pyftsubset x/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc \
    --font-number=$FACE \
    --text-file=chars.txt \
    --layout-features='' \
    --no-hinting \
    --name-IDs='0,1,2,3,4,5,6' \
    --output-file="$repo/assets/fonts/NotoSansCJKsc-Subset.otf"
ls -l "$repo/assets/fonts/NotoSansCJKsc-Subset.otf"
