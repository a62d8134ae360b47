/* zero_shard.c: ZeRO stages 2 and 3 for any layer runner (see
 * zero_shard.h and docs/zero.md).
 *
 * What s owns: the units over the owner's ranges, the sharded optimizer
 * (a dt__zero over the units: the shard's FP32 masters and moments), the
 * shard's summed gradients, one unit's gradient buffer (gbuf), the layer
 * buffers (wb; two with prefetch) and the collectives' queue
 * (zero_queue.c).
 *
 * Why the sums equal data parallelism's: a unit's ring reduce-scatter adds
 * each element in the order of the ring allreduce of the same range (its
 * first half), and data parallelism allreduces the same ranges (its
 * buckets; stage 3's units are the buckets of --bucket-size-mb 0). With
 * one micro-batch per rank the summed gradients are therefore
 * bit-identical; with several, this file sums over the ranks first and
 * then over the micro-batches, data parallelism the other way round.
 *
 * Invariants: wb[b] holds range wl[b]'s weights once its gather wseq[b]
 * is waited for, or wl[b] is DT__ZS_NONE (after an update or a restore);
 * gbuf holds the gradients of the unit being backpropagated only. */
#include "zero_shard.h"

#include <stdlib.h>
#include <string.h>

#include "dt_internal.h"
#include "gpt_layers.h"
#include "zero_queue.h"

#define DT__ZS_NONE (-2)

struct dt__zs {
    dt_backend *be;
    dt_comm *dp;
    int stage;
    dt_dtype precision;
    const dt_paramset *layout;
    dt__zero *zero;

    int n;                 /* ranges */
    size_t *off, *len;     /* (n) */
    int *unit;             /* (n) the unit holding range i */
    const int *group;      /* while the units are cut: the caller's range groups, or NULL */
    int n_units;           /* ascending in the buffer */
    size_t *unit_off, *unit_len;
    int *unit_low, *unit_high; /* (n_units) lowest and highest range */

    dt_buffer grad;  /* (shard) FP32: the summed gradients */
    dt_buffer gbuf;  /* (largest unit) FP32: one unit's gradients of one micro-batch */
    dt_buffer wb[2]; /* stage 3 (largest range) FP32: a layer's weights; two with prefetch */
    int wl[2];       /* the range each holds, DT__ZS_NONE: none */
    int64_t wseq[2]; /* its gather's place in the queue, -1: none pending */
    int cur;         /* the buffer last handed out */
    int prefetch;
    dt__zq *q;
    int64_t accumulated; /* micro-batches added into grad since zero_grad */

    size_t keep_off, keep_n; /* dt__zs_keep's range (keep_n 0: none) */
    float *keep_acc;
    dt__zs_traffic traffic;
};

/* Units from the top: stage 3 every range, stage 2 closed at bucket_bytes
 * (lib/model/gpt.c's dt__gpt_buckets over the same ranges) and where the
 * ranges' group changes. */
