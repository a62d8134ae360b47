/* trace_hooks.c: what a training run writes to its trace (the format:
 * docs/trace-format.md): the file's opening and metadata, the per-layer
 * spans (the model's layer hook), the collectives' steps, counters, the
 * step's optimizer span and loss-scale events, and grad_amax.
 *
 * Invariants: times are nanoseconds since the trainer was created; the
 * "iter" arg is the 0-based iteration; the first write error is kept in
 * tr->trace.status (a hook cannot return one) and every later step fails
 * with it (dt__trace_check); writes are serialised with the comm thread's
 * lock while that thread runs. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_time.h"
#include "trainer_internal.h"

dt_status dt__trace_write(dt_trainer *tr, const dt_trace_event *e)
{
    if (tr->dp.comm_thread_on) pthread_mutex_lock(&tr->dp.mu);
    dt_status st = dt_trace_write(tr->trace.writer, e);
    if (st != DT_OK && tr->trace.status == DT_OK) tr->trace.status = st;
    if (tr->dp.comm_thread_on) pthread_mutex_unlock(&tr->dp.mu);
    return st;
}

void dt__layer_hook(void *ctx, int layer, char pass, int64_t t0_ns, int64_t t1_ns)
{
    dt_trainer *tr = ctx;
    if (tr->dp.overlap_active && (pass == 'B' || pass == 'W')) /* a layer's gradients are complete */
        for (int b = 0; b < tr->dp.n_buckets; b++)
            if (tr->dp.bucket_low[b] == layer) dt__tr_dp_launch_bucket(tr, b);
    if (!tr->trace.writer || tr->trace.status != DT_OK) return;
    dt_trace_event e;
    const char *name = pass == 'B'   ? "backward"
                       : pass == 'b' ? "backward_b"
                       : pass == 'W' ? "backward_w"
                       : pass == 'R' ? "recompute"
                                     : "forward";
    dt_trace_event_init(&e, DT_TRACE_COMPLETE, name, "compute", tr->rank, DT_LANE_COMPUTE, t0_ns - tr->t_start_ns,
                        t1_ns - t0_ns);
    e.iter = tr->iter;
    e.micro_batch = tr->trace.micro;
    e.layer = layer;
    if (dt__trace_write(tr, &e) == DT_OK && tr->kind->activation_bytes)
        dt__trace_live_act(tr, t1_ns, tr->kind->activation_bytes(tr));
}

/* A sample at the end of each layer's forward and backward (and each
 * pipeline instruction), so the activations held rise through a forward and
 * fall through a backward; equal consecutive values are written once. */
void dt__trace_live_act(dt_trainer *tr, int64_t ts_ns, size_t bytes)
{
    if (!tr->trace.writer || tr->trace.status != DT_OK || bytes == tr->trace.live_act) return;
    if (dt__trace_counter(tr, "live_activation_bytes", ts_ns - tr->t_start_ns, (double)bytes) == DT_OK)
        tr->trace.live_act = bytes;
}

static dt_status dt__trace_metadata(dt_trainer *tr)
{
    static const struct {
        const char *what;
        int tid;
        const char *label;
    } meta[] = {
        {"process_name", 0, NULL},
        {"thread_name", DT_LANE_COMPUTE, "compute"},
        {"thread_name", DT_LANE_COMM, "comm"},
        {"thread_name", DT_LANE_OPTIM, "optimizer"},
    };
    for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++) {
        if (meta[i].tid == DT_LANE_COMM && !(tr->cfg.comm && tr->cfg.comm->size > 1)) continue;
        dt_trace_event e;
        dt_trace_event_init(&e, DT_TRACE_METADATA, meta[i].what, "meta", tr->rank, meta[i].tid, 0, 0);
        if (meta[i].label) snprintf(e.label, sizeof e.label, "%s", meta[i].label);
        else if (tr->pipe.rt)
            snprintf(e.label, sizeof e.label, "dtrain rank %d (t %d, d %d, p %d)", tr->rank,
                     dt__pipe_tp_index(tr->pipe.rt), dt__pipe_dp_index(tr->pipe.rt), dt__pipe_stage(tr->pipe.rt));
        else if (tr->ps.rt)
            snprintf(e.label, sizeof e.label, "dtrain rank %d (%s %d)", tr->rank,
                     dt__ps_is_server(tr->ps.rt) ? "parameter server" : "worker", dt__ps_index(tr->ps.rt));
        else snprintf(e.label, sizeof e.label, "dtrain rank %d", tr->rank);
        DT_CHECK(dt__trace_write(tr, &e));
    }
    return DT_OK;
}

