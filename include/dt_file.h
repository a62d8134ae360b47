/* dt_file.h: output files written whole or not at all (lib/core/file.c),
 * the one writer behind every file the programs produce: dtrain's
 * --summary and --trace, dtsim's --summary, --trace and hardware files,
 * dtbench's --json. Checkpoints use the same steps on their own files.
 *
 * A dt_file_out writes to a temporary file in the destination's directory
 * (".NAME.tmp.PID.N"); dt_file_out_commit flushes it, fsyncs it, closes
 * it (each checked) and renames it over NAME, then fsyncs the directory.
 * Any failure, or dt_file_out_abort, removes the temporary file: NAME is
 * never left empty or partial, and an existing NAME is untouched. A path
 * that already exists and is not a regular file (/dev/null, /dev/full, a
 * FIFO, /dev/stdout) is written in place, since renaming over a device
 * would replace it; its write errors (ENOSPC from /dev/full) are reported
 * all the same.
 *
 * Messages name the file as "WHAT PATH: ..." (WHAT a flag such as
 * "--summary", or NULL for the bare path) and the error, e.g.
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
/* Finish: flush, fsync, close, rename, fsync the directory; frees f. On a
 * failure (or an earlier one) the temporary file is removed. */
DT_API dt_status dt_file_out_commit(dt_file_out *f);
/* Give up: close and remove the temporary file; frees f (NULL: nothing). */
DT_API void dt_file_out_abort(dt_file_out *f);

/* PATH gets exactly n bytes of buf, whole or not at all. */
DT_API dt_status dt_file_write_whole(const char *path, const char *what, const void *buf, size_t n);

/* Before any work: can PATH be written as above? Its directory must exist
 * and be writable, and PATH must not be a directory (an existing
 * non-regular file must be writable). No file is created. */
DT_API dt_status dt_file_check_output(const char *path, const char *what);
/* The same for a directory to be created with its parents (mkdir -p): an
 * existing DIR must be a writable directory, otherwise its nearest
 * existing ancestor must be. Nothing is created. */
DT_API dt_status dt_file_check_output_dir(const char *dir, const char *what);

/* mkdir -p DIR (mode 0755): DT_OK when DIR is (now) a directory. */
DT_API dt_status dt_file_mkdir_p(const char *dir);

#ifdef __cplusplus
}
#endif
#endif