static dt_status dt__zs_units_make(dt__zs *s, size_t bucket_bytes, const int *group)
{
    s->group = group;
    const int n = s->n;
    s->unit = calloc((size_t)n, sizeof *s->unit);
    s->unit_off = calloc((size_t)n, sizeof *s->unit_off);
    s->unit_len = calloc((size_t)n, sizeof *s->unit_len);
    s->unit_low = calloc((size_t)n, sizeof *s->unit_low);
    s->unit_high = calloc((size_t)n, sizeof *s->unit_high);
    if (!s->unit || !s->unit_off || !s->unit_len || !s->unit_low || !s->unit_high)
        return DT_FAIL(DT_ERR_NOMEM, "--zero-stage: out of memory for the units");
    const size_t bytes = s->stage == 3 ? 0 : bucket_bytes;
    int nb = 0, high = n - 1;
    size_t acc = 0;
    for (int i = n - 1; i >= 0; i--) { /* found from the top, numbered from the bottom below */
        acc += s->len[i];
        if (acc * sizeof(float) >= bytes || i == 0 || (s->group && s->group[i - 1] != s->group[i])) {
            s->unit_low[nb] = i, s->unit_high[nb] = high, s->unit_off[nb] = s->off[i], s->unit_len[nb] = acc;
            nb++, high = i - 1, acc = 0;
        }
    }
    s->n_units = nb;
    s->group = NULL; /* the caller's: not kept */
    for (int a = 0, b = nb - 1; a < b; a++, b--) { /* ascending in the buffer */
        const int lo = s->unit_low[a], hi = s->unit_high[a];
        const size_t off = s->unit_off[a], len = s->unit_len[a];
        s->unit_low[a] = s->unit_low[b], s->unit_high[a] = s->unit_high[b];
        s->unit_off[a] = s->unit_off[b], s->unit_len[a] = s->unit_len[b];
        s->unit_low[b] = lo, s->unit_high[b] = hi, s->unit_off[b] = off, s->unit_len[b] = len;
    }
    for (int u = 0; u < nb; u++)
        for (int i = s->unit_low[u]; i <= s->unit_high[u]; i++) s->unit[i] = u;
    return DT_OK;
}

dt_status dt__zs_create(const dt__zs_config *c, dt_comm *dp, dt_backend *be, dt__zs **out)
{
    *out = NULL;
    if (c->stage != 2 && c->stage != 3) return DT_FAIL(DT_ERR_INVALID, "--zero-stage %d: expected 2 or 3", c->stage);
    if (c->n_ranges < 1) return DT_FAIL(DT_ERR_INVALID, "--zero-stage %d: no layers to shard", c->stage);
    size_t end = 0;
    for (int i = 0; i < c->n_ranges; i++) {
        if (c->range_off[i] != end)
            return DT_FAIL(DT_ERR_INVALID, "--zero-stage: layer range %d starts at %zu, expected %zu", i,
                           c->range_off[i], end);
        end += c->range_len[i];
    }
    if (end != c->layout->numel)
        return DT_FAIL(DT_ERR_INVALID, "--zero-stage: the layers cover %zu of %zu elements", end, c->layout->numel);
    dt__zs *s = calloc(1, sizeof *s);
    if (!s) return DT_FAIL(DT_ERR_NOMEM, "--zero-stage: out of memory");
    s->be = be;
    s->dp = dp;
    s->stage = c->stage;
    s->precision = c->precision;
    s->layout = c->layout;
    s->prefetch = c->prefetch && c->stage == 3;
    s->wl[0] = s->wl[1] = DT__ZS_NONE;
    s->wseq[0] = s->wseq[1] = -1;
    s->n = c->n_ranges;
    dt_status st = DT_OK;
    s->off = malloc((size_t)s->n * sizeof *s->off);
    s->len = malloc((size_t)s->n * sizeof *s->len);
    if (!s->off || !s->len) {
        st = DT_FAIL(DT_ERR_NOMEM, "--zero-stage: out of memory");
        goto fail;
    }
    memcpy(s->off, c->range_off, (size_t)s->n * sizeof *s->off);
    memcpy(s->len, c->range_len, (size_t)s->n * sizeof *s->len);
    DT_CHECK_GOTO(dt__zs_units_make(s, c->bucket_bytes, c->range_group), st, fail);
    DT_CHECK_GOTO(dt__zero_create_units(dp, be, c->layout, c->optim, s->n_units, s->unit_off, s->unit_len, &s->zero),
                  st, fail);
    size_t lo = 0, shard = 0, big_layer = 0;
    dt__zero_shard(s->zero, &lo, &shard);
    for (int i = 0; i < s->n; i++) big_layer = DT_MAX(big_layer, s->len[i]);
    DT_CHECK_GOTO(dt_buffer_alloc(&s->grad, be, (shard ? shard : 1) * sizeof(float)), st, fail);
    DT_CHECK_GOTO(dt_buffer_alloc(&s->gbuf, be, dt__zs_largest_unit(s) * sizeof(float)), st, fail);
    if (s->stage == 3)
        for (int b = 0; b < 1 + s->prefetch; b++)
            DT_CHECK_GOTO(dt_buffer_alloc(&s->wb[b], be, big_layer * sizeof(float)), st, fail);
    DT_CHECK_GOTO(dt__zq_create(dp, NULL, s->prefetch, &s->q), st, fail);
    *out = s;
    return DT_OK;
fail:
    dt__zs_free(s);
    return st;
}

