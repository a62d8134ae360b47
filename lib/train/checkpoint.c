/* checkpoint.c: checkpoint files and directories (see dt_checkpoint.h for
 * the byte layout, the manifest and the crash-safety protocol;
 * docs/checkpoints.md for the whole story).
 *
 * Owns: shard records in memory, the shard file writer and verifying
 * reader, the manifest, the collective commit (tmp dir, fsyncs, renames,
 * `latest`, pruning) and the search for the checkpoint to load.
 *
 * Invariants: a file is only ever written under DIR/iter_X.tmp/ or as
 * DIR/.latest.tmp.PID.N (dt_file.h), and reaches its final name by rename(2) after fsync, so
 * a reader never sees a partial iter_X/ or latest; latest only ever names
 * a directory whose rename was already made durable (fsync of DIR); a
 * reader trusts nothing it has not checksummed: the manifest's own CRC, every
 * shard's size and CRC against the manifest, every record's header and data
 * CRC, and the rank, world and iteration inside each shard. */
#define _DEFAULT_SOURCE /* flock */
#include "dt_checkpoint.h"
#include "dt_dir.h"
#include "dt_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define DT__CK_HDR 64
#define DT__CK_REC 32
#define DT__CK_FOOT 16
#define DT__CK_REC_MAGIC 0x43455254u /* "TREC" read as a little-endian u32 */
#define DT__CK_TAG 31000             /* shard reports to rank 0 (below the parameter server's 32000..) */
static const char dt__ck_magic[8] = {'D', 'T', 'C', 'K', 'S', 'H', 'R', 'D'};
static const char dt__ck_end[8] = {'D', 'T', 'C', 'K', 'E', 'N', 'D', '\0'};

/* ---- little-endian helpers ------------------------------------------------ */

static int dt__ck_host_le(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static void dt__put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void dt__put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t dt__get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t dt__get64(const unsigned char *p) { return (uint64_t)dt__get32(p) | (uint64_t)dt__get32(p + 4) << 32; }

static size_t dt__ck_elem(dt_checkpoint_kind k) { return k == DT_CKPT_F32 ? 4 : k == DT_CKPT_I64 ? 8 : 1; }
static const char *dt__ck_kind_name(uint32_t k)
{
    return k == DT_CKPT_F32 ? "f32" : k == DT_CKPT_I64 ? "i64" : k == DT_CKPT_BYTES ? "bytes" : "?";
}

/* ---- records ---------------------------------------------------------------- */

void dt_checkpoint_shard_init(dt_checkpoint_shard *s, int rank, int world, int64_t iteration)
{
    memset(s, 0, sizeof *s);
    s->rank = rank;
    s->world = world;
    s->iteration = iteration;
}

void dt_checkpoint_shard_free(dt_checkpoint_shard *s)
{
    if (!s) return;
    for (int i = 0; i < s->count; i++) {
        free(s->rec[i].name);
        free(s->rec[i].owned);
    }
    free(s->rec);
    free(s->blob);
    memset(s, 0, sizeof *s);
}

static const dt_checkpoint_record *dt__ck_lookup(const dt_checkpoint_shard *s, const char *name)
{
    for (int i = 0; i < s->count; i++)
        if (strcmp(s->rec[i].name, name) == 0) return &s->rec[i];
    return NULL;
}

/* Append a record pointing at data (not copied; owned is freed with s). */
static dt_status dt__ck_append(dt_checkpoint_shard *s, const char *name, size_t name_len, dt_checkpoint_kind kind,
                               const void *data, size_t count, void *owned)
{
    if (s->count == s->capacity) {
        int cap = s->capacity ? 2 * s->capacity : 32;
        dt_checkpoint_record *r = realloc(s->rec, (size_t)cap * sizeof *r);
        if (!r) return DT_FAIL(DT_ERR_NOMEM, "checkpoint: out of memory for %d records", cap);
        s->rec = r;
        s->capacity = cap;
    }
    char *n = malloc(name_len + 1);
    if (!n) return DT_FAIL(DT_ERR_NOMEM, "checkpoint: out of memory");
    memcpy(n, name, name_len);
    n[name_len] = '\0';
    s->rec[s->count++] = (dt_checkpoint_record){.name = n, .kind = kind, .count = count, .data = data, .owned = owned};
    return DT_OK;
}

dt_status dt_checkpoint_shard_add(dt_checkpoint_shard *s, const char *name, dt_checkpoint_kind kind, const void *data,
                                  size_t count, void **copy)
{
    const size_t len = name ? strlen(name) : 0;
    if (len < 1 || len > DT_CHECKPOINT_NAME_MAX)
        return DT_FAIL(DT_ERR_INVALID, "checkpoint record '%s': expected a name of 1..%d bytes", name ? name : "",
                       DT_CHECKPOINT_NAME_MAX);
    if (kind != DT_CKPT_F32 && kind != DT_CKPT_I64 && kind != DT_CKPT_BYTES)
        return DT_FAIL(DT_ERR_INVALID, "checkpoint record %s: unknown kind %d", name, (int)kind);
    if (dt__ck_lookup(s, name)) return DT_FAIL(DT_ERR_INVALID, "checkpoint record %s: added twice", name);
    const size_t bytes = count * dt__ck_elem(kind);
    void *p = malloc(bytes ? bytes : 1);
    if (!p) return DT_FAIL(DT_ERR_NOMEM, "checkpoint record %s: out of memory for %zu bytes", name, bytes);
    if (data && bytes) memcpy(p, data, bytes);
    dt_status st = dt__ck_append(s, name, len, kind, p, count, p);
    if (st != DT_OK) {
        free(p);
        return st;
    }
    if (copy) *copy = p;
    return DT_OK;
}

dt_status dt_checkpoint_shard_find(const dt_checkpoint_shard *s, const char *name, dt_checkpoint_kind kind,
                                   size_t count, const void **data)
{
    const dt_checkpoint_record *r = dt__ck_lookup(s, name);
    const char *file = s->path[0] ? s->path : "checkpoint shard";
    if (!r) return DT_FAIL(DT_ERR_FORMAT, "%s: no record %s (saved by another layout or version?)", file, name);
    if (r->kind != kind)
        return DT_FAIL(DT_ERR_FORMAT, "%s: record %s holds %s, expected %s", file, name, dt__ck_kind_name(r->kind),
                       dt__ck_kind_name(kind));
    if (r->count != count)
        return DT_FAIL(DT_ERR_FORMAT, "%s: record %s has %zu elements, this run expects %zu", file, name, r->count,
                       count);
    *data = r->data;
    return DT_OK;
}

/* ---- writing a shard file ---------------------------------------------------- */

static dt_status dt__ck_write_all(int fd, const void *buf, size_t n, uint32_t *crc, const char *path)
{
    const unsigned char *p = buf;
    if (crc) *crc = dt_crc32c_update(*crc, buf, n);
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return DT_FAIL(DT_ERR_IO, "%s: write failed (%s)", path, w < 0 ? strerror(errno) : "no progress");
        p += w;
        n -= (size_t)w;
    }
    return DT_OK;
}

