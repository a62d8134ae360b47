/* view_cp.c: the context-parallel view (see dtv_view.h): which key/value
 * block each context rank holds, and which is on its way, at playback
 * time v->now, from t->cp (trace_cp.c). It draws on the ring view's
 * circle and lanes (ring_draw.c).
 *
 * The c context ranks of one group sit on the circle, context rank 0 at
 * the top, clockwise, each labelled with its rank, the two sequence chunks
 * it holds (i and 2c-1-i of 2c) and the block it computes with. A disc is
 * filled in the forward's or the backward's colour while the rank is in an
 * exchange of that pass. p2p: during a ring step the block the rank passes
 * on travels as a box along the lane to rank i + 1, at (now - t0)/(t1 - t0)
 * of the way, labelled with whose block it is (a finished step: a hollow
 * box at the lane's end); allgather and a2a: during an exchange a box on
 * every lane from the rank to each other rank. The panel says what the
 * group's first rank is doing (the pass, the block when the count of
 * attentions matches the model's blocks, the step), explains the exchange,
 * shows the sequence's chunks by owner, and draws the c x c matrix of
 * blocks held (rows: ranks; columns: whose block), the figure the tests
 * probe, with each rank's step beside its row.
 *
 * Invariants: the geometry depends on the area and c only (the circle is
 * the ring view's with n = c; dtv_cp_cell_rect); drawing is clipped to
 * the area; a frame costs O(c^2) plus O(c log(exchanges)). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtv_ring_draw.h"

/* Lane labels and node details up to this many context ranks (beyond, they crowd). */
enum { DTV__CP_LABELS = 16 };

void dtv_cp_cell_rect(SDL_Rect area, int c, int i, int j, SDL_Rect *out)
{
    dtv__ring_layout L;
    dtv__ring_layout_of(area, c, &L);
    const SDL_Rect P = L.panel;
    if (c < 1 || c > DTV_CP_MATRIX_MAX) {
        *out = (SDL_Rect){P.x, P.y + P.h, 0, 0};
        return;
    }
    /* under the panel's text (the top 45%), at most half the panel high, room for the steps on the right */
    const int by_w = (P.w - 44 - 150) / c, by_h = P.h * 50 / 100 / c;
    const int cs = dtv__ring_clampi(by_w < by_h ? by_w : by_h, 6, 28);
    const int x0 = P.x + 44, y0 = P.y + P.h * 45 / 100;
    *out = (SDL_Rect){x0 + j * cs, y0 + i * cs, cs - 2, cs - 2};
}

static SDL_Color dtv__pass_color(int forward) { return dtv_kind_color(forward ? DTV_FORWARD : DTV_BACKWARD); }

static const char *dtv__enc_name(int kind)
{
    switch (kind) {
    case DTV_FORWARD: return "forward";
    case DTV_BACKWARD: return "backward";
    case DTV_RECOMPUTE: return "recomputation";
    case DTV_EVAL: return "evaluation";
    default: return "";
    }
}

/* "micro-batch 3's backward, block 1" or "the evaluation, attention 2 of 4"
 * (the block only when the span's attentions are the model's blocks: one
 * stage, as many as num_layers). */
static void dtv__pass_text(char *b, size_t n, const dtv_cp *cp, const dtv_cp_state *s)
{
    char who[64] = "";
    const char *enc = dtv__enc_name(s->enc_kind);
    if (enc[0] && s->mb >= 0) snprintf(who, sizeof who, "micro-batch %d's %s", s->mb, enc);
    else if (enc[0]) snprintf(who, sizeof who, "the %s", enc);
    else snprintf(who, sizeof who, "the %s", s->forward ? "forward" : "backward");
    if (s->enc_kind == DTV_RECOMPUTE || s->enc_kind == DTV_EVAL || (s->enc_kind == DTV_BACKWARD && s->forward))
        snprintf(who + strlen(who), sizeof who - strlen(who), " (%s)", s->forward ? "forward" : "backward");
    if (s->nth < 0 || s->of <= 0) snprintf(b, n, "%s", who);
    else if (cp->p == 1 && s->of == cp->num_layers && (s->enc_kind == DTV_FORWARD || s->enc_kind == DTV_BACKWARD))
        snprintf(b, n, "%s, block %d", who, s->forward ? s->nth : s->of - 1 - s->nth);
    else snprintf(b, n, "%s, attention %d of %d", who, s->nth + 1, s->of);
}

