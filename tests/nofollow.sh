#!/bin/sh
# nofollow.sh: every call in lib/train and lib/core that creates, writes,
# truncates, renames or removes a file or directory goes through the one
# no-follow helper (lib/core/file_dir.c, dt_dir.h), or is one of the
# exceptions listed below with its reason (issue 34: dtrain never writes
# or removes through a symbolic link in a save directory). Run by `make
# check` with DT_SRCDIR. Source-level: a new raw unlink(), rename(),
# rmdir(), mkdir(), truncate(), or open()/openat()/fopen() for writing
# fails this test until it moves into the helper or is listed here.
#
# Rules: (1) the calls unlink rmdir rename remove mkdir truncate ftruncate
# creat and unlinkat renameat mkdirat, (2) open()/openat() with O_WRONLY,
# O_RDWR, O_CREAT, O_TRUNC or O_APPEND, and fopen() with a mode holding w,
# a or +, are only in lib/core/file_dir.c or an exception below; (3) an
# open()/openat() keeps its flags on its own line (so that (2) can see
# them); (4) checkpoint code (lib/train/checkpoint*.c) never uses the
# link-following dt_file writer (dt_file_out_open, dt_file_write_whole,
# dt_file_stage_whole); (5) every exception still matches a line.
set -u
LC_ALL=C
export LC_ALL
SRCDIR=${DT_SRCDIR:-.}
cd "$SRCDIR" || exit 99
[ -d lib/core ] && [ -d lib/train ] || { echo "nofollow.sh: no lib/core, lib/train under $SRCDIR" >&2; exit 99; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-nofollow.XXXXXX") || exit 99
trap 'rm -rf "$TMP"' EXIT HUP INT TERM

# FILE ~~ TEXT THE LINE HOLDS ~~ WHY IT NEED NOT GO THROUGH THE HELPER
cat >"$TMP/exceptions" <<'LIST'
lib/core/file.c ~~ (void)mkdir(p, 0777); ~~ mkdir -p of a user-named output directory (--save, dtviz --frames): a link the user names is the user's choice
lib/core/file.c ~~ if (mkdir(dir, 0777) == 0 ~~ the same, its last component
lib/core/file.c ~~ fd = open(f->target, O_WRONLY | O_APPEND ~~ a user-named output that is a device or a descriptor's link (/dev/null, /dev/stdout), written in place by design (dt_file.h)
lib/core/file.c ~~ fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW ~~ the temporary beside a user-named output: O_EXCL never opens an existing file or follows a link
lib/core/file.c ~~ if (fd >= 0 && f->tmp) unlink(f->tmp); ~~ removes that temporary, which this process just created
lib/core/file.c ~~ if (f->tmp) unlink(f->tmp); ~~ the same temporary, on abort or failure
lib/core/file.c ~~ if (tmp) unlink(tmp); ~~ the same temporaries, removed by dt_file_out_remove_temporaries before MPI_Abort or on a signal
lib/core/file.c ~~ rename(f->tmp, f->target) ~~ places a user-named output; a link the user named is followed and kept by design (dt_file.h); never used inside a save directory (rule 4)
lib/train/checkpoint.c ~~ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW ~~ dt_checkpoint_shard_write_file, a caller-named shard file (tests, tools); O_NOFOLLOW refuses a link; a save writes its shards through dt_dir_create
lib/train/checkpoint_lock.c ~~ openat(dfd, "dtrain.lock", O_RDWR | O_CREAT | O_NOFOLLOW ~~ the lock file persists, so it cannot be O_EXCL: O_NOFOLLOW refuses a link and fstat a non-regular file or one with other names, before it is written
lib/train/checkpoint_lock.c ~~ if (ftruncate(fd, 0) != 0 ~~ the lock file opened and checked just above
LIST

CALLS='(^|[^_[:alnum:]])(unlink|unlinkat|rmdir|rename|renameat|renameat2|remove|mkdir|mkdirat|truncate|ftruncate|creat)[[:space:]]*\('
OPENS='(^|[^_[:alnum:]])(open|openat)[[:space:]]*\('
FOPENW='(^|[^_[:alnum:]])fopen[[:space:]]*\([^,]*,[[:space:]]*"[^"]*[wa+]'
: >"$TMP/fails"
: >"$TMP/used"
for f in lib/core/*.c lib/train/*.c; do
    [ "$f" = lib/core/file_dir.c ] && continue # the helper itself
    # code only: comment lines (starting * or /*) and trailing comments are not calls
    grep -n -E "$CALLS|$OPENS|(^|[^_[:alnum:]])fopen[[:space:]]*\(" "$f" >"$TMP/hits" || continue
    while IFS= read -r hit; do
        line=${hit%%:*}
        code=$(printf '%s\n' "${hit#*:}" | sed 's://.*$::; s:/\*.*$::')
        case $(printf '%s' "$code" | sed 's/^[[:space:]]*//') in '*'* | '') continue ;; esac
        bad=
        if printf '%s\n' "$code" | grep -q -E "$CALLS"; then
            bad="creates, removes, renames or truncates"
        elif printf '%s\n' "$code" | grep -q -E "$OPENS"; then
            if ! printf '%s\n' "$code" | grep -q 'O_[A-Z]'; then
                bad="open()s without its flags on the line (keep them there so that this test can read them)"
            elif printf '%s\n' "$code" | grep -q -E 'O_WRONLY|O_RDWR|O_CREAT|O_TRUNC|O_APPEND'; then
                bad="opens for writing"
            fi
        elif printf '%s\n' "$code" | grep -q -E "$FOPENW"; then
            bad="fopen()s for writing"
        fi
        [ -n "$bad" ] || continue
        found=
        while IFS= read -r ex; do
            e_file=${ex%% ~~ *}
            rest=${ex#* ~~ }
            e_text=${rest%% ~~ *}
            [ "$e_file" = "$f" ] || continue
            case $code in *"$e_text"*) found=$ex ;; esac
            [ -n "$found" ] && break
        done <"$TMP/exceptions"
        if [ -n "$found" ]; then
            echo "ok: $f:$line: exception: ${found##* ~~ }"
            printf '%s\n' "$found" >>"$TMP/used"
        else
            echo "FAIL: $f:$line: $bad outside the no-follow helper (lib/core/file_dir.c), not a listed exception:$code" >&2
            echo x >>"$TMP/fails"
        fi
    done <"$TMP/hits"
done
# (4) the checkpoint code never uses the link-following writer
if grep -n -E 'dt_file_(out_open|write_whole|stage_whole)[[:space:]]*\(' lib/train/checkpoint*.c >"$TMP/w"; then
    while IFS= read -r hit; do
        echo "FAIL: $hit: a checkpoint file written by the link-following dt_file writer (use dt_dir.h)" >&2
        echo x >>"$TMP/fails"
    done <"$TMP/w"
else
    echo "ok: lib/train/checkpoint*.c write only through dt_dir.h"
fi
# (5) no stale exception
while IFS= read -r ex; do
    grep -q -F -x -- "$ex" "$TMP/used" || { echo "FAIL: stale exception (no line matches it): $ex" >&2; echo x >>"$TMP/fails"; }
done <"$TMP/exceptions"
n=$(wc -l <"$TMP/fails" | tr -d ' ')
[ "$n" = 0 ] || { echo "nofollow.sh: $n failure(s)" >&2; exit 1; }
echo "nofollow.sh: every write, rename and removal in lib/core and lib/train goes through dt_dir.h or a listed exception"