/* Write shard s to fd (a new file, named path in messages), fsync and close it. */
static dt_status dt__ck_shard_write_fd(int fd, const char *path, const dt_checkpoint_shard *s, uint64_t *bytes_out,
                                       uint32_t *crc_out)
{
    if (!dt__ck_host_le()) {
        close(fd);
        return DT_FAIL(DT_ERR_UNSUPPORTED, "%s: checkpoints are little-endian; this host is big-endian", path);
    }
    uint64_t total = DT__CK_HDR + DT__CK_FOOT;
    for (int i = 0; i < s->count; i++)
        total += DT__CK_REC + strlen(s->rec[i].name) + (uint64_t)s->rec[i].count * dt__ck_elem(s->rec[i].kind);
    unsigned char h[DT__CK_HDR];
    memset(h, 0, sizeof h);
    memcpy(h, dt__ck_magic, 8);
    dt__put32(h + 8, DT_CHECKPOINT_VERSION);
    dt__put32(h + 12, DT__CK_HDR);
    dt__put32(h + 16, (uint32_t)s->rank);
    dt__put32(h + 20, (uint32_t)s->world);
    dt__put64(h + 24, (uint64_t)s->iteration);
    dt__put32(h + 32, (uint32_t)s->count);
    dt__put64(h + 40, total);
    dt__put32(h + 60, dt_crc32c(h, 60));

    uint32_t crc = 0;
    dt_status st = dt__ck_write_all(fd, h, sizeof h, &crc, path);
    for (int i = 0; st == DT_OK && i < s->count; i++) {
        const dt_checkpoint_record *r = &s->rec[i];
        const size_t nlen = strlen(r->name), dbytes = r->count * dt__ck_elem(r->kind);
        unsigned char rh[DT__CK_REC + DT_CHECKPOINT_NAME_MAX];
        memset(rh, 0, DT__CK_REC);
        dt__put32(rh, DT__CK_REC_MAGIC);
        dt__put32(rh + 4, (uint32_t)r->kind);
        dt__put32(rh + 8, (uint32_t)nlen);
        dt__put64(rh + 16, (uint64_t)r->count);
        dt__put32(rh + 24, dt_crc32c(r->data, dbytes));
        memcpy(rh + DT__CK_REC, r->name, nlen);
        dt__put32(rh + 28, dt_crc32c_update(dt_crc32c(rh, 28), r->name, nlen));
        st = dt__ck_write_all(fd, rh, DT__CK_REC + nlen, &crc, path);
        if (st == DT_OK && dbytes) st = dt__ck_write_all(fd, r->data, dbytes, &crc, path);
    }
    if (st == DT_OK) {
        unsigned char f[DT__CK_FOOT];
        memcpy(f, dt__ck_end, 8);
        dt__put32(f + 8, (uint32_t)s->count);
        const uint32_t before = dt_crc32c_update(crc, f, 12); /* every byte before the CRC field */
        dt__put32(f + 12, before);
        st = dt__ck_write_all(fd, f, sizeof f, NULL, path);
        /* the file's checksum is this one: a CRC over a message followed by
         * its own CRC is the same constant for every message, useless */
        crc = before;
    }
    if (st == DT_OK && fsync(fd) != 0) st = DT_FAIL(DT_ERR_IO, "%s: fsync failed (%s)", path, strerror(errno));
    if (close(fd) != 0 && st == DT_OK) st = DT_FAIL(DT_ERR_IO, "%s: close failed (%s)", path, strerror(errno));
    if (st != DT_OK) return st;
    if (bytes_out) *bytes_out = total;
    if (crc_out) *crc_out = crc;
    return DT_OK;
}

dt_status dt_checkpoint_shard_write_file(const char *path, const dt_checkpoint_shard *s, uint64_t *bytes_out,
                                         uint32_t *crc_out)
{
    /* O_NOFOLLOW: a link at path is refused, never written through */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return DT_FAIL(DT_ERR_IO, "%s: cannot create (%s)", path, strerror(errno));
    return dt__ck_shard_write_fd(fd, path, s, bytes_out, crc_out);
}

/* ---- reading a shard file ------------------------------------------------------ */