dt_status dt__trace_counter(dt_trainer *tr, const char *name, int64_t ts, double value)
{
    /* an inf/NaN value (an fp16 step skipped for its loss, a NaN val_loss)
     * has no JSON number: the series has a gap there */
    if (!isfinite(value)) return DT_OK;
    dt_trace_event e;
    dt_trace_event_init(&e, DT_TRACE_COUNTER, name, "counter", tr->rank, DT_LANE_COMPUTE, ts, 0);
    e.value = value; /* no other args: Perfetto plots each counter arg as a series */
    return dt__trace_write(tr, &e);
}

/* The trace's layer slot of a GPT parameter: -1 the embedding (wte, wpe),
 * l for "h.<l>.*", L for the final LayerNorm and the LM head. */
static int dt__param_layer(const char *name, int L)
{
    if (!strncmp(name, "h.", 2)) return (int)strtol(name + 2, NULL, 10);
    return !strcmp(name, "wte") || !strcmp(name, "wpe") ? -1 : L;
}

/* grad_amax (docs/trace-format.md): one instant per layer slot, from the
 * per-tensor amax of dt__update_apply (-1: the tensor had an inf/NaN). */
dt_status dt__trace_grad_amax(dt_trainer *tr, const dt_paramset *layout, const float *amax, float S, int64_t ts)
{
    const int L = tr->cfg.model.num_layers;
    for (int layer = -1; layer <= L; layer++) {
        float m = -1.0f;
        int bad = 0;
        for (int i = 0; i < layout->count; i++) {
            if (dt__param_layer(layout->info[i].name, L) != layer) continue;
            if (amax[i] < 0) bad++;
            else m = fmaxf(m, amax[i]);
        }
        dt_trace_event e;
        dt_trace_event_init(&e, DT_TRACE_INSTANT, "grad_amax", "optim", tr->rank, DT_LANE_OPTIM, ts, 0);
        e.iter = tr->iter;
        e.layer = layer;
        if (m >= 0) DT_CHECK(dt_trace_event_add_arg(&e, "amax", m)); /* absent: every tensor of the slot overflowed */
        DT_CHECK(dt_trace_event_add_arg(&e, "nonfinite", bad));
        DT_CHECK(dt_trace_event_add_arg(&e, "loss_scale", S));
        DT_CHECK(dt__trace_write(tr, &e));
    }
    return DT_OK;
}

/* Return the trace hook's first write error, if any, as this call's status. */
dt_status dt__trace_check(dt_trainer *tr)
{
    if (tr->trace.status == DT_OK) return DT_OK;
    return DT_FAIL(tr->trace.status, "--trace %s: writing the trace failed", tr->cfg.trace_path);
}

/* Trace hook for the steps of the gradient allreduce (comm lane). */
void dt__comm_hook(void *ctx, const char *phase, int step, int peer, size_t bytes, int64_t t0_ns, int64_t t1_ns)
{
    dt_trainer *tr = ctx;
    if (!tr->trace.writer || tr->trace.status != DT_OK) return;
    dt_trace_event e;
    dt_trace_event_init(&e, DT_TRACE_COMPLETE, phase, "comm", tr->rank, DT_LANE_COMM, t0_ns - tr->t_start_ns,
                        t1_ns - t0_ns);
    e.iter = tr->iter;
    e.bytes = (int64_t)bytes;
    if (dt_trace_event_add_arg(&e, "step", step) != DT_OK || dt_trace_event_add_arg(&e, "peer", peer) != DT_OK) return;
    dt__trace_write(tr, &e);
}

void dt__trace_rank_path(const char *path, int rank, char *out, size_t cap)
{
    const size_t len = strlen(path);
    const int dot = len > 5 && strcmp(path + len - 5, ".json") == 0 ? (int)len - 5 : (int)len;
    snprintf(out, cap, "%.*s.rank%d%s", dot, path, rank, path + dot);
}

/* Open the trace (one file per rank: run.json -> run.rank1.json, whose
 * header says where its clock lies on rank 0's; trace_gather.c merges them
 * into run.json at the end) with the configuration in its header, write
 * the metadata, hook the layers. */
