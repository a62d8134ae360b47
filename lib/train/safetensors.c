/* safetensors.c: the safetensors format (include/dt_safetensors.h): a
 * strict reader (the header validated whole at open, tensors read on
 * demand with pread) and a writer of F32 tensors.
 *
 * Invariants: an open file's tensors are sorted by name, and their byte
 * ranges, sorted by offset, tile the buffer after the header exactly (no
 * overlap, no hole, nothing past the end). The host is little-endian, as
 * the format (x86-64 and aarch64 Linux, dtrain's targets). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dt_file.h"
#include "dt_half.h"
#include "dt_internal.h"
#include "dt_safetensors.h"

struct dt_safetensors {
    char *path;
    int fd;
    uint64_t data_start; /* 8 + header length */
    uint64_t data_size;
    int n;
    dt_st_tensor *t; /* (n) by name */
    char **names;    /* (n) owned */
    json_t *meta;    /* "__metadata__" or NULL */
};

static size_t dt__st_elsize(dt_dtype d) { return d == DT_F32 ? 4 : 2; }

static int dt__st_by_name(const void *a, const void *b)
{
    return strcmp(((const dt_st_tensor *)a)->name, ((const dt_st_tensor *)b)->name);
}

static int dt__st_by_begin(const void *a, const void *b)
{
    const dt_st_tensor *x = *(const dt_st_tensor *const *)a, *y = *(const dt_st_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

/* one header entry into t (name already set) */
static dt_status dt__st_entry(const char *path, const char *name, json_t *v, dt_st_tensor *t)
{
    if (!json_is_object(v))
        return DT_FAIL(DT_ERR_FORMAT, "%s: tensor \"%s\": expected an object with dtype, shape, data_offsets", path,
                       name);
    const char *key;
    json_t *x;
    json_object_foreach(v, key, x)
    {
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
            return DT_FAIL(DT_ERR_FORMAT, "%s: tensor \"%s\": unknown key \"%s\" (expected dtype, shape, data_offsets)",
                           path, name, key);
    }
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"), *off = json_object_get(v, "data_offsets");
    if (!json_is_string(dt)) return DT_FAIL(DT_ERR_FORMAT, "%s: tensor \"%s\": \"dtype\": expected a string", path, name);
    const char *ds = json_string_value(dt);
    if (!strcmp(ds, "F32")) t->dtype = DT_F32;
    else if (!strcmp(ds, "F16")) t->dtype = DT_F16;
    else if (!strcmp(ds, "BF16")) t->dtype = DT_BF16;
    else return DT_FAIL(DT_ERR_FORMAT, "%s: tensor \"%s\": dtype %s: expected F32, F16 or BF16", path, name, ds);
    if (!json_is_array(sh) || json_array_size(sh) > DT_SAFETENSORS_MAX_DIMS)
        return DT_FAIL(DT_ERR_FORMAT, "%s: tensor \"%s\": \"shape\": expected a list of at most %d integers", path,
                       name, DT_SAFETENSORS_MAX_DIMS);
    t->ndim = (int)json_array_size(sh);
    t->numel = 1;
    for (int i = 0; i < t->ndim; i++) {
        json_t *d = json_array_get(sh, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > ((json_int_t)1 << 40))
            return DT_FAIL(DT_ERR_FORMAT, "%s: tensor \"%s\": \"shape\"[%d]: expected an integer in 0..2^40", path,
                           name, i);
        t->shape[i] = (int64_t)json_integer_value(d);
        if (t->shape[i] && t->numel > ((uint64_t)1 << 48) / (uint64_t)t->shape[i])
            return DT_FAIL(DT_ERR_FORMAT, "%s: tensor \"%s\": \"shape\": more than 2^48 elements", path, name);
        t->numel *= (uint64_t)t->shape[i];
    }
    if (!json_is_array(off) || json_array_size(off) != 2 || !json_is_integer(json_array_get(off, 0)) ||
        !json_is_integer(json_array_get(off, 1)) || json_integer_value(json_array_get(off, 0)) < 0 ||
        json_integer_value(json_array_get(off, 1)) < json_integer_value(json_array_get(off, 0)))
        return DT_FAIL(DT_ERR_FORMAT, "%s: tensor \"%s\": \"data_offsets\": expected [begin, end], 0 <= begin <= end",
                       path, name);
    t->begin = (uint64_t)json_integer_value(json_array_get(off, 0));
    t->end = (uint64_t)json_integer_value(json_array_get(off, 1));
    if (t->end - t->begin != t->numel * dt__st_elsize(t->dtype))
        return DT_FAIL(DT_ERR_FORMAT, "%s: tensor \"%s\": data_offsets span %llu bytes, its shape and dtype %llu",
                       path, name, (unsigned long long)(t->end - t->begin),
                       (unsigned long long)(t->numel * dt__st_elsize(t->dtype)));
    return DT_OK;
}

/* the entries' ranges tile [0, size) */
static dt_status dt__st_tiles(const dt_safetensors *st)
{
    if (!st->n) {
        if (st->data_size)
            return DT_FAIL(DT_ERR_FORMAT, "%s: %llu bytes after the header and no tensor", st->path,
                           (unsigned long long)st->data_size);
        return DT_OK;
    }
    const dt_st_tensor **o = malloc((size_t)st->n * sizeof *o);
    if (!o) return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for %d tensors", st->path, st->n);
    for (int i = 0; i < st->n; i++) o[i] = &st->t[i];
    qsort(o, (size_t)st->n, sizeof *o, dt__st_by_begin);
    dt_status s = DT_OK;
    uint64_t at = 0;
    for (int i = 0; i < st->n && s == DT_OK; i++) {
        if (o[i]->begin > at)
            s = DT_FAIL(DT_ERR_FORMAT, "%s: tensor \"%s\" starts at byte %llu, leaving a hole after %llu", st->path,
                        o[i]->name, (unsigned long long)o[i]->begin, (unsigned long long)at);
        else if (o[i]->begin < at)
            s = DT_FAIL(DT_ERR_FORMAT, "%s: tensor \"%s\" (bytes %llu..%llu) overlaps the one before it", st->path,
                        o[i]->name, (unsigned long long)o[i]->begin, (unsigned long long)o[i]->end);
        else if (o[i]->end > st->data_size)
            s = DT_FAIL(DT_ERR_FORMAT, "%s: tensor \"%s\" ends at byte %llu, past the %llu bytes after the header "
                                       "(a truncated file?)",
                        st->path, o[i]->name, (unsigned long long)o[i]->end, (unsigned long long)st->data_size);
        at = o[i]->end;
    }
    if (s == DT_OK && at != st->data_size)
        s = DT_FAIL(DT_ERR_FORMAT, "%s: the tensors end at byte %llu of the %llu after the header", st->path,
                    (unsigned long long)at, (unsigned long long)st->data_size);
    free(o);
    return s;
}

static dt_status dt__st_pread(int fd, void *buf, size_t n, uint64_t at)
{
    uint8_t *p = buf;
    while (n) {
        const ssize_t r = pread(fd, p, n, (off_t)at);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return r < 0 ? DT_ERR_IO : DT_ERR_FORMAT;
        p += r, n -= (size_t)r, at += (uint64_t)r;
    }
    return DT_OK;
}

dt_status dt_safetensors_open(const char *path, dt_safetensors **out)
{
    *out = NULL;
    dt_safetensors *st = calloc(1, sizeof *st);
    if (!st) return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", path);
    st->fd = -1;
    st->path = strdup(path);
    dt_status s = st->path ? DT_OK : DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", path);
    size_t size = 0;
    if (s == DT_OK) s = dt_file_open_input(path, "safetensors file", &st->fd, &size);
    uint8_t len8[8];
    uint64_t hlen = 0;
    char *h = NULL;
    json_t *root = NULL;
    if (s == DT_OK && size < 8)
        s = DT_FAIL(DT_ERR_FORMAT, "%s: %zu bytes, too short for a safetensors header length (8)", path, size);
    if (s == DT_OK && dt__st_pread(st->fd, len8, 8, 0) != DT_OK)
        s = DT_FAIL(DT_ERR_IO, "%s: cannot read the header length", path);
    if (s == DT_OK) {
        for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
        if (hlen > DT_SAFETENSORS_MAX_HEADER)
            s = DT_FAIL(DT_ERR_FORMAT, "%s: a header of %llu bytes (at most %llu)", path, (unsigned long long)hlen,
                        (unsigned long long)DT_SAFETENSORS_MAX_HEADER);
        else if (hlen < 2 || hlen > size - 8)
            s = DT_FAIL(DT_ERR_FORMAT, "%s: a header of %llu bytes in a file of %zu (truncated or not safetensors)",
                        path, (unsigned long long)hlen, size);
    }
    if (s == DT_OK && !(h = malloc(hlen)))
        s = DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for a %llu-byte header", path, (unsigned long long)hlen);
    if (s == DT_OK && dt__st_pread(st->fd, h, hlen, 8) != DT_OK)
        s = DT_FAIL(DT_ERR_IO, "%s: cannot read the %llu-byte header", path, (unsigned long long)hlen);
    if (s == DT_OK) {
        json_error_t je;
        root = json_loadb(h, hlen, JSON_REJECT_DUPLICATES, &je);
        if (!root) s = DT_FAIL(DT_ERR_FORMAT, "%s: header: %s (byte %d)", path, je.text, je.position);
        else if (!json_is_object(root)) s = DT_FAIL(DT_ERR_FORMAT, "%s: header: expected a JSON object", path);
    }
    if (s == DT_OK) {
        st->data_start = 8 + hlen;
        st->data_size = size - st->data_start;
        const size_t n = json_object_size(root);
        st->t = calloc(n ? n : 1, sizeof *st->t);
        st->names = calloc(n ? n : 1, sizeof *st->names);
        if (!st->t || !st->names) s = DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for %zu tensors", path, n);
        const char *key;
        json_t *v;
        json_object_foreach(root, key, v)
        {
            if (s != DT_OK) break;
            if (!strcmp(key, "__metadata__")) {
                const char *mk;
                json_t *mv;
                if (!json_is_object(v)) s = DT_FAIL(DT_ERR_FORMAT, "%s: \"__metadata__\": expected an object", path);
                else
                    json_object_foreach(v, mk, mv) if (s == DT_OK && !json_is_string(mv)) s = DT_FAIL(
                        DT_ERR_FORMAT, "%s: \"__metadata__\".\"%s\": expected a string", path, mk);
                if (s == DT_OK) st->meta = json_incref(v);
                continue;
            }
            if (!key[0]) {
                s = DT_FAIL(DT_ERR_FORMAT, "%s: a tensor with an empty name", path);
                break;
            }
            dt_st_tensor *t = &st->t[st->n];
            if (!(st->names[st->n] = strdup(key))) s = DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", path);
            else {
                t->name = st->names[st->n++];
                s = dt__st_entry(path, key, v, t);
            }
        }
    }
    if (s == DT_OK) {
        qsort(st->t, (size_t)st->n, sizeof *st->t, dt__st_by_name);
        s = dt__st_tiles(st);
    }
    json_decref(root);
    free(h);
    if (s != DT_OK) {
        dt_safetensors_close(st);
        return s;
    }
    *out = st;
    return DT_OK;
}

void dt_safetensors_close(dt_safetensors *st)
{
    if (!st) return;
    if (st->fd >= 0) close(st->fd);
    for (int i = 0; st->names && i < st->n; i++) free(st->names[i]);
    free(st->names);
    free(st->t);
    json_decref(st->meta);
    free(st->path);
    free(st);
}

int dt_safetensors_count(const dt_safetensors *st) { return st->n; }
const dt_st_tensor *dt_safetensors_tensor(const dt_safetensors *st, int i)
{
    return i >= 0 && i < st->n ? &st->t[i] : NULL;
}

const dt_st_tensor *dt_safetensors_find(const dt_safetensors *st, const char *name)
{
    const dt_st_tensor key = {.name = name};
    return bsearch(&key, st->t, (size_t)st->n, sizeof *st->t, dt__st_by_name);
}

const char *dt_safetensors_metadata(const dt_safetensors *st, const char *key)
{
    return st->meta ? json_string_value(json_object_get(st->meta, key)) : NULL;
}

dt_status dt_safetensors_read_f32(const dt_safetensors *st, const dt_st_tensor *t, float *out)
{
    const uint64_t at = st->data_start + t->begin;
    if (t->dtype == DT_F32) {
        if (dt__st_pread(st->fd, out, (size_t)(t->end - t->begin), at) != DT_OK)
            return DT_FAIL(DT_ERR_IO, "%s: tensor \"%s\": short read (did the file change?)", st->path, t->name);
        return DT_OK;
    }
    enum { CHUNK = 1 << 16 };
    uint16_t *buf = malloc(CHUNK * sizeof *buf);
    if (!buf) return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", st->path);
    dt_status s = DT_OK;
    for (uint64_t i = 0; i < t->numel && s == DT_OK; i += CHUNK) {
        const size_t m = (size_t)(t->numel - i < CHUNK ? t->numel - i : CHUNK);
        if (dt__st_pread(st->fd, buf, m * 2, at + i * 2) != DT_OK)
            s = DT_FAIL(DT_ERR_IO, "%s: tensor \"%s\": short read (did the file change?)", st->path, t->name);
        else if (t->dtype == DT_F16) dt_f16_to_float_array(out + i, buf, m);
        else dt_bf16_to_float_array(out + i, buf, m);
    }
    free(buf);
    return s;
}

static int dt__st_out_by_name(const void *a, const void *b)
{
    return strcmp((*(const dt_st_out *const *)a)->name, (*(const dt_st_out *const *)b)->name);
}

dt_status dt_safetensors_write(const char *path, const dt_st_out *t, int n)
{
    const dt_st_out **o = malloc((size_t)(n > 0 ? n : 1) * sizeof *o);
    json_t *root = json_object(), *meta = json_pack("{s:s}", "format", "pt");
    dt_status s = o && root && meta ? DT_OK : DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; s == DT_OK && i < n; i++) o[i] = &t[i];
    if (s == DT_OK) qsort(o, (size_t)n, sizeof *o, dt__st_out_by_name);
    uint64_t at = 0;
    for (int i = 0; s == DT_OK && i < n; i++) {
        const dt_st_out *x = o[i];
        if (!x->name || !x->name[0] || !strcmp(x->name, "__metadata__") || (i && !strcmp(x->name, o[i - 1]->name)) ||
            x->ndim < 0 || x->ndim > DT_SAFETENSORS_MAX_DIMS) {
            s = DT_FAIL(DT_ERR_INVALID, "%s: tensor \"%s\": an empty, reserved or repeated name, or %d dimensions",
                        path, x->name ? x->name : "(null)", x->ndim);
            break;
        }
        uint64_t numel = 1;
        json_t *shape = json_array();
        for (int d = 0; shape && d < x->ndim; d++) {
            numel *= (uint64_t)x->shape[d];
            json_array_append_new(shape, json_integer(x->shape[d]));
        }
        json_t *e = json_pack("{s:s, s:o, s:[I,I]}", "dtype", "F32", "shape", shape, "data_offsets", (json_int_t)at,
                              (json_int_t)(at + 4 * numel));
        if (!e || json_object_set_new(root, x->name, e)) s = DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", path);
        at += 4 * numel;
    }
    char *h = NULL;
    if (s == DT_OK && json_object_set_new(root, "__metadata__", meta) == 0) meta = NULL;
    if (s == DT_OK && !(h = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS)))
        s = DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for the header", path);
    dt_file_out *f = NULL;
    if (s == DT_OK) s = dt_file_out_open(path, "safetensors file", &f);
    if (s == DT_OK) {
        size_t hl = strlen(h);
        const size_t pad = (8 - hl % 8) % 8; /* the buffer starts 8-byte aligned */
        uint8_t len8[8];
        for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)(hl + pad) >> (8 * i));
        s = dt_file_out_write(f, len8, 8);
        if (s == DT_OK) s = dt_file_out_write(f, h, hl);
        if (s == DT_OK && pad) s = dt_file_out_write(f, "        ", pad);
        for (int i = 0; s == DT_OK && i < n; i++) {
            uint64_t numel = 1;
            for (int d = 0; d < o[i]->ndim; d++) numel *= (uint64_t)o[i]->shape[d];
            s = dt_file_out_write(f, o[i]->data, (size_t)(4 * numel));
        }
        if (s == DT_OK) s = dt_file_out_commit(f);
        else dt_file_out_abort(f);
    }
    free(h);
    json_decref(meta);
    json_decref(root);
    free(o);
    return s;
}