dt_status dt_checkpoint_shard_read_file(const char *path, dt_checkpoint_shard *out)
{
    memset(out, 0, sizeof *out);
    if (!dt__ck_host_le())
        return DT_FAIL(DT_ERR_UNSUPPORTED, "%s: checkpoints are little-endian; this host is big-endian", path);
    char *text = NULL; /* a regular file only: dt_file_read_whole refuses a FIFO rather than wait on it */
    size_t n = 0;
    DT_CHECK(dt_file_read_whole(path, NULL, 0, &text, &n));
    unsigned char *b = (unsigned char *)text;
    dt_status st = DT_OK;
    snprintf(out->path, sizeof out->path, "%s", path);
    out->blob = b;
    if (n < 8 || memcmp(b, dt__ck_magic, 8) != 0) {
        st = n < 8 && memcmp(b, dt__ck_magic, n) == 0
                 ? DT_FAIL(DT_ERR_FORMAT, "%s: truncated at byte %zu (the header is %d bytes)", path, n, DT__CK_HDR)
                 : DT_FAIL(DT_ERR_FORMAT, "%s: bad magic (not a dtrain checkpoint shard)", path);
        goto fail;
    }
    if (n < DT__CK_HDR) {
        st = DT_FAIL(DT_ERR_FORMAT, "%s: truncated at byte %zu (the header is %d bytes)", path, n, DT__CK_HDR);
        goto fail;
    }
    if (dt__get32(b + 8) != DT_CHECKPOINT_VERSION) {
        st = DT_FAIL(DT_ERR_FORMAT, "%s: format version %" PRIu32 ", this build reads version %d", path,
                     dt__get32(b + 8), DT_CHECKPOINT_VERSION);
        goto fail;
    }
    if (dt__get32(b + 60) != dt_crc32c(b, 60)) {
        st = DT_FAIL(DT_ERR_FORMAT, "%s: header checksum mismatch", path);
        goto fail;
    }
    const uint64_t total = dt__get64(b + 40);
    const uint32_t nrec = dt__get32(b + 32);
    if (dt__get32(b + 12) != DT__CK_HDR) {
        st = DT_FAIL(DT_ERR_FORMAT, "%s: header size %" PRIu32 ", expected %d", path, dt__get32(b + 12), DT__CK_HDR);
        goto fail;
    }
    if (n < total) {
        st = DT_FAIL(DT_ERR_FORMAT, "%s: truncated at byte %zu (the header says %" PRIu64 " bytes)", path, n, total);
        goto fail;
    }
    if (n > total) {
        st = DT_FAIL(DT_ERR_FORMAT, "%s: %zu bytes, the header says %" PRIu64 " (trailing data)", path, n, total);
        goto fail;
    }
    out->rank = (int)dt__get32(b + 16);
    out->world = (int)dt__get32(b + 20);
    out->iteration = (int64_t)dt__get64(b + 24);
    const size_t end = (size_t)total - DT__CK_FOOT;
    size_t pos = DT__CK_HDR;
    for (uint32_t i = 0; i < nrec; i++) {
        if (pos + DT__CK_REC > end) {
            st = DT_FAIL(DT_ERR_FORMAT,
                         "%s: record %" PRIu32 " of %" PRIu32 " at byte %zu runs past the records' end "
                         "(byte %zu)",
                         path, i, nrec, pos, end);
            goto fail;
        }
        const unsigned char *r = b + pos;
        const uint32_t nlen = dt__get32(r + 8), kind = dt__get32(r + 4);
        if (dt__get32(r) != DT__CK_REC_MAGIC) {
            st = DT_FAIL(DT_ERR_FORMAT, "%s: record %" PRIu32 " at byte %zu: bad record magic", path, i, pos);
            goto fail;
        }
        if (nlen < 1 || nlen > DT_CHECKPOINT_NAME_MAX || pos + DT__CK_REC + nlen > end ||
            dt__get32(r + 28) != dt_crc32c_update(dt_crc32c(r, 28), r + DT__CK_REC, nlen)) {
            st = DT_FAIL(DT_ERR_FORMAT, "%s: record %" PRIu32 " at byte %zu: record header checksum mismatch", path, i,
                         pos);
            goto fail;
        }
        const char *name = (const char *)r + DT__CK_REC;
        if (kind != DT_CKPT_F32 && kind != DT_CKPT_I64 && kind != DT_CKPT_BYTES) {
            st = DT_FAIL(DT_ERR_FORMAT, "%s: record %.*s: unknown kind %" PRIu32, path, (int)nlen, name, kind);
            goto fail;
        }
        const uint64_t count = dt__get64(r + 16);
        const size_t data_at = pos + DT__CK_REC + nlen;
        if (count > (end - data_at) / dt__ck_elem(kind)) {
            st = DT_FAIL(DT_ERR_FORMAT, "%s: record %.*s: %" PRIu64 " elements run past the records' end (byte %zu)",
                         path, (int)nlen, name, count, end);
            goto fail;
        }
        const size_t dbytes = (size_t)count * dt__ck_elem(kind);
        if (dt__get32(r + 24) != dt_crc32c(b + data_at, dbytes)) {
            st = DT_FAIL(DT_ERR_FORMAT, "%s: checksum mismatch of tensor %.*s (record %" PRIu32 ", data at byte %zu)",
                         path, (int)nlen, name, i, data_at);
            goto fail;
        }
        for (int k = 0; k < out->count; k++)
            if (strlen(out->rec[k].name) == nlen && memcmp(out->rec[k].name, name, nlen) == 0) {
                st = DT_FAIL(DT_ERR_FORMAT, "%s: record %.*s appears twice", path, (int)nlen, name);
                goto fail;
            }
        DT_CHECK_GOTO(dt__ck_append(out, name, nlen, (dt_checkpoint_kind)kind, b + data_at, (size_t)count, NULL), st,
                      fail);
        pos = data_at + dbytes;
    }
    if (pos != end) {
        st = DT_FAIL(DT_ERR_FORMAT, "%s: %zu bytes between the last record and the footer (at byte %zu)", path,
                     end - pos, pos);
        goto fail;
    }
    if (memcmp(b + end, dt__ck_end, 8) != 0 || dt__get32(b + end + 8) != nrec) {
        st = DT_FAIL(DT_ERR_FORMAT, "%s: bad footer at byte %zu", path, end);
        goto fail;
    }
    if (dt__get32(b + end + 12) != dt_crc32c(b, end + 12)) {
        st = DT_FAIL(DT_ERR_FORMAT, "%s: file checksum mismatch", path);
        goto fail;
    }
    return DT_OK;
fail:
    dt_checkpoint_shard_free(out);
    return st;
}

/* ---- directories ------------------------------------------------------------------ */

/* "iter_" followed by 8 or more digits and nothing else (suffix NULL), or
 * by exactly `suffix` (".tmp"). */
static int dt__ck_iter_name(const char *name, const char *suffix, int64_t *iter)
{
    if (strncmp(name, "iter_", 5) != 0) return 0;
    const char *p = name + 5;
    int64_t v = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 18) v = v * 10 + (*p++ - '0'), digits++;
    if (digits < 8) return 0;
    if (suffix ? strcmp(p, suffix) != 0 : *p != '\0') return 0;
    if (iter) *iter = v;
    return 1;
}

