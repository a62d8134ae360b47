#!/bin/sh
# viz-cli.sh: the dtviz program's command line, run by `make check` (when the
# SDL2 viewer is built) with DT_BUILDDIR (where ./dtviz and ./dtsim are) and
# DT_SRCDIR set.
#
# Checks: --help exits 0 and lists the flags; each bad flag or value, no
# trace, three traces and a missing trace file exit 2 with exactly one
# stderr line "dtviz: ..." naming the flag (or the file) and nothing on
# stdout; `dtviz --png` of a dtsim trace writes a PNG (its 8 signature bytes,
# a nonzero size) with SDL_VIDEODRIVER unset and with SDL_VIDEODRIVER=dummy,
# and with no DISPLAY either way (headless needs no display); two traces
# side by side render too; without --size a timeline picture is as tall as
# its rows (1400x286 for 6 rows, 1400x598 for two panes), with --size or
# another view the size asked for; `--frames DIR --frame-count 3` writes exactly
# frame_00000.png .. frame_00002.png. The window (no --png, --frames) with
# no display (DISPLAY, WAYLAND_DISPLAY unset; a WAYLAND_DISPLAY without
# XDG_RUNTIME_DIR; SDL_VIDEODRIVER=dummy or offscreen, which open no window;
# an X display that never answers) exits 1 with one line suggesting --png,
# in 2 s (8 s for the display that never answers). A PNG that cannot be
# written (/dev/full; ulimit -f; a full 64 KiB tmpfs in a private mount
# namespace, skipped where none can be made) exits 1 with one line naming
# the file, leaves no partial or temporary file and an existing file as it
# was; --frames then leaves no frame. --png into a missing directory or
# onto a directory, --frames onto a file or under a missing directory, and
# (not as root) into a read-only directory exit 1 naming the path before
# the traces are read. The traces come from ./dtsim run.
# POSIX sh. The binaries are built by `make check` itself; the parts this
# machine cannot play (no python3, no mount namespace, root) print "skip:".

. "${DT_SRCDIR:-.}/tests/cli-lib.sh"
DTVIZ=$BUILDDIR/dtviz
DTSIM=$BUILDDIR/dtsim
cli_init viz-cli.sh dtviz "$DTVIZ"
[ -x "$DTSIM" ] || { echo "viz-cli.sh: $DTSIM not found (set DT_BUILDDIR)" >&2; exit 99; }
# headless rendering must not need a display
unset DISPLAY WAYLAND_DISPLAY

# is_png FILE: FILE exists, is not empty and starts with the PNG signature 89 50 4E 47 0D 0A 1A 0A
is_png() {
    [ -s "$1" ] || return 1
    sig=$(od -A n -t x1 -N 8 "$1" | tr -d ' \n')
    [ "$sig" = 89504e470d0a1a0a ]
}

# ---- traces from the simulator ---------------------------------------------------
"$DTSIM" run --pipeline-model-parallel-size 2 --micro-batches 4 --train-iters 2 --trace "$TMP/pp.json" \
    >"$TMP/sim.out" 2>&1 || { fail "dtsim run (pipeline): $(tail -3 "$TMP/sim.out")"; cli_finish; }
"$DTSIM" run --pipeline-model-parallel-size 2 --micro-batches 4 --train-iters 2 --pipeline-schedule gpipe \
    --trace "$TMP/gpipe.json" >"$TMP/sim.out" 2>&1 || fail "dtsim run (gpipe): $(tail -3 "$TMP/sim.out")"

# ---- --help --------------------------------------------------------------------------
run --help
[ "$rc" -eq 0 ] || fail "--help: exit $rc, expected 0"
[ -s "$TMP/err" ] && fail "--help wrote to stderr: $(cat "$TMP/err")"
for flag in --png --frames --frame-count --view --time --size --profile --hw --help; do
    grep -q -e "^  $flag " "$TMP/out" || fail "--help does not list $flag"
done
grep -q 'Exit status' "$TMP/out" || fail "--help does not give the exit status"

