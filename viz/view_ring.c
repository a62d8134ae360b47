/* view_ring.c: the ring view (see dtv_view.h): how a data-parallel
 * allreduce or a parameter server moves the gradients, at playback time
 * v->now.
 *
 * Allreduce (t->has_ring): the ranks with collective steps on a circle,
 * rank 0 at the top, clockwise. For each rank, the step shown is the
 * comm-lane step (reduce-scatter, all-gather, reduce, broadcast) in progress
 * at `now` or, when none is, the last one that ended: its chunk is a box on
 * the link from the rank to the step's `peer`, at (now - t0)/(t1 - t0) of
 * the way (a finished step: a hollow box at the end of the link); peer -1
 * (a step that only receives) draws no box. Each directed link is its own
 * lane, offset to the right of its direction, so the two halves of a tree
 * exchange do not hide each other. The bytes on each link and per rank are
 * those of the steps of the rank's current iteration ended by `now`.
 *
 * The buffer S of "sent X x S": the gradient bytes one iteration
 * allreduces on that rank. It comes from the rank's `bucket launch` events
 * (their bytes summed over one iteration), which both dtrain and dtsim
 * write with data parallelism; without them (dtsim's pipeline runs) it is
 * derived from the steps' sizes with the algorithm's own rule (ring: the
 * n-1 reduce-scatter segments plus the one all-gather step 0 sends; tree:
 * twice the first halving's; naive: the whole buffer sent to rank 0), never
 * from the sum being explained (trace_coll.c, dtv_coll_index). The panel
 * says which.
 *
 * Parameter server (t->pushes > 0): workers on the circle, servers in the
 * middle; a worker's push/pull span is drawn as the push (gradients, first
 * half of the span) and the pull (new weights, second half): the trace
 * does not split them, and the caption says so. A server is filled while
 * one of its `apply` spans runs. The staleness histogram counts the pushes
 * ended by `now`.
 *
 * Invariants: the layout depends on the area only (dtv_ring_point and the
 * other geometry helpers give the pixels the tests probe); drawing is
 * clipped to the area; per frame the cost is O(ranks x log(spans)) plus,
 * for at most DTV__LINK_LABELS ranks, their current iteration's steps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtv_ring_draw.h"

/* Link byte labels up to DTV__LINK_LABELS ranks (beyond, they crowd the rank labels; the panel lists them). */
enum { DTV__LINK_LABELS = 8 };

/* ---- figures ------------------------------------------------------------ */

static const dtv_span *dtv__span(const dtv_trace *t, const dtv_coll_rank *cr, int i)
{
    return &t->rows[cr->row].s[cr->idx[i]];
}

/* The last of cr's spans that started by now (-1: none). */
static int dtv__last_started(const dtv_trace *t, const dtv_coll_rank *cr, int64_t now)
{
    return dtv_row_last_started(&t->rows[cr->row], cr->idx, cr->n, now);
}

void dtv_ring_state_of(const dtv_trace *t, int ri, int64_t now, dtv_ring_state *out)
{
    memset(out, 0, sizeof *out);
    out->span = -1;
    out->peer = -1;
    out->step_name = -1;
    const dtv_coll *c = t->coll;
    if (!c || ri < 0 || ri >= t->n_ranks || !c->rank[ri].steps) return;
    const dtv_coll_rank *cr = &c->rank[ri];
    out->buffer = cr->buffer;
    const int i = dtv__last_started(t, cr, now);
    if (i < 0) return;
    const dtv_span *s = dtv__span(t, cr, i);
    const dt_trace_event *e = &t->ev[s->ev];
    out->span = cr->idx[i];
    out->active = s->t1 > now;
    out->frac = out->active && s->t1 > s->t0 ? (double)(now - s->t0) / (double)(s->t1 - s->t0) : 1.0;
    out->iter = e->iter;
    out->peer = (int)dtv_coll_extra(e, "peer", -1);
    out->step_name = dtv_coll_step_name(e->name);
    out->step = (int)dtv_coll_extra(e, "step", 0) - c->step_base[out->step_name];
    out->steps = c->step_count[out->step_name];
    /* the first step of this iteration (iterations do not go back in time on one rank) */
    int lo = 0, hi = i;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (t->ev[dtv__span(t, cr, mid)->ev].iter < e->iter) lo = mid + 1;
        else hi = mid;
    }
    out->first = lo;
    out->ended = out->active ? i : i + 1; /* steps [first, ended) of cr are done */
    out->sent = cr->cum[out->ended] - cr->cum[lo];
}