/* Complete checkpoints under root, newest first (*n of them; free *out). */
static dt_status dt__ck_list(const char *root, int64_t **out, int *n)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(root);
    if (!d) return DT_FAIL(DT_ERR_IO, "%s: cannot open the directory (%s)", root, strerror(errno));
    int cap = 0;
    struct dirent *e;
    dt_status st = DT_OK;
    while ((e = readdir(d)) != NULL) {
        int64_t it;
        if (!dt__ck_iter_name(e->d_name, NULL, &it)) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *v = realloc(*out, (size_t)cap * sizeof *v);
            if (!v) {
                st = DT_FAIL(DT_ERR_NOMEM, "%s: out of memory listing checkpoints", root);
                break;
            }
            *out = v;
        }
        (*out)[(*n)++] = it;
    }
    closedir(d);
    for (int i = 1; i < *n; i++) { /* insertion sort, descending */
        int64_t v = (*out)[i];
        int j = i - 1;
        for (; j >= 0 && (*out)[j] < v; j--) (*out)[j + 1] = (*out)[j];
        (*out)[j + 1] = v;
    }
    return st;
}

/* ---- the manifest --------------------------------------------------------------------- */

static const char dt__ck_mcrc_key[] = "\"manifest_crc32c\"";

/* DIR/NAME (new: O_EXCL, no link followed) gets text, fsynced. */
static dt_status dt__ck_write_text(int dfd, const char *dir, const char *name, const char *text, size_t n)
{
    int fd;
    DT_CHECK(dt_dir_create(dfd, dir, name, &fd));
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    dt_status st = dt__ck_write_all(fd, text, n, NULL, path);
    if (st == DT_OK && fsync(fd) != 0) st = DT_FAIL(DT_ERR_IO, "%s: fsync failed (%s)", path, strerror(errno));
    if (close(fd) != 0 && st == DT_OK) st = DT_FAIL(DT_ERR_IO, "%s: close failed (%s)", path, strerror(errno));
    return st;
}

static json_t *dt__ck_object_or_empty(const char *text, const char *what, dt_status *st)
{
    if (!text) return json_object();
    json_error_t err;
    json_t *o = json_loads(text, 0, &err);
    if (!o || !json_is_object(o)) {
        json_decref(o);
        *st = DT_FAIL(DT_ERR_INVALID, "checkpoint: the %s is not a JSON object (%s)", what, err.text);
        return NULL;
    }
    return o;
}

/* TMP/manifest.json (tfd: TMP's descriptor). */
static dt_status dt__ck_write_manifest(int tfd, const char *tmp, const dt_checkpoint_save *a, int world,
                                       const dt_checkpoint_shard_entry *e)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/manifest.json", tmp);
    dt_status st = DT_OK;
    json_t *o = json_object(), *sh = json_array();
    json_t *layout = dt__ck_object_or_empty(a->layout_json, "layout", &st);
    json_t *config = layout ? dt__ck_object_or_empty(a->config_json, "configuration", &st) : NULL;
    int bad = !o || !sh || !layout || !config;
    for (int r = 0; !bad && r < world; r++) {
        char crc[16];
        snprintf(crc, sizeof crc, "%08" PRIx32, e[r].crc32c);
        json_t *x = json_pack("{s:i, s:s, s:I, s:s}", "rank", r, "file", e[r].file, "bytes", (json_int_t)e[r].bytes,
                              "crc32c", crc);
        bad |= !x || json_array_append_new(sh, x) != 0;
    }
    if (!bad) {
        bad |= json_object_set_new(o, "format", json_string("dtrain-checkpoint")) != 0;
        bad |= json_object_set_new(o, "version", json_integer(DT_CHECKPOINT_VERSION)) != 0;
        bad |= json_object_set_new(o, "iteration", json_integer(a->iteration)) != 0;
        bad |= json_object_set_new(o, "world_size", json_integer(world)) != 0;
        bad |= json_object_set(o, "layout", layout) != 0;
        bad |= json_object_set(o, "config", config) != 0;
        bad |= json_object_set(o, "shards", sh) != 0;
    }
    char *body = bad ? NULL : json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(o), json_decref(sh), json_decref(layout), json_decref(config);
    if (!body) return st != DT_OK ? st : DT_FAIL(DT_ERR_NOMEM, "%s: out of memory building the manifest", path);
    size_t n = strlen(body);
    /* body ends "\n}": continue the object with the checksum line */
    if (n < 2 || body[n - 1] != '}') {
        free(body);
        return DT_FAIL(DT_ERR_INVALID, "%s: unexpected manifest text", path);
    }
    n -= 2;
    char *text = malloc(n + 64);
    if (!text) {
        free(body);
        return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(text, body, n);
    free(body);
    memcpy(text + n, ",\n", 2);
    n += 2;
    const uint32_t crc = dt_crc32c(text, n);
    n += (size_t)snprintf(text + n, 64, "  %s: \"%08" PRIx32 "\"\n}\n", dt__ck_mcrc_key, crc);
    st = dt__ck_write_text(tfd, tmp, "manifest.json", text, n);
    free(text);
    return st;
}

void dt_checkpoint_manifest_free(dt_checkpoint_manifest *m)
{
    if (!m) return;
    free(m->layout_json);
    free(m->config_json);
    free(m->shards);
    if (m->held_fd1 > 0) close(m->held_fd1 - 1); /* the shared lock goes with it */
    memset(m, 0, sizeof *m);
}