void dt__zs_free(dt__zs *s)
{
    if (!s) return;
    dt__zq_free(s->q); /* first: its thread may still use the buffers */
    dt__zero_free(s->zero);
    dt_buffer_free(&s->grad);
    dt_buffer_free(&s->gbuf);
    dt_buffer_free(&s->wb[0]);
    dt_buffer_free(&s->wb[1]);
    free(s->off);
    free(s->len);
    free(s->unit);
    free(s->unit_off);
    free(s->unit_len);
    free(s->unit_low);
    free(s->unit_high);
    free(s);
}

void dt__zs_set_coll(dt__zs *s, const dt_collective_opts *coll) { dt__zq_set_coll(s->q, coll); }
void dt__zs_locked(dt__zs *s, void (*fn)(void *ctx), void *ctx) { dt__zq_locked(s->q, fn, ctx); }

dt_status dt__zs_take_shard(dt__zs *s, const float *whole)
{
    return dt__zero_take_shard(s->zero, whole, s->precision);
}

void dt__zs_traffic_reset(dt__zs *s) { s->traffic = (dt__zs_traffic){0}; }
float *dt__zs_scratch(dt__zs *s) { return s->gbuf.data; }

/* ---- weights -------------------------------------------------------------- */

/* An all-gather of n floats at buf, issued (waited for with wait). */
static dt_status dt__zs_all_gather(dt__zs *s, float *buf, size_t n, int wait, int64_t *seq)
{
    int64_t k;
    DT_CHECK(dt__zq_issue(s->q, DT__ZQ_ALL_GATHER, buf, n, &k));
    if (wait) DT_CHECK(dt__zq_wait(s->q, k));
    if (seq) *seq = wait ? -1 : k;
    return DT_OK;
}

/* Start gathering range i into layer buffer b: this rank's segment,
 * rounded from the FP32 shard, then an all-gather of the range (it has run
 * on return unless prefetching). */
static dt_status dt__zs_gather(dt__zs *s, int b, int i)
{
    if (s->wseq[b] >= 0) DT_CHECK(dt__zq_wait(s->q, s->wseq[b])); /* the buffer's last gather, done */
    s->wseq[b] = -1;
    s->wl[b] = DT__ZS_NONE;
    DT_CHECK(dt__zero_unit_weights(s->zero, s->unit[i], s->wb[b].data));
    DT_CHECK(dt__zs_all_gather(s, s->wb[b].data, s->len[i], 0, &s->wseq[b]));
    s->wl[b] = i;
    s->traffic.gathers++;
    s->traffic.gather_floats += (int64_t)s->len[i];
    return DT_OK;
}

dt_status dt__zs_gather_range(dt__zs *s, int i, float *buf)
{
    DT_CHECK(dt__zero_unit_weights(s->zero, s->unit[i], buf));
    DT_CHECK(dt__zs_all_gather(s, buf, s->len[i], 1, NULL));
    s->traffic.gathers++;
    s->traffic.gather_floats += (int64_t)s->len[i];
    return DT_OK;
}

dt_status dt__zs_prefetch(dt__zs *s, int next)
{
    if (!s->prefetch || next < 0 || s->wl[0] == next || s->wl[1] == next) return DT_OK;
    return dt__zs_gather(s, s->cur ^ 1, next);
}

