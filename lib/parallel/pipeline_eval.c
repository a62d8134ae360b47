/* pipeline_eval.c: what a pipeline rank does outside the schedule
 * (pipeline_impl.h): evaluation and the non-finite check (forwards through
 * every virtual stage in order), the weights fingerprint and the tied
 * embeddings' check, the weight-version figures, and the positions of
 * checkpoints (boundary, seek).
 *
 * A forward outside the schedule runs in each chunk's spare slot (slot
 * `slots`, never the schedule's): the rank takes its chunks in ascending
 * virtual stage, each receiving its input from virtual stage q-1 (a
 * blocking receive, or a copy from this rank's chunk) and sending its
 * output to q+1 before the next. The virtual stages form one chain, so
 * the blocking messages cannot wait on each other in a cycle. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dt_checkpoint.h"
#include "dt_data.h"
#include "dt_internal.h"
#include "pipeline_impl.h"
#include "zero_shard.h"

/* One micro-batch forward through this rank's chunks (tokens and targets
 * already read where the ends need them), spare slots; check: the
 * non-finite search (dt__stage_forward_check), its first layer in *pos.
 * The last virtual stage's loss and counted targets in *loss, *nc. The
 * spare slots stay busy: dt__pipe_chain_release frees them. */
static dt_status dt__pipe_chain_forward(dt__pipe *pp, int check, float *loss, int *nc, int *pos)
{
    const int q1 = pp->q_last;
    *pos = -1;
    for (int c = 0; c < pp->v; c++) {
        dt__chunk *k = &pp->ch[c];
        const int e = k->slots, first = k->q == 0, last = k->q == q1;
        if (!first) {
            float *x = dt__stage_input(k->st, e);
            if (dt__pipe_chunk_of(pp, k->q - 1) >= 0) DT_CHECK(dt__pipe_box_take(pp, c, DT__PIPE_ACT, x));
            else DT_CHECK(dt__pipe_recv(pp, x, dt__pipe_device_of(pp, k->q - 1), dt__pipe_tag(k->q, DT__PIPE_EVAL)));
        }
        const float *out = NULL;
        int at = -1;
        dt__pipe_op_begin(pp, c);
        if (check)
            DT_CHECK(
                dt__stage_forward_check(k->st, e, first ? pp->tokens : NULL, last ? pp->targets : NULL, &out, &at));
        else
            DT_CHECK(dt__stage_forward(k->st, e, NULL, first ? pp->tokens : NULL, last ? pp->targets : NULL, NULL, loss,
                                       nc));
        dt__pipe_op_end(pp, c);
        if (at >= 0 && *pos < 0) *pos = at;
        if (last) continue;
        DT_CHECK(dt__stage_output(k->st, e, &out));
        const int next = dt__pipe_chunk_of(pp, k->q + 1);
        if (next >= 0) {
            DT_CHECK(dt__pipe_box_put(pp, next, DT__PIPE_ACT, out));
        } else {
            dt_comm_request *q = NULL;
            DT_CHECK(dt__pipe_send(pp, out, k->act_wire ? &k->act_wire[e] : NULL, dt__pipe_device_of(pp, k->q + 1),
                                   dt__pipe_tag(k->q + 1, DT__PIPE_EVAL), &q));
            DT_CHECK(dt__pipe_wait_send(pp, &q));
        }
    }
    return DT_OK;
}

static dt_status dt__pipe_chain_release(dt__pipe *pp)
{
    for (int c = 0; c < pp->v; c++) DT_CHECK(dt__stage_release(pp->ch[c].st, pp->ch[c].slots));
    return DT_OK;
}

/* Step t's micro-batches of this pipeline forward again through the
 * virtual stages, each stage looking at its layers' outputs; activations
 * travel as in the step. */
dt_status dt__pipe_forward_check(dt__pipe *pp, int64_t t, int *mb, int *pos)
{
    const int ends = dt__pipe_chunk_of(pp, 0) >= 0 || dt__pipe_chunk_of(pp, pp->q_last) >= 0;
    *mb = *pos = -1;
    for (int k = 0; k < pp->cfg.m; k++) {
        const int j = (int)t * pp->cfg.m + k; /* the schedule's micro-batch */
        if (ends) DT_CHECK(pp->cfg.batch(pp->cfg.ctx, 0, dt__pipe_index(pp, j), pp->tokens, pp->targets, NULL, NULL));
        int at = -1;
        DT_CHECK(dt__pipe_chain_forward(pp, 1, NULL, NULL, &at));
        DT_CHECK(dt__pipe_chain_release(pp));
        if (at >= 0 && *mb < 0) *mb = k, *pos = at;
    }
    return DT_OK;
}

