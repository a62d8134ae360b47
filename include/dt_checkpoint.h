/* dt_checkpoint.h: crash-safe, checksummed checkpoints (lib/train/checkpoint.c,
 * lib/core/crc32c.c); the trainer's use of them is dt_trainer_save / _load
 * (dt_train.h) and docs/checkpoints.md describes both.
 *
 * Files. A save root DIR holds
 *   DIR/iter_XXXXXXXX/          one complete checkpoint (8+ decimal digits)
 *       manifest.json           written last, by rank 0
 *       shard-RRRRR.bin         one per rank of the world, written by that rank
 *   DIR/latest                  "iter_XXXXXXXX\n": the newest complete one
 * and, only while a save is under way (or after a crash in one),
 * DIR/iter_XXXXXXXX.tmp/ and DIR/.latest.tmp.PID.N, which readers ignore.
 *
 * Shard file, version 1 (integers little-endian; tensor data little-endian
 * IEEE-754 f32 or int64; a big-endian host is refused):
 *   header, 64 bytes:
 *     0  magic "DTCKSHRD"        8  u32 format version (1)   12 u32 header bytes (64)
 *     16 u32 rank                20 u32 world size            24 i64 iteration
 *     32 u32 record count        36 u32 0                     40 u64 file bytes (footer included)
 *     48 12 zero bytes           60 u32 CRC32C of bytes 0..59
 *   records, one after the other:
 *     0  u32 magic 0x43455254 ("TREC")   4 u32 kind (1 f32, 2 i64, 3 bytes)
 *     8  u32 name length (1..255)       12 u32 0
 *     16 u64 element count              24 u32 CRC32C of the data
 *     28 u32 CRC32C of bytes 0..27 and the name
 *     32 the name (no NUL), then count elements of data
 *   footer, 16 bytes:
 *     0  magic "DTCKEND\0"   8 u32 record count   12 u32 CRC32C of every byte before this field
 * Manifest (JSON, UTF-8): format "dtrain-checkpoint", version, iteration,
 * world_size, layout (object), config (object), shards [{rank, file, bytes,
 * crc32c (the file's footer checksum, 8 hex digits)}], and as its last member, on
 * its own line, "manifest_crc32c": the CRC32C of every byte of the file
 * before that line.
 *
 * Crash safety (dt_checkpoint_write): every rank writes and fsyncs its
 * shard into iter_X.tmp/; rank 0 collects the sizes and checksums, writes
 * and fsyncs the manifest and the directory, renames iter_X.tmp to iter_X,
 * fsyncs DIR, writes .latest.tmp.PID.N, fsyncs it, renames it to latest and
 * fsyncs DIR again; then it prunes to the newest `keep`. A crash at any
 * point leaves latest naming a complete checkpoint (or none yet).
 *
 * Every function returns DT_OK or fails with one line naming the file and
 * what is wrong ("bad magic", "format version 2, this build reads 1",
 * "checksum mismatch of tensor param/wte", "truncated at byte 1234 (the
 * header says 5678 bytes)", ...). */
#ifndef DT_CHECKPOINT_H
#define DT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "dt_comm.h"
#include "dt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DT_CHECKPOINT_VERSION 1
#define DT_CHECKPOINT_NAME_MAX 255

/* CRC-32C (Castagnoli): dt_crc32c("123456789", 9) == 0xE3069283.
 * dt_crc32c_update(crc, ...) continues a CRC (start from 0). */
DT_API uint32_t dt_crc32c(const void *data, size_t n);
DT_API uint32_t dt_crc32c_update(uint32_t crc, const void *data, size_t n);

typedef enum dt_checkpoint_kind { DT_CKPT_F32 = 1, DT_CKPT_I64 = 2, DT_CKPT_BYTES = 3 } dt_checkpoint_kind;

typedef struct dt_checkpoint_record {
    char *name;
    dt_checkpoint_kind kind;
    size_t count;     /* elements (bytes for DT_CKPT_BYTES) */
    const void *data; /* count elements (possibly unaligned when read from a file: memcpy them) */
    void *owned;      /* what data points to when the record owns it */
} dt_checkpoint_record;

/* One rank's part of a checkpoint: named records (names unique). */
typedef struct dt_checkpoint_shard {
    int rank, world;
    int64_t iteration;
    int count, capacity;
    dt_checkpoint_record *rec;
    void *blob;      /* a read shard: the file's bytes, which the records point into */
    char path[4096]; /* a read shard: its file (for messages) */
} dt_checkpoint_shard;

DT_API void dt_checkpoint_shard_init(dt_checkpoint_shard *s, int rank, int world, int64_t iteration);
DT_API void dt_checkpoint_shard_free(dt_checkpoint_shard *s);
/* Append a record with a copy of data (count elements of kind); *copy (may
 * be NULL) is where the copy lives, e.g. to fill it from device memory
 * when data is NULL. Fails on a duplicate or over-long name. */
DT_API dt_status dt_checkpoint_shard_add(dt_checkpoint_shard *s, const char *name, dt_checkpoint_kind kind,
                                         const void *data, size_t count, void **copy);
