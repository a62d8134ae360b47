/* step_pipe.c: the pipeline- and tensor-parallel strategy. The stage
 * runtime (lib/parallel/pipeline.c) owns the stage's weights, gradients and
 * optimizer and executes the schedule (lib/parallel/schedule.c) whole; this file
 * creates it from the configuration, feeds it the data, traces each
 * executed instruction and each tensor-parallel allreduce, reports a
 * non-finite step (FP32 gpipe/1f1b: no rank updated, and nonfinite.c found
 * the first bad layer inside it), and gathers the figures of every stage
 * after the last step (the summary's pipeline object).
 *
 * Invariants: one dt__tr_pipe_step is one iteration of the schedule; rank
 * = tensor + t * (data + d * stage); after the last step every rank holds
 * every stage's figures (a collective) and rank 0 the whole model's
 * weights fingerprint. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_time.h"
#include "gpt_layers.h"
#include "cp.h"
#include "tp.h"
#include "trainer_internal.h"

/* The pipeline's data: micro-batch `index` of the training or validation rows. */
static dt_status dt__pipe_batch(void *ctx, int val, uint64_t index, int32_t *tokens, int32_t *targets, int32_t *example,
                                int *n_examples)
{
    dt_trainer *tr = ctx;
    return dt_data_batch(tr->gpt.data, val ? DT_SPLIT_VAL : DT_SPLIT_TRAIN, index, tr->B, tr->T, tokens, targets,
                         example, n_examples);
}

/* Trace: every executed instruction of the schedule, on the lane of its kind. */
static void dt__pipe_event(void *ctx, int stage, const dt_sched_instr *in, int64_t t0_ns, int64_t t1_ns)
{
    dt_trainer *tr = ctx;
    if (!tr->trace.writer || tr->trace.status != DT_OK) return;
    const int compute = in->op == DT_SCHED_FORWARD || in->op == DT_SCHED_BACKWARD || in->op == DT_SCHED_BACKWARD_B ||
                        in->op == DT_SCHED_BACKWARD_W;
    const int optim = in->op == DT_SCHED_OPTIM_STEP || in->op == DT_SCHED_STASH || in->op == DT_SCHED_DROP;
    dt_trace_event e;
    dt_trace_event_init(&e, DT_TRACE_COMPLETE, dt_sched_op_name(in->op), "pipeline", tr->rank,
                        compute ? DT_LANE_COMPUTE
                        : optim ? DT_LANE_OPTIM
                                : DT_LANE_COMM,
                        t0_ns - tr->t_start_ns, t1_ns - t0_ns);
    e.iter = in->step;
    if (in->mb >= 0) e.micro_batch = in->mb;
    if (dt_trace_event_add_arg(&e, "stage", stage) != DT_OK ||
        dt_trace_event_add_arg(&e, "version", in->version) != DT_OK ||
        dt_trace_event_add_arg(&e, "phase", (double)in->phase) != DT_OK)
        return;
    /* several model chunks per stage (interleaved-1f1b, zb-v): which one */
    if (dt__pipe_chunks(tr->pipe.rt) > 1 && in->chunk >= 0 && dt_trace_event_add_arg(&e, "chunk", in->chunk) != DT_OK)
        return;
    /* a message: its id, the same in the trace of the rank at its other end (the merged trace's flows) */
    const int64_t id = dt__pipe_message_id(tr->pipe.rt, in);
    if (id >= 0 && dt_trace_event_add_arg(&e, "flow", (double)id) != DT_OK) return;
    /* and its bytes on the link (this rank's part under scatter/gather) */
    const size_t bytes = dt__pipe_message_bytes(tr->pipe.rt, in);
    if (bytes) e.bytes = (int64_t)bytes;
    if (dt__trace_write(tr, &e) == DT_OK && compute)
        dt__trace_live_act(tr, t1_ns, dt__pipe_activation_bytes(tr->pipe.rt));
}

/* Trace: each recomputation inside a BACKWARD, nested in its span (cat
 * "stage", so the instruction's time is not counted twice). */
