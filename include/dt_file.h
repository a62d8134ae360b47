/* dt_file.h: output files written whole or not at all (lib/core/file.c),
 * the one writer behind every file the programs produce: dtrain's
 * --summary and --trace, dtsim's --summary, --trace and hardware files,
 * dtbench's --json, dtviz's --png and --frames. Checkpoints use the same
 * steps on their own files.
 *
 * A dt_file_out writes to a temporary file beside the target
 * (".NAME.tmp.PID.N"); dt_file_out_commit flushes it, fsyncs it, closes
 * it (each checked) and renames it over NAME, then fsyncs the directory.
 * Any failure, or dt_file_out_abort, removes the temporary file: NAME is
 * never left empty or partial, and an existing NAME is untouched.
 *
 * What is replaced, and how:
 * - A symbolic link is followed: the file it leads to is replaced (a new
 *   one made where a dangling link points) and the link stays.
 * - A replaced file keeps its permission bits; a new one gets 0666 less
 *   the umask, as fopen would give it.
 * - A path that exists and is not a regular file (/dev/null, /dev/full, a
 *   FIFO) is written in place, since renaming over a device would replace
 *   it; so is a link to an open descriptor (/dev/stdout, /dev/fd/N), which
 *   is appended to, since the file behind it may hold the descriptor's
 *   other output. Their write errors (ENOSPC from /dev/full) are reported
 *   all the same.
 * - A set of files placed all or none (dtviz --frames) stages each one
 *   (dt_file_stage_whole: written, synced and closed beside its name),
 *   then commits them all once every one is staged, or aborts them all.
 *
 * Messages are one line naming the file as "WHAT PATH: ..." (WHAT a flag
 * such as "--summary", or NULL for the bare path) and the error, e.g.
 * "--summary /dev/full: write failed (No space left on device)". A
 * program that wants a size limit (ulimit -f) to be such a message rather
 * than a silent death must ignore SIGXFSZ (then write(2) fails with EFBIG). */
#ifndef DT_FILE_H
#define DT_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "dt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dt_file_out dt_file_out;

/* Start writing PATH (what: see above; the pointer is kept until commit or
 * abort). Fails when the directory is missing or not writable, or PATH is
 * a directory. */
DT_API dt_status dt_file_out_open(const char *path, const char *what, dt_file_out **out);
/* The stream to write to (buffered; errors are caught at commit too). */
DT_API FILE *dt_file_out_stream(dt_file_out *f);
/* Write n bytes; a failure is sticky: commit fails too. */
DT_API dt_status dt_file_out_write(dt_file_out *f, const void *buf, size_t n);
/* Flush the stream (errors show now rather than at commit). */
DT_API dt_status dt_file_out_flush(dt_file_out *f);
/* Finish: flush, fsync, close, rename, fsync the directory (a staged file:
 * only the rename and the fsync of the directory); frees f. On a failure
 * (or an earlier one) the temporary file is removed. */
DT_API dt_status dt_file_out_commit(dt_file_out *f);
/* Give up: close and remove the temporary file (a staged one too); frees f
 * (NULL: nothing). */
DT_API void dt_file_out_abort(dt_file_out *f);
/* For a process about to end without returning (before MPI_Abort, in a
 * SIGTERM or SIGINT handler): remove the temporary file of every output
 * this process has open or staged, leaving each target as it was; the
 * outputs can then only be aborted. Async-signal-safe. */
DT_API void dt_file_out_remove_temporaries(void);

/* PATH gets exactly n bytes of buf, whole or not at all. */
DT_API dt_status dt_file_write_whole(const char *path, const char *what, const void *buf, size_t n);
/* The first half of dt_file_write_whole, for files placed together: the n
 * bytes go to PATH's temporary file, which is flushed, fsynced and closed
 * (each checked); *out is then only dt_file_out_commit'ed (renamed over
 * PATH) or dt_file_out_abort'ed (removed). Its stream is closed: no more
 * writes. A path that would be written in place (a device, a FIFO, a
 * descriptor's link) cannot wait for the others and is refused before it
 * is opened. On a failure nothing is left and *out is NULL. */
DT_API dt_status dt_file_stage_whole(const char *path, const char *what, const void *buf, size_t n, dt_file_out **out);

/* Before any work: can PATH be written as above? The directory of what it
 * replaces must exist and be writable, and PATH must not be a directory
 * (what is written in place must be writable). No file is created. */
DT_API dt_status dt_file_check_output(const char *path, const char *what);
/* The same for a directory of output files: an existing DIR must be a
 * writable directory; otherwise, with parents (mkdir -p), its nearest
 * existing ancestor must be, and without, its parent must exist and be
 * writable. Nothing is created. */
DT_API dt_status dt_file_check_output_dir(const char *dir, const char *what, int parents);

/* mkdir -p DIR (mode 0777 less the umask, as mkdir(1) makes them): DT_OK
 * when DIR is (now) a directory. */
DT_API dt_status dt_file_mkdir_p(const char *dir);

/* ---- inputs (lib/core/file_in.c) ----
 * Every whole input file goes through these: only a regular file is read
 * (a FIFO would block for ever, /dev/zero never ends), refused with one
 * line "WHAT PATH: is a pipe (FIFO), expected a regular file". */

/* "regular file", "pipe (FIFO)", "character device", ... for st_mode. */
DT_API const char *dt_file_kind_name(unsigned mode);
/* Open PATH for reading (*fd_out, close it) if it is a regular file; its
 * size in *size_out (NULL: not wanted). Never blocks on a FIFO. */
DT_API dt_status dt_file_open_input(const char *path, const char *what, int *fd_out, size_t *size_out);
/* PATH's bytes (*out, malloc'd, NUL-terminated; *n without the NUL): a
 * regular file of at most max bytes (0: no limit). */
DT_API dt_status dt_file_read_whole(const char *path, const char *what, size_t max, char **out, size_t *n);
/* Refuse (DT_ERR_INVALID, one line naming both) an output that is the same
 * regular file (device and inode) as an input; DT_OK when either does not
 * exist or is NULL. */
DT_API dt_status dt_file_check_not_input(const char *out, const char *out_what, const char *in, const char *in_what);

/* ---- text echoed from input files (lib/core/escape.c) ----
 * A byte that could drive a terminal (C0 controls, newline and tab
 * included, DEL, the C1 controls U+0080..U+009F, bytes of no well-formed
 * UTF-8 character) becomes \xHH; other UTF-8 text is kept. */

/* s (NULL: "") escaped into out[cap], cut at a whole character or escape
 * when it does not fit; always NUL-terminated. Returns out. */
DT_API const char *dt_escape(const char *s, char *out, size_t cap);
/* s escaped onto f; 0, or EOF after a write error. */
DT_API int dt_fputs_escaped(const char *s, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