# ---- bad flags and values: exit 2, one line naming the flag ------------------------
expect_usage_error --size --size 10x10 "$TMP/pp.json" --png "$TMP/x.png"
expect_usage_error --size --size big "$TMP/pp.json" --png "$TMP/x.png"
expect_usage_error --view --view nope "$TMP/pp.json" --png "$TMP/x.png"
expect_usage_error --time --time 2 "$TMP/pp.json" --png "$TMP/x.png"
expect_usage_error --time --time -0.5 "$TMP/pp.json" --png "$TMP/x.png"
expect_usage_error --frame-count --frame-count 0 "$TMP/pp.json" --frames "$TMP/f0"
expect_usage_error --no-such-flag --no-such-flag 1 "$TMP/pp.json"
expect_usage_error trace --png "$TMP/x.png"
expect_usage_error trace "$TMP/pp.json" "$TMP/pp.json" "$TMP/pp.json" --png "$TMP/x.png"
expect_usage_error missing.json "$TMP/missing.json" --png "$TMP/x.png"
: >"$TMP/empty.json"
expect_usage_error empty.json "$TMP/empty.json" --png "$TMP/x.png"
[ -e "$TMP/x.png" ] && fail "a rejected command line wrote $TMP/x.png"

# ---- --png, with SDL_VIDEODRIVER unset and =dummy ----------------------------------
for driver in unset dummy; do
    rm -f "$TMP/pp.png"
    if [ "$driver" = unset ]; then
        (unset SDL_VIDEODRIVER; "$DTVIZ" "$TMP/pp.json" --png "$TMP/pp.png") >"$TMP/out" 2>"$TMP/err"
    else
        SDL_VIDEODRIVER=dummy "$DTVIZ" "$TMP/pp.json" --png "$TMP/pp.png" >"$TMP/out" 2>"$TMP/err"
    fi
    rc=$?
    if [ "$rc" -ne 0 ]; then
        fail "--png (SDL_VIDEODRIVER $driver): exit $rc: $(cat "$TMP/err")"
    elif is_png "$TMP/pp.png"; then
        echo "ok: dtviz --png (SDL_VIDEODRIVER $driver) -> $(wc -c <"$TMP/pp.png" | tr -d ' ') bytes of PNG"
    else
        fail "--png (SDL_VIDEODRIVER $driver): $TMP/pp.png is missing, empty or not a PNG"
    fi
done
# every view, a size, a playback time and two traces side by side
for view in timeline ring scale memory breakdown cp; do
    rm -f "$TMP/v.png"
    run "$TMP/pp.json" --view "$view" --size 640x400 --time 0.5 --png "$TMP/v.png"
    [ "$rc" -eq 0 ] || fail "--view $view: exit $rc: $(cat "$TMP/err")"
    is_png "$TMP/v.png" || fail "--view $view: no PNG"
done
run "$TMP/gpipe.json" "$TMP/pp.json" --png "$TMP/two.png"
[ "$rc" -eq 0 ] || fail "two traces: exit $rc: $(cat "$TMP/err")"
is_png "$TMP/two.png" || fail "two traces: no PNG"
# a picture fits its rows: without --size a timeline is as tall as its rows need (pp.json: 2
# ranks x 3 lanes, 30 px each, under the 66 px title and axis, over the 40 px legend; two panes:
# the 26 px comparison line and two of those); --size is exact; the other views keep 1400x800
png_size() { od -A n -t u1 -j 16 -N 8 "$1" | awk '{ printf "%dx%d", $3 * 256 + $4, $7 * 256 + $8 }'; }
for case in "pp.png 1400x286" "two.png 1400x598"; do
    set -- $case
    [ "$(png_size "$TMP/$1")" = "$2" ] || fail "--png $1 without --size: $(png_size "$TMP/$1"), expected $2"
done
run "$TMP/pp.json" --size 1400x800 --png "$TMP/s.png"
[ "$rc" -eq 0 ] && [ "$(png_size "$TMP/s.png")" = 1400x800 ] || fail "--size 1400x800: $(png_size "$TMP/s.png")"
run "$TMP/pp.json" --view memory --png "$TMP/s.png"
[ "$rc" -eq 0 ] && [ "$(png_size "$TMP/s.png")" = 1400x800 ] || fail "--view memory: $(png_size "$TMP/s.png")"
# a PNG that cannot be written: a run-time failure (1), one line naming the file
run "$TMP/pp.json" --png "$TMP/no-such-dir/x.png"
[ "$rc" -eq 1 ] || fail "--png into a missing directory: exit $rc, expected 1"
grep -q 'no-such-dir/x.png' "$TMP/err" || fail "--png into a missing directory: $(cat "$TMP/err")"