dt_status dt__trace_open(dt_trainer *tr)
{
    json_t *co = dt__run_config_object(tr);
    char *cj = co ? json_dumps(co, JSON_COMPACT | JSON_PRESERVE_ORDER | DT__JSON_PRECISION) : NULL;
    json_decref(co);
    if (!cj) return DT_FAIL(DT_ERR_NOMEM, "trainer: out of memory serialising the configuration");
    char *clock = NULL;
    if (dt__trace_multi(tr)) {
        const size_t cap = strlen(tr->trace_path) + 32;
        char *per = malloc(cap);
        clock = dt__trace_clock_other(tr);
        if (!per || !clock) {
            free(per);
            free(clock);
            free(cj);
            return DT_FAIL(DT_ERR_NOMEM, "trainer: out of memory");
        }
        dt__trace_rank_path(tr->trace_path, tr->rank, per, cap);
        tr->trace.merged_path = tr->trace_path; /* owned: freed with the trainer */
        tr->trace_path = per;
        tr->cfg.trace_path = per;
    }
    dt_status st = dt_trace_writer_open_ext(tr->cfg.trace_path, "dtrain", cj, clock, &tr->trace.writer);
    free(cj);
    free(clock);
    DT_CHECK(st);
    tr->trace.live_act = SIZE_MAX;
    DT_CHECK(dt__trace_metadata(tr));
    dt__tr_set_hook(tr, 1);
    return DT_OK;
}

/* The end of a (non-pipeline) step: the loss scale and an overflow, the
 * optimizer span, the loss, LR and activation counters, LARS/LAMB trust
 * ratios. t1: the step's end. */
dt_status dt__trace_step_end(dt_trainer *tr, const dt__step_ctx *c, size_t act_bytes, int64_t t1)
{
    const dt_paramset *layout = tr->kind->layout(tr);
    const dt_loss_scaler_event ev = c->ur.ev;
    const int skip = c->ur.skipped, first_bad = c->ur.first_bad;
    const int64_t t_opt = c->t_opt;
    if (tr->trace.writer && tr->cfg.use_loss_scaling) {
        const int64_t ts = t1 - tr->t_start_ns;
        DT_CHECK(dt__trace_counter(tr, "loss_scale", ts, ev.scale_after));
        if (skip) {
            dt_trace_event e;
            char name[16 + DT_NAME_MAX];
            snprintf(name, sizeof name, "overflow %s", first_bad >= 0 ? layout->info[first_bad].name : "");
            dt_trace_event_init(&e, DT_TRACE_INSTANT, name, "optim", tr->rank, DT_LANE_OPTIM, t_opt - tr->t_start_ns,
                                0);
            e.iter = tr->iter;
            DT_CHECK(dt_trace_event_add_arg(&e, "loss_scale", c->S));
            DT_CHECK(dt_trace_event_add_arg(&e, "tensor", first_bad));
            DT_CHECK(dt_trace_event_add_arg(&e, "at_min", ev.at_min));
            DT_CHECK(dt__trace_write(tr, &e));
        }
    }
    if (tr->trace.writer && !skip) {
        if (!tr->ps.rt) { /* a worker of a parameter server has its push/pull on the comm lane instead */
            dt_trace_event e;
            dt_trace_event_init(&e, DT_TRACE_COMPLETE, "optimizer", "optim", tr->rank, DT_LANE_OPTIM,
                                t_opt - tr->t_start_ns, t1 - t_opt);
            e.iter = tr->iter;
            DT_CHECK(dt_trace_event_add_arg(&e, "grad_norm", c->ur.norm));
            DT_CHECK(dt_trace_event_add_arg(&e, "clip_factor", c->ur.clip));
            DT_CHECK(dt__trace_write(tr, &e));
        }
        const int64_t ts = t1 - tr->t_start_ns;
        DT_CHECK(dt__trace_counter(tr, "loss", ts, (float)c->loss_sum));
        DT_CHECK(dt__trace_counter(tr, "lr", ts, c->ur.lr));
        DT_CHECK(dt__trace_counter(tr, "activation_bytes", ts, (double)act_bytes));
        DT_CHECK(dt__trace_counter(tr, "peak_activation_bytes", ts, (double)dt__tr_peak_act(tr)));
        if (tr->opt_ready && dt_optim_has_trust_ratios(&tr->opt)) {
            /* LARS/LAMB: one counter track per tensor the trust ratio applies to */
            const float *ratio = dt_optim_trust_ratios(&tr->opt);
            for (int i = 0; i < layout->count; i++) {
                if (!layout->info[i].decay) continue;
                char name[8 + DT_NAME_MAX]; /* the event keeps its first DT_TRACE_NAME_MAX - 1 bytes */
                snprintf(name, sizeof name, "trust/%s", layout->info[i].name);
                DT_CHECK(dt__trace_counter(tr, name, ts, ratio[i]));
            }
        }
    }
    return DT_OK;
}