static void dt__recompute_event(void *ctx, int stage, const dt_sched_instr *in, int layer, int64_t t0_ns, int64_t t1_ns)
{
    dt_trainer *tr = ctx;
    if (!tr->trace.writer || tr->trace.status != DT_OK) return;
    dt_trace_event e;
    dt_trace_event_init(&e, DT_TRACE_COMPLETE, "recompute", "stage", tr->rank, DT_LANE_COMPUTE, t0_ns - tr->t_start_ns,
                        t1_ns - t0_ns);
    e.iter = in->step;
    if (in->mb >= 0) e.micro_batch = in->mb;
    e.layer = layer;
    if (dt_trace_event_add_arg(&e, "stage", stage) != DT_OK) return;
    dt__trace_write(tr, &e);
}

/* Trace: each allreduce of the tensor-parallel operators f and g, and
 * each collective of the vocabulary split (lib/parallel/tp.h's kinds). */
static void dt__tp_event(void *ctx, int kind, char pass, int64_t t0_ns, int64_t t1_ns)
{
    dt_trainer *tr = ctx;
    if (!tr->trace.writer || tr->trace.status != DT_OK) return;
    static const char *const names[DT__TP_NKINDS] = {"tp allreduce f", "tp allreduce g", "tp vocab allreduce",
                                                     "tp vocab gather", "tp reduce-scatter", "tp all-gather",
                                                     "tp layernorm grad allreduce"};
    if (kind < 0 || kind >= DT__TP_NKINDS) return;
    dt_trace_event e;
    dt_trace_event_init(&e, DT_TRACE_COMPLETE, names[kind], "tp", tr->rank, DT_LANE_COMM, t0_ns - tr->t_start_ns,
                        t1_ns - t0_ns);
    e.iter = tr->iter;
    if (dt_trace_event_add_arg(&e, "forward", pass == 'F') != DT_OK) return;
    dt__trace_write(tr, &e);
}

/* Trace: each exchange of context parallelism (lib/parallel/cp.h's kinds):
 * a ring step with the rank whose block arrives (its "step" and "from"),
 * the all-gather, reduce-scatter or all-to-all, each with its bytes. */
static void dt__cp_event(void *ctx, int kind, char pass, int step, int from, size_t bytes, int64_t t0_ns,
                         int64_t t1_ns)
{
    dt_trainer *tr = ctx;
    if (!tr->trace.writer || tr->trace.status != DT_OK || kind < 0 || kind >= DT__CP_NKINDS) return;
    static const char *const names[DT__CP_NKINDS] = {"cp ring step", "cp kv all-gather", "cp dkv reduce-scatter",
                                                     "cp all-to-all"};
    dt_trace_event e;
    dt_trace_event_init(&e, DT_TRACE_COMPLETE, names[kind], "cp", tr->rank, DT_LANE_COMM, t0_ns - tr->t_start_ns,
                        t1_ns - t0_ns);
    e.iter = tr->iter;
    e.bytes = (int64_t)bytes;
    if (dt_trace_event_add_arg(&e, "forward", pass == 'F') != DT_OK) return;
    if (step >= 0 && (dt_trace_event_add_arg(&e, "step", step) != DT_OK ||
                      dt_trace_event_add_arg(&e, "from", from) != DT_OK))
        return;
    dt__trace_write(tr, &e);
}

/* Trace: each sum of the tied wte's gradient over the first and last stage. */
static void dt__emb_event(void *ctx, int64_t t0_ns, int64_t t1_ns, size_t bytes)
{
    dt_trainer *tr = ctx;
    if (!tr->trace.writer || tr->trace.status != DT_OK) return;
    dt_trace_event e;
    dt_trace_event_init(&e, DT_TRACE_COMPLETE, "tied embedding allreduce", "comm", tr->rank, DT_LANE_COMM,
                        t0_ns - tr->t_start_ns, t1_ns - t0_ns);
    e.iter = tr->iter;
    if (dt_trace_event_add_arg(&e, "bytes", (double)bytes) != DT_OK) return;
    dt__trace_write(tr, &e);
}

/* Trace: each agreement of the ranks inside OPTIM_STEP (pipeline.h's
 * sync_event) on the comm lane, since the wait for the other stages is
 * communication, and the stage's own work before it ("grad norm": the
 * squares of its gradients, the unscaling) on the optimizer lane. The
 * optim_step span starts after the last agreement. */