# ---- the window without a display: one line suggesting --png, exit 1, at once ----------
# run_timed LIMIT COMMAND...: COMMAND with stdout/stderr in $TMP/out, $TMP/err, its status
# in $rc and the seconds it took in $elapsed; killed after LIMIT s (and 2 s later if it
# holds SIGTERM, as SDL does) where timeout(1) exists
run_timed() {
    limit=$1
    shift
    t0=$(date +%s)
    if command -v timeout >/dev/null 2>&1; then
        timeout -k 2 "$limit" "$@" >"$TMP/out" 2>"$TMP/err"
    else
        "$@" >"$TMP/out" 2>"$TMP/err"
    fi
    rc=$?
    elapsed=$(($(date +%s) - t0))
}
# expect_no_window WHAT MAX_S COMMAND...: exit 1 within MAX_S seconds, nothing on stdout and
# exactly one stderr line "dtviz: ..." that suggests --png
expect_no_window() {
    what=$1
    max_s=$2
    shift 2
    run_timed 20 "$@"
    failures_before=$failures
    [ "$rc" -eq 1 ] || fail "window, $what: exit $rc after $elapsed s, expected 1: $(head -c 300 "$TMP/err")"
    [ "$elapsed" -le "$max_s" ] || fail "window, $what: took $elapsed s, expected at most $max_s"
    lines=$(wc -l <"$TMP/err" | tr -d ' ')
    [ "$lines" = 1 ] || fail "window, $what: $lines lines on stderr, expected 1: $(cat "$TMP/err")"
    grep -q '^dtviz: .*--png' "$TMP/err" || fail "window, $what: stderr does not suggest --png: $(cat "$TMP/err")"
    [ -s "$TMP/out" ] && fail "window, $what: wrote to stdout: $(head -c 200 "$TMP/out")"
    [ "$failures" -eq "$failures_before" ] && echo "ok: window, $what: exit 1 in $elapsed s: $(cat "$TMP/err")"
    return 0
}
# SDL 2.26 fell back to its "offscreen" driver and the loop waited for keys forever
expect_no_window "no DISPLAY, WAYLAND_DISPLAY, SDL_VIDEODRIVER" 2 \
    env -u DISPLAY -u WAYLAND_DISPLAY -u SDL_VIDEODRIVER "$DTVIZ" "$TMP/pp.json"
# libwayland printed a line of its own when probed without XDG_RUNTIME_DIR
expect_no_window "WAYLAND_DISPLAY without XDG_RUNTIME_DIR" 2 \
    env -u DISPLAY -u SDL_VIDEODRIVER -u XDG_RUNTIME_DIR WAYLAND_DISPLAY=wayland-dtviz-test "$DTVIZ" "$TMP/pp.json"
# drivers that open no window: refused (DTV_MAX_FRAMES, the tests' frame limit, unset)
for driver in dummy offscreen; do
    expect_no_window "SDL_VIDEODRIVER=$driver" 2 \
        env -u DTV_MAX_FRAMES SDL_VIDEODRIVER=$driver "$DTVIZ" "$TMP/pp.json"
done
# an X display that takes the connection and never answers (a dead forward): 5 s at most
if command -v python3 >/dev/null 2>&1; then
    python3 -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(4)
print(s.getsockname()[1] - 6000, flush=True)
held = []
while True:
    held.append(s.accept()[0])