/* Context parallelism: each rank's per-position flags (correct, B*T/c of
 * them, its rows) all-gathered over the context group and put back in
 * the sequences' order into correct (B*T); work: B*T floats. */
static dt_status dt__pipe_cp_correct(dt__pipe *pp, uint8_t *correct, float *work)
{
    const int B = pp->cfg.B, T = pp->cfg.T, c = pp->c, Tc = T / (2 * c);
    const size_t nl = (size_t)B * T / (size_t)c;
    for (size_t i = 0; i < nl; i++) work[pp->cpi * nl + i] = correct[i];
    DT_CHECK(dt_comm_all_gather(pp->cpc, work, nl * (size_t)c, NULL));
    for (int r = 0; r < c; r++)
        for (int part = 0; part < 2; part++)
            for (int b = 0; b < B; b++)
                for (int t = 0; t < Tc; t++)
                    correct[(size_t)b * T + (size_t)dt__cpos_chunk((dt__cpos){c, r}, part) * Tc + t] =
                        (uint8_t)work[r * nl + ((size_t)part * B + b) * Tc + t];
    return DT_OK;
}

dt_status dt__pipe_evaluate(dt__pipe *pp, int n_val, int has_accuracy, double sums[4])
{
    for (int c = 0; c < pp->v; c++) dt__stage_weights_changed(pp->ch[c].st);
    const int c0 = dt__pipe_chunk_of(pp, 0), c1 = dt__pipe_chunk_of(pp, pp->q_last);
    /* the data replicas share the examples; a replica's context ranks take the same ones */
    const int lo = (int)((int64_t)n_val * pp->ddi / pp->dd), hi = (int)((int64_t)n_val * (pp->ddi + 1) / pp->dd);
    const size_t n = (size_t)pp->cfg.B * pp->cfg.T;
    double acc[4] = {0, 0, 0, 0};
    float *pos_loss = malloc(n * sizeof *pos_loss);
    uint8_t *pos_correct = malloc(n);
    dt_status st = DT_OK;
    if (!pos_loss || !pos_correct) {
        st = DT_FAIL(DT_ERR_NOMEM, "pipeline evaluation: out of memory");
        goto done;
    }
    for (int j = lo; j < hi; j++) {
        int n_ex = 0, nc = 0, at;
        float loss = 0.0f;
        if (c0 >= 0 || c1 >= 0)
            DT_CHECK_GOTO(pp->cfg.batch(pp->cfg.ctx, 1, (uint64_t)j, pp->tokens, pp->targets, pp->example, &n_ex), st,
                          done);
        DT_CHECK_GOTO(dt__pipe_chain_forward(pp, 0, &loss, &nc, &at), st, done);
        if (c1 >= 0) {
            acc[0] += (double)loss * nc;
            acc[1] += nc;
            if (has_accuracy && n_ex > 0) {
                int nok = 0;
                DT_CHECK_GOTO(dt__stage_position_stats(pp->ch[c1].st, pp->ch[c1].slots, pos_loss, pos_correct), st,
                              done);
                if (pp->c > 1) DT_CHECK_GOTO(dt__pipe_cp_correct(pp, pos_correct, pos_loss), st, done);
                dt_data_count_correct(pp->example, pos_correct, (int)n, n_ex, &nok);
                if (pp->cpi == 0) { /* the context group's first rank counts the whole sequences */
                    acc[2] += n_ex;
                    acc[3] += nok;
                }
            }
        }
        DT_CHECK_GOTO(dt__pipe_chain_release(pp), st, done);
    }
    {
        if (pp->tpi != 0) acc[0] = acc[1] = acc[2] = acc[3] = 0.0; /* tensor-parallel ranks computed the same */
        DT_CHECK_GOTO(dt_comm_sum_doubles(pp->cfg.world, acc, 4), st, done);
        for (int i = 0; i < 4; i++) sums[i] = acc[i];
    }
done:
    free(pos_loss);
    free(pos_correct);
    return st;
}

/* ---- the fingerprint -------------------------------------------------------- */

