/* trace_cp.c: the context-parallel index of a trace and what each context
 * rank shows at a playback time (see dtv_trace.h), built by dtv_cp_index
 * at the end of loading (trace_model.c) and drawn by view_cp.c.
 *
 * Which block a rank holds comes from the ring steps' own `from`: during
 * step s the rank computes with the block that arrived at the end of step
 * s - 1, (from + 1) mod c (its own at step 0), and after the step with
 * `from`. The trace names no layer, so an exchange's attention is counted
 * within the compute span around it (a forward, a backward, a
 * recomputation, an evaluation): a ring starts at step 0 (allgather: at
 * its all-gather); a2a is not counted.
 *
 * Invariants: t->cp is NULL exactly when the trace has no cp exchange on a
 * comm lane; every member's exchanges are a subset of its comm row, by
 * start; a state depends only on the index and `now`. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtv_trace.h"

static int dtv__is_cp(int kind)
{
    return kind == DTV_CP_RING || kind == DTV_CP_AG || kind == DTV_CP_RS || kind == DTV_CP_A2A;
}

static int dtv__row_of(const dtv_trace *t, int pid, int lane)
{
    for (int r = 0; r < t->n_rows; r++)
        if (t->rows[r].pid == pid && t->rows[r].lane == lane) return r;
    return -1;
}

/* The compute span around time ts on row r (-1: none): the last that
 * started by ts and has not ended before it (a recomputation nested in a
 * backward before the backward). */
static int dtv__enclosing(const dtv_row *r, int64_t ts)
{
    int lo = 0, hi = r->n;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (r->s[mid].t0 <= ts) lo = mid + 1;
        else hi = mid;
    }
    for (int j = lo - 1; j >= 0 && r->max_end[j] >= ts; j--)
        if (r->s[j].t1 >= ts) return j;
    return -1;
}

/* c, t and the exchange from the configuration and the events. */
static void dtv__cp_sizes(const dtv_trace *t, dtv_cp *cp, int max_from, int max_bstep, int ranks, int names)
{
    char type[16] = "";
    dtv_trace_config_string(t, "cp_comm_type", type, sizeof type);
    cp->t = (int)dtv_trace_config_number(t, "tensor_model_parallel_size", 1);
    if (cp->t < 1 || cp->t > t->n_ranks) cp->t = 1;
    cp->c = (int)dtv_trace_config_number(t, "context_parallel_size", 0);
    if (cp->c < 1 || cp->c > DTV_MAX_RANKS) {
        cp->c = max_from + 1 > max_bstep + 1 ? max_from + 1 : max_bstep + 1;
        if (cp->c < 2) cp->c = ranks / cp->t > 1 ? ranks / cp->t : 2;
    }
    const int nl = (int)dtv_trace_config_number(t, "num_layers", 0);
    cp->num_layers = nl > 0 ? nl : 0;
    cp->p = t->p;
    if (!strcmp(type, "p2p")) cp->type = DTV_CP_TYPE_P2P;
    else if (!strcmp(type, "allgather")) cp->type = DTV_CP_TYPE_ALLGATHER;
    else if (!strcmp(type, "a2a")) cp->type = DTV_CP_TYPE_A2A;
    else
        cp->type = names & (1 << DTV_CP_TYPE_P2P)         ? DTV_CP_TYPE_P2P
                   : names & (1 << DTV_CP_TYPE_ALLGATHER) ? DTV_CP_TYPE_ALLGATHER
                                                          : DTV_CP_TYPE_A2A;
}

