/* fp8_train.c: FP8 training's state across steps (--fp8-format): the
 * lib/model/fp8.h state given to the model's runners, its reduction over
 * the ranks after each step, delayed scaling's amax history and scales,
 * the per-tensor counts in the trace and the summary, and its checkpoint
 * records.
 *
 * After each step every rank holds the same state: the step's amax of
 * each tensor is the max over every rank (a tensor-parallel shard's
 * weights, the data replicas' and context ranks' rows, a pipeline
 * stage's own blocks: the whole model's tensors are on every rank, zero
 * where a rank ran none), its counts the sum (a tensor replicated over a
 * tensor-parallel group counted by its rank 0 only, fp8.h). Delayed
 * scaling then pushes each amax into the tensor's history and sets the
 * next step's scale (dt_fp8.h), as Transformer Engine does after each
 * step with amax reduction over its groups; so a run's scales are the
 * same for any layout of the same model and data.
 *
 * Trace (docs/trace-format.md): rank 0 writes one "fp8 <tensor>" instant
 * per tensor and step, and at the end "fp8_hist <tensor>" events with the
 * run's values by binade below their amax (the simulator's input).
 *
 * Checkpoint: fp8 i64[4] (tensors, history length, ring position, filled
 * entries), fp8.scale f32[n], fp8.history f32[n * H], on every rank (the
 * same values). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_time.h"
#include "fp8.h"
#include "trainer_internal.h"

dt_status dt__fp8_train_create(dt_trainer *tr)
{
    const dt_train_config *c = &tr->cfg;
    if (c->fp8 == DT_FP8_OFF) return DT_OK;
    const dt__fp8_settings s = {.mode = c->fp8,
                                .recipe = c->fp8_recipe,
                                .algo = c->fp8_amax_algo,
                                .margin = c->fp8_margin,
                                .history_len = c->fp8_amax_history_len};
    DT_CHECK(dt__fp8_create(tr->be, &s, c->model.num_layers, &tr->fp8));
    const size_t n = (size_t)tr->fp8->n;
    tr->fp8_run.sat = calloc(n, sizeof(double));
    tr->fp8_run.flush = calloc(n, sizeof(double));
    tr->fp8_run.values = calloc(n, sizeof(double));
    tr->fp8_run.amax = calloc(n, sizeof(float));
    if (!tr->fp8_run.sat || !tr->fp8_run.flush || !tr->fp8_run.values || !tr->fp8_run.amax)
        return DT_FAIL(DT_ERR_NOMEM, "fp8: out of memory for the run's counts");
    if (tr->gpt.model) dt__gpt_set_fp8(tr->gpt.model, tr->fp8);
    if (tr->pipe.rt) dt__pipe_set_fp8(tr->pipe.rt, tr->fp8);
    if (tr->zgpt) dt__zgpt_set_fp8(tr->zgpt, tr->fp8);
    return DT_OK;
}

void dt__fp8_train_free(dt_trainer *tr)
{
    dt__fp8_free(tr->fp8);
    tr->fp8 = NULL;
    free(tr->fp8_run.sat);
    free(tr->fp8_run.flush);
    free(tr->fp8_run.values);
    free(tr->fp8_run.amax);
}

/* amax(n) = its max over the ranks of comm */
static dt_status dt__fp8_max_over(dt_comm *comm, float *amax, size_t n)
{
    const int R = comm->size;
    float *all = calloc((size_t)R * n, sizeof *all);
    if (!all) return DT_FAIL(DT_ERR_NOMEM, "fp8: out of memory for the amax exchange (%d ranks)", R);
    memcpy(all + (size_t)comm->rank * n, amax, n * sizeof *amax);
    dt_status st = dt_comm_all_gather(comm, all, (size_t)R * n, NULL);
    for (int r = 0; st == DT_OK && r < R; r++)
        for (size_t i = 0; i < n; i++) amax[i] = fmaxf(amax[i], all[(size_t)r * n + i]);
    free(all);
    return st;
}

/* v(n) summed over the ranks (counts: integers, exact in the sum's ~48 bits) */
static dt_status dt__fp8_sum_over(dt_comm *comm, double *v, size_t n)
{
    DT_CHECK(dt_comm_sum_doubles(comm, v, n));
    for (size_t i = 0; i < n; i++) v[i] = round(v[i]);
    return DT_OK;
}