static void dt__sync_event(void *ctx, const char *name, int64_t local_t0_ns, int64_t t0_ns, int64_t t1_ns)
{
    dt_trainer *tr = ctx;
    if (!tr->trace.writer || tr->trace.status != DT_OK) return;
    for (int comm = 0; comm < 2; comm++) {
        const int64_t a = comm ? t0_ns : local_t0_ns, b = comm ? t1_ns : t0_ns;
        if (!comm && b <= a) continue;
        dt_trace_event e;
        dt_trace_event_init(&e, DT_TRACE_COMPLETE, comm ? name : "grad norm", comm ? "comm" : "optim", tr->rank,
                            comm ? DT_LANE_COMM : DT_LANE_OPTIM, a - tr->t_start_ns, b - a);
        e.iter = tr->iter;
        if (dt_trace_event_add_arg(&e, "stage", dt__pipe_stage(tr->pipe.rt)) != DT_OK) return;
        dt__trace_write(tr, &e);
    }
}

/* Pipeline/tensor parallelism: the stage owns its weights, gradients and optimizer. */
dt_status dt__tr_pipe_create(dt_trainer *tr)
{
    const dt_train_config *cfg = &tr->cfg;
    if (tr->be->device == DT_DEVICE_CUDA) DT_CHECK(dt_comm_nccl_create(cfg->comm, tr->be, &tr->gcomm));
    int any = 0, v = 1;
    for (int i = 0; i < 64; i++) any |= cfg->pipeline_split[i] != 0;
    /* model chunks per stage: Megatron-LM's flags, or the schedule's default (config.c checked them) */
    DT_CHECK(dt_sched_chunks_from_flags(cfg->pipeline_schedule, cfg->pipeline_size, cfg->model.num_layers,
                                        cfg->virtual_pipeline_size, cfg->layers_per_virtual_stage, &v));
    const dt__pipe_setup ps = {.world = cfg->comm,
                               .device_world = tr->gcomm,
                               .p = cfg->pipeline_size,
                               .t = cfg->tensor_size,
                               .vocab_parallel = !cfg->no_vocab_parallel,
                               .scatter_gather = !cfg->no_scatter_gather,
                               .sequence_parallel = cfg->sequence_parallel,
                               .c = cfg->context_size > 1 ? cfg->context_size : 1,
                               .cp_type = cfg->cp_comm_type,
                               .kind = cfg->pipeline_schedule,
                               .v = v,
                               .split = any ? cfg->pipeline_split : NULL,
                               .model = &tr->cfg.model,
                               .B = tr->B,
                               .T = tr->T,
                               .m = tr->n_micro,
                               .steps = cfg->train_iters > 0 ? cfg->train_iters : 1,
                               .be = tr->be,
                               .init = tr->init,
                               .optim = cfg->optim,
                               .lr = tr->lr,
                               .clip_grad = cfg->clip_grad,
                               .precision = cfg->precision,
                               .scaler = cfg->use_loss_scaling ? &tr->scaler : NULL,
                               .recompute = cfg->recompute,
                               .recompute_num_layers = cfg->recompute_num_layers,
                               .allreduce = cfg->allreduce,
                               .chunk_bytes = cfg->allreduce_chunk_bytes,
                               .zero = cfg->use_distributed_optimizer,
                               .zero_stage = cfg->zero_stage >= 2 ? cfg->zero_stage : 0,
                               .bucket_bytes = cfg->bucket_bytes,
                               .batch = dt__pipe_batch,
                               .event = dt__pipe_event,
                               .tp_event = dt__tp_event,
                               .cp_event = dt__cp_event,
                               .emb_event = dt__emb_event,
                               .coll_event = cfg->trace_path ? dt__comm_hook : NULL,
                               .sync_event = dt__sync_event,
                               .recompute_event = dt__recompute_event,
                               .nonfinite = cfg->precision == DT_F32 ? dt__nf_pipe_locate : NULL,
                               .ctx = tr};
    return dt__pipe_create(&ps, &tr->pipe.rt);
}

/* After the last pipeline step: the whole model on rank 0 and every stage's
 * figures on every rank (collective). */
