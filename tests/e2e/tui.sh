#!/usr/bin/env bash
# End-to-end: the real binary in tmux, as a person would use it, against the fake-openai test
# instrument. Walks setup → live run → inspector (drill into an item) → compare → help → observers →
# annotate (interview items, then an observer subject's traits) → quit → restart (the answers and
# ratings are still there) → RoleBench → Persona (write a character with a target, save, probe, edit it, probe again: the before/after view and the answers that moved a dimension), and asserts on what the pane shows. One scripted reply carries terminal escape sequences (set the window
# title, clear the screen): they must reach the screen inert.
#
# Usage: tests/e2e/tui.sh [TARGET_DIR]   (binaries from `cargo build --workspace --bins`, default target/debug)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${1:-target/debug}"
for b in incharacter fake-openai; do
    [[ -x "$bin/$b" ]] || { echo "e2e: $bin/$b is missing: run cargo build --workspace --bins first" >&2; exit 1; }
done
bin="$(cd "$bin" && pwd)"
command -v tmux >/dev/null || { echo "e2e: tmux is not installed (apt-get install -y tmux)" >&2; exit 1; }

work="$(mktemp -d)"
session="incharacter-e2e-$$"
server_pid=""
cleanup() {
    tmux kill-session -t "$session" 2>/dev/null || true
    [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# The scripted reply: an OSC "set title" and a CSI "clear screen" inside an answer.
printf '[{"contains": "really difficult", "reply": "I read ahead \\u001b]0;pwned\\u0007 and \\u001b[2J never give up."}]' \
    >"$work/script.json"
"$bin/fake-openai" --port 0 --seed 1 --latency-ms 20 --tokens-per-s 400 --script "$work/script.json" \
    >"$work/server.out" 2>"$work/server.err" &
server_pid=$!
for _ in $(seq 100); do
    grep -q "listening on" "$work/server.out" 2>/dev/null && break
    sleep 0.05
done
url="$(grep -o 'http://[^ ]*' "$work/server.out" | head -1)"
[[ -n "$url" ]] || { echo "e2e: fake-openai did not start" >&2; cat "$work/server.err" >&2; exit 1; }

cat >"$work/config.toml" <<EOF
[[providers]]
name = "fake"
kind = "openai"
base_url = "$url"
model = "scripted"

[roles]
rpa = "fake"
judge = "fake"
EOF

mkdir -p "$work/data/rolebench"
for q in "where is your ship" "what do you fear" "who do you trust"; do
    printf '{"role": "Captain Test", "question": "Captain, %s?", "generated": ["Well, I suppose I do enjoy a good conversation about %s."], "type": "script_agnostic"}\n' "$q" "$q"
done >"$work/data/rolebench/roles.jsonl"

# No bundled sample sessions in this walk: the session counts below are the walk's own.
tmux new-session -d -s "$session" -x 120 -y 40 \
    "INCHARACTER_SAMPLES='$work/no-samples' INCHARACTER_CONFIG='$work/config.toml' INCHARACTER_DATA_DIR='$work/data' '$bin/incharacter'; echo E2E-EXIT=\$?; sleep 600"
tmux select-pane -t "$session" -T e2e-title

label=e2e
. tests/e2e/lib.sh

# Setup: filter, pick Hermione, GSE, ER_batch + OC, start.
wait_for "Characters (32)"
keys h e r m i o n e
wait_for "Characters (1) · filter: hermione"
keys Space Tab
wait_for "[x] Hermione Granger"
for _ in $(seq 9); do keys Down; done
keys Space Tab Down Down Space
wait_for "≈ "
keys Enter

# Live run: the transcript streams, the run finishes, the escape sequences did nothing.
wait_for "Transcript"
wait_for "run finished" 60
keys f
wait_for "Transcript · following"
pane | grep -qF "never give up." || true
title="$(tmux display-message -p -t "$session" '#{pane_title}')"
[[ "$title" == "e2e-title" ]] || { echo "e2e: the pane title changed to '$title'" >&2; exit 1; }
pane | grep -qF "1 Setup" || { echo "e2e: the screen was cleared" >&2; pane >&2; exit 1; }

# Inspector: dimensions, then drill into the first item and see the exact prompts.
keys 3
wait_for "Dimensions"
wait_for "Self-efficacy"
keys Tab
keys Enter
wait_for "prompt sent to the agent"
wait_for "[system]"
pane | grep -qF "never give up." || { echo "e2e: the scripted answer is not in the drill view" >&2; pane >&2; exit 1; }
if pane | grep -qF "pwned"; then echo "e2e: escape sequence text reached the screen" >&2; exit 1; fi

# Compare: radar and bars against the labels.
keys 4
wait_for "Measured vs labels"
wait_for "Session table"

# Help lists the keys; any key closes it.
keys '?'
wait_for "Keys (any key closes)"
wait_for "next theme"
keys Escape
wait_gone "Keys (any key closes)"

# Observers: a synthetic subject's run streams its dialogues and ends with the trait comparison.
keys 7
wait_for "No observer run open."
keys s
wait_for "Scenario 1"
wait_for "run finished" 60
wait_for "aggregate"
wait_for "reported"

# Annotate: open the interview session, answer 5 items with number keys (GSE: 1–4).
keys 5
wait_for "Sessions (2)"
# The interview session is the older one, first in the list: go there before opening.
keys Home
keys Enter
wait_for "opened session"
keys 8
wait_for "0/10 answered"
keys 1
wait_for "1/10 answered"
keys 2 3 4 1
wait_for "5/10 answered"

# Annotate the observer session (the newer one): its subject rated on every trait, blind until then
# (digits answer here, so F6 and F9 switch screens).
keys F6
wait_for "Sessions (2)"
keys Home Down Enter
wait_for "opened session"
keys F9
wait_for "subject task · per subject · subject 1/1"
wait_for "stay hidden until you"
keys 3 Enter 4 Enter 2 . 5 Enter x 5 Enter
wait_for "5/5 ratings by"
wait_gone "stay hidden until you"

# Quit restores the terminal (the shell line after the program is visible).
keys q
wait_for "E2E-EXIT=0"
pane | grep -qF "Measured vs labels" && { echo "e2e: the alternate screen was not left" >&2; exit 1; }

# SIGTERM also restores the terminal.
tmux respawn-pane -k -t "$session" \
    "INCHARACTER_SAMPLES='$work/no-samples' INCHARACTER_CONFIG='$work/config.toml' INCHARACTER_DATA_DIR='$work/data' '$bin/incharacter'; echo E2E-TERM=\$?; sleep 600"
wait_for "Characters (32)"
# The answers survived the restart.
keys 5
wait_for "Sessions (2)"
keys Enter
wait_for "opened session"
keys 8
wait_for "5/10 answered"
wait_for "n=5 "
# A line damaged while the screen is open (a hand edit, another program): the next answer is not
# written after it, the screen says where; mended, coming back to the screen goes on.
ann="$(grep -l '"task":"item"' "$work"/data/sessions/*/annotations/*.jsonl | head -1)"
cp "$ann" "$work/answers.good"
echo '{"annotator": oops' >>"$ann"
keys 3
wait_for "could not be read"
wait_for "$(basename "$ann"):6:"
[[ "$(head -n 5 "$ann")" == "$(cat "$work/answers.good")" && "$(wc -l <"$ann")" -eq 6 ]] \
    || { echo "e2e: an answer was written after the damaged line" >&2; cat "$ann" >&2; exit 1; }
cp "$work/answers.good" "$ann"
keys F6
wait_for "Sessions (2)"
keys F9
wait_for "5/10 answered"
# So did the subject's ratings, and the agreement panel counts them.
keys F6
wait_for "Sessions (2)"
keys Home Down Enter
wait_for "opened session"
keys F9
wait_for "5/5 ratings by"
wait_for "Extraversion   1"
# RoleBench: a question file in <data dir>/rolebench, one role picked, its answers scored with the
# common subsequence of answer and reference highlighted.
keys F10 # digits answer on the annotate screen; f10 switches from anywhere
wait_for "rolebench/roles.jsonl"
keys Enter
wait_for "[ ] Captain Test (3)"
keys Space
wait_for "[x] Captain Test (3)"
keys C-r
wait_for "Questions 3/3" 60
wait_for "common subsequence highlighted"
wait_for "Rouge-L P"
tmux capture-pane -p -e -t "$session" | grep -q $'\e\[1;4m' \
    || { echo "e2e: no highlighted (bold underlined) common subsequence" >&2; exit 1; }
# Persona: a character written from scratch with a target, saved, then probed on the fake server.
keys F11
wait_for "Characters (32)"
keys a
wait_for "New character (unsaved)"
keys BTab
for _ in $(seq 20); do keys BSpace; done
keys -l "wren-en"
keys Tab
for _ in $(seq 15); do keys BSpace; done
keys -l "Wren"
keys Tab Tab Tab Tab
keys -l "You are Wren, a quiet lighthouse keeper who plans everything."
keys Tab
wait_for "h/l: H/L"
keys h
wait_for "Extraversion             H"
keys C-s
wait_for "saved wren-en"
wait_for "Characters (33)"
wait_for "✎ wren-en"
keys C-r
# The first probe of a character has nothing before it: it is shown alone.
wait_for "Before / after the probe" 60
wait_for "the first measurement of this character"
keys Escape
wait_for "✎ wren-en"
# Edit the prompt, save, probe again: the before/after of the two versions.
keys Enter
wait_for "Editing"
keys Tab Tab Tab Tab
keys -l "She counts ships at night. "
keys C-s
wait_for "saved wren-en"
keys C-r
wait_for "Before / after the probe" 60
wait_for "edited between the two sessions"
wait_for "dimensions on target now"
wait_for "✗ 0.20 below"
wait_for "▸ Extraversion"
wait_for "target H"
keys Enter
wait_for "Answers that moved it"
wait_for "Extraversion · BFI · er-batch: before"
keys Escape
wait_for "Before / after the probe"
keys Escape
wait_for "version      "
shell_pid="$(tmux display-message -p -t "$session" '#{pane_pid}')"
app_pid=""
for status in /proc/[0-9]*/status; do
    # The child of the pane's shell (read from /proc, so no procps is needed).
    if grep -q "^PPid:[[:space:]]*$shell_pid\$" "$status" 2>/dev/null; then
        app_pid="$(basename "$(dirname "$status")")"
    fi
done
[[ -n "$app_pid" ]] || { echo "e2e: cannot find the running binary" >&2; exit 1; }
kill -TERM "$app_pid"
# Killed by SIGTERM, it says so in its exit (128 + 15), as the headless commands do.
wait_for "E2E-TERM=143"
pane | grep -qF "Characters (33)" && { echo "e2e: SIGTERM left the alternate screen up" >&2; exit 1; }
echo "e2e: TUI walk passed"