/* A rank's exchange in a few words: "backward step 2 of 4", "all-gather (ended)". */
static void dtv__step_text(char *b, size_t n, const dtv_cp_state *s)
{
    if (s->x < 0) {
        snprintf(b, n, "no exchange yet");
        return;
    }
    const char *pass = s->forward ? "forward" : "backward";
    static const char *const names[] = {"all-gather", "reduce-scatter", "all-to-all"};
    if (s->kind == DTV_CP_RING) snprintf(b, n, "%s step %d of %d", pass, s->step + 1, s->steps);
    else snprintf(b, n, "%s %s", pass, names[s->kind == DTV_CP_AG ? 0 : s->kind == DTV_CP_RS ? 1 : 2]);
    if (!s->active) snprintf(b + strlen(b), n - strlen(b), " (ended)");
}

/* The block in flight on a lane: "K/V 3", "K/V+dK/dV 3", "dK/dV 3". */
static void dtv__block_text(char *b, size_t n, const dtv_cp_state *s)
{
    const int blk = s->holds;
    if (s->grad == 2) snprintf(b, n, "dK/dV %d", blk);
    else snprintf(b, n, "K/V%s %d", s->grad ? "+dK/dV" : "", blk);
}

/* The lanes and their boxes: the ring's block (p2p), every pair's (allgather, a2a). */
static void dtv__draw_lanes(dtv_canvas *c, SDL_Rect area, const dtv__ring_layout *L, const dtv_cp *cp,
                            const dtv_cp_state *st)
{
    const int n = cp->c, sh = dtv_text_height(c, DTV_FONT_SMALL);
    if (cp->type == DTV_CP_TYPE_P2P && n <= 256)
        for (int i = 0; i < n; i++) {
            dtv__ring_path p;
            dtv__ring_path_of(area, L, n, i, (i + 1) % n, &p);
            dtv__ring_path_draw(c, &p, 0, 1, DTV_GRID, 1);
        }
    for (int i = 0; i < n; i++) {
        const dtv_cp_state *s = &st[i];
        if (s->x < 0) continue;
        const SDL_Color col = dtv_kind_color((dtv_kind)s->kind);
        if (s->kind == DTV_CP_RING) {
            dtv__ring_path p;
            dtv__ring_path_of(area, L, n, i, (i + 1) % n, &p);
            double x, y;
            dtv__ring_path_at(&p, s->frac, &x, &y);
            if (s->active) dtv__ring_path_draw(c, &p, 0, s->frac, col, n <= 64 ? 3 : 1);
            dtv__ring_box(c, (int)lround(x), (int)lround(y), L->box, s->active ? col : DTV_DIM, s->active);
            if (!s->active || n > DTV__CP_LABELS) continue;
            char b[32];
            dtv__block_text(b, sizeof b, s);
            int tw = 0;
            TTF_SizeUTF8(c->small, b, &tw, NULL);
            /* beside the box, on the lane's outer side, clear of it by its half diagonal */
            const double d = L->box + 6 + fabs(p.px) * tw / 2.0 + fabs(p.py) * sh / 2.0;
            dtv_text(c, (int)lround(x + p.px * d), (int)lround(y + p.py * d) - sh / 2, DTV_FONT_SMALL, DTV_CENTER,
                     DTV_FG, "%s", b);
        } else if (s->active && n <= DTV__CP_LABELS) {
            for (int j = 0; j < n; j++) {
                if (j == i) continue;
                dtv__ring_path p;
                dtv__ring_path_of(area, L, n, i, j, &p);
                double x, y;
                dtv__ring_path_at(&p, s->frac, &x, &y);
                dtv__ring_path_draw(c, &p, 0, s->frac, col, 1);
                dtv__ring_box(c, (int)lround(x), (int)lround(y), L->box > 5 ? 5 : L->box, col, 1);
            }
        }
    }
}

