#!/usr/bin/env bash
# Newcomer check: clone this repo into a temporary folder, make a fresh virtual environment,
# run the README's two Quickstart commands verbatim, check the page answers HTTP 200 and the
# test suite passes, then clean up. Usage: scripts/fresh_check.sh [port]
set -euo pipefail
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
port=${1:-7899}
work=$(mktemp -d)
app_pid=""
cleanup() { [ -n "$app_pid" ] && kill -- -"$app_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

git clone -q "$repo" "$work/specviz"
cd "$work/specviz"
# The two commands are the first two lines of the first code block under "## Quickstart".
mapfile -t cmds < <(awk '/^## Quickstart/{q=1} q&&/^```/{n++; next} q&&n==1' README.md | grep -v '^#' | grep -v '^$' | head -2)
[ "${#cmds[@]}" -eq 2 ] || { echo "FAIL: could not find two Quickstart commands in README.md"; exit 1; }
echo "launch command: ${cmds[0]}"
echo "test command:   ${cmds[1]}"

python3.11 -m venv "$work/venv"
source "$work/venv/bin/activate"

export GRADIO_SERVER_PORT=$port
setsid bash -c "${cmds[0]}" > "$work/app.log" 2>&1 &
app_pid=$!
ok=""
for _ in $(seq 1 900); do   # installs first, so allow up to 15 minutes
  if curl -fsS -o /dev/null "http://127.0.0.1:$port/"; then ok=1; break; fi
  kill -0 "$app_pid" 2>/dev/null || break
  sleep 1
done
if [ -z "$ok" ]; then echo "FAIL: the page never answered on port $port"; tail -30 "$work/app.log"; exit 1; fi
echo "PASS: page answered HTTP 200 on http://127.0.0.1:$port/"
kill -- -"$app_pid" 2>/dev/null; wait "$app_pid" 2>/dev/null || true; app_pid=""
unset GRADIO_SERVER_PORT

if bash -c "${cmds[1]}" > "$work/tests.log" 2>&1; then
  tail -3 "$work/tests.log"; echo "PASS: test suite"
else
  tail -120 "$work/tests.log"; echo "FAIL: test suite"; exit 1
fi