static dt_status dt__pipe_finish(dt_trainer *tr)
{
    const int p = tr->cfg.pipeline_size;
    DT_CHECK(dt__pipe_probe(tr->pipe.rt, &tr->pipe.probe));
    tr->pipe.figures = calloc((size_t)3 * p, sizeof *tr->pipe.figures);
    float *v = calloc((size_t)3 * p, sizeof *v);
    if (!tr->pipe.figures || !v) {
        free(v);
        return DT_FAIL(DT_ERR_NOMEM, "trainer: out of memory");
    }
    const int s = dt__pipe_stage(tr->pipe.rt);
    if (dt__pipe_dp_index(tr->pipe.rt) == 0 && dt__pipe_tp_index(tr->pipe.rt) == 0) {
        v[s] = (float)dt__pipe_peak_activation_bytes(tr->pipe.rt);
        v[p + s] = (float)dt__pipe_max_versions(tr->pipe.rt);
        v[2 * p + s] = (float)dt__pipe_max_versions_in_flight(tr->pipe.rt);
    }
    dt_status st = dt_comm_allreduce(tr->cfg.comm, v, (size_t)3 * p, DT_ALLREDUCE_RING, NULL);
    for (int i = 0; st == DT_OK && i < 3 * p; i++) tr->pipe.figures[i] = v[i];
    free(v);
    DT_CHECK(st);
    return dt__pipe_version_check(tr->pipe.rt, &tr->pipe.mismatch, &tr->pipe.disagree);
}

/* Trace, loss scaling: the scale after the step, and an overflow marker on
 * every rank (each stage skipped the step; `tensor` names the whole model's
 * first overflowing tensor, wherever it lives). */
static dt_status dt__trace_pipe_scale(dt_trainer *tr, const dt__pipe_stats *ps, int64_t ts)
{
    DT_CHECK(dt__trace_counter(tr, "loss_scale", ts, dt_loss_scaler_scale(&tr->scaler)));
    if (!ps->skipped) return DT_OK;
    dt_trace_event e;
    char name[16 + DT_NAME_MAX];
    snprintf(name, sizeof name, "overflow %s", dt__pipe_tensor_name(tr->pipe.rt, ps->first_bad));
    dt_trace_event_init(&e, DT_TRACE_INSTANT, name, "optim", tr->rank, DT_LANE_OPTIM, ts, 0);
    e.iter = tr->iter;
    DT_CHECK(dt_trace_event_add_arg(&e, "loss_scale", ps->loss_scale));
    DT_CHECK(dt_trace_event_add_arg(&e, "tensor", ps->first_bad));
    DT_CHECK(dt_trace_event_add_arg(&e, "at_min", ps->ev.at_min));
    DT_CHECK(dt_trace_event_add_arg(&e, "stage", dt__pipe_stage(tr->pipe.rt)));
    return dt__trace_write(tr, &e);
}

dt_status dt__tr_pipe_step(dt_trainer *tr, dt_train_stats *out)
{
    if (tr->iter >= tr->cfg.train_iters)
        return DT_FAIL(DT_ERR_INVALID, "iteration %lld: the pipeline schedule ends after --train-iters %lld",
                       (long long)tr->iter + 1, (long long)tr->cfg.train_iters);
    const int64_t t0 = dt_time_ns();
    dt__pipe_stats ps;
    DT_CHECK(dt__pipe_step(tr->pipe.rt, tr->iter, &ps));
    DT_CHECK(tr->be->synchronize(tr->be));
    const int64_t t1 = dt_time_ns();
    DT_CHECK(dt__trace_check(tr));
    if (ps.nonfinite) { /* the loss is named first, as one process names it */
        const int loss_bad = !isfinite(ps.loss);
        DT_CHECK(dt__nonfinite(tr, loss_bad ? "training loss" : "gradient norm", loss_bad ? ps.loss : ps.grad_norm));
    } else if (ps.loss_iter > 0 && dt__loss_overflow(tr, ps.loss) && ps.skipped) {
        /* fp16: the stages agreed the step overflowed (dt__pipe_agree counts a
         * non-finite loss); every rank has this loss: search together */
        DT_CHECK(dt__loss_overflow_locate(tr));
    } else if (ps.loss_iter > 0) {
        DT_CHECK(dt__loss_check(tr, ps.loss)); /* pipedream: a step late, on some ranks */
    }
    if (tr->trace.writer) {
        const int64_t ts = t1 - tr->t_start_ns;
        if (tr->cfg.use_loss_scaling) DT_CHECK(dt__trace_pipe_scale(tr, &ps, ts));
        if (ps.loss_iter > 0) DT_CHECK(dt__trace_counter(tr, "loss", ts, ps.loss));
        DT_CHECK(dt__trace_counter(tr, "lr", ts, ps.lr));
        DT_CHECK(
            dt__trace_counter(tr, "peak_activation_bytes", ts, (double)dt__pipe_peak_activation_bytes(tr->pipe.rt)));
    }
    const double secs = (double)(t1 - t0) * 1e-9;
    dt__tr_account(tr, secs);
    tr->iter++;
    if (tr->iter == tr->cfg.train_iters) DT_CHECK(dt__pipe_finish(tr));
    if (out) {
        memset(out, 0, sizeof *out);
        out->iter = tr->iter;
        out->loss = ps.loss;
        out->loss_iter = ps.loss_iter;
        out->lr = ps.lr;
        out->grad_norm = ps.grad_norm;
        out->step_seconds = secs;
        out->tokens_per_second = secs > 0 ? (double)tr->cfg.global_batch_size * tr->T / secs : 0.0;
        out->loss_scale = ps.loss_scale;
        out->overflow = ps.skipped;
        out->overflow_tensor = ps.skipped && ps.first_bad >= 0 ? dt__pipe_tensor_name(tr->pipe.rt, ps.first_bad) : NULL;
        out->overflow_where = tr->nf.loss_overflow ? tr->nf.where : NULL;
        out->scale_at_min = ps.ev.at_min;
        out->scale_at_min_first = ps.ev.at_min_first;
        out->skipped_steps = tr->cfg.use_loss_scaling ? tr->scaler.skipped : 0;
        out->nonfinite = tr->nf.skip;
        out->nonfinite_where = tr->nf.skip ? tr->nf.where : NULL;
        out->nonfinite_skipped = tr->nf.skipped;
    }
    return DT_OK;
}