static dt_status dt__ck_read_manifest(const char *dir, dt_checkpoint_manifest *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->dir, sizeof m->dir, "%s", dir);
    char path[4200];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    char *b = NULL; /* a regular file only (dt_file_read_whole): a FIFO is refused */
    size_t n = 0;
    DT_CHECK(dt_file_read_whole(path, NULL, 0, &b, &n));
    const char *text = b;
    /* the checksum line: the last occurrence of the key, at the start of a line */
    const char *k = NULL;
    for (const char *p = strstr(text, dt__ck_mcrc_key); p; p = strstr(p + 1, dt__ck_mcrc_key)) k = p;
    const char *line = k;
    while (line && line > text && line[-1] != '\n') line--;
    unsigned long want = 0;
    if (!k || !line || line == text || sscanf(k + sizeof dt__ck_mcrc_key - 1, " : \"%8lx\"", &want) != 1) {
        free(b);
        return DT_FAIL(DT_ERR_FORMAT, "%s: no manifest_crc32c line at its end (truncated, or not written by dtrain)",
                       path);
    }
    if ((uint32_t)want != dt_crc32c(text, (size_t)(line - text))) {
        free(b);
        return DT_FAIL(DT_ERR_FORMAT, "%s: manifest checksum mismatch", path);
    }
    /* the checksum covers what comes before its line; after it only "}\n" may follow */
    const char *eol = strchr(k, '\n');
    if (!eol || strcmp(eol + 1, "}\n") != 0 || (size_t)(eol + 3 - text) != n) {
        const size_t at = eol ? (size_t)(eol + 1 - text) : n;
        free(b);
        return DT_FAIL(DT_ERR_FORMAT,
                       "%s: %zu bytes after the manifest_crc32c line at byte %zu, expected only \"}\" (appended "
                       "to, so not covered by the checksum)",
                       path, n > at ? n - at : 0, at);
    }
    json_error_t err;
    json_t *o = json_loadb(text, n, JSON_REJECT_DUPLICATES, &err);
    free(b);
    if (!o || !json_is_object(o)) {
        json_decref(o);
        return DT_FAIL(DT_ERR_FORMAT, "%s: not a JSON object (line %d: %s)", path, err.line, err.text);
    }
    dt_status st = DT_OK;
    const char *fmt = json_string_value(json_object_get(o, "format"));
    json_t *ver = json_object_get(o, "version"), *it = json_object_get(o, "iteration"),
           *ws = json_object_get(o, "world_size"), *sh = json_object_get(o, "shards");
    if (!fmt || strcmp(fmt, "dtrain-checkpoint") != 0) {
        st = DT_FAIL(DT_ERR_FORMAT, "%s: format is not \"dtrain-checkpoint\"", path);
        goto done;
    }
    if (!json_is_integer(ver) || json_integer_value(ver) != DT_CHECKPOINT_VERSION) {
        st = DT_FAIL(DT_ERR_FORMAT, "%s: format version %lld, this build reads version %d", path,
                     json_is_integer(ver) ? (long long)json_integer_value(ver) : -1LL, DT_CHECKPOINT_VERSION);
        goto done;
    }
    if (!json_is_integer(it) || json_integer_value(it) < 0 || !json_is_integer(ws) || json_integer_value(ws) < 1 ||
        json_integer_value(ws) > 1 << 20 || !json_is_array(sh)) {
        st = DT_FAIL(DT_ERR_FORMAT, "%s: iteration, world_size or shards missing or invalid", path);
        goto done;
    }
    m->version = DT_CHECKPOINT_VERSION;
    m->iteration = json_integer_value(it);
    const char *base = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    int64_t named = -1;
    if (dt__ck_iter_name(base, NULL, &named) && named != m->iteration) { /* refused: the name would mislead */
        st = DT_FAIL(DT_ERR_FORMAT, "%s: the directory is named for iteration %lld, its manifest says %lld", path,
                     (long long)named, (long long)m->iteration);
        goto done;
    }
    m->world_size = (int)json_integer_value(ws);
    if ((int)json_array_size(sh) != m->world_size) {
        st = DT_FAIL(DT_ERR_FORMAT, "%s: %zu shards listed for a world of %d ranks (a shard is missing)", path,
                     json_array_size(sh), m->world_size);
        goto done;
    }
    m->shards = calloc((size_t)m->world_size, sizeof *m->shards);
    if (!m->shards) {
        st = DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    m->n_shards = m->world_size;
    for (int r = 0; r < m->world_size; r++) {
        json_t *x = json_array_get(sh, (size_t)r);
        json_t *rk = json_object_get(x, "rank"), *by = json_object_get(x, "bytes");
        const char *file = json_string_value(json_object_get(x, "file"));
        const char *crc = json_string_value(json_object_get(x, "crc32c"));
        char expect[32];
        snprintf(expect, sizeof expect, "shard-%05d.bin", r);
        unsigned long c = 0;
        char tail = 0;
        if (!json_is_integer(rk) || json_integer_value(rk) != r || !file || strcmp(file, expect) != 0 ||
            !json_is_integer(by) || json_integer_value(by) < 0 || !crc || strlen(crc) != 8 ||
            sscanf(crc, "%8lx%c", &c, &tail) != 1) {
            st = DT_FAIL(DT_ERR_FORMAT, "%s: shard entry %d is not {rank %d, file %s, bytes, crc32c}", path, r, r,
                         expect);
            goto done;
        }
        m->shards[r].rank = r;
        snprintf(m->shards[r].file, sizeof m->shards[r].file, "%s", file);
        m->shards[r].bytes = (uint64_t)json_integer_value(by);
        m->shards[r].crc32c = (uint32_t)c;
    }
    json_t *lay = json_object_get(o, "layout"), *cfg = json_object_get(o, "config");
    m->layout_json = json_is_object(lay) ? json_dumps(lay, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17))
                                         : strdup("{}");
    m->config_json = json_is_object(cfg) ? json_dumps(cfg, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17))
                                         : strdup("{}");
    if (!m->layout_json || !m->config_json) st = DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", path);
done:
    json_decref(o);
    if (st != DT_OK) dt_checkpoint_manifest_free(m);
    return st;
}

/* ---- verifying and reading ---------------------------------------------------------------- */