static dt_status dt__fp8_trace_step(dt_trainer *tr, int64_t iter)
{
    const dt__fp8 *f = tr->fp8;
    const int64_t ts = dt_time_ns() - tr->t_start_ns;
    for (int i = 0; i < f->n; i++) {
        if (f->values[i] == 0 && f->amax[i] == 0) continue; /* not run this step */
        char name[DT_TRACE_NAME_MAX] = "fp8 ";
        dt__fp8_tensor_name(i, name + 4, sizeof name - 4);
        dt_trace_event e;
        dt_trace_event_init(&e, DT_TRACE_INSTANT, name, "optim", tr->rank, DT_LANE_OPTIM, ts, 0);
        e.iter = iter;
        e.layer = i / DT__FP8_PER_BLOCK;
        DT_CHECK(dt_trace_event_add_arg(&e, "tensor", i % DT__FP8_PER_BLOCK));
        DT_CHECK(dt_trace_event_add_arg(&e, "amax", f->amax[i]));
        if (f->set.recipe == DT_FP8_DELAYED && f->hfill > 0) /* the first step's scales are its own amaxes' */
            DT_CHECK(dt_trace_event_add_arg(&e, "scale", f->scale[i]));
        DT_CHECK(dt_trace_event_add_arg(&e, "saturated", f->sat[i]));
        DT_CHECK(dt_trace_event_add_arg(&e, "flushed", f->flush[i]));
        DT_CHECK(dt_trace_event_add_arg(&e, "values", f->values[i]));
        DT_CHECK(dt__trace_write(tr, &e));
    }
    return DT_OK;
}

dt_status dt__fp8_train_step_end(dt_trainer *tr)
{
    dt__fp8 *f = tr->fp8;
    const size_t n = (size_t)f->n;
    dt_comm *comm = tr->cfg.comm;
    if (comm && comm->size > 1) {
        DT_CHECK(dt__fp8_max_over(comm, f->amax, n));
        double *v = malloc(3 * n * sizeof *v);
        if (!v) return DT_FAIL(DT_ERR_NOMEM, "fp8: out of memory for the counts' exchange");
        memcpy(v, f->sat, n * sizeof *v);
        memcpy(v + n, f->flush, n * sizeof *v);
        memcpy(v + 2 * n, f->values, n * sizeof *v);
        const dt_status st = dt__fp8_sum_over(comm, v, 3 * n);
        if (st == DT_OK) {
            memcpy(f->sat, v, n * sizeof *v);
            memcpy(f->flush, v + n, n * sizeof *v);
            memcpy(f->values, v + 2 * n, n * sizeof *v);
        }
        free(v);
        DT_CHECK(st);
    }
    /* the step's figures, in the trace with the scale that was in force */
    int any_sat = 0;
    for (size_t i = 0; i < n; i++) {
        tr->fp8_run.sat[i] += f->sat[i];
        tr->fp8_run.flush[i] += f->flush[i];
        tr->fp8_run.values[i] += f->values[i];
        tr->fp8_run.amax[i] = fmaxf(tr->fp8_run.amax[i], f->amax[i]);
        any_sat |= f->sat[i] > 0;
    }
    tr->fp8_run.steps++;
    tr->fp8_run.steps_saturated += any_sat;
    if (tr->trace.writer && tr->rank == 0) DT_CHECK(dt__fp8_trace_step(tr, tr->iter - 1));
    /* delayed scaling: the history, then the next step's scales */
    if (f->set.recipe == DT_FP8_DELAYED) {
        const int H = f->set.history_len;
        for (size_t i = 0; i < n; i++) {
            float *h = f->history + i * (size_t)H;
            h[f->hpos] = f->amax[i];
            const int filled = f->hfill < H ? f->hfill + 1 : H;
            const float a = dt_fp8_history_amax(h, filled, f->amax[i], f->set.algo);
            /* a scale per role's format; the history keeps the last one that had a positive amax */
            const dt_fp8_format fmt = dt_fp8_role_format(f->set.mode, (int)(i % 3));
            const float s = dt_fp8_scale_from_amax(a, fmt, f->set.margin, 0);
            if (s > 0) f->scale[i] = s;
        }
        f->hpos = (f->hpos + 1) % H;
        if (f->hfill < H) f->hfill++;
    }
    dt__fp8_step_clear(f);
    return DT_OK;
}

void dt__fp8_train_freeze(dt_trainer *tr, int on)
{
    if (tr->fp8) tr->fp8->frozen = on;
}

dt_status dt__fp8_train_trace_hist(dt_trainer *tr)
{
    dt__fp8 *f = tr->fp8;
    const size_t m = (size_t)f->n * DT__FP8_REL;
    dt_comm *comm = tr->cfg.comm;
    double *rel = malloc(m * sizeof *rel);
    if (!rel) return DT_FAIL(DT_ERR_NOMEM, "fp8: out of memory for the histograms");
    memcpy(rel, f->rel, m * sizeof *rel);
    dt_status st = comm && comm->size > 1 ? dt__fp8_sum_over(comm, rel, m) : DT_OK;
    const int64_t ts = dt_time_ns() - tr->t_start_ns;
    for (int i = 0; st == DT_OK && tr->rank == 0 && i < f->n; i++) {
        const double *h = rel + (size_t)i * DT__FP8_REL;
        int lo = 0, hi = DT__FP8_REL - 1;
        while (lo <= hi && h[lo] == 0) lo++;
        while (hi >= lo && h[hi] == 0) hi--;
        char name[DT_TRACE_NAME_MAX] = "fp8_hist ";
        dt__fp8_tensor_name(i, name + 9, sizeof name - 9);
        for (int j = lo; st == DT_OK && j <= hi; j += 6) {
            dt_trace_event e;
            dt_trace_event_init(&e, DT_TRACE_INSTANT, name, "optim", tr->rank, DT_LANE_OPTIM, ts, 0);
            e.iter = tr->iter;
            e.layer = i / DT__FP8_PER_BLOCK;
            st = dt_trace_event_add_arg(&e, "tensor", i % DT__FP8_PER_BLOCK);
            if (st == DT_OK) st = dt_trace_event_add_arg(&e, "from", j);
            for (int k = 0; st == DT_OK && k < 6 && j + k <= hi; k++) {
                char key[8];
                snprintf(key, sizeof key, "b%d", k);
                st = dt_trace_event_add_arg(&e, key, h[j + k]);
            }
            if (st == DT_OK) st = dt__trace_write(tr, &e);
        }
    }
    free(rel);
    return st;
}