int64_t dtv_ring_link_bytes(const dtv_trace *t, int ri, int64_t now, int to_pid)
{
    dtv_ring_state s;
    dtv_ring_state_of(t, ri, now, &s);
    if (s.span < 0) return 0;
    const dtv_coll_rank *cr = &t->coll->rank[ri];
    int64_t b = 0;
    for (int i = s.first; i < s.ended; i++) {
        const dt_trace_event *e = &t->ev[dtv__span(t, cr, i)->ev];
        if ((int)dtv_coll_extra(e, "peer", -1) == to_pid && e->bytes > 0) b += e->bytes;
    }
    return b;
}

static const char *const dtv__step_names[DTV_N_STEP_NAMES] = {"reduce-scatter", "all-gather", "reduce", "broadcast",
                                                              "allreduce"};
static const char *const dtv__step_short[DTV_N_STEP_NAMES] = {"RS", "AG", "reduce", "bcast", "allreduce"};

static SDL_Color dtv__step_color(int nm)
{
    return dtv_kind_color(nm == DTV_STEP_AG || nm == DTV_STEP_BCAST ? DTV_AG : DTV_RS);
}

/* "reduce-scatter step 2 of 3" */
static void dtv__step_label(char *b, size_t n, const dtv_ring_state *s)
{
    if (s->steps > 1) snprintf(b, n, "%s step %d of %d", dtv__step_names[s->step_name], s->step + 1, s->steps);
    else snprintf(b, n, "%s", dtv__step_names[s->step_name]);
}

/* ---- allreduce ------------------------------------------------------------ */