/* The nodes and their labels. */
static void dtv__draw_nodes(dtv_canvas *c, SDL_Rect area, const dtv__ring_layout *L, const dtv_cp *cp,
                            const dtv_cp_state *st)
{
    const int n = cp->c, every = n <= 24 ? 1 : (n + 23) / 24;
    for (int i = 0; i < n; i++) {
        const dtv_cp_member *mb = &cp->m[i];
        const dtv_cp_state *s = &st[i];
        int x, y;
        dtv_ring_point(area, n, i, &x, &y);
        const SDL_Color fill = mb->ri < 0 || mb->n == 0 ? DTV_GRID
                               : s->x >= 0 && s->active ? dtv__pass_color(s->forward)
                                                        : DTV_PANEL;
        dtv__ring_disc(c, x, y, L->node_r, fill, DTV_DIM);
        if (i % every || (i && n - i < every)) continue;
        char l1[64], l2[96] = "";
        if (mb->pid == i) snprintf(l1, sizeof l1, "rank %d", mb->pid);
        else snprintf(l1, sizeof l1, "rank %d (cp %d)", mb->pid, i);
        if (n <= DTV__CP_LABELS) {
            const int k = snprintf(l2, sizeof l2, "chunks %d, %d\n", i, 2 * n - 1 - i);
            if (mb->ri < 0) snprintf(l2 + k, sizeof l2 - (size_t)k, "not in the trace");
            else if (mb->n == 0) snprintf(l2 + k, sizeof l2 - (size_t)k, "no exchanges");
            else if (s->kind == DTV_CP_RING && s->holds >= 0)
                snprintf(l2 + k, sizeof l2 - (size_t)k, "K/V of %d", s->holds);
            else if (s->all) snprintf(l2 + k, sizeof l2 - (size_t)k, "K/V of all");
        }
        const double a = -M_PI / 2 + 2.0 * M_PI * i / n;
        dtv__ring_node_label(c, L, a, L->node_r + 6, n <= DTV__CP_LABELS ? DTV_FONT_NORMAL : DTV_FONT_SMALL, DTV_FG, l1,
                             l2, DTV_DIM);
    }
}

/* The sequence's 2c chunks, each with its owner under it; returns the height used. */
static int dtv__draw_chunks(dtv_canvas *c, int x, int y, int w, int n)
{
    const int sh = dtv_text_height(c, DTV_FONT_SMALL);
    const int cw = dtv__ring_clampi(w / (2 * n), 4, 34);
    if (2 * n > 64) return 0;
    dtv_text(c, x, y, DTV_FONT_SMALL, DTV_LEFT, DTV_DIM,
             "the sequence's %d chunks (inside) and the context rank holding each (under):", 2 * n);
    y += sh + 2;
    for (int k = 0; k < 2 * n; k++) {
        const int owner = k < n ? k : 2 * n - 1 - k;
        dtv_fill(c, x + k * cw, y, cw - 1, sh + 4, DTV_PANEL);
        dtv_frame(c, x + k * cw, y, cw - 1, sh + 4, DTV_GRID);
        if (cw >= 14) {
            dtv_text(c, x + k * cw + cw / 2, y + 2, DTV_FONT_SMALL, DTV_CENTER, DTV_DIM, "%d", k);
            dtv_text(c, x + k * cw + cw / 2, y + sh + 6, DTV_FONT_SMALL, DTV_CENTER, DTV_FG, "%d", owner);
        }
    }
    return 2 * sh + 10;
}