dt_status dt_checkpoint_read_shard(const dt_checkpoint_manifest *m, int rank, dt_checkpoint_shard *out)
{
    memset(out, 0, sizeof *out);
    if (rank < 0 || rank >= m->n_shards)
        return DT_FAIL(DT_ERR_INVALID, "%s: no shard for rank %d (the checkpoint has %d)", m->dir, rank, m->n_shards);
    const dt_checkpoint_shard_entry *e = &m->shards[rank];
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", m->dir, e->file);
    struct stat sb;
    if (stat(path, &sb) != 0)
        return DT_FAIL(DT_ERR_IO, "%s: missing shard of rank %d (%s)", path, rank, strerror(errno));
    if ((uint64_t)sb.st_size < e->bytes)
        return DT_FAIL(DT_ERR_FORMAT, "%s: truncated at byte %lld (the manifest says %" PRIu64 " bytes)", path,
                       (long long)sb.st_size, e->bytes);
    if ((uint64_t)sb.st_size > e->bytes)
        return DT_FAIL(DT_ERR_FORMAT, "%s: %lld bytes, the manifest says %" PRIu64, path, (long long)sb.st_size,
                       e->bytes);
    DT_CHECK(dt_checkpoint_shard_read_file(path, out));
    dt_status st = DT_OK;
    const uint32_t crc = dt_crc32c(out->blob, (size_t)e->bytes - 4); /* the footer's */
    if (crc != e->crc32c)
        st = DT_FAIL(DT_ERR_FORMAT,
                     "%s: file checksum %08" PRIx32 " differs from the manifest's %08" PRIx32
                     " (a shard of another save?)",
                     path, crc, e->crc32c);
    else if (out->rank != rank || out->world != m->world_size || out->iteration != m->iteration)
        st = DT_FAIL(DT_ERR_FORMAT,
                     "%s: holds rank %d of %d at iteration %lld, the manifest expects rank %d of %d at "
                     "iteration %lld",
                     path, out->rank, out->world, (long long)out->iteration, rank, m->world_size,
                     (long long)m->iteration);
    if (st != DT_OK) dt_checkpoint_shard_free(out);
    return st;
}

dt_status dt_checkpoint_verify(const char *ckpt_dir, dt_checkpoint_manifest *m_out)
{
    /* a shared flock on the directory while it is read, and for m_out's
     * life: a save's pruning skips a checkpoint a reader holds */
    int held = open(ckpt_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (held >= 0 && flock(held, LOCK_SH) != 0) {
        close(held);
        held = -1;
    }
    dt_checkpoint_manifest m;
    dt_status st = dt__ck_read_manifest(ckpt_dir, &m);
    if (st != DT_OK) {
        if (held >= 0) close(held);
        return st;
    }
    m.held_fd1 = held + 1;
    for (int r = 0; r < m.n_shards; r++) {
        dt_checkpoint_shard s;
        st = dt_checkpoint_read_shard(&m, r, &s);
        if (st != DT_OK) {
            dt_checkpoint_manifest_free(&m);
            return st;
        }
        dt_checkpoint_shard_free(&s);
    }
    if (m_out) *m_out = m;
    else dt_checkpoint_manifest_free(&m);
    return DT_OK;
}

/* Append "; " and text to note (cap), keeping it one line. */
static void dt__ck_note(char *note, size_t cap, const char *fmt, const char *a, const char *b)
{
    if (!note || !cap) return;
    size_t n = strlen(note);
    if (n && n + 2 < cap) {
        memcpy(note + n, "; ", 3);
        n += 2;
    }
    if (n < cap) snprintf(note + n, cap - n, fmt, a, b);
}

dt_status dt_checkpoint_find_latest(const char *dir, char *path_out, size_t cap, char *note, size_t note_cap,
                                    dt_checkpoint_manifest *m)
{
    if (note && note_cap) note[0] = '\0';
    if (!dir || !dir[0]) return DT_FAIL(DT_ERR_INVALID, "--load '': expected a directory");
    char p[4200];
    struct stat sb;
    snprintf(p, sizeof p, "%s/manifest.json", dir);
    if (stat(p, &sb) == 0) { /* a checkpoint itself: exactly that one */
        if ((size_t)snprintf(path_out, cap, "%s", dir) >= cap) return DT_FAIL(DT_ERR_INVALID, "%s: path too long", dir);
        return dt_checkpoint_verify(dir, m);
    }
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return DT_FAIL(DT_ERR_IO, "--load %s: no such directory", dir);
    char why[1024] = "", tried[64] = "";
    /* latest first */
    snprintf(p, sizeof p, "%s/latest", dir);
    char *lb = NULL;
    size_t ln = 0;
    if (stat(p, &sb) != 0) {
        snprintf(why, sizeof why, "%s/latest is missing", dir);
    } else if (dt_file_read_whole(p, NULL, 0, &lb, &ln) != DT_OK) {
        snprintf(why, sizeof why, "%s", dt_last_error());
    } else {
        while (ln && (lb[ln - 1] == '\n' || lb[ln - 1] == '\r' || lb[ln - 1] == ' ')) lb[--ln] = '\0';
        if (!dt__ck_iter_name((const char *)lb, NULL, NULL) || ln >= sizeof tried) {
            snprintf(why, sizeof why, "%s/latest does not name a checkpoint (\"%.40s\")", dir, (const char *)lb);
        } else {
            snprintf(tried, sizeof tried, "%s", (const char *)lb);
            snprintf(p, sizeof p, "%s/%s", dir, tried);
            if (dt_checkpoint_verify(p, m) == DT_OK) {
                free(lb);
                if ((size_t)snprintf(path_out, cap, "%s", p) >= cap)
                    return DT_FAIL(DT_ERR_INVALID, "%s: path too long", p);
                return DT_OK;
            }
            snprintf(why, sizeof why, "latest -> %s is invalid (%s)", tried, dt_last_error());
        }
    }
    free(lb);
    char skipped[1536] = "";
    dt__ck_note(skipped, sizeof skipped, "%s%s", why, "");
    int64_t *its = NULL;
    int n = 0;
    DT_CHECK(dt__ck_list(dir, &its, &n));
    for (int i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "iter_%08lld", (long long)its[i]);
        if (!strcmp(name, tried)) continue;
        snprintf(p, sizeof p, "%s/%s", dir, name);
        if (dt_checkpoint_verify(p, m) == DT_OK) {
            free(its);
            if (note && note_cap)
                snprintf(note, note_cap, "skipped: %s; loading %s, the newest valid checkpoint", skipped, name);
            if ((size_t)snprintf(path_out, cap, "%s", p) >= cap) return DT_FAIL(DT_ERR_INVALID, "%s: path too long", p);
            return DT_OK;
        }
        char one[1024];
        snprintf(one, sizeof one, "%s is invalid (%s)", name, dt_last_error());
        dt__ck_note(skipped, sizeof skipped, "%s%s", one, "");
    }
    free(its);
    if (n == 0 && !tried[0]) return DT_FAIL(DT_ERR_IO, "--load %s: no checkpoint there (no latest, no iter_*)", dir);
    return DT_FAIL(DT_ERR_FORMAT, "--load %s: no valid checkpoint: %s", dir, skipped);
}

