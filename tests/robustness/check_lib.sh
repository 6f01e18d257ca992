# Shared by the robustness sweeps: `check CMD...` runs CMD in the current folder, which must
# fail cleanly (exit 1..123 within ${CHECK_TIMEOUT:-20} s, exactly one line on stderr) and leave
# every file there as it was (types, link targets and checksums before and after).
# Set `before=$(snapshot)` once the inputs are in place; `cases` and `failures` count.
snapshot() {
  find . -mindepth 1 ! -name out.txt ! -name err.txt -printf '%p %y %l\n' | sort
  find . -type f ! -name out.txt ! -name err.txt -exec sha256sum {} + | sort
}
failures=0 cases=0
check() { # check COMMAND...: must fail cleanly and touch nothing
  cases=$((cases + 1))
  local t0=$SECONDS
  timeout "${CHECK_TIMEOUT:-20}" "$@" >out.txt 2>err.txt </dev/null
  local rc=$? lines
  [ -n "${VERBOSE:-}" ] && echo "$((SECONDS - t0))s rc=$rc: $*"
  lines=$(wc -l <err.txt)
  local why=""
  if [ "$rc" -lt 1 ] || [ "$rc" -gt 123 ]; then why="exit $rc"; fi
  if [ "$lines" -ne 1 ]; then why="$why, $lines lines on stderr"; fi
  local now
  now=$(snapshot)
  if [ "$now" != "$before" ]; then
    why="$why, files changed: $(diff <(echo "$before") <(echo "$now") | head -3 | tr '\n' ' ')"
  fi
  if [ -n "$why" ]; then
    echo "FAIL ($why): $*"
    head -c 300 err.txt
    failures=$((failures + 1))
    before=$now # report each change once
  fi
}
check_says() { # check_says TEXT COMMAND...: as check, and the line names TEXT
  local text=$1 failed=$failures
  shift
  check "$@"
  if [ "$failures" -eq "$failed" ] && ! grep -qF -- "$text" err.txt; then
    echo "FAIL (the message does not name \"$text\"): $*"
    head -c 300 err.txt
    failures=$((failures + 1))
  fi
}