/* This rank's chunks' terms of the fingerprint, from weights laid out as
 * the rank's flat buffer (backend memory). */
static dt_status dt__pipe_probe_of(dt__pipe *pp, const float *weights, double *out)
{
    *out = 0.0;
    for (int c = 0; c < pp->v; c++) {
        double x = 0.0;
        DT_CHECK(dt__stage_probe_of(pp->ch[c].st, weights + pp->ch[c].offset, &x));
        *out += x;
    }
    return DT_OK;
}

/* Under ZeRO-1 with mixed precision, and ZeRO-2/3, the weights are the
 * FP32 masters, in segments over the data group: gathered into one flat
 * buffer, then fingerprinted. Collective over the data group. */
static dt_status dt__pipe_probe_masters(dt__pipe *pp, double *mine)
{
    const dt__zero *z = dt__pipe_zero(pp);
    const float *m = dt__zero_master(z);
    size_t lo = 0, len = 0;
    dt__zero_shard(z, &lo, &len);
    const size_t n = pp->layout.numel;
    dt_buffer all = {0};
    dt_status st = dt_buffer_alloc(&all, pp->cfg.be, (n ? n : 1) * sizeof(float));
    if (pp->zs) { /* ZeRO-2/3: unit by unit */
        if (st == DT_OK) st = dt__zs_gather_masters(pp->zs, all.data);
    } else {
        if (st == DT_OK && len)
            st = pp->cfg.be->copy(pp->cfg.be, (float *)all.data + lo, m, len * sizeof(float), DT_COPY_D2D);
        if (st == DT_OK) st = dt_comm_all_gather(dt__pipe_dev_data(pp), all.data, n, NULL);
    }
    if (st == DT_OK && pp->dpi == 0) st = dt__pipe_probe_of(pp, all.data, mine);
    dt_buffer_free(&all);
    return st;
}

/* Tied embeddings: virtual stage 0's wte and the last one's copy must be
 * equal bit for bit (the same sums, the same updates); their CRC32C, added
 * with opposite signs (exact in a double), tells: over the two ranks, or
 * on the rank that holds both. */
static dt_status dt__pipe_tied_check(dt__pipe *pp)
{
    double v = 0.0;
    for (int end = 0; end < 2; end++) {
        const int c = dt__pipe_chunk_of(pp, end ? pp->q_last : 0);
        if (c < 0) continue;
        size_t off, n;
        dt__stage_tied_range(pp->ch[c].st, &off, &n);
        float *h = malloc((n ? n : 1) * sizeof *h);
        if (!h) return DT_FAIL(DT_ERR_NOMEM, "pipeline: out of memory checking the tied embeddings");
        dt_status st =
            pp->cfg.be->copy(pp->cfg.be, h, dt__stage_params(pp->ch[c].st) + off, n * sizeof(float), DT_COPY_D2H);
        if (st == DT_OK) v += (end ? -1.0 : 1.0) * (double)dt_crc32c(h, n * sizeof(float));
        free(h);
        DT_CHECK(st);
    }
    if (pp->emb) DT_CHECK(dt_comm_sum_doubles(pp->emb, &v, 1));
    if (v != 0.0)
        return DT_FAIL(DT_ERR_NUMERIC, "pipeline: tied embeddings: the last virtual stage's copy of wte differs from "
                                       "the first's wte");
    return DT_OK;
}

dt_status dt__pipe_probe(dt__pipe *pp, double *out)
{
    double mine = 0.0;
    const int ends = dt__pipe_chunk_of(pp, 0) >= 0 || dt__pipe_chunk_of(pp, pp->q_last) >= 0;
    if (pp->tied && ends && pp->params.data) DT_CHECK(dt__pipe_tied_check(pp)); /* ZeRO-3: no whole weights */
    if ((pp->zero && dt__zero_master(pp->zero)) || pp->zs) DT_CHECK(dt__pipe_probe_masters(pp, &mine));
    else if (pp->dpi == 0) DT_CHECK(dt__pipe_probe_of(pp, pp->params.data, &mine)); /* the first pipeline speaks */
    DT_CHECK(dt_comm_sum_doubles(pp->cfg.world, &mine, 1));
    *out = mine;
    return DT_OK;
}

/* ---- weight versions ------------------------------------------------------------ */