/* ---- the collective save --------------------------------------------------------------------- */

/* Every rank learns which ranks failed (flags summed over comm). Returns
 * the first failed rank, or -1. */
static dt_status dt__ck_agree(dt_comm *comm, int failed, int *first_failed)
{
    *first_failed = failed ? (comm ? comm->rank : 0) : -1;
    if (!comm || comm->size == 1) return DT_OK;
    float *f = calloc((size_t)comm->size, sizeof *f);
    if (!f) return DT_FAIL(DT_ERR_NOMEM, "checkpoint: out of memory");
    f[comm->rank] = failed ? 1.0f : 0.0f;
    dt_status st = dt_comm_allreduce(comm, f, (size_t)comm->size, DT_ALLREDUCE_RING, NULL);
    *first_failed = -1;
    for (int r = 0; st == DT_OK && r < comm->size; r++)
        if (f[r] != 0.0f) {
            *first_failed = r;
            break;
        }
    free(f);
    return st;
}

/* Remove DIR/NAME, an old checkpoint, unless a reader holds it (a shared
 * flock taken by dt_checkpoint_verify while it loads): then it stays, and
 * the next save prunes it. *kept: it stayed. */
static dt_status dt__ck_prune_one(int dfd, const char *dir, const char *name, int *kept)
{
    *kept = 0;
    int sub;
    DT_CHECK(dt_dir_open_sub(dfd, dir, name, &sub));
    if (flock(sub, LOCK_EX | LOCK_NB) != 0) {
        const int e = errno;
        close(sub);
        if (e == EWOULDBLOCK) {
            *kept = 1;
            return DT_OK;
        }
        return DT_FAIL(DT_ERR_IO, "%s/%s: cannot lock to prune it (%s)", dir, name, strerror(e));
    }
    const dt_status st = dt_dir_remove_tree(dfd, dir, name);
    close(sub); /* the lock goes with it */
    return st;
}

/* Rank 0, once every shard is durable: manifest, rename, latest, pruning.
 * dfd: the save directory's descriptor; tfd: TMP's (TMP = DIR/TNAME). */
static dt_status dt__ck_commit(const dt_checkpoint_save *a, int world, const dt_checkpoint_shard_entry *e, int dfd,
                               int tfd, const char *tmp, const char *tname, const char *name)
{
    DT_CHECK(dt__ck_write_manifest(tfd, tmp, a, world, e));
    DT_CHECK(dt_dir_fsync(tfd, tmp));
    dt_dir_kind k;
    DT_CHECK(dt_dir_kind_of(dfd, a->dir, name, &k));
    if (k != DT_DIR_NONE) DT_CHECK(dt_dir_expect(dfd, a->dir, name, DT_DIR_DIR)); /* a link: refused */
    char old[96] = "";
    if (k == DT_DIR_DIR) { /* the same iteration saved before (a resumed run): set the old one aside */
        snprintf(old, sizeof old, "%s.old", name);
        DT_CHECK(dt_dir_remove_tree(dfd, a->dir, old));
        DT_CHECK(dt_dir_rename(dfd, a->dir, name, old));
    }
    DT_CHECK(dt_dir_rename(dfd, a->dir, tname, name));
    DT_CHECK(dt_dir_fsync(dfd, a->dir));
    char line[80];
    snprintf(line, sizeof line, "%s\n", name);
    DT_CHECK(dt_dir_write_whole(dfd, a->dir, "latest", line, strlen(line))); /* a temporary, fsync, rename, fsync */
    if (old[0]) DT_CHECK(dt_dir_remove_tree(dfd, a->dir, old));
    if (a->keep > 0) { /* prune: the newest `keep` stay (the new one is among them) */
        int64_t *its = NULL;
        int n = 0, kept = 0;
        DT_CHECK(dt__ck_list(a->dir, &its, &n));
        dt_status st = DT_OK;
        for (int i = a->keep; st == DT_OK && i < n; i++) {
            if (its[i] == a->iteration) continue;
            char p[64];
            snprintf(p, sizeof p, "iter_%08lld", (long long)its[i]);
            st = dt__ck_prune_one(dfd, a->dir, p, &kept);
        }
        free(its);
        DT_CHECK(st);
        DT_CHECK(dt_dir_fsync(dfd, a->dir));
    }
    return DT_OK;
}

/* Rank 0 before anyone writes: DIR exists and holds no links where dtrain
 * writes, a stale DIR/iter_X.tmp of a crashed save and the .latest.tmp.*
 * files a killed commit left are gone, the new DIR/TNAME exists. *dfd_out:
 * DIR's descriptor. */
static dt_status dt__ck_prepare(const dt_checkpoint_save *a, const char *tname, int *dfd_out)
{
    *dfd_out = -1;
    DT_CHECK(dt_file_mkdir_p(a->dir));
    int dfd;
    DT_CHECK(dt_dir_open(a->dir, &dfd));
    dt_status st = dt_checkpoint_check_dir(dfd, a->dir);
    DIR *d = NULL;
    if (st == DT_OK) st = dt_dir_list(dfd, a->dir, &d);
    struct dirent *e;
    while (d && st == DT_OK && (e = readdir(d)) != NULL) {
        if (dt__ck_iter_name(e->d_name, ".tmp", NULL)) {
            st = dt_dir_remove_tree(dfd, a->dir, e->d_name);
        } else if (!strncmp(e->d_name, ".latest.tmp.", 12)) {
            st = dt_dir_expect(dfd, a->dir, e->d_name, DT_DIR_FILE);
            if (st == DT_OK) st = dt_dir_unlink(dfd, a->dir, e->d_name);
        }
    }
    if (d) closedir(d);
    if (st == DT_OK) st = dt_dir_mkdir(dfd, a->dir, tname);
    if (st != DT_OK) {
        close(dfd);
        return st;
    }
    *dfd_out = dfd;
    return DT_OK;
}

