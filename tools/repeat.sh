#!/usr/bin/env bash
# repeat.sh: run the same pytest selection N times in a row, to make a flaky test visible. A test
# that fails once in N runs is a bug (in the product or in the test), not bad luck.
#
# Usage: tools/repeat.sh N [PYTEST-ARGS...]
#   tools/repeat.sh 5 tests/unit -q
#   DELGUARD_INTEGRATION=1 tools/repeat.sh 3 tests/reliability -p no:cacheprovider   (as root)
#
# Prints one line per run (exit code, pytest's counts, seconds) and the FAILED/ERROR lines of a
# run that failed; every run's whole output stays in REPEAT_LOGS (default: a new dir in /tmp).
# Exits 0 only when all N runs passed.
set -euo pipefail

[ $# -ge 1 ] && [[ $1 =~ ^[1-9][0-9]*$ ]] || {
    echo "usage: tools/repeat.sh N [PYTEST-ARGS...]" >&2
    exit 2
}
runs=$1
shift
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
logs=${REPEAT_LOGS:-$(mktemp -d /tmp/repeat.XXXXXX)}
mkdir -p "$logs"
cd "$repo"

failed=0
for i in $(seq 1 "$runs"); do
    log=$logs/run-$i.log
    start=$(date +%s)
    rc=0
    "$python" -m pytest "$@" >"$log" 2>&1 || rc=$?
    seconds=$(($(date +%s) - start))
    counts=$(grep -E ' in [0-9.]+s( \([0-9:]+\))?( =+)?$' "$log" | tail -1 | tr -d '=' | xargs)
    echo "run $i/$runs: exit $rc, ${counts:-no summary line} (${seconds} s wall)"
    if [ "$rc" -ne 0 ]; then
        failed=$((failed + 1))
        grep -E '^(FAILED|ERROR) ' "$log" | sed 's/^/    /' || true
    fi
done
echo "$failed of $runs runs failed; logs: $logs"
[ "$failed" -eq 0 ]