dt_status dt__zs_weights(dt__zs *s, int i, int next, float **base)
{
    if (s->stage != 3) return DT_FAIL(DT_ERR_INVALID, "--zero-stage %d keeps the whole weights: no gather", s->stage);
    int b = s->wl[0] == i ? 0 : s->wl[1] == i ? 1 : -1;
    if (b < 0) {
        b = s->prefetch ? s->cur ^ 1 : 0;
        DT_CHECK(dt__zs_gather(s, b, i));
    }
    if (s->wseq[b] >= 0) DT_CHECK(dt__zq_wait(s->q, s->wseq[b]));
    s->wseq[b] = -1;
    s->cur = b;
    *base = s->wb[b].data;
    return dt__zs_prefetch(s, next);
}

dt_status dt__zs_gather_unit(dt__zs *s, int u, float *buf, int refresh)
{
    DT_CHECK(dt__zero_unit_weights(s->zero, u, buf));
    DT_CHECK(dt__zs_all_gather(s, buf, s->unit_len[u], 1, NULL));
    if (refresh) {
        s->traffic.refreshes++;
        s->traffic.refresh_floats += (int64_t)s->unit_len[u];
    }
    return DT_OK;
}

void dt__zs_forget(dt__zs *s) { s->wl[0] = s->wl[1] = DT__ZS_NONE; }

dt_status dt__zs_gather_masters(dt__zs *s, float *whole)
{
    const float *m = dt__zero_master(s->zero);
    if (!m) return DT_FAIL(DT_ERR_BACKEND, "--zero-stage: the shard holds no masters");
    for (int u = 0; u < s->n_units; u++) {
        size_t seg_lo, seg_len, shard_off;
        dt__zero_unit(s->zero, u, &seg_lo, &seg_len, &shard_off);
        float *unit = whole + s->unit_off[u];
        if (seg_len)
            DT_CHECK(s->be->copy(s->be, unit + seg_lo, m + shard_off, seg_len * sizeof(float), DT_COPY_D2D));
        DT_CHECK(dt__zs_all_gather(s, unit, s->unit_len[u], 1, NULL));
    }
    return DT_OK;
}

/* ---- gradients ------------------------------------------------------------ */

dt_status dt__zs_grads_open(dt__zs *s, int i, float **base, size_t *origin)
{
    const int u = s->unit[i];
    if (i == s->unit_high[u]) DT_CHECK(s->be->memset_zero(s->be, s->gbuf.data, s->unit_len[u] * sizeof(float)));
    *base = s->gbuf.data;
    *origin = s->unit_off[u];
    return DT_OK;
}

void dt__zs_keep(dt__zs *s, size_t off, size_t n, float *acc)
{
    s->keep_off = off;
    s->keep_n = n;
    s->keep_acc = acc;
}

dt_status dt__zs_grads_done(dt__zs *s, int i, const dt__rounder *rnd)
{
    const int u = s->unit[i];
    if (i != s->unit_low[u]) return DT_OK;
    const size_t n = s->unit_len[u];
    float *g = s->gbuf.data;
    if (rnd && s->precision != DT_F32) DT_CHECK(dt__round(s->be, rnd, g, n));
    if (s->keep_n && s->keep_off >= s->unit_off[u] && s->keep_off + s->keep_n <= s->unit_off[u] + n) {
        float *k = g + (s->keep_off - s->unit_off[u]);
        DT_CHECK(s->be->axpy(s->be, s->keep_acc, 1.0f, k, s->keep_n));
        DT_CHECK(s->be->memset_zero(s->be, k, s->keep_n * sizeof(float)));
    }
    int64_t seq;
    DT_CHECK(dt__zq_issue(s->q, DT__ZQ_REDUCE_SCATTER, g, n, &seq)); /* after any gather issued before it */
    DT_CHECK(dt__zq_wait(s->q, seq));
    s->traffic.scatters++;
    s->traffic.scatter_floats += (int64_t)n;
    size_t seg_lo, seg_len, shard_off;
    dt__zero_unit(s->zero, u, &seg_lo, &seg_len, &shard_off);
    if (!seg_len) return DT_OK;
    float *dst = (float *)s->grad.data + shard_off;
    if (s->accumulated == 0) return s->be->copy(s->be, dst, g + seg_lo, seg_len * sizeof(float), DT_COPY_D2D);
    return s->be->axpy(s->be, dst, 1.0f, g + seg_lo, seg_len);
}

