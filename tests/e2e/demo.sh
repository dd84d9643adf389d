#!/usr/bin/env bash
# End-to-end: `incharacter demo` in tmux on the bundled sample sessions, with a fresh data dir, no
# config and no network. Asserts that an interview streams within seconds at 1×, then walks the tour
# (n): setup, inspector, compare, observers; then, at 80×24, steps ahead of the replay at once.
# INCHARACTER_SAMPLES, if set, replaces the bundled
# samples. With --captures DIR it also writes what each step shows
# (the text captures README shows, kept in assets/screens/).
#
# Usage: tests/e2e/demo.sh [TARGET_DIR] [--captures DIR]   (default target/debug)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="target/debug"
captures=""
while (($#)); do
    case "$1" in
    --captures) captures="$(mkdir -p "$2" && cd "$2" && pwd)"; shift 2 ;;
    *) bin="$1"; shift ;;
    esac
done
[[ -x "$bin/incharacter" ]] || { echo "demo e2e: $bin/incharacter is missing: run cargo build first" >&2; exit 1; }
bin="$(cd "$bin" && pwd)"
command -v tmux >/dev/null || { echo "demo e2e: tmux is not installed (apt-get install -y tmux)" >&2; exit 1; }

work="$(mktemp -d)"
session="incharacter-demo-$$"
cleanup() {
    tmux kill-session -t "$session" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

tmux new-session -d -s "$session" -x 120 -y 40 \
    "${INCHARACTER_SAMPLES:+INCHARACTER_SAMPLES='$INCHARACTER_SAMPLES'} INCHARACTER_CONFIG='$work/none.toml' \
     INCHARACTER_DATA_DIR='$work/data' '$bin/incharacter' demo; echo DEMO-EXIT=\$?; sleep 600"

label="demo e2e"
. tests/e2e/lib.sh
capture() {
    # Trailing blanks trimmed, so the files diff cleanly.
    [[ -z "$captures" ]] || pane | sed -e 's/[[:space:]]*$//' >"$captures/$1.txt"
}

# 1. The interview streams at 1× within seconds (10 s allows for a cold start of the binary).
wait_for "demo 1/5" 10
wait_for "streaming" 10
wait_for "Transcript"
if [[ -n "$captures" ]]; then
    # Let a few answers arrive before the capture.
    wait_for "answered" 60
fi
capture live
keys s s # 1× → 4× → instant
wait_for "the replay has finished" 60

# 2. The setup the run was started from.
keys n
wait_for "demo 2/5"
wait_for "[x]"
capture setup
# 3. The inspector.
keys n
wait_for "demo 3/5"
wait_for "Dimensions"
capture inspector
# 4. Compare: the measured profile against the labels.
keys n
wait_for "demo 4/5"
wait_for "Measured vs labels"
capture compare
# 5. Observers: the observer sample is opened.
keys n
wait_for "demo 5/5"
wait_for "Dialogues"
capture observers
keys n
wait_for "the tour is over"
keys q
wait_for "DEMO-EXIT=0"

# At 80×24, n n at once: the replay has barely begun, yet the inspector shows the session's scores
# and compare draws its radar (the whole session, while Live goes on replaying it).
tmux kill-session -t "$session"
tmux new-session -d -s "$session" -x 80 -y 24 \
    "${INCHARACTER_SAMPLES:+INCHARACTER_SAMPLES='$INCHARACTER_SAMPLES'} INCHARACTER_CONFIG='$work/none.toml' \
     INCHARACTER_DATA_DIR='$work/data' '$bin/incharacter' demo; echo DEMO-EXIT=\$?; sleep 600"
wait_for "demo 1/5" 10
keys n n
wait_for "demo 3/5"
wait_for "replay goes on in 2"
pane | grep -qE "Extraversion +[0-9]\.[0-9]{2} " \
    || { echo "demo e2e: no score in the inspector at 80×24" >&2; pane >&2; exit 1; }
if pane | grep -qF "not assessed yet"; then echo "demo e2e: the inspector is empty" >&2; pane >&2; exit 1; fi
keys n
wait_for "demo 4/5"
wait_for "Measured vs labels"
# Braille cells (U+2800–U+28FF, UTF-8 E2 A0–A3 …) draw the radar.
pane | LC_ALL=C grep -qP '\xE2[\xA0-\xA3]' || { echo "demo e2e: no radar at 80×24" >&2; pane >&2; exit 1; }
# The session shown is the sample being replayed: annotating it is refused (never written to
# another session).
keys F9
wait_for "read-only sample"
keys q
wait_for "DEMO-EXIT=0"
echo "demo e2e: tour passed${captures:+ (captures in $captures)}"
