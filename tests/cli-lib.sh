# cli-lib.sh: what the command-line tests of dtrain and dtsim share (cli.sh,
# sim-cli.sh). Source it, then call
#   cli_init SCRIPT NAME PROGRAM
# (SCRIPT: the test's name for messages, NAME: the program's name as it
# starts its error lines, PROGRAM: its path): checks that PROGRAM is
# executable (exit 99 otherwise), makes $TMP (removed on exit) and sets
# failures=0. Sourcing sets BUILDDIR and SRCDIR (from DT_BUILDDIR and
# DT_SRCDIR) and defines fail, run, expect_usage_error, expect_help and
# cli_finish.
# POSIX sh.

set -u
LC_ALL=C
export LC_ALL

BUILDDIR=${DT_BUILDDIR:-.}
SRCDIR=${DT_SRCDIR:-.}

# cli_init SCRIPT NAME PROGRAM
cli_init() {
    CLI_SCRIPT=$1
    CLI_NAME=$2
    CLI_PROG=$3
    if [ ! -x "$CLI_PROG" ]; then
        echo "$CLI_SCRIPT: $CLI_PROG not found or not executable (set DT_BUILDDIR)" >&2
        exit 99
    fi
    TMP=$(mktemp -d "${TMPDIR:-/tmp}/$CLI_NAME-cli.XXXXXX") || exit 99
    trap 'rm -rf "$TMP"' EXIT HUP INT TERM
    failures=0
}

# fail MESSAGE: report and count a failure
fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# run ARGS...: the program with stdout in $TMP/out, stderr in $TMP/err, status in $rc
run() {
    "$CLI_PROG" "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
}

# expect_usage_error WORD ARGS...: exit 2, one stderr line starting "NAME: " holding WORD, no stdout
expect_usage_error() {
    word=$1
    shift
    failures_before=$failures
    run "$@"
    if [ "$rc" -ne 2 ]; then
        fail "$CLI_NAME $*: exit $rc, expected 2 (stderr: $(head -c 300 "$TMP/err"))"
        return
    fi
    lines=$(wc -l <"$TMP/err" | tr -d ' ')
    if [ "$lines" != 1 ]; then
        fail "$CLI_NAME $*: $lines lines on stderr, expected 1: $(cat "$TMP/err")"
        return
    fi
    grep -q "^$CLI_NAME: " "$TMP/err" ||
        fail "$CLI_NAME $*: stderr does not start with '$CLI_NAME: ': $(cat "$TMP/err")"
    grep -q -F -e "$word" "$TMP/err" || fail "$CLI_NAME $*: stderr does not name '$word': $(cat "$TMP/err")"
    [ -s "$TMP/out" ] &&
        fail "$CLI_NAME $*: wrote to stdout before rejecting the command line: $(head -c 200 "$TMP/out")"
    [ "$failures" -eq "$failures_before" ] && echo "ok: $CLI_NAME $* -> $(cat "$TMP/err")"
    return 0
}

# expect_help FLAG...: after `run --help`: exit 0, nothing on stderr, a line
# "  FLAG ..." for each FLAG, and a "(default: ...)" for every flag listed
# but --help and --version
expect_help() {
    [ "$rc" -eq 0 ] || fail "--help: exit $rc, expected 0"
    [ -s "$TMP/err" ] && fail "--help wrote to stderr: $(cat "$TMP/err")"
    for flag in "$@"; do
        grep -q -e "^  $flag " "$TMP/out" || fail "--help does not list $flag"
    done
    n_flags=$(grep -c '^  --' "$TMP/out")
    n_defaults=$(grep -c '(default: ' "$TMP/out")
    [ "$n_defaults" -eq $((n_flags - 2)) ] ||
        fail "--help: $n_defaults defaults for $n_flags flags (all but --help and --version need one)"
}

# cli_finish: exit 1 after a count of the failures, if any (returns otherwise)
cli_finish() {
    if [ "$failures" -ne 0 ]; then
        echo "$CLI_SCRIPT: $failures failure(s)" >&2
        exit 1
    fi
}