static void dtv__draw_allreduce(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v)
{
    const dtv_coll *co = t->coll;
    const int n = co->n, g = co->group > 1 ? co->group : n;
    const int64_t now = v->now;
    dtv__ring_layout L;
    dtv__ring_layout_of(area, n, &L);
    static const char *const algo_names[] = {"", "ring allreduce", "tree allreduce (recursive halving-doubling)",
                                             "naive allreduce (reduce to rank 0, then broadcast)",
                                             "MPI's own allreduce"};
    char what[160];
    snprintf(what, sizeof what, "%s over %d ranks%s", algo_names[co->algo], g, g < n ? " per group" : "");
    dtv__ring_title(c, area, t, v, what);
    const int lh = dtv_text_height(c, DTV_FONT_NORMAL), sh = dtv_text_height(c, DTV_FONT_SMALL);

    int lowest = -1;
    for (int k = 0; k < t->n_ranks && lowest < 0; k++)
        if (co->rank[k].steps) lowest = k;
    /* the ring's links, faint (tree and naive links appear as they are used) */
    if (co->algo == DTV_ALGO_RING && n <= 256)
        for (int k = 0; k < t->n_ranks; k++) {
            const dtv_coll_rank *cr = &co->rank[k];
            if (!cr->steps || cr->first_peer == INT32_MIN) continue;
            const int pk = dtv_rank_index(t, cr->first_peer);
            if (pk < 0 || co->rank[pk].slot < 0) continue;
            dtv__ring_path p;
            dtv__ring_path_of(area, &L, n, cr->slot, co->rank[pk].slot, &p);
            dtv__ring_path_draw(c, &p, 0, 1, DTV_GRID, 1);
        }
    /* the bytes each link carried this iteration (few ranks only: they must be readable) */
    if (n <= DTV__LINK_LABELS)
        for (int k = 0; k < t->n_ranks; k++) {
            const dtv_coll_rank *cr = &co->rank[k];
            if (!cr->steps) continue;
            dtv_ring_state s;
            dtv_ring_state_of(t, k, now, &s);
            if (s.span < 0) continue;
            int64_t bytes[DTV__LINK_LABELS] = {0};
            for (int i = s.first; i < s.ended; i++) {
                const dt_trace_event *e = &t->ev[dtv__span(t, cr, i)->ev];
                const int pk = dtv_rank_index(t, (int)dtv_coll_extra(e, "peer", -1));
                if (pk >= 0 && co->rank[pk].slot >= 0 && e->bytes > 0) bytes[co->rank[pk].slot] += e->bytes;
            }
            for (int j = 0; j < n; j++) {
                if (!bytes[j]) continue;
                dtv__ring_path p;
                dtv__ring_path_of(area, &L, n, cr->slot, j, &p);
                if (co->algo != DTV_ALGO_RING) dtv__ring_path_draw(c, &p, 0, 1, DTV_GRID, 1);
                double mx, my;
                dtv__ring_path_at(&p, 0.5, &mx, &my);
                const int d = L.box + 12;
                char b[32];
                dtv_fmt_bytes(b, sizeof b, (double)bytes[j]);
                int tw = 0;
                TTF_SizeUTF8(c->small, b, &tw, NULL);
                /* beside the lane's middle, on its outer side, clear of the box by its half diagonal */
                const double ex = fabs(p.px) * tw / 2.0 + fabs(p.py) * sh / 2.0;
                dtv_text(c, (int)lround(mx + p.px * (d + ex)), (int)lround(my + p.py * (d + ex)) - sh / 2,
                         DTV_FONT_SMALL, DTV_CENTER, DTV_DIM, "%s", b);
            }
        }
    /* nodes: filled with the phase's colour while the rank is in a step */
    int64_t iter_shown = -1;
    for (int k = 0; k < t->n_ranks; k++) {
        const dtv_coll_rank *cr = &co->rank[k];
        if (!cr->steps) continue;
        dtv_ring_state s;
        dtv_ring_state_of(t, k, now, &s);
        if (s.span >= 0 && s.iter > iter_shown) iter_shown = s.iter;
        int x, y;
        dtv_ring_point(area, n, cr->slot, &x, &y);
        dtv__ring_disc(c, x, y, L.node_r, s.span >= 0 && s.active ? dtv__step_color(s.step_name) : DTV_PANEL, DTV_DIM);
    }
    /* chunks, then the labels */
    const int label_every = n <= 24 ? 1 : (n + 23) / 24;
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < t->n_ranks; k++) {
            const dtv_coll_rank *cr = &co->rank[k];
            if (!cr->steps) continue;
            dtv_ring_state s;
            dtv_ring_state_of(t, k, now, &s);
            const int pk = s.peer >= 0 ? dtv_rank_index(t, s.peer) : -1;
            if (pass == 0) {
                if (s.span < 0 || pk < 0 || co->rank[pk].slot < 0) continue;
                dtv__ring_path p;
                dtv__ring_path_of(area, &L, n, cr->slot, co->rank[pk].slot, &p);
                double x, y;
                dtv__ring_path_at(&p, s.frac, &x, &y);
                if (s.active) dtv__ring_path_draw(c, &p, 0, s.frac, dtv__step_color(s.step_name), n <= 64 ? 3 : 1);
                dtv__ring_box(c, (int)lround(x), (int)lround(y), L.box,
                              s.active ? dtv__step_color(s.step_name) : DTV_DIM, s.active);
                continue;
            }
            if (cr->slot % label_every || (cr->slot && n - cr->slot < label_every)) continue;
            const double a = -M_PI / 2 + 2.0 * M_PI * cr->slot / n;
            char l2[48] = "";
            if (s.span >= 0 && n <= 24) {
                if (!s.active) snprintf(l2, sizeof l2, "idle");
                else if (s.steps > 1)
                    snprintf(l2, sizeof l2, "%s %d/%d%s", dtv__step_short[s.step_name], s.step + 1, s.steps,
                             s.peer < 0 ? " recv" : "");
                else snprintf(l2, sizeof l2, "%s%s", dtv__step_short[s.step_name], s.peer < 0 ? " recv" : "");
            }
            char l1[32];
            snprintf(l1, sizeof l1, "rank %d", t->pids[k]);
            dtv__ring_node_label(c, &L, a, L.node_r + 6, n <= 24 ? DTV_FONT_NORMAL : DTV_FONT_SMALL, DTV_FG, l1, l2,
                                 DTV_FG);
        }

    /* the panel */
    const SDL_Rect P = L.panel;
    int y = P.y;
    dtv_ring_state s0;
    dtv_ring_state_of(t, lowest, now, &s0);
    if (iter_shown < 0) {
        y += dtv__ring_wrap(c, P.x, y, P.w, DTV_FONT_BOLD, DTV_FG,
                            "No collective step yet: the ranks are computing their first gradients.");
        y += 4;
    } else {
        dtv_text(c, P.x, y, DTV_FONT_BOLD, DTV_LEFT, DTV_FG, "iter %lld (of 0..%lld)%s", (long long)iter_shown,
                 (long long)(t->n_steps - 1), now >= t->t_max ? ": the last, final state" : "");
        y += lh + 6;
        if (s0.span >= 0) {
            char st[80];
            dtv__step_label(st, sizeof st, &s0);
            dtv__ring_box(c, P.x + 6, y + lh / 2, 5, s0.active ? dtv__step_color(s0.step_name) : DTV_DIM, s0.active);
            dtv_text(c, P.x + 18, y, DTV_FONT_NORMAL, DTV_LEFT, DTV_FG, "rank %d: %s%s", t->pids[lowest], st,
                     s0.active ? (s0.peer < 0 ? " (receiving)" : "") : " (ended; idle)");
            y += lh + 4;
        }
    }
    static const char *const explain[] = {
        "",
        "Reduce-scatter: n-1 steps; in each, every rank sends one of the n chunks of its buffer to the next rank, "
        "which adds it to its own. Then each rank holds one fully summed chunk. All-gather: n-1 more steps pass "
        "the summed chunks on until every rank has all of them.",
        "Halving: ranks exchange half of their range with a partner 2^k apart and add the half they keep; "
        "doubling: they swap the summed blocks back. Ranks beyond a power of two fold into a partner first "
        "(reduce) and get the result back (broadcast).",
        "Every rank sends its whole buffer to rank 0, which adds them in order, then rank 0 broadcasts the sum "
        "(binomial tree): (n-1) x S go into rank 0's link, its bottleneck.",
        "MPI's allreduce does not say whom it sends to: each rank's single step is drawn without a chunk.",
    };
    y += dtv__ring_wrap(c, P.x, y, P.w, DTV_FONT_SMALL, DTV_DIM, explain[co->algo]) + 6;
    const double formula = 2.0 * (g - 1) / g;
    if (co->algo == DTV_ALGO_RING || co->algo == DTV_ALGO_TREE)
        dtv_text(c, P.x, y, DTV_FONT_NORMAL, DTV_LEFT, DTV_ACCENT,
                 "each rank sends 2(n-1)/n x S = 2*%d/%d x S = %.3f x S", g - 1, g, formula);
    else
        dtv_text(c, P.x, y, DTV_FONT_NORMAL, DTV_LEFT, DTV_ACCENT, "a ring would send 2(n-1)/n x S = %.3f x S per rank",
                 formula);
    y += lh + 2;
    if (co->algo == DTV_ALGO_TREE && (g & (g - 1)))
        y += dtv__ring_wrap(c, P.x, y, P.w, DTV_FONT_SMALL, DTV_DIM,
                            "(n is not a power of two: the fold and unfold move whole buffers on top)");
    y +=
        dtv__ring_wrap(c, P.x, y, P.w, DTV_FONT_SMALL, DTV_DIM,
                       co->buffer_from_buckets
                           ? "S: the gradient bytes a rank allreduces per iteration (its bucket launch events). By the "
                             "links and below: the bytes sent this iteration so far."
                           : "S: the gradient bytes a rank allreduces per iteration (from the steps' sizes: no bucket "
                             "launch events). By the links and below: the bytes sent this iteration so far.") +
        6;
    /* per rank: sent so far this iteration, as bytes, as X and as a bar up to the formula's mark */
    const int c1 = P.x + 44, c2 = c1 + (P.w >= 420 ? 96 : 80), c3 = c2 + (P.w >= 420 ? 96 : 80), c4 = c3 + 52;
    const int bw = P.x + P.w - c4;
    double xmax_all = formula;
    for (int k = 0; k < t->n_ranks; k++)
        if (co->rank[k].steps) {
            dtv_ring_state s;
            dtv_ring_state_of(t, k, now, &s);
            if (s.buffer > 0 && (double)s.sent / s.buffer > xmax_all) xmax_all = (double)s.sent / s.buffer;
        }
    const double bscale = bw > 0 ? bw / (xmax_all * 1.08) : 0;
    dtv_text(c, P.x, y, DTV_FONT_SMALL, DTV_LEFT, DTV_DIM, "rank");
    dtv_text(c, c1, y, DTV_FONT_SMALL, DTV_LEFT, DTV_DIM, "S");
    dtv_text(c, c2, y, DTV_FONT_SMALL, DTV_LEFT, DTV_DIM, "sent");
    dtv_text(c, c3, y, DTV_FONT_SMALL, DTV_LEFT, DTV_DIM, "X");
    if (bw >= 40)
        dtv_text(c, c4 + (int)lround(formula * bscale), y, DTV_FONT_SMALL, DTV_CENTER, DTV_ACCENT, "%.3f", formula);
    y += sh + 2;
    dtv_line(c, P.x, y, P.x + P.w, y, DTV_GRID);
    y += 3;
    const int rows_fit = (P.y + P.h - y) / lh - 2;
    int shown = 0, total = 0;
    double xmin = INFINITY, xmax = -INFINITY;
    const int y_rows = y;
    for (int k = 0; k < t->n_ranks; k++) {
        if (!co->rank[k].steps) continue;
        dtv_ring_state s;
        dtv_ring_state_of(t, k, now, &s);
        const double X = s.buffer > 0 ? (double)s.sent / s.buffer : NAN;
        if (!isnan(X)) {
            if (X < xmin) xmin = X;
            if (X > xmax) xmax = X;
        }
        total++;
        if (shown >= rows_fit) continue;
        char b1[32], b2[32];
        dtv_fmt_bytes(b1, sizeof b1, s.buffer);
        dtv_fmt_bytes(b2, sizeof b2, (double)s.sent);
        dtv_text(c, P.x, y, DTV_FONT_NORMAL, DTV_LEFT, DTV_FG, "%d", t->pids[k]);
        dtv_text(c, c1, y, DTV_FONT_NORMAL, DTV_LEFT, DTV_DIM, "%s", s.buffer > 0 ? b1 : "?");
        dtv_text(c, c2, y, DTV_FONT_NORMAL, DTV_LEFT, DTV_FG, "%s", b2);
        if (!isnan(X)) {
            const int done = fabs(X - formula) < 0.005 && co->algo != DTV_ALGO_NAIVE;
            dtv_text(c, c3, y, DTV_FONT_NORMAL, DTV_LEFT, done ? DTV_ACCENT : DTV_FG, "%.3f", X);
            if (bw >= 40)
                dtv_fill(c, c4, y + 3, (int)lround(X * bscale), lh - 6,
                         s.span >= 0 ? dtv__step_color(s.step_name) : DTV_DIM);
        }
        y += lh;
        shown++;
    }
    if (bw >= 40 && shown) { /* the formula's mark across the bars */
        const int fx = c4 + (int)lround(formula * bscale);
        dtv_line(c, fx, y_rows - 2, fx, y, DTV_ACCENT);
    }
    if (shown < total)
        dtv_text(c, P.x, y, DTV_FONT_SMALL, DTV_LEFT, DTV_DIM, "+%d more ranks; X over all ranks: %.3f .. %.3f",
                 total - shown, isinf(xmin) ? 0.0 : xmin, isinf(xmax) ? 0.0 : xmax);
    else if (co->algo == DTV_ALGO_RING || co->algo == DTV_ALGO_TREE)
        dtv__ring_wrap(c, P.x, y + 4, P.w, DTV_FONT_SMALL, DTV_DIM,
                       "X = sent / S reaches 2(n-1)/n when the iteration's allreduce has ended: n-1 chunks of S/n in "
                       "each phase, whatever n is.");

    /* legend */
    int lx = area.x + 8;
    const int ly = area.y + area.h - DTV__RING_BOTTOM + 8;
    dtv__ring_legend_entry(c, &lx, ly, dtv_kind_color(DTV_RS), 1, "reduce-scatter / reduce: partial sums on their way");
    dtv__ring_legend_entry(c, &lx, ly, dtv_kind_color(DTV_AG), 1, "all-gather / broadcast: summed chunks");
    dtv__ring_legend_entry(c, &lx, ly, DTV_DIM, 0, "a rank's last step, ended");
}