/* Member i's exchanges, the spans around them and their attentions' numbers. */
static dt_status dtv__cp_member(const dtv_trace *t, dtv_cp *cp, int i)
{
    dtv_cp_member *mb = &cp->m[i];
    mb->pid = cp->base + cp->t * i;
    mb->ri = dtv_rank_index(t, mb->pid);
    mb->row = mb->ri >= 0 ? dtv__row_of(t, mb->pid, DT_LANE_COMM) : -1;
    mb->compute_row = mb->ri >= 0 ? dtv__row_of(t, mb->pid, DT_LANE_COMPUTE) : -1;
    if (mb->row < 0) return DT_OK;
    const dtv_row *row = &t->rows[mb->row];
    for (int k = 0; k < row->n; k++) mb->n += dtv__is_cp(row->s[k].kind);
    if (mb->n == 0) return DT_OK;
    mb->idx = malloc((size_t)mb->n * sizeof *mb->idx);
    mb->enc = malloc((size_t)mb->n * sizeof *mb->enc);
    mb->nth = malloc((size_t)mb->n * sizeof *mb->nth);
    mb->of = malloc((size_t)mb->n * sizeof *mb->of);
    if (!mb->idx || !mb->enc || !mb->nth || !mb->of)
        return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory for %d exchanges", t->name, mb->n);
    int n = 0;
    for (int k = 0; k < row->n; k++)
        if (dtv__is_cp(row->s[k].kind)) mb->idx[n++] = k;
    /* the attentions: counted up per (span, pass), then their totals from the end back */
    int cur = -2, cnt[2] = {-1, -1};
    for (int k = 0; k < n; k++) {
        const dtv_span *s = &row->s[mb->idx[k]];
        const dt_trace_event *e = &t->ev[s->ev];
        const int fwd = dtv_coll_extra(e, "forward", 0) != 0;
        mb->enc[k] = mb->compute_row >= 0 ? dtv__enclosing(&t->rows[mb->compute_row], s->t0) : -1;
        if (mb->enc[k] != cur) cur = mb->enc[k], cnt[0] = cnt[1] = -1;
        const int start = s->kind == DTV_CP_RING ? dtv_coll_extra(e, "step", 0) == 0 : s->kind == DTV_CP_AG;
        if (start) cnt[fwd]++;
        mb->nth[k] = s->kind == DTV_CP_A2A ? -1 : cnt[fwd];
    }
    int tot[2] = {0, 0};
    cur = -2;
    for (int k = n - 1; k >= 0; k--) {
        const int fwd = dtv_coll_extra(&t->ev[row->s[mb->idx[k]].ev], "forward", 0) != 0;
        if (mb->enc[k] != cur) cur = mb->enc[k], tot[0] = tot[1] = 0;
        if (!tot[fwd] && mb->nth[k] >= 0) tot[fwd] = mb->nth[k] + 1;
        mb->of[k] = mb->nth[k] >= 0 ? tot[fwd] : 0;
    }
    return DT_OK;
}

dt_status dtv_cp_index(dtv_trace *t)
{
    /* the exchanges: who has them, the largest from and backward step, the names */
    int low = -1, ranks = 0, max_from = -1, max_bstep = -1, names = 0;
    for (int r = 0; r < t->n_rows; r++) {
        const dtv_row *row = &t->rows[r];
        if (row->lane != DT_LANE_COMM) continue;
        int any = 0;
        for (int k = 0; k < row->n; k++) {
            if (!dtv__is_cp(row->s[k].kind)) continue;
            any = 1;
            const dt_trace_event *e = &t->ev[row->s[k].ev];
            names |= 1 << (row->s[k].kind == DTV_CP_RING  ? DTV_CP_TYPE_P2P
                           : row->s[k].kind == DTV_CP_A2A ? DTV_CP_TYPE_A2A
                                                          : DTV_CP_TYPE_ALLGATHER);
            if (row->s[k].kind != DTV_CP_RING) continue;
            const int from = (int)dtv_coll_extra(e, "from", -1), step = (int)dtv_coll_extra(e, "step", -1);
            if (from > max_from) max_from = from;
            if (!dtv_coll_extra(e, "forward", 0) && step > max_bstep) max_bstep = step;
        }
        if (!any) continue;
        ranks++;
        if (low < 0 || row->pid < low) low = row->pid;
    }
    if (low < 0) return DT_OK;
    dtv_cp *cp = calloc(1, sizeof *cp);
    if (!cp) return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", t->name);
    t->cp = cp;
    dtv__cp_sizes(t, cp, max_from, max_bstep, ranks, names);
    /* the ring steps name context ranks: refuse one outside the group */
    for (int r = 0; r < t->n_rows; r++) {
        const dtv_row *row = &t->rows[r];
        for (int k = 0; k < row->n && row->lane == DT_LANE_COMM; k++) {
            if (row->s[k].kind != DTV_CP_RING) continue;
            const dt_trace_event *e = &t->ev[row->s[k].ev];
            static const char *const keys[] = {"step", "from"};
            for (int q = 0; q < 2; q++) {
                const double v = dtv_coll_extra(e, keys[q], -1);
                if (!(v >= 0 && v < cp->c))
                    return DT_FAIL(DT_ERR_FORMAT,
                                   "%s: event \"%s\" of rank %d: \"args.%s\" is %.17g; expected 0..%d (context "
                                   "parallel size %d)",
                                   t->name, e->name, e->pid, keys[q], v, cp->c - 1, cp->c);
            }
        }
    }
    /* the group of the lowest rank, and how many groups have exchanges (their context ranks 0, distinct) */
    cp->base = low - cp->t * ((low / cp->t) % cp->c);
    int *keys = malloc((size_t)ranks * sizeof *keys);
    cp->m = calloc((size_t)cp->c, sizeof *cp->m);
    if (!keys || !cp->m) {
        free(keys);
        return DT_FAIL(DT_ERR_NOMEM, "%s: out of memory", t->name);
    }
    int nk = 0;
    for (int r = 0; r < t->n_rows; r++) {
        const dtv_row *row = &t->rows[r];
        int any = 0;
        for (int k = 0; k < row->n && row->lane == DT_LANE_COMM && !any; k++) any = dtv__is_cp(row->s[k].kind);
        if (any) keys[nk++] = row->pid - cp->t * ((row->pid / cp->t) % cp->c);
    }
    for (int k = 0; k < nk; k++) { /* at most DTV_MAX_RANKS^2 / 2 comparisons, once */
        int dup = 0;
        for (int j = 0; j < k && !dup; j++) dup = keys[j] == keys[k];
        cp->groups += !dup;
    }
    free(keys);
    for (int i = 0; i < cp->c; i++) DT_CHECK(dtv__cp_member(t, cp, i));
    return DT_OK;
}