dt_status dt__pipe_version_check(dt__pipe *pp, long long *mismatches, long long *disagreements)
{
    long long mis = 0;
    const int n = pp->total_mb;
    for (int mb = 0; mb < n; mb++)
        if (pp->used[2 * mb] >= 0 && pp->used[2 * mb] != pp->used[2 * mb + 1]) mis++;
    /* across stages: per micro-batch the sum and the sum of squares of the
     * stages' forward versions (first pipeline only); equal versions on all
     * p stages give p * sumsq == sum^2 */
    float *f = calloc((size_t)2 * n + 1, sizeof *f);
    if (!f) return DT_FAIL(DT_ERR_NOMEM, "pipeline: out of memory checking versions");
    if (pp->dpi == 0 && pp->tpi == 0) {
        for (int mb = 0; mb < n; mb++) {
            f[2 * mb] = (float)pp->used[2 * mb];
            f[2 * mb + 1] = (float)pp->used[2 * mb] * (float)pp->used[2 * mb];
        }
        f[2 * n] = (float)mis;
    }
    dt_status st = dt_comm_allreduce(pp->cfg.world, f, (size_t)2 * n + 1, DT_ALLREDUCE_RING, NULL);
    long long dis = 0;
    for (int mb = 0; st == DT_OK && mb < n; mb++) {
        const double sum = f[2 * mb], sq = f[2 * mb + 1];
        if (fabs((double)pp->p * sq - sum * sum) > 0.5) dis++;
    }
    if (st == DT_OK) {
        *mismatches = (long long)f[2 * n];
        *disagreements = dis;
    }
    free(f);
    return st;
}

/* ---- checkpoint positions ------------------------------------------------------- */

/* The first instruction of step t or later in this stage's list (n if none),
 * after checking that no instruction of a step before t comes later. */
static dt_status dt__pipe_cut(const dt__pipe *pp, int64_t t, int *cut)
{
    const int s = pp->stage, n = pp->sched->count[s];
    const dt_sched_instr *list = pp->sched->instr[s];
    int i = 0;
    while (i < n && list[i].step < t) i++;
    for (int j = i; j < n; j++)
        if (list[j].step < t)
            return DT_FAIL(DT_ERR_UNSUPPORTED,
                           "--pipeline-schedule %s: stage %d runs work of step %d after step %lld "
                           "has begun (micro-batches and weight versions in flight across the "
                           "boundary): a checkpoint cannot be taken or resumed there",
                           dt_sched_kind_name(pp->cfg.kind), s, list[j].step + 1, (long long)t + 1);
    *cut = i;
    return DT_OK;
}

dt_status dt__pipe_boundary(const dt__pipe *pp, int64_t t)
{
    int cut;
    DT_CHECK(dt__pipe_cut(pp, t, &cut));
    if (pp->pc != cut || pp->n_stash)
        return DT_FAIL(DT_ERR_UNSUPPORTED,
                       "pipeline stage %d: %s at the start of step %lld (a checkpoint needs a "
                       "clean step boundary)",
                       pp->stage, pp->n_stash ? "weight versions stashed" : "not", (long long)t + 1);
    for (int c = 0; c < pp->v; c++)
        for (int k = 0; k < pp->ch[c].slots; k++)
            if (pp->ch[c].slot_mb[k] >= 0)
                return DT_FAIL(DT_ERR_UNSUPPORTED,
                               "pipeline stage %d: micro-batch %d in flight at the start of step %lld", pp->stage,
                               pp->ch[c].slot_mb[k], (long long)t + 1);
    return DT_OK;
}

dt_status dt__pipe_seek(dt__pipe *pp, int64_t t)
{
    if (t < 0 || t > pp->cfg.steps)
        return DT_FAIL(DT_ERR_INVALID, "pipeline: cannot resume at step %lld of %lld", (long long)t,
                       (long long)pp->cfg.steps);
    if (pp->pc != 0 || pp->n_stash)
        return DT_FAIL(DT_ERR_INVALID, "pipeline stage %d: resume only before the first step", pp->stage);
    int cut;
    DT_CHECK(dt__pipe_cut(pp, t, &cut));
    /* the current version: the last optimizer step's before the cut (0 before any) */
    const dt_sched_instr *list = pp->sched->instr[pp->stage];
    int v = 0;
    for (int i = 0; i < cut; i++)
        if (list[i].op == DT_SCHED_OPTIM_STEP) v = list[i].version;
    pp->pc = cut;
    pp->version = v;
    return DT_OK;
}