/* The matrix of blocks held, with each rank's step beside its row. */
static void dtv__draw_matrix(dtv_canvas *c, SDL_Rect area, const dtv__ring_layout *L, const dtv_cp *cp,
                             const dtv_cp_state *st)
{
    const int n = cp->c, sh = dtv_text_height(c, DTV_FONT_SMALL);
    SDL_Rect r0;
    dtv_cp_cell_rect(area, n, 0, 0, &r0);
    if (r0.w == 0) {
        dtv_text(c, L->panel.x, L->panel.y + L->panel.h - sh - 4, DTV_FONT_SMALL, DTV_LEFT, DTV_DIM,
                 "(c = %d: too many ranks for the matrix of blocks held)", n);
        return;
    }
    const int cs = r0.w + 2;
    dtv_text(c, r0.x, r0.y - 2 * sh - 6, DTV_FONT_SMALL, DTV_LEFT, DTV_DIM,
             cp->type == DTV_CP_TYPE_A2A ? "whose rows each rank holds (columns: rank j's rows)"
                                         : "whose key/value block each rank holds (columns: rank j's block)");
    for (int j = 0; j < n; j++)
        if (cs >= 14 || j % 4 == 0)
            dtv_text(c, r0.x + j * cs + r0.w / 2, r0.y - sh - 2, DTV_FONT_SMALL, DTV_CENTER, DTV_DIM, "%d", j);
    for (int i = 0; i < n; i++) {
        const dtv_cp_state *s = &st[i];
        SDL_Rect r;
        for (int j = 0; j < n; j++) {
            dtv_cp_cell_rect(area, n, i, j, &r);
            const int cell = dtv_cp_cell(s, i, j);
            if (cell == DTV_CP_CELL_HELD) {
                dtv_fill(c, r.x, r.y, r.w, r.h, dtv__pass_color(s->forward));
            } else {
                dtv_fill(c, r.x, r.y, r.w, r.h, DTV_PANEL);
                const SDL_Color edge = cell == DTV_CP_CELL_ARRIVING ? dtv_kind_color((dtv_kind)s->kind) : DTV_GRID;
                dtv_frame(c, r.x, r.y, r.w, r.h, edge);
                if (cell == DTV_CP_CELL_ARRIVING && r.w > 4) dtv_frame(c, r.x + 1, r.y + 1, r.w - 2, r.h - 2, edge);
            }
        }
        if (cs >= sh || i % 4 == 0)
            dtv_text(c, r0.x - 6, r0.y + i * cs + (r0.h - sh) / 2, DTV_FONT_SMALL, DTV_RIGHT, DTV_DIM, "%d", i);
        if (cs < sh) continue;
        char b[64];
        if (cp->m[i].ri < 0) snprintf(b, sizeof b, "not in the trace");
        else dtv__step_text(b, sizeof b, s);
        dtv_text(c, r0.x + n * cs + 8, r0.y + i * cs + (r0.h - sh) / 2, DTV_FONT_SMALL, DTV_LEFT,
                 s->x >= 0 && s->active ? DTV_FG : DTV_DIM, "%s", b);
    }
}

static const char *const dtv__explain[] = {
    "Each sequence is cut into 2c chunks; context rank i holds chunks i and 2c-1-i, so that every rank has the "
    "same work under the causal mask. At ring step s rank i computes its queries against the keys and values of "
    "rank (i - s) mod c while it passes that block on to rank i + 1 and receives the block of rank (i - s - 1) "
    "mod c. The forward makes c - 1 transfers (its last step computes without one); the backward c, each block "
    "carrying the gradient the ranks before added, until every block's dK/dV is home. A step's span runs from "
    "the send to the wait's end, the attention beside it included.",
    "The forward all-gathers every rank's key/value block at once, so each rank holds all c and runs its "
    "attention against them; the backward gathers them again and reduce-scatters their gradients dK/dV back "
    "to their owners.",
    "An all-to-all turns the sequence split into a head split: rank i sends rank j its rows of heads j NH/c.., "
    "so that each rank holds every rank's rows for its own heads and runs their whole attention; a second "
    "all-to-all sends the output back (the backward: four).",
};