void dtv_cp_free(dtv_trace *t)
{
    dtv_cp *cp = t->cp;
    if (!cp) return;
    for (int i = 0; cp->m && i < cp->c; i++) {
        free(cp->m[i].idx);
        free(cp->m[i].enc);
        free(cp->m[i].nth);
        free(cp->m[i].of);
    }
    free(cp->m);
    free(cp);
    t->cp = NULL;
}

void dtv_cp_state_of(const dtv_trace *t, int i, int64_t now, dtv_cp_state *out)
{
    memset(out, 0, sizeof *out);
    out->x = out->holds = out->arriving = out->enc_kind = out->mb = out->nth = -1;
    const dtv_cp *cp = t->cp;
    if (!cp || i < 0 || i >= cp->c || cp->m[i].n == 0) return;
    const dtv_cp_member *mb = &cp->m[i];
    const dtv_row *row = &t->rows[mb->row];
    const int k = dtv_row_last_started(row, mb->idx, mb->n, now);
    if (k < 0) return;
    const dtv_span *s = &row->s[mb->idx[k]];
    const dt_trace_event *e = &t->ev[s->ev];
    const int c = cp->c;
    out->x = k;
    out->active = s->t1 > now;
    out->frac = out->active && s->t1 > s->t0 ? (double)(now - s->t0) / (double)(s->t1 - s->t0) : 1.0;
    out->kind = s->kind;
    out->iter = e->iter;
    out->forward = dtv_coll_extra(e, "forward", 0) != 0;
    out->bytes = e->bytes > 0 ? e->bytes : 0;
    out->nth = mb->nth[k];
    out->of = mb->of[k];
    if (mb->enc[k] >= 0) {
        const dtv_span *en = &t->rows[mb->compute_row].s[mb->enc[k]];
        out->enc_kind = en->kind;
        out->mb = t->ev[en->ev].micro_batch == DT_TRACE_NONE ? -1 : t->ev[en->ev].micro_batch;
    }
    if (s->kind == DTV_CP_RING) {
        const int from = (int)dtv_coll_extra(e, "from", 0);
        out->step = (int)dtv_coll_extra(e, "step", 0);
        out->steps = out->forward ? c - 1 : c;
        out->holds = out->active ? (from + 1) % c : from;
        if (out->active) {
            out->arriving = from;
            out->grad = out->forward ? 0 : out->step < c - 1 ? 1 : 2;
        }
    } else if (s->kind == DTV_CP_AG) {
        out->all = !out->active;
        out->all_arriving = out->active;
    } else if (s->kind == DTV_CP_RS) {
        out->all = out->active;
    } else {
        out->all_arriving = out->active;
    }
}

int dtv_cp_cell(const dtv_cp_state *s, int i, int j)
{
    if (s->x < 0) return DTV_CP_CELL_NONE;
    if (s->kind == DTV_CP_RING) {
        if (j == s->holds) return DTV_CP_CELL_HELD;
        return j == s->arriving ? DTV_CP_CELL_ARRIVING : DTV_CP_CELL_NONE;
    }
    if (s->all || j == i) return DTV_CP_CELL_HELD;
    return s->all_arriving ? DTV_CP_CELL_ARRIVING : DTV_CP_CELL_NONE;
}