typedef struct dt__ck_report {
    int64_t ok;
    uint64_t bytes;
    uint64_t crc;
} dt__ck_report;

dt_status dt_checkpoint_write(const dt_checkpoint_save *a, char *path_out, size_t cap)
{
    dt_comm *c = a->comm && a->comm->size > 1 ? a->comm : NULL;
    const int world = c ? c->size : 1, rank = c ? c->rank : 0;
    if (!a->dir || !a->dir[0]) return DT_FAIL(DT_ERR_INVALID, "--save '': expected a directory");
    if (a->iteration < 0 || a->iteration > 99999999999LL)
        return DT_FAIL(DT_ERR_INVALID, "checkpoint: iteration %lld out of range", (long long)a->iteration);
    char name[64], tname[80], shard[32], tmp[4200], fin[4200], file[4300];
    snprintf(name, sizeof name, "iter_%08lld", (long long)a->iteration);
    snprintf(tname, sizeof tname, "%s.tmp", name);
    snprintf(shard, sizeof shard, "shard-%05d.bin", rank);
    if ((size_t)snprintf(tmp, sizeof tmp, "%s/%s", a->dir, tname) >= sizeof tmp - 64)
        return DT_FAIL(DT_ERR_INVALID, "--save %s: path too long", a->dir);
    snprintf(fin, sizeof fin, "%s/%s", a->dir, name);
    snprintf(file, sizeof file, "%s/%s", tmp, shard);
    dt_status st = a->local_status;
    if (st == DT_OK &&
        (!a->shard || a->shard->rank != rank || a->shard->world != world || a->shard->iteration != a->iteration))
        st = DT_FAIL(DT_ERR_INVALID,
                     "checkpoint: shard of rank %d of %d at iteration %lld, expected rank %d of %d at "
                     "%lld",
                     a->shard ? a->shard->rank : -1, a->shard ? a->shard->world : -1,
                     a->shard ? (long long)a->shard->iteration : -1LL, rank, world, (long long)a->iteration);
    /* 1. rank 0 makes the tmp directory; every file below is reached through
     * DIR's and TMP's descriptors, never through a link (dt_dir.h) */
    int dfd = -1, tfd = -1;
    if (rank == 0 && st == DT_OK) st = dt__ck_prepare(a, tname, &dfd);
    int bad = -1;
    dt_status ast = dt__ck_agree(c, st != DT_OK, &bad);
    if (ast != DT_OK || bad >= 0) {
        if (dfd >= 0) close(dfd);
        if (ast != DT_OK) return ast;
        return st != DT_OK ? st : DT_FAIL(DT_ERR_IO, "--save %s: rank %d could not prepare %s", a->dir, bad, tmp);
    }
    /* 2. every rank writes and fsyncs its shard (a new file: O_EXCL) */
    dt__ck_report me = {0, 0, 0};
    uint32_t crc = 0;
    if (st == DT_OK && dfd < 0) st = dt_dir_open(a->dir, &dfd);
    if (st == DT_OK) st = dt_dir_open_sub(dfd, a->dir, tname, &tfd);
    if (st == DT_OK) {
        int fd = -1;
        st = dt_dir_create(tfd, tmp, shard, &fd);
        if (st == DT_OK) st = dt__ck_shard_write_fd(fd, file, a->shard, &me.bytes, &crc);
    }
    me.ok = st == DT_OK;
    me.crc = crc;
    /* 3. the reports to rank 0 */
    dt_checkpoint_shard_entry *e = NULL;
    dt_status cst = DT_OK;
    if (rank == 0) {
        e = calloc((size_t)world, sizeof *e);
        dt__ck_report *rep = calloc((size_t)world, sizeof *rep);
        dt_comm_request **q = calloc((size_t)world, sizeof *q);
        if (!e || !rep || !q) cst = DT_FAIL(DT_ERR_NOMEM, "checkpoint: out of memory");
        if (rep) rep[0] = me;
        for (int r = 1; cst == DT_OK && r < world; r++)
            cst = c->ops->irecv(c, &rep[r], sizeof rep[r], r, DT__CK_TAG, &q[r]);
        for (int r = 1; q && r < world; r++)
            if (q[r]) {
                dt_status w = c->ops->wait(c, q[r]);
                if (w != DT_OK && cst == DT_OK) cst = w;
            }
        int failed = -1;
        for (int r = 0; cst == DT_OK && r < world; r++) {
            if (!rep[r].ok && failed < 0) failed = r;
            e[r].rank = r;
            snprintf(e[r].file, sizeof e[r].file, "shard-%05d.bin", r);
            e[r].bytes = rep[r].bytes;
            e[r].crc32c = (uint32_t)rep[r].crc;
        }
        free(rep);
        free(q);
        /* 4. all shards durable: the manifest, the rename, latest */
        if (cst == DT_OK && st == DT_OK && failed < 0) cst = dt__ck_commit(a, world, e, dfd, tfd, tmp, tname, name);
        else if (cst == DT_OK && st == DT_OK)
            cst = DT_FAIL(DT_ERR_IO, "--save %s: rank %d could not write its shard", a->dir, failed);
    } else {
        dt_comm_request *q = NULL;
        cst = c->ops->isend(c, &me, sizeof me, 0, DT__CK_TAG, &q);
        if (cst == DT_OK) cst = c->ops->wait(c, q);
    }
    free(e);
    if (tfd >= 0) close(tfd);
    if (dfd >= 0) close(dfd);
    if (st == DT_OK) st = cst;
    /* 5. everyone returns rank 0's verdict (and its own failures) */
    DT_CHECK(dt__ck_agree(c, st != DT_OK, &bad));
    if (bad >= 0)
        return st != DT_OK ? st : DT_FAIL(DT_ERR_IO, "--save %s: rank %d failed while saving %s", a->dir, bad, name);
    if (path_out && cap) snprintf(path_out, cap, "%s", fin);
    return DT_OK;
}