/* The record NAME with exactly `count` elements of `kind`: *data points to
 * them (unaligned: memcpy). Fails naming the file and the record when it is
 * missing or of another kind or size. */
DT_API dt_status dt_checkpoint_shard_find(const dt_checkpoint_shard *s, const char *name, dt_checkpoint_kind kind,
                                          size_t count, const void **data);

/* Write one shard file at path (created or replaced), fsync it; *bytes and
 * *crc (may be NULL) get its size and its checksum: the footer's, the
 * CRC32C of every byte but the last four (a CRC over a message followed by
 * its own CRC is one constant for every message). */
DT_API dt_status dt_checkpoint_shard_write_file(const char *path, const dt_checkpoint_shard *s, uint64_t *bytes,
                                                uint32_t *crc);
/* Read and verify one shard file (magic, version, header, every record's
 * header and data checksum, footer, whole-file checksum) into *out. */
DT_API dt_status dt_checkpoint_shard_read_file(const char *path, dt_checkpoint_shard *out);

typedef struct dt_checkpoint_save {
    const char *dir; /* the save root (created if missing) */
    int64_t iteration;
    dt_comm *comm;                    /* the world (every rank calls); NULL: one process */
    const dt_checkpoint_shard *shard; /* this rank's */
    const char *layout_json;          /* a JSON object's text for the manifest's "layout" (NULL: {}) */
    const char *config_json;          /* ... "config" (NULL: {}) */
    int keep;                         /* > 0: keep only the newest `keep` checkpoints; 0: all */
    /* DT_OK, or this rank's failure while gathering its shard (its message
     * kept): the rank still takes part, so every rank fails together
     * instead of waiting for it. */
    dt_status local_status;
} dt_checkpoint_save;

/* Collective over comm: write this rank's shard, then (rank 0) the
 * manifest, the rename and `latest` as described above. Every rank returns
 * the same status; *path_out (may be NULL, cap bytes) gets DIR/iter_X. */
DT_API dt_status dt_checkpoint_write(const dt_checkpoint_save *a, char *path_out, size_t cap);

typedef struct dt_checkpoint_shard_entry {
    int rank;
    char file[64];
    uint64_t bytes;
    uint32_t crc32c;
} dt_checkpoint_shard_entry;

typedef struct dt_checkpoint_manifest {
    char dir[4096]; /* the checkpoint directory */
    int version;
    int64_t iteration;
    int world_size;
    char *layout_json, *config_json; /* compact JSON text of the objects */
    int n_shards;
    dt_checkpoint_shard_entry *shards; /* (n_shards) by rank */
    int held_fd1; /* the directory's descriptor + 1 holding a shared flock (0: none), so a save's pruning keeps
                     it while it is read; closed by dt_checkpoint_manifest_free */
} dt_checkpoint_manifest;

DT_API void dt_checkpoint_manifest_free(dt_checkpoint_manifest *m);
/* Verify a checkpoint directory completely: the manifest (its checksum,
 * format, version, one shard per rank 0..world-1) and every shard file
 * (size and checksum against the manifest, then dt_checkpoint_shard_read_file's
 * checks, its rank, world and iteration). m may be NULL. */
DT_API dt_status dt_checkpoint_verify(const char *ckpt_dir, dt_checkpoint_manifest *m);
/* Read rank's shard of a verified checkpoint (checked again against m). */
DT_API dt_status dt_checkpoint_read_shard(const dt_checkpoint_manifest *m, int rank, dt_checkpoint_shard *out);

/* The checkpoint --load DIR means, verified (path in path_out, cap bytes;
 * its manifest in *m unless m is NULL: free it with dt_checkpoint_manifest_free):
 *   DIR itself when it holds a manifest.json (exactly that one: an invalid
 *   one is an error);
 *   else DIR/latest's target when it is valid;
 *   else the newest valid DIR/iter_X, and note (cap note_cap, may be NULL)
 *   says in one line what was skipped and why.
 * note is "" when nothing was skipped. Fails when nothing valid is left. */
DT_API dt_status dt_checkpoint_find_latest(const char *dir, char *path_out, size_t cap, char *note, size_t note_cap,
                                           dt_checkpoint_manifest *m);

/* One job at a time in a save directory (lib/train/checkpoint_lock.c):
 * create DIR if needed and take an exclusive flock(2) on DIR/dtrain.lock,
 * writing "HOST:PID" into it; *fd holds the lock until
 * dt_checkpoint_lock_release (or the process's end). Fails without waiting
 * when another process holds it, naming the holder the file records. The
 * process that commits checkpoints (rank 0) takes it before any training. */
DT_API dt_status dt_checkpoint_lock_take(const char *dir, int *fd);
DT_API void dt_checkpoint_lock_release(int fd);
/* Refuse (one line naming it) a save directory DIR (dfd: its descriptor)
 * where an entry dtrain writes or removes (dtrain.lock, latest,
 * .latest.tmp.*, iter_*) is a symbolic link: dtrain never writes, truncates
 * or removes through a link (dt_dir.h). Entries with other names are never
 * touched. Called by dt_checkpoint_lock_take and before every save. */
DT_API dt_status dt_checkpoint_check_dir(int dfd, const char *dir);

#ifdef __cplusplus
}
#endif
#endif