dt_status dt__zs_each_segment(dt__zs *s, dt_status (*fn)(void *ctx, const float *g, size_t a, size_t b), void *ctx)
{
    for (int u = 0; u < s->n_units; u++) {
        size_t seg_lo, seg_len, shard_off;
        dt__zero_unit(s->zero, u, &seg_lo, &seg_len, &shard_off);
        const size_t a = s->unit_off[u] + seg_lo;
        if (seg_len) DT_CHECK(fn(ctx, (const float *)s->grad.data + shard_off, a, a + seg_len));
    }
    return DT_OK;
}

dt_status dt__zs_add_whole(dt__zs *s, size_t off, size_t n, const float *src)
{
    for (int u = 0; u < s->n_units; u++) {
        size_t seg_lo, seg_len, shard_off;
        dt__zero_unit(s->zero, u, &seg_lo, &seg_len, &shard_off);
        const size_t a = DT_MAX(off, s->unit_off[u] + seg_lo), b = DT_MIN(off + n, s->unit_off[u] + seg_lo + seg_len);
        if (a >= b) continue;
        float *dst = (float *)s->grad.data + shard_off + (a - s->unit_off[u] - seg_lo);
        DT_CHECK(s->be->axpy(s->be, dst, 1.0f, src + (a - off), b - a));
    }
    return DT_OK;
}

void dt__zs_accumulated(dt__zs *s) { s->accumulated++; }

dt_status dt__zs_zero_grad(dt__zs *s)
{
    s->accumulated = 0; /* the next micro-batch copies its sums into the shard */
    size_t lo, len;
    dt__zero_shard(s->zero, &lo, &len);
    return s->be->memset_zero(s->be, s->grad.data, (len ? len : 1) * sizeof(float));
}

dt_status dt__zs_update(dt__zs *s, const dt__zero_step_args *a, dt__update_result *r)
{
    DT_CHECK(dt__zero_update(s->zero, NULL, s->grad.data, a, r));
    dt__zs_forget(s); /* the masters may have changed */
    return DT_OK;
}

/* ---- accessors ------------------------------------------------------------ */

int dt__zs_units(const dt__zs *s) { return s->n_units; }
void dt__zs_unit_range(const dt__zs *s, int u, size_t *off, size_t *len)
{
    *off = s->unit_off[u];
    *len = s->unit_len[u];
}
int dt__zs_unit_of(const dt__zs *s, int i) { return s->unit[i]; }
size_t dt__zs_largest_unit(const dt__zs *s)
{
    size_t big = 0;
    for (int u = 0; u < s->n_units; u++) big = DT_MAX(big, s->unit_len[u]);
    return big;
}
int dt__zs_stage(const dt__zs *s) { return s->stage; }
dt__zero *dt__zs_zero(dt__zs *s) { return s->zero; }
float *dt__zs_grad(dt__zs *s) { return s->grad.data; }
void dt__zs_traffic_of(const dt__zs *s, dt__zs_traffic *t) { *t = s->traffic; }
size_t dt__zs_grad_bytes(const dt__zs *s) { return s->grad.bytes; }
size_t dt__zs_working_bytes(const dt__zs *s) { return s->gbuf.bytes + s->wb[0].bytes + s->wb[1].bytes; }