/* The summary's pipeline object (JSON null without pipeline parallelism):
 * per stage the peak saved activation bytes, the most weight versions
 * alive at once (current + stashed) and the most distinct versions used by
 * micro-batches in flight. */
/* Tensor parallelism's part of the summary: the vocabulary split and what
 * this rank holds of the embedding and the LM head (bytes of its rows,
 * the head's GEMM FLOPs per token: 2 forward + 4 backward per row and
 * channel), which fall by t under the split. */
static json_t *dt__tr_tp_summary(const dt_trainer *tr)
{
    const dt_train_config *cfg = &tr->cfg;
    const int t = cfg->tensor_size, V = cfg->model.vocab_size, C = cfg->model.hidden_size;
    const int vp = t > 1 && !cfg->no_vocab_parallel;
    int v0 = 0, nv = V;
    if (vp) dt__vocab_rows(V, t, dt__pipe_tp_index(tr->pipe.rt), &v0, &nv);
    const dt_paramset *L = dt__pipe_layout(tr->pipe.rt);
    const int *wi = dt__pipe_whole_index(tr->pipe.rt);
    /* the head layer's whole indexes (the layer table): lnf.w, lnf.b, then the untied head */
    int head0, nhead;
    dt__gpt_layer_tensors(&cfg->model, cfg->model.num_layers, &head0, &nhead);
    const int lnfb = head0 + 1, last = head0 + 2;
    size_t wte = 0, head = 0;
    int has_head = 0;
    for (int i = 0; i < L->count; i++) {
        if (wi[i] == 0) wte += L->info[i].numel * sizeof(float);
        if (!cfg->model.tie_embeddings && wi[i] == last) head += L->info[i].numel * sizeof(float);
        has_head |= wi[i] == lnfb;
    }
    const int sp = t > 1 && cfg->sequence_parallel;
    return json_pack("{s:i, s:b, s:b, s:b, s:[i,i], s:I, s:I, s:I}", "size", t, "vocab_parallel", vp,
                     "sequence_parallel", sp, "scatter_gather_tensors_in_pipeline",
                     t > 1 && cfg->pipeline_size > 1 && !cfg->no_scatter_gather && !sp,
                     "vocab_rows", v0, v0 + nv, "wte_bytes", (json_int_t)wte, "lm_head_bytes", (json_int_t)head,
                     "lm_head_flops_per_token", (json_int_t)(has_head ? 6 * (json_int_t)nv * C : 0));
}

/* Context parallelism's part of the summary (JSON null with c = 1): the
 * size and exchange, this rank's place and chunks of each sequence, its
 * exchanges and bytes sent in the run, and the exchange's workspace. */
