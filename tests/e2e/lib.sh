# Shared by the tmux walks: what the pane shows, and waiting on it by polling (never by sleeping a
# guessed time). The caller sets $session (the tmux session) and $label (the prefix of its messages).

pane() { tmux capture-pane -p -t "$session"; }

# Polls the pane until it shows $1 (a fixed string), up to $2 seconds (default 20).
wait_for() {
    local deadline=$((SECONDS + ${2:-20}))
    until pane | grep -qF -- "$1"; do
        if ((SECONDS > deadline)); then
            echo "$label: timed out waiting for: $1" >&2
            pane >&2
            exit 1
        fi
        sleep 0.1
    done
}

# Polls the pane until $1 is gone, up to $2 seconds (default 20).
wait_gone() {
    local deadline=$((SECONDS + ${2:-20}))
    while pane | grep -qF -- "$1"; do
        if ((SECONDS > deadline)); then
            echo "$label: timed out waiting for this to go: $1" >&2
            pane >&2
            exit 1
        fi
        sleep 0.1
    done
}

keys() { tmux send-keys -t "$session" "$@"; }
