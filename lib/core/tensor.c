/* tensor.c: buffers, views and flat parameter layouts (see dt_tensor.h). */
#include "dt_tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_backend.h"

size_t dt_dtype_size(dt_dtype t)
{
    switch (t) {
    case DT_F32: return 4;
    case DT_F16: return 2;
    case DT_BF16: return 2;
    case DT_I32: return 4;
    }
    return 0;
}

const char *dt_dtype_name(dt_dtype t)
{
    switch (t) {
    case DT_F32: return "f32";
    case DT_F16: return "f16";
    case DT_BF16: return "bf16";
    case DT_I32: return "i32";
    }
    return "?";
}

dt_status dt_buffer_alloc(dt_buffer *buf, struct dt_backend *be, size_t bytes)
{
    buf->data = NULL;
    buf->bytes = 0;
    buf->backend = be;
    if (bytes == 0) return DT_OK;
    DT_CHECK(be->alloc(be, bytes, &buf->data));
    buf->bytes = bytes;
    return DT_OK;
}

void dt_buffer_free(dt_buffer *buf)
{
    if (buf->data && buf->backend) buf->backend->free(buf->backend, buf->data);
    buf->data = NULL;
    buf->bytes = 0;
}

dt_status dt_tensor_view(dt_tensor *t, const dt_buffer *buf, size_t offset, dt_dtype dtype, int ndim,
                         const int64_t *shape)
{
    if (ndim < 0 || ndim > DT_MAX_DIMS)
        return DT_FAIL(DT_ERR_INVALID, "tensor view: %d dimensions (expected 0..%d)", ndim, DT_MAX_DIMS);
    memset(t, 0, sizeof *t);
    t->buf = buf;
    t->offset = offset;
    t->dtype = dtype;
    t->ndim = ndim;
    int64_t stride = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        if (shape[i] < 0) return DT_FAIL(DT_ERR_INVALID, "tensor view: negative extent %lld", (long long)shape[i]);
        t->shape[i] = shape[i];
        t->strides[i] = stride;
        stride *= shape[i];
    }
    size_t end = (offset + (size_t)stride) * dt_dtype_size(dtype);
    if (buf && end > buf->bytes)
        return DT_FAIL(DT_ERR_INVALID, "tensor view: %zu bytes past a buffer of %zu bytes", end, buf->bytes);
    return DT_OK;
}

int64_t dt_tensor_numel(const dt_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

int dt_tensor_is_contiguous(const dt_tensor *t)
{
    int64_t stride = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != stride) return 0;
        stride *= t->shape[i];
    }
    return 1;
}

void *dt_tensor_data(const dt_tensor *t) { return (char *)t->buf->data + t->offset * dt_dtype_size(t->dtype); }

void dt_paramset_init(dt_paramset *ps) { memset(ps, 0, sizeof *ps); }

void dt_paramset_free(dt_paramset *ps)
{
    free(ps->info);
    memset(ps, 0, sizeof *ps);
}

dt_status dt_paramset_add(dt_paramset *ps, const char *name, int ndim, const int64_t *shape, int decay)
{
    if (ndim < 1 || ndim > DT_MAX_DIMS)
        return DT_FAIL(DT_ERR_INVALID, "parameter '%s': %d dimensions (expected 1..%d)", name, ndim, DT_MAX_DIMS);
    if (strlen(name) >= DT_NAME_MAX)
        return DT_FAIL(DT_ERR_INVALID, "parameter name '%s' longer than %d characters", name, DT_NAME_MAX - 1);
    if (dt_paramset_find(ps, name) >= 0) return DT_FAIL(DT_ERR_INVALID, "parameter '%s' added twice", name);
    if (ps->count == ps->capacity) {
        int cap = ps->capacity ? 2 * ps->capacity : 32;
        dt_param_info *n = realloc(ps->info, (size_t)cap * sizeof *n);
        if (!n) return DT_FAIL(DT_ERR_NOMEM, "parameter table: out of memory");
        ps->info = n;
        ps->capacity = cap;
    }
    dt_param_info *p = &ps->info[ps->count];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] <= 0)
            return DT_FAIL(DT_ERR_INVALID, "parameter '%s': extent %lld in dimension %d (expected > 0)", name,
                           (long long)shape[i], i);
        p->shape[i] = shape[i];
        numel *= (size_t)shape[i];
    }
    /* 16-element (64-byte) alignment keeps every tensor cache-line and SIMD aligned. */
    size_t off = (ps->numel + 15) & ~(size_t)15;
    p->offset = off;
    p->numel = numel;
    p->decay = decay;
    ps->numel = off + numel;
    ps->count++;
    return DT_OK;
}

int dt_paramset_find(const dt_paramset *ps, const char *name)
{
    for (int i = 0; i < ps->count; i++)
        if (strcmp(ps->info[i].name, name) == 0) return i;
    return -1;
}
