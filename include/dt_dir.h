/* dt_dir.h: entries of a directory dtrain owns (a --save directory),
 * reached only relative to the directory's descriptor and never through a
 * symbolic link (lib/core/file_dir.c). The one way checkpoint code creates,
 * replaces and removes files and directories.
 *
 * The directory itself is the path the user named (a link there is the
 * user's choice and is followed once, when it is opened). Below it,
 * nothing is followed: an entry that is a symbolic link where dtrain would
 * write, replace or remove is refused with one line naming it ("DIR/NAME:
 * is a symbolic link; dtrain never writes or removes through links in a
 * save directory (remove the link)"). Files are created O_EXCL |
 * O_NOFOLLOW, directories opened O_NOFOLLOW, removal is unlinkat(2) (which
 * removes a link, never what it points to) and renameat(2) (which moves
 * the entry, never a link's target). Messages name "DIR/NAME". */
#ifndef DT_DIR_H
#define DT_DIR_H

#include <dirent.h>
#include <stddef.h>

#include "dt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What an entry is, not following a link. */
typedef enum dt_dir_kind {
    DT_DIR_NONE = 0, /* no such entry */
    DT_DIR_FILE,     /* a regular file */
    DT_DIR_DIR,      /* a directory */
    DT_DIR_LINK,     /* a symbolic link */
    DT_DIR_OTHER     /* a FIFO, device or socket */
} dt_dir_kind;

/* Open the directory PATH (a descriptor for the calls below; close it). */
DT_API dt_status dt_dir_open(const char *path, int *fd);
/* A stream listing the directory's entries (closedir it). */
DT_API dt_status dt_dir_list(int dfd, const char *dir, DIR **out);
/* NAME's kind in the directory (DIR, the directory's path, for messages). */
DT_API dt_status dt_dir_kind_of(int dfd, const char *dir, const char *name, dt_dir_kind *kind);
/* Refuse NAME unless it is missing or of kind want (DT_DIR_FILE or DT_DIR_DIR). */
DT_API dt_status dt_dir_expect(int dfd, const char *dir, const char *name, dt_dir_kind want);
/* Open the subdirectory NAME (O_NOFOLLOW: a link is refused). */
DT_API dt_status dt_dir_open_sub(int dfd, const char *dir, const char *name, int *fd);
/* Make the subdirectory NAME, which must not exist. */
DT_API dt_status dt_dir_mkdir(int dfd, const char *dir, const char *name);
/* Create the file NAME, which must not exist, for writing (mode 0644). */
DT_API dt_status dt_dir_create(int dfd, const char *dir, const char *name, int *fd);
/* Remove the file NAME (a link: the link only); a missing one is DT_OK. */
DT_API dt_status dt_dir_unlink(int dfd, const char *dir, const char *name);
/* Remove the subdirectory NAME and the files in it (a missing one is
 * DT_OK). NAME itself a link, or holding a subdirectory: refused. */
DT_API dt_status dt_dir_remove_tree(int dfd, const char *dir, const char *name);
/* Rename FROM to TO in the directory (TO a link: refused). */
DT_API dt_status dt_dir_rename(int dfd, const char *dir, const char *from, const char *to);
/* NAME gets exactly n bytes, whole or not at all: a temporary
 * ".NAME.tmp.PID.N" created beside it, written, fsynced, renamed over NAME,
 * then the directory fsynced. NAME a link or not a regular file: refused. */
DT_API dt_status dt_dir_write_whole(int dfd, const char *dir, const char *name, const void *buf, size_t n);
/* fsync the directory (its renames and removals made durable). */
DT_API dt_status dt_dir_fsync(int dfd, const char *dir);

#ifdef __cplusplus
}
#endif
#endif