json_t *dt__fp8_train_summary(const dt_trainer *tr)
{
    const dt__fp8 *f = tr->fp8;
    const dt_train_config *c = &tr->cfg;
    double sat = 0, fl = 0, vals = 0;
    json_t *tensors = json_object();
    for (int i = 0; tensors && i < f->n; i++) {
        sat += tr->fp8_run.sat[i];
        fl += tr->fp8_run.flush[i];
        vals += tr->fp8_run.values[i];
        char name[64];
        dt__fp8_tensor_name(i, name, sizeof name);
        json_t *t = json_pack("{s:f, s:f, s:f, s:f}", "saturated", tr->fp8_run.sat[i], "flushed", tr->fp8_run.flush[i],
                              "values", tr->fp8_run.values[i], "amax", (double)tr->fp8_run.amax[i]);
        if (!t || json_object_set_new(tensors, name, t)) {
            json_decref(tensors);
            tensors = NULL;
        }
    }
    const char *engine = dt_backend_cpu_bf16_engine();
    char gemm[160];
    if (!strcmp(tr->be->name, "cpu"))
        snprintf(gemm, sizeof gemm, "%s on the FP8 values (each a bf16), FP32 accumulation",
                 engine ? engine : "FP32 GEMM (no bf16 matrix kernel on this CPU)");
    else snprintf(gemm, sizeof gemm, "%s backend's fp8_gemm", tr->be->name);
    json_t *o = json_pack("{s:s, s:s, s:i, s:i, s:s, s:s, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:o*}", "format",
                          dt_fp8_mode_name(c->fp8), "recipe", dt_fp8_recipe_name(c->fp8_recipe), "margin",
                          c->fp8_margin, "amax_history_len", c->fp8_amax_history_len, "amax_compute_algo",
                          dt_fp8_amax_algo_name(c->fp8_amax_algo), "gemm", gemm, "steps",
                          (json_int_t)tr->fp8_run.steps, "steps_saturated", (json_int_t)tr->fp8_run.steps_saturated,
                          "saturated", sat, "flushed", fl, "values", vals, "saturated_fraction",
                          vals > 0 ? sat / vals : 0.0, "flushed_fraction", vals > 0 ? fl / vals : 0.0, "tensors",
                          tensors);
    return o;
}

dt_status dt__fp8_ck_put(const dt_trainer *tr, dt_checkpoint_shard *s)
{
    const dt__fp8 *f = tr->fp8;
    const int64_t h[4] = {f->n, f->set.history_len, f->hpos, f->hfill};
    DT_CHECK(dt_checkpoint_shard_add(s, "fp8", DT_CKPT_I64, h, 4, NULL));
    DT_CHECK(dt_checkpoint_shard_add(s, "fp8.scale", DT_CKPT_F32, f->scale, (size_t)f->n, NULL));
    return dt_checkpoint_shard_add(s, "fp8.history", DT_CKPT_F32, f->history,
                                   (size_t)f->n * (size_t)f->set.history_len, NULL);
}

dt_status dt__fp8_ck_get(dt_trainer *tr, const dt_checkpoint_shard *s)
{
    dt__fp8 *f = tr->fp8;
    const void *p;
    DT_CHECK(dt_checkpoint_shard_find(s, "fp8", DT_CKPT_I64, 4, &p));
    int64_t h[4];
    memcpy(h, p, sizeof h);
    if (h[0] != f->n || h[1] != f->set.history_len || h[2] < 0 || h[2] >= h[1] || h[3] < 0 || h[3] > h[1])
        return DT_FAIL(DT_ERR_FORMAT, "%s: fp8 state of %lld tensors with a history of %lld, ring %lld/%lld; this run "
                                      "has %d tensors and --fp8-amax-history-len %d",
                       s->path, (long long)h[0], (long long)h[1], (long long)h[2], (long long)h[3], f->n,
                       f->set.history_len);
    DT_CHECK(dt_checkpoint_shard_find(s, "fp8.scale", DT_CKPT_F32, (size_t)f->n, &p));
    memcpy(f->scale, p, (size_t)f->n * sizeof *f->scale);
    DT_CHECK(dt_checkpoint_shard_find(s, "fp8.history", DT_CKPT_F32, (size_t)f->n * (size_t)f->set.history_len, &p));
    memcpy(f->history, p, (size_t)f->n * (size_t)f->set.history_len * sizeof *f->history);
    f->hpos = (int)h[2];
    f->hfill = (int)h[3];
    return DT_OK;
}