void dtv_draw_cp(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v)
{
    SDL_RenderSetClipRect(c->r, &area);
    const dtv_cp *cp = t->cp;
    if (!cp) {
        dtv__ring_title(c, area, t, v, "no context parallelism");
        const int w = area.w - 80 < 700 ? area.w - 80 : 700;
        int y = area.y + area.h / 3;
        y += dtv__ring_wrap(c, area.x + (area.w - w) / 2, y, w, DTV_FONT_BOLD, DTV_FG,
                            "This trace has no context-parallel exchanges to show.");
        dtv__ring_wrap(c, area.x + (area.w - w) / 2, y + 8, w, DTV_FONT_NORMAL, DTV_DIM,
                       "Run with context parallelism, e.g. mpirun -np 4 ./dtrain --context-parallel-size 4 "
                       "--trace FILE (--cp-comm-type p2p, the default; or allgather, a2a).");
        SDL_RenderSetClipRect(c->r, NULL);
        return;
    }
    const int n = cp->c;
    static const char *const types[] = {"p2p ring", "allgather", "a2a"};
    char what[200];
    int k = snprintf(what, sizeof what, "context parallelism c = %d (%s), the group of rank %d", n, types[cp->type],
                     cp->base);
    if (cp->groups > 1) snprintf(what + k, sizeof what - (size_t)k, " (1 of %d groups)", cp->groups);
    dtv__ring_title(c, area, t, v, what);
    dtv__ring_layout L;
    dtv__ring_layout_of(area, n, &L);
    dtv_cp_state st[DTV_CP_MATRIX_MAX];
    dtv_cp_state *s = n <= DTV_CP_MATRIX_MAX ? st : calloc((size_t)n, sizeof *s);
    if (!s) {
        SDL_RenderSetClipRect(c->r, NULL);
        return;
    }
    for (int i = 0; i < n; i++) dtv_cp_state_of(t, i, v->now, &s[i]);
    dtv__draw_lanes(c, area, &L, cp, s);
    dtv__draw_nodes(c, area, &L, cp, s);
    /* the panel: the first rank with an exchange, the explanation, the chunks, the matrix */
    const SDL_Rect P = L.panel;
    const int lh = dtv_text_height(c, DTV_FONT_NORMAL);
    int y = P.y, first = -1;
    for (int i = 0; i < n && first < 0; i++)
        if (s[i].x >= 0) first = i;
    if (first < 0) {
        y += dtv__ring_wrap(c, P.x, y, P.w, DTV_FONT_BOLD, DTV_FG,
                            "No exchange yet: the ranks have not reached an attention.");
    } else {
        char pass[160], step[64];
        dtv__pass_text(pass, sizeof pass, cp, &s[first]);
        dtv__step_text(step, sizeof step, &s[first]);
        char head[300];
        snprintf(head, sizeof head, "iter %lld: %s; context rank %d: %s", (long long)s[first].iter, pass, first, step);
        y += dtv__ring_wrap(c, P.x, y, P.w, DTV_FONT_BOLD, DTV_FG, head);
    }
    y += 6;
    y += dtv__ring_wrap(c, P.x, y, P.w, DTV_FONT_SMALL, DTV_DIM, dtv__explain[cp->type]) + 6;
    if (y + lh * 3 < P.y + P.h / 2) y += dtv__draw_chunks(c, P.x, y, P.w, n);
    dtv__draw_matrix(c, area, &L, cp, s);
    /* legend */
    int lx = area.x + 8;
    const int ly = area.y + area.h - DTV__RING_BOTTOM + 8;
    if (cp->type == DTV_CP_TYPE_P2P) {
        dtv__ring_legend_entry(c, &lx, ly, dtv_kind_color(DTV_CP_RING), 1,
                               "a key/value block on its way to the next rank (backward: with its dK/dV)");
        dtv__ring_legend_entry(c, &lx, ly, DTV_DIM, 0, "a rank's last step, ended");
    } else if (cp->type == DTV_CP_TYPE_ALLGATHER) {
        dtv__ring_legend_entry(c, &lx, ly, dtv_kind_color(DTV_CP_AG), 1, "K/V all-gather");
        dtv__ring_legend_entry(c, &lx, ly, dtv_kind_color(DTV_CP_RS), 1, "dK/dV reduce-scatter");
    } else {
        dtv__ring_legend_entry(c, &lx, ly, dtv_kind_color(DTV_CP_A2A), 1, "all-to-all: rows of the other ranks' heads");
    }
    dtv__ring_legend_entry(c, &lx, ly, dtv__pass_color(1), 1, "held, forward");
    dtv__ring_legend_entry(c, &lx, ly, dtv__pass_color(0), 1, "held, backward");
    if (s != st) free(s);
    SDL_RenderSetClipRect(c->r, NULL);
}