' >"$TMP/xport" &
    xpid=$!
    i=0
    while [ ! -s "$TMP/xport" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    expect_no_window "a display that never answers" 8 \
        env -u WAYLAND_DISPLAY -u SDL_VIDEODRIVER DISPLAY="127.0.0.1:$(cat "$TMP/xport")" "$DTVIZ" "$TMP/pp.json"
    kill "$xpid" 2>/dev/null
    wait "$xpid" 2>/dev/null
else
    echo "skip: a display that never answers (no python3 to play it)"
fi

# ---- --frames ------------------------------------------------------------------------
run "$TMP/pp.json" --frames "$TMP/frames" --frame-count 3 --size 320x200
[ "$rc" -eq 0 ] || fail "--frames: exit $rc: $(cat "$TMP/err")"
for i in 0 1 2; do
    is_png "$TMP/frames/frame_0000$i.png" || fail "--frames: frame_0000$i.png missing or not a PNG"
done
n=$(ls "$TMP/frames" | wc -l | tr -d ' ')
[ "$n" = 3 ] || fail "--frames --frame-count 3: $n files in the directory: $(ls "$TMP/frames")"
cmp -s "$TMP/frames/frame_00000.png" "$TMP/frames/frame_00002.png" &&
    fail "--frames: the first and last frames are the same picture (the playback time does not move)"
# without --frame-count: fps x duration frames (the help's default: 30 x 4 = 120)
run "$TMP/pp.json" --frames "$TMP/frames2" --fps 2 --duration 2.5 --size 160x100
n=$(ls "$TMP/frames2" 2>/dev/null | wc -l | tr -d ' ')
[ "$rc" -eq 0 ] && [ "$n" = 5 ] || fail "--frames --fps 2 --duration 2.5: exit $rc, $n files (expected 5)"
"$DTVIZ" --help | grep -q -- "--frame-count N .*(default: fps x duration: 120)" ||
    fail "dtviz --help does not give --frame-count's default as fps x duration (120)"

# ---- outputs that cannot be written: exit 1, one line naming the file, nothing left behind
# expect_write_error WHAT WORD: after `run`: exit 1, nothing on stdout, one stderr line
# "dtviz: ..." holding WORD
expect_write_error() {
    failures_before=$failures
    [ "$rc" -eq 1 ] || fail "$1: exit $rc, expected 1: $(head -c 300 "$TMP/err")"
    lines=$(wc -l <"$TMP/err" | tr -d ' ')
    [ "$lines" = 1 ] || fail "$1: $lines lines on stderr, expected 1: $(cat "$TMP/err")"
    grep -q -F -e "$2" "$TMP/err" || fail "$1: stderr does not name '$2': $(cat "$TMP/err")"
    [ -s "$TMP/out" ] && fail "$1: wrote to stdout: $(head -c 200 "$TMP/out")"
    [ "$failures" -eq "$failures_before" ] && echo "ok: $1 -> $(cat "$TMP/err")"
    return 0
}
# leftovers DIR: the temporary files (.NAME.XXXXXX) a write left in DIR
leftovers() { ls -A "$1" | grep '^\.' || true; }

# checked before the traces are read: a missing trace is not reached
run "$TMP/missing.json" --png "$TMP/no-such-dir/x.png"
expect_write_error "--png into a missing directory, checked first" no-such-dir
run "$TMP/pp.json" --png "$TMP/frames"
expect_write_error "--png onto a directory" "$TMP/frames"
run "$TMP/pp.json" --frames "$TMP/pp.json"
expect_write_error "--frames onto a file" "$TMP/pp.json"
run "$TMP/pp.json" --frames "$TMP/no-such-dir/f"
expect_write_error "--frames under a missing directory" no-such-dir
if [ "$(id -u)" != 0 ]; then # root writes anywhere
    mkdir "$TMP/ro" && chmod 555 "$TMP/ro"
    run "$TMP/pp.json" --png "$TMP/ro/x.png"
    expect_write_error "--png into a read-only directory" "$TMP/ro"
    run "$TMP/pp.json" --frames "$TMP/ro"
    expect_write_error "--frames into a read-only directory" "$TMP/ro"
    chmod 755 "$TMP/ro"
else
    echo "skip: read-only directories (root writes in them)"
fi

# a full device: IMG_SavePNG's unchecked fclose made this exit 0
if [ -c /dev/full ]; then
    run "$TMP/pp.json" --png /dev/full
    expect_write_error "--png /dev/full" /dev/full
fi
# a file-size limit (ulimit -f, in blocks of 512 or 1024 bytes): SIGXFSZ killed dtviz mid-file
# and left a truncated PNG; an existing file must survive, and --frames writes all or none
rm -f "$TMP/u.png"
(ulimit -f 8 && exec "$DTVIZ" "$TMP/pp.json" --png "$TMP/u.png") >"$TMP/out" 2>"$TMP/err"
rc=$?
expect_write_error "--png past ulimit -f" "$TMP/u.png"
[ -e "$TMP/u.png" ] && fail "--png past ulimit -f left $TMP/u.png ($(wc -c <"$TMP/u.png") bytes)"
echo "an older picture" >"$TMP/keep.png"
cp "$TMP/keep.png" "$TMP/keep.orig"
(ulimit -f 8 && exec "$DTVIZ" "$TMP/pp.json" --png "$TMP/keep.png") >"$TMP/out" 2>"$TMP/err"
rc=$?
expect_write_error "--png over an existing file past ulimit -f" "$TMP/keep.png"
cmp -s "$TMP/keep.png" "$TMP/keep.orig" || fail "--png past ulimit -f destroyed the existing $TMP/keep.png"
(ulimit -f 8 && exec "$DTVIZ" "$TMP/pp.json" --frames "$TMP/uframes" --frame-count 3) >"$TMP/out" 2>"$TMP/err"
rc=$?
expect_write_error "--frames past ulimit -f" "$TMP/uframes/frame_00000.png"
[ -e "$TMP/uframes" ] && fail "--frames past ulimit -f left $TMP/uframes: $(ls -A "$TMP/uframes")"
cp -R "$TMP/frames" "$TMP/frames.orig"
(ulimit -f 8 && exec "$DTVIZ" "$TMP/pp.json" --frames "$TMP/frames" --frame-count 3) >"$TMP/out" 2>"$TMP/err"
rc=$?
expect_write_error "--frames over earlier frames past ulimit -f" "$TMP/frames/frame_00000.png"
for i in 0 1 2; do
    cmp -s "$TMP/frames/frame_0000$i.png" "$TMP/frames.orig/frame_0000$i.png" ||
        fail "--frames past ulimit -f changed the earlier frame_0000$i.png"
done
[ -z "$(leftovers "$TMP")$(leftovers "$TMP/frames")" ] ||
    fail "failed writes left temporary files: $(leftovers "$TMP") $(leftovers "$TMP/frames")"

# a full disk: a 64 KiB tmpfs on $TMP/mnt in a private mount namespace (as root, or in a
# user namespace), seen by nothing else and gone with it
if [ "$(id -u)" = 0 ]; then ns="unshare -m"; else ns="unshare -r -m"; fi
mkdir "$TMP/mnt"
if command -v unshare >/dev/null 2>&1 &&
    $ns sh -c 'mount -t tmpfs -o size=64k dtviz-test "$1"' sh "$TMP/mnt" 2>/dev/null; then
    # the 1400x800 picture is over 30 KB: after 40 KB of filler it does not fit; on the empty
    # disk the first frame fits and the second does not (--size: the picture is not fitted)
    $ns sh -s "$DTVIZ" "$TMP/pp.json" "$TMP" <<'FULL'
dtviz=$1 trace=$2 t=$3 d=$3/mnt
mount -t tmpfs -o size=64k dtviz-test "$d" || { echo "FAIL: mount"; exit 0; }
dd if=/dev/zero of="$d/filler" bs=1024 count=40 2>/dev/null
echo "an older picture" >"$d/keep.png"
"$dtviz" "$trace" --size 1400x800 --png "$d/keep.png" >"$t/full.out" 2>"$t/full.err"
rc=$?
if [ "$rc" -eq 1 ] && [ "$(wc -l <"$t/full.err")" -eq 1 ] && grep -q "keep.png.*No space" "$t/full.err"; then
    echo "ok: --png on a full disk -> $(cat "$t/full.err")"
else
    echo "FAIL: --png on a full disk: exit $rc: $(cat "$t/full.err")"
fi
[ "$(cat "$d/keep.png")" = "an older picture" ] || echo "FAIL: --png on a full disk destroyed keep.png"
rm -f "$d/filler" "$d/keep.png"
"$dtviz" "$trace" --size 1400x800 --frames "$d/f" --frame-count 3 >"$t/full.out" 2>"$t/full.err"
rc=$?
if [ "$rc" -eq 1 ] && [ "$(wc -l <"$t/full.err")" -eq 1 ] && grep -q "frame_0000[0-2].png.*No space" "$t/full.err"
then
    echo "ok: --frames on a full disk -> $(cat "$t/full.err")"
else
    echo "FAIL: --frames on a full disk: exit $rc: $(cat "$t/full.err")"
fi
[ -z "$(ls -A "$d")" ] || echo "FAIL: the full disk was left with: $(ls -AR "$d")"
FULL
    [ $? -eq 0 ] || echo "FAIL: the full-disk checks did not run"
else
    echo "skip: a full disk (no mount namespace with a tmpfs here)"
fi >"$TMP/full" 2>&1
cat "$TMP/full"
grep -q '^FAIL' "$TMP/full" && fail "full disk: $(grep '^FAIL' "$TMP/full")"

cli_finish
echo "viz-cli.sh: all passed"
