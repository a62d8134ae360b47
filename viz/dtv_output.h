/* dtv_output.h: how the viewer writes its files (viz/output.c): checked
 * before any rendering, then written whole or not at all.
 *
 * A regular file (or a new one) is written to a temporary file in the same
 * directory, ".NAME.XXXXXX", synced and closed with every result checked,
 * then renamed over NAME: a full disk, a file-size limit (EFBIG once
 * SIGXFSZ is ignored, as dtviz does) or any other failure removes the
 * temporary file and leaves an existing NAME as it was. An existing NAME
 * keeps its permissions; a new one gets 0666 less the umask. A path that
 * exists and is not a regular file (/dev/stdout, a FIFO, /dev/full) is
 * written in place, since it cannot be renamed over; its errors are still
 * reported. A symbolic link is followed: its target is replaced.
 *
 * Errors are DT_ERR_IO with one line naming the file and the reason. */
#ifndef DTV_OUTPUT_H
#define DTV_OUTPUT_H

#include <stddef.h>

#include "dt_status.h"

/* Before rendering: `path` can be written (its directory exists and is
 * writable, it is not a directory); `flag` ("--png") starts the message. */
dt_status dtv_out_check_file(const char *flag, const char *path);
/* Before rendering: `dir` is a writable directory, or can be made in a
 * writable parent. */
dt_status dtv_out_check_dir(const char *flag, const char *dir);

/* Write n bytes to path as described above. */
dt_status dtv_out_write(const char *path, const void *buf, size_t n);

/* The two halves of dtv_out_write for a set of files written together
 * (--frames): stage writes the bytes to a synced temporary file beside
 * `path` (its name in tmp, tmp_size bytes); commit renames it over path;
 * discard removes it (tmp "" is ignored). A path that is not a regular
 * file is not staged (DT_ERR_IO). */
dt_status dtv_out_stage(const char *path, const void *buf, size_t n, char *tmp, size_t tmp_size);
dt_status dtv_out_commit(const char *tmp, const char *path);
void dtv_out_discard(const char *tmp);

#endif