/* ---- parameter server ----------------------------------------------------- */

void dtv_ps_hist_plot(SDL_Rect area, SDL_Rect *plot)
{
    dtv__ring_layout L;
    dtv__ring_layout_of(area, 1, &L);
    const int h = dtv__ring_clampi(L.panel.h * 50 / 100, 60, 340);
    *plot = (SDL_Rect){L.panel.x + 46, L.panel.y + L.panel.h - h - 44, L.panel.w - 56, h};
}

/* A "nice" ceiling: 1, 2, 5 x 10^k >= v. */
static double dtv__nice_ceil(double v)
{
    if (v <= 1) return 1;
    const double p = pow(10.0, floor(log10(v)));
    const double f = v / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

int dtv_ps_bar_height(SDL_Rect area, const int64_t hist[DTV_N_STALE], int k)
{
    SDL_Rect P;
    dtv_ps_hist_plot(area, &P);
    int64_t mx = 0;
    for (int i = 0; i < DTV_N_STALE; i++)
        if (hist[i] > mx) mx = hist[i];
    const double top = dtv__nice_ceil((double)mx);
    return (int)lround((double)hist[k] / top * P.h);
}

static void dtv__draw_hist(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, int64_t now)
{
    SDL_Rect P;
    dtv_ps_hist_plot(area, &P);
    int64_t hist[DTV_N_STALE], count, sum, mx;
    dtv_coll_hist_at(t, now, hist, &count, &sum, &mx);
    const int lh = dtv_text_height(c, DTV_FONT_NORMAL), sh = dtv_text_height(c, DTV_FONT_SMALL);
    int64_t hmax = 0;
    for (int i = 0; i < DTV_N_STALE; i++)
        if (hist[i] > hmax) hmax = hist[i];
    const double top = dtv__nice_ceil((double)hmax);
    dtv_text(c, P.x - 40, P.y - 2 * lh - 14, DTV_FONT_BOLD, DTV_LEFT, DTV_FG, "staleness of the pushes so far");
    if (count)
        dtv_text(c, P.x - 40, P.y - lh - 12, DTV_FONT_NORMAL, DTV_LEFT, DTV_FG, "%lld pushes: mean %.2f, max %lld",
                 (long long)count, (double)sum / (double)count, (long long)mx);
    else dtv_text(c, P.x - 40, P.y - lh - 12, DTV_FONT_NORMAL, DTV_LEFT, DTV_DIM, "no push has finished yet");
    /* y axis: 0, top/2 (when a whole number), top */
    for (int q = 0; q <= 2; q++) {
        if (q == 1 && fmod(top, 2.0) != 0) continue;
        const int yy = P.y + P.h - q * P.h / 2;
        dtv_line(c, P.x, yy, P.x + P.w, yy, q ? DTV_GRID : DTV_DIM);
        dtv_text(c, P.x - 4, yy - sh / 2, DTV_FONT_SMALL, DTV_RIGHT, DTV_DIM, "%g", top * q / 2);
    }
    dtv_line(c, P.x, P.y, P.x, P.y + P.h, DTV_DIM);
    const SDL_Color bar = dtv_kind_color(DTV_PUSHPULL);
    for (int k = 0; k < DTV_N_STALE; k++) {
        const int x0 = P.x + k * P.w / DTV_N_STALE + 2, x1 = P.x + (k + 1) * P.w / DTV_N_STALE - 2;
        const int h = (int)lround((double)hist[k] / top * P.h);
        if (h > 0) {
            dtv_fill(c, x0, P.y + P.h - h, x1 - x0, h, bar);
            dtv_frame(c, x0, P.y + P.h - h, x1 - x0, h, DTV_DIM);
        }
        if (k % (P.w / DTV_N_STALE >= 22 ? 1 : 2) == 0 || k == DTV_N_STALE - 1)
            dtv_text(c, (x0 + x1) / 2, P.y + P.h + 2, DTV_FONT_SMALL, DTV_CENTER, DTV_DIM, "%d%s", k,
                     k == DTV_N_STALE - 1 ? "+" : "");
    }
    dtv__ring_wrap(
        c, P.x - 40, P.y + P.h + 2 + sh, P.w + 40, DTV_FONT_SMALL, DTV_DIM,
        "x: staleness, the updates the servers applied between a worker's pull and its next push; y: pushes");
}

static void dtv__draw_ps(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v)
{
    const dtv_coll *co = t->coll;
    const int nw = co->n_workers, ns = co->n_servers;
    const int64_t now = v->now;
    dtv__ring_layout L;
    dtv__ring_layout_of(area, nw, &L);
    char mode[32] = "parameter server";
    if (t->config_json && strstr(t->config_json, "\"ps-async\"")) snprintf(mode, sizeof mode, "ps-async");
    else if (t->config_json && strstr(t->config_json, "\"ps-sync\"")) snprintf(mode, sizeof mode, "ps-sync");
    char what[96];
    snprintf(what, sizeof what, "%s: %d workers, %d server%s", mode, nw, ns, ns == 1 ? "" : "s");
    dtv__ring_title(c, area, t, v, what);
    /* server positions: the centre, or a small circle */
    const int sr = dtv__ring_clampi(L.R / 6, 10, 24);
    int sx[64], sy[64];
    const int ns_drawn = ns < 64 ? ns : 64;
    for (int j = 0; j < ns_drawn; j++) {
        const double a = -M_PI / 2 + 2.0 * M_PI * j / (ns > 0 ? ns : 1);
        const double rr = ns > 1 ? L.R * 0.32 : 0;
        sx[j] = (int)lround(L.cx + rr * cos(a));
        sy[j] = (int)lround(L.cy + rr * sin(a));
    }
    /* lines */
    if ((int64_t)nw * ns_drawn <= 4096)
        for (int k = 0; k < t->n_ranks; k++) {
            if (!co->rank[k].worker || co->rank[k].server) continue;
            int x, y;
            dtv_ring_point(area, nw, co->rank[k].slot, &x, &y);
            for (int j = 0; j < ns_drawn; j++) dtv_line(c, x, y, sx[j], sy[j], DTV_GRID);
        }
    /* servers */
    const int lh = dtv_text_height(c, DTV_FONT_NORMAL), sh = dtv_text_height(c, DTV_FONT_SMALL);
    char applying[160] = "";
    for (int k = 0; k < t->n_ranks; k++) {
        const dtv_coll_rank *cr = &co->rank[k];
        if (!cr->server || cr->slot < 0 || cr->slot >= ns_drawn) continue;
        const int j = cr->slot;
        int active = 0;
        const dt_trace_event *e = NULL;
        if (cr->n) {
            const int i = dtv__last_started(t, cr, now);
            if (i >= 0 && dtv__span(t, cr, i)->t1 > now) {
                active = 1;
                e = &t->ev[dtv__span(t, cr, i)->ev];
            }
        }
        if (active) dtv_disc(c, sx[j], sy[j], sr + 5, DTV_ACCENT);
        dtv__ring_disc(c, sx[j], sy[j], sr, active ? dtv_kind_color(DTV_OPTIM) : DTV_PANEL, DTV_DIM);
        dtv_text(c, sx[j], sy[j] + sr + 6, DTV_FONT_NORMAL, DTV_CENTER, DTV_FG, "server %d", j);
        dtv_text(c, sx[j], sy[j] + sr + 6 + lh, DTV_FONT_SMALL, DTV_CENTER, DTV_DIM, "rank %d", t->pids[k]);
        if (active && !applying[0]) {
            const int w = (int)dtv_coll_extra(e, "worker", -1);
            if (w >= 0)
                snprintf(applying, sizeof applying,
                         "server %d is applying worker %d's push (staleness %d) -> version %d", j, w,
                         (int)dtv_coll_extra(e, "staleness", 0), (int)dtv_coll_extra(e, "version", 0));
            else
                snprintf(applying, sizeof applying, "server %d is applying the summed push -> version %d", j,
                         (int)dtv_coll_extra(e, "version", 0));
        }
    }
    /* workers, their pushes and pulls */
    const int label_every = nw <= 24 ? 1 : (nw + 23) / 24;
    const SDL_Color cpush = dtv_kind_color(DTV_PUSHPULL), cpull = dtv_kind_color(DTV_OPTIM);
    for (int k = 0; k < t->n_ranks; k++) {
        const dtv_coll_rank *cr = &co->rank[k];
        if (!cr->worker || cr->server) continue;
        int x, y;
        dtv_ring_point(area, nw, cr->slot, &x, &y);
        const int i = dtv__last_started(t, cr, now);
        const dtv_span *s = i >= 0 ? dtv__span(t, cr, i) : NULL;
        const int active = s && s->t1 > now;
        dtv__ring_disc(c, x, y, L.node_r, active ? cpush : DTV_PANEL, DTV_DIM);
        if (active) {
            const double f = s->t1 > s->t0 ? (double)(now - s->t0) / (double)(s->t1 - s->t0) : 1.0;
            const int push = f < 0.5;
            const double g = push ? 2 * f : 2 * f - 1;
            for (int j = 0; j < ns_drawn; j++) {
                const double fx = push ? x + g * (sx[j] - x) : sx[j] + g * (x - sx[j]);
                const double fy = push ? y + g * (sy[j] - y) : sy[j] + g * (y - sy[j]);
                dtv_line(c, push ? x : sx[j], push ? y : sy[j], (int)lround(fx), (int)lround(fy),
                         push ? DTV_DIM : cpull);
                dtv__ring_box(c, (int)lround(fx), (int)lround(fy), L.box, push ? cpush : cpull, 1);
            }
        }
        if (cr->slot % label_every || (cr->slot && nw - cr->slot < label_every)) continue;
        const double a = -M_PI / 2 + 2.0 * M_PI * cr->slot / nw;
        char l1[48], l2[64] = "";
        const char *wp = strstr(t->pname[k], "(worker ");
        if (wp) snprintf(l1, sizeof l1, "worker %d (rank %d)", atoi(wp + 8), t->pids[k]);
        else snprintf(l1, sizeof l1, "rank %d", t->pids[k]);
        if (!s && nw <= 24) snprintf(l2, sizeof l2, "computing its first step");
        if (s && nw <= 24) {
            const dt_trace_event *e = &t->ev[s->ev];
            if (active)
                snprintf(l2, sizeof l2, "%s iter %lld, staleness %d", now - s->t0 < s->t1 - now ? "push" : "pull",
                         (long long)e->iter, (int)dtv_coll_extra(e, "staleness", 0));
            else if (i == cr->n - 1) snprintf(l2, sizeof l2, "done: %d pushes", cr->n);
            else snprintf(l2, sizeof l2, "computing iter %lld", (long long)(e->iter + 1));
        }
        dtv__ring_node_label(c, &L, a, L.node_r + 6, nw <= 24 ? DTV_FONT_NORMAL : DTV_FONT_SMALL, DTV_FG, l1, l2,
                             DTV_DIM);
    }
    /* the panel: captions, then the histogram */
    const SDL_Rect P = L.panel;
    int y = P.y;
    y += dtv__ring_wrap(c, P.x, y, P.w, DTV_FONT_NORMAL, DTV_FG,
                        "A worker pushes its gradients to every server and pulls the new weights back.");
    y += 4;
    y += dtv__ring_wrap(c, P.x, y, P.w, DTV_FONT_SMALL, DTV_DIM,
                        "The trace has one push/pull span per step: its first half is drawn as the push, its second "
                        "half as the pull (the trace does not say where one ends). A server is filled while it applies "
                        "an update.");
    y += 6;
    if (applying[0]) y += dtv__ring_wrap(c, P.x, y, P.w, DTV_FONT_NORMAL, DTV_ACCENT, applying);
    (void)sh;
    dtv__draw_hist(c, area, t, now);
    int lx = area.x + 8;
    const int ly = area.y + area.h - DTV__RING_BOTTOM + 8;
    dtv__ring_legend_entry(c, &lx, ly, cpush, 1, "push: gradients to the servers");
    dtv__ring_legend_entry(c, &lx, ly, cpull, 1, "pull: new weights from the servers");
}

void dtv_draw_ring(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v)
{
    SDL_RenderSetClipRect(c->r, &area);
    const dtv_coll *co = t->coll;
    if (co && t->has_ring && co->n > 0 && co->algo != DTV_ALGO_NONE) {
        dtv__draw_allreduce(c, area, t, v);
    } else if (co && t->pushes > 0 && co->n_workers > 0) {
        dtv__draw_ps(c, area, t, v);
    } else {
        dtv__ring_title(c, area, t, v, "no collectives");
        const int w = area.w - 80 < 700 ? area.w - 80 : 700;
        int y = area.y + area.h / 3;
        y += dtv__ring_wrap(c, area.x + (area.w - w) / 2, y, w, DTV_FONT_BOLD, DTV_FG,
                            "This trace has no data-parallel collectives or parameter server to show.");
        y += 8;
        y += dtv__ring_wrap(c, area.x + (area.w - w) / 2, y, w, DTV_FONT_NORMAL, DTV_DIM,
                            "Run with data parallelism, e.g. mpirun -np 4 ./dtrain ... --allreduce ring (or tree, "
                            "naive, ps-async with --num-ps-servers 1), or simulate it: ./dtsim run "
                            "--data-parallel-size 4 --allreduce ring ... --trace FILE.");
        if (t->cp)
            dtv__ring_wrap(c, area.x + (area.w - w) / 2, y + 8, w, DTV_FONT_NORMAL, DTV_FG,
                           "It has context-parallel exchanges: the cp view shows their ring (key 6, --view cp).");
    }
    SDL_RenderSetClipRect(c->r, NULL);
}