static json_t *dt__tr_cp_summary(const dt_trainer *tr)
{
    const dt__cp *cp = dt__pipe_cp(tr->pipe.rt);
    if (!cp) return json_null();
    const dt__cpos pos = dt__cp_pos(cp);
    return json_pack("{s:i, s:s, s:i, s:[i,i], s:I, s:I, s:I}", "size", pos.c, "comm_type",
                     dt_cp_comm_name(tr->cfg.cp_comm_type), "rank", pos.rank, "chunks", dt__cpos_chunk(pos, 0),
                     dt__cpos_chunk(pos, 1), "exchanges", (json_int_t)dt__cp_exchanges(cp), "bytes_sent",
                     (json_int_t)dt__cp_bytes_sent(cp), "workspace_bytes", (json_int_t)dt__cp_workspace_bytes(cp));
}

json_t *dt__tr_pipe_summary(const dt_trainer *tr)
{
    if (!tr->pipe.rt) return json_null();
    const int p = tr->cfg.pipeline_size;
    json_t *o = json_object(), *a = json_array(), *v = json_array(), *f = json_array();
    int bad = !o || !a || !v || !f;
    for (int s = 0; !bad && tr->pipe.figures && s < p; s++) {
        bad |= json_array_append_new(a, json_integer((json_int_t)tr->pipe.figures[s])) != 0;
        bad |= json_array_append_new(v, json_integer((json_int_t)tr->pipe.figures[p + s])) != 0;
        bad |= json_array_append_new(f, json_integer((json_int_t)tr->pipe.figures[2 * p + s])) != 0;
    }
    if (!bad) {
        dt__jset(o, "schedule", json_string(dt_sched_kind_name(tr->cfg.pipeline_schedule)), &bad);
        dt__jset(o, "stages", json_integer(p), &bad);
        dt__jset(o, "data_parallel_size", json_integer(tr->dp_size), &bad);
        dt__jset(o, "micro_batches_per_step", json_integer(tr->n_micro), &bad);
        dt__jset(o, "stage_peak_activation_bytes", a, &bad);
        dt__jset(o, "stage_weight_versions", v, &bad);
        dt__jset(o, "stage_versions_in_flight", f, &bad);
        /* stashing: backward on the forward's weights; vertical sync: one version per micro-batch */
        dt__jset(o, "version_mismatches", json_integer(tr->pipe.mismatch), &bad);
        dt__jset(o, "version_disagreements_across_stages", json_integer(tr->pipe.disagree), &bad);
        dt__jset(o, "tensor_parallel", dt__tr_tp_summary(tr), &bad);
        dt__jset(o, "context_parallel", dt__tr_cp_summary(tr), &bad);
        a = v = f = NULL;
    }
    json_decref(a), json_decref(v), json_decref(f);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- the pipeline strategy's table ----------------------------------------- */

/* Evaluation through the stages; the sums come back added over every rank. */
static dt_status dt__pipe_strategy_evaluate(dt_trainer *tr, dt__eval_sums *sum)
{
    double v[4];
    DT_CHECK(dt__pipe_evaluate(tr->pipe.rt, tr->cfg.eval_iters * tr->n_micro * tr->dp_size, tr->kind->has_accuracy(tr),
                               v));
    sum->loss = v[0], sum->counted = v[1], sum->examples = v[2], sum->correct = v[3];
    return DT_OK;
}

static size_t dt__pipe_strategy_peak(const dt_trainer *tr) { return dt__pipe_peak_activation_bytes(tr->pipe.rt); }

/* added over the stages after the last step (NAN before) */
static double dt__pipe_strategy_probe(const dt_trainer *tr) { return tr->pipe.probe; }

static void dt__pipe_state(const dt_trainer *tr, dt__strategy_state *s)
{
    *s = (dt__strategy_state){.zero = dt__pipe_zero(tr->pipe.rt),
                              .optim = dt__pipe_optimizer(tr->pipe.rt),
                              .layout = dt__pipe_layout(tr->pipe.rt)};
}

static int dt__pipe_ck_role(const dt_trainer *tr)
{
    (void)tr;
    return DT__CK_STAGE;
}

static const char *dt__pipe_ck_kind(const dt_trainer *tr)
{
    (void)tr;
    return "pipeline/tensor parallel";
}

static const char *dt__pipe_ck_shards(const dt_trainer *tr)
{
    if (dt__pipe_sharder(tr->pipe.rt))
        return "each rank: its stage's (tensor shard's) zero-2/3 segments of weights (masters) and optimizer";
    return dt__pipe_zero(tr->pipe.rt)
               ? "each rank: its stage's (tensor shard's) zero-1 segment of weights (masters) and optimizer"
               : "each rank: its stage's (tensor shard's) weights and optimizer";
}

/* A stage's tensors (tensor-parallel shards under t > 1) and its optimizer,
 * or its ZeRO-1 segment, at a step boundary. */
static dt_status dt__pipe_ck_save(dt_trainer *tr, dt_checkpoint_shard *s, int64_t version)
{
    (void)version;
    DT_CHECK(dt__pipe_boundary(tr->pipe.rt, tr->iter));
    if (dt__pipe_sharder(tr->pipe.rt)) /* the stage's ZeRO-2/3 segments, and the units they came from */
        DT_CHECK(dt__ck_put_units(s, dt__pipe_zero(tr->pipe.rt)));
    if (dt__pipe_zero(tr->pipe.rt)) /* the stage's ZeRO-1 segment, or those */
        return dt__ck_put_zero(s, tr->be, dt__pipe_zero(tr->pipe.rt), dt__pipe_params(tr->pipe.rt));
    DT_CHECK(dt__ck_put_tensors(s, tr->be, "param/", dt__pipe_layout(tr->pipe.rt), dt__pipe_params(tr->pipe.rt)));
    return dt__ck_put_optim(s, dt__pipe_optimizer(tr->pipe.rt));
}

static dt_status dt__pipe_ck_load(dt_trainer *tr, dt_checkpoint_shard *s, int64_t it)
{
    if (dt__pipe_sharder(tr->pipe.rt))
        DT_CHECK(dt__ck_get_units(s, dt__pipe_zero(tr->pipe.rt), tr->cfg.zero_stage));
    if (dt__pipe_zero(tr->pipe.rt)) {
        DT_CHECK(dt__ck_get_zero(s, tr->be, dt__pipe_zero(tr->pipe.rt), dt__pipe_params(tr->pipe.rt)));
    } else {
        DT_CHECK(dt__ck_get_tensors(s, tr->be, "param/", dt__pipe_layout(tr->pipe.rt), dt__pipe_params(tr->pipe.rt)));
        DT_CHECK(dt__ck_get_optim(s, dt__pipe_optimizer(tr->pipe.rt), 1));
    }
    return dt__pipe_seek(tr->pipe.rt, it);
}

/* Every rank has its part: the stage's ZeRO segments to its data group. */
static dt_status dt__pipe_ck_restored(dt_trainer *tr) { return dt__pipe_restored(tr->pipe.rt); }

static void dt__pipe_strategy_bytes(const dt_trainer *tr, size_t *weights, size_t *gradients, size_t *optimizer,
                                    size_t *working, size_t *numel)
{
    dt__pipe_state_bytes(tr->pipe.rt, weights, gradients, optimizer, working);
    *numel = dt__pipe_layout(tr->pipe.rt)->numel;
}

static void dt__pipe_strategy_free(dt_trainer *tr)
{
    dt__pipe_free(tr->pipe.rt);
    tr->pipe.rt = NULL;
    free(tr->pipe.figures);
    tr->pipe.figures = NULL;
}

const dt__strategy dt__strategy_pipe = {
    .name = "pipe",
    .split = 1,
    .create = dt__tr_pipe_create,
    .step = dt__tr_pipe_step,
    .evaluate = dt__pipe_strategy_evaluate,
    .peak_activation_bytes = dt__pipe_strategy_peak,
    .probe = dt__pipe_strategy_probe,
    .state = dt__pipe_state,
    .summary_key = "pipeline",
    .summary = dt__tr_pipe_summary,
    .state_bytes = dt__pipe_strategy_bytes,
    .ck_role = dt__pipe_ck_role,
    .ck_kind = dt__pipe_ck_kind,
    .ck_shards = dt__pipe_ck_shards,
    .ck_save = dt__pipe_ck_save,
    .ck_load = dt__pipe_ck_load,
    .restored = dt__pipe_ck_restored,
    .nonfinite = DT__NF_IN_STEP,
    .free = dt__pipe_strategy_free,
};
