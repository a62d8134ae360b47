/* view_memory.c: the memory view (see dtv_view.h): small multiples, one
 * panel per rank, of the memory over time as stacked areas: static
 * (weights, gradients, optimizer state) at the bottom, PipeDream's stashed
 * weight copies above it, the activations saved for backward on top, from
 * dtsim's `memory` counters. A real run (dtrain) records only its
 * activations (`live_activation_bytes` at the end of each layer's forward
 * and backward, so they rise and fall within a step; older traces:
 * `activation_bytes`, once a step) and the activation arena's high-water
 * mark (`peak_activation_bytes`, drawn as a line); the view says that the
 * rest is not in its trace.
 *
 * Every panel shares one y axis (bytes, from 0 to the trace's largest
 * value), so ranks and schedules compare by height: 1F1B's activations
 * stay flat as m grows, GPipe's grow with m, PipeDream adds its stash.
 *
 * Sampling: each pixel column shows the largest stack of the counters that
 * fall into it (or the value carried in from before), so a short peak
 * is never lost; runs of equal columns are one rectangle. Only what
 * happened by v->now is drawn; the peak marked is the peak so far.
 *
 * Invariants: at most one vertex per pixel column per panel and area;
 * nothing outside `area` is drawn; the same state gives the same pixels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtv_view.h"

enum { DTV__M_TOP = 46, DTV__M_LEGEND = 22, DTV__M_LEFT = 70, DTV__M_GAP = 12, DTV__M_PTITLE = 15, DTV__M_AXIS = 16 };

static const SDL_Color DTV__M_STATIC = {160, 174, 196, 255}; /* grey-blue */

static SDL_Color dtv__m_act(void) { return dtv_kind_color(DTV_FORWARD); }
static SDL_Color dtv__m_stash(void) { return dtv_kind_color(DTV_STASH); }

/* The modelled breakdown is present (dtsim's memory counter with extras). */
static int dtv__m_full(const dtv_trace *t)
{
    for (int k = 0; k < t->n_ranks; k++)
        for (int i = 0; i < t->memory[k].n; i++)
            if (t->memory[k].p[i].a > 0 || t->memory[k].p[i].c > 0) return 1;
    return !strcmp(t->tool, "dtsim");
}

/* The stack of a point (static + stash + activations), or its value. */
static double dtv__m_top(const dtv_point *p)
{
    const double s = p->a + p->b + p->c;
    return s > 0 ? s : p->v;
}

/* A nice ceiling for the y axis in binary units, and its tick step. */
static void dtv__m_axis(double max, double *top, double *step)
{
    double unit = 1;
    while (max / unit >= 1024 && unit < 1024.0 * 1024 * 1024 * 1024) unit *= 1024;
    const double raw = max / unit / 4;
    const double p = pow(10.0, floor(log10(raw > 0 ? raw : 1)));
    const double f = raw / p;
    *step = (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p * unit;
    *top = ceil(max * 1.04 / *step) * *step;
    if (*top <= 0) *top = *step = 1;
}

/* A tick label in the axis's unit ("0.5 MiB", "2 MiB"), the unit chosen by the top. */
static void dtv__m_tick(char *b, size_t n, double bytes, double top)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    double unit = 1;
    while (u < 4 && top / unit >= 1024) unit *= 1024, u++;
    if (bytes == 0) snprintf(b, n, "0");
    else snprintf(b, n, "%g %s", bytes / unit, units[u]);
}

void dtv_memory_layout_of(const dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v,
                          dtv_memory_layout *out)
{
    (void)c;
    (void)v;
    memset(out, 0, sizeof *out);
    out->full = dtv__m_full(t);
    int with = 0;
    for (int k = 0; k < t->n_ranks; k++) {
        if (t->memory[k].n == 0) continue;
        if (out->n_panels < DTV_MEMORY_PANELS) out->rank[out->n_panels++] = k;
        with++;
    }
    out->omitted = with - out->n_panels;
    double mx = 0;
    for (int k = 0; k < t->n_ranks; k++)
        for (int i = 0; i < t->memory[k].n; i++) mx = fmax(mx, dtv__m_top(&t->memory[k].p[i]));
    if (!out->full) /* real runs: the arena's high-water mark is drawn too */
        for (size_t i = 0; i < t->n_ev; i++)
            if (t->ev[i].ph == DT_TRACE_COUNTER && !strcmp(t->ev[i].name, "peak_activation_bytes"))
                mx = fmax(mx, t->ev[i].value);
    dtv__m_axis(mx, &out->y_max, &out->y_tick);
    if (out->n_panels == 0) return;
    const int n = out->n_panels;
    const int cols = n <= 3 ? 1 : n <= 8 ? 2 : 4;
    const int rows = (n + cols - 1) / cols;
    const int top = area.y + DTV__M_TOP, bottom = area.y + area.h - DTV__M_LEGEND;
    const int cw = (area.w - 8) / cols, ch = (bottom - top) / rows;
    for (int i = 0; i < n; i++) {
        const int cx = area.x + (i % cols) * cw, cy = top + (i / cols) * ch;
        SDL_Rect r = {cx + DTV__M_LEFT, cy + DTV__M_PTITLE, cw - DTV__M_LEFT - DTV__M_GAP,
                      ch - DTV__M_PTITLE - DTV__M_AXIS - 4};
        if (r.w < 10) r.w = 10;
        if (r.h < 10) r.h = 10;
        out->plot[i] = r;
    }
}

int dtv_memory_y_of(const dtv_memory_layout *L, int panel, double bytes)
{
    const SDL_Rect *r = &L->plot[panel];
    return (int)lround(r->y + r->h - bytes * r->h / L->y_max);
}

/* One panel's stacked areas up to `now`: static, stash, activations. */
static void dtv__m_areas(dtv_canvas *c, const dtv_memory_layout *L, int panel, const dtv_series *s, const dtv_view *v,
                         int64_t lim, const dtv_point **peak)
{
    const SDL_Rect *r = &L->plot[panel];
    const double span = (double)(v->t1 - v->t0);
    int j = dtv_series_at(s, v->t0); /* the point carried into the first column */
    const dtv_point *carry = j >= 0 ? &s->p[j] : NULL;
    j = j >= 0 ? j + 1 : 0;
    /* a run of equal columns: [run_x, px) with these pixel heights */
    int run_x = -1, run_y[3] = {0, 0, 0};
    const SDL_Color col[3] = {DTV__M_STATIC, dtv__m_stash(), dtv__m_act()};
    const int y0 = dtv_memory_y_of(L, panel, 0);
    for (int px = 0; px <= r->w; px++) {
        int y[3] = {y0, y0, y0}, have = 0;
        if (px < r->w) {
            const int64_t tc0 = v->t0 + (int64_t)floor(span * px / r->w);
            const int64_t tc1 = v->t0 + (int64_t)floor(span * (px + 1) / r->w);
            if (tc0 <= lim) {
                const dtv_point *best = carry;
                for (; j < s->n && s->p[j].t < tc1 && s->p[j].t <= lim; j++) {
                    if (!best || dtv__m_top(&s->p[j]) > dtv__m_top(best)) best = &s->p[j];
                    carry = &s->p[j];
                }
                if (best) {
                    const double a = best->a, st = best->c, top = dtv__m_top(best);
                    y[0] = dtv_memory_y_of(L, panel, a);
                    y[1] = dtv_memory_y_of(L, panel, a + st);
                    y[2] = dtv_memory_y_of(L, panel, top);
                    have = 1;
                    if (!*peak || top > dtv__m_top(*peak)) *peak = best;
                }
            }
        }
        const int same = run_x >= 0 && have && y[0] == run_y[0] && y[1] == run_y[1] && y[2] == run_y[2];
        if (run_x >= 0 && !same) { /* flush the run */
            int below = y0;
            for (int k = 0; k < 3; k++) {
                dtv_fill(c, r->x + run_x, run_y[k], px - run_x, below - run_y[k], col[k]);
                below = run_y[k];
            }
            run_x = -1;
        }
        if (have && run_x < 0) {
            run_x = px;
            memcpy(run_y, y, sizeof y);
        }
    }
}

/* A line of a series (real runs' arena high-water mark) up to `lim`. */
static void dtv__m_line(dtv_canvas *c, const dtv_memory_layout *L, int panel, const dtv_series *s, const dtv_view *v,
                        int64_t lim, SDL_Color colr)
{
    const SDL_Rect *r = &L->plot[panel];
    const double span = (double)(v->t1 - v->t0);
    int j = dtv_series_at(s, v->t0);
    const dtv_point *carry = j >= 0 ? &s->p[j] : NULL;
    j = j >= 0 ? j + 1 : 0;
    int prev_y = INT32_MIN, run_x = 0;
    for (int px = 0; px <= r->w; px++) {
        int y = INT32_MIN;
        if (px < r->w) {
            const int64_t tc0 = v->t0 + (int64_t)floor(span * px / r->w);
            const int64_t tc1 = v->t0 + (int64_t)floor(span * (px + 1) / r->w);
            if (tc0 <= lim) {
                const dtv_point *best = carry;
                for (; j < s->n && s->p[j].t < tc1 && s->p[j].t <= lim; j++) {
                    if (!best || s->p[j].v > best->v) best = &s->p[j];
                    carry = &s->p[j];
                }
                if (best) y = dtv_memory_y_of(L, panel, best->v);
            }
        }
        if (y != prev_y) {
            if (prev_y != INT32_MIN) {
                dtv_line(c, r->x + run_x, prev_y, r->x + px, prev_y, colr);
                dtv_line(c, r->x + run_x, prev_y - 1, r->x + px, prev_y - 1, colr);
                if (y != INT32_MIN) dtv_line(c, r->x + px, prev_y, r->x + px, y, colr);
            }
            prev_y = y;
            run_x = px;
        }
    }
}

void dtv_draw_memory(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v)
{
    SDL_RenderSetClipRect(c->r, &area);
    dtv_memory_layout L;
    dtv_memory_layout_of(c, area, t, v, &L);
    /* title */
    int tx = area.x + 8;
    tx += dtv_text(c, tx, area.y + 4, DTV_FONT_BOLD, DTV_LEFT, DTV_FG, "%s", t->name);
    char sched[32];
    dtv_trace_config_string(t, "pipeline_schedule", sched, sizeof sched);
    char what[256], fit[96];
    dtv_fit_note(fit, sizeof fit, t, v);
    if (t->p > 1 && t->m > 0)
        snprintf(what, sizeof what, "%s: memory per rank, pipeline %s, p = %d, m = %d%s%s", t->tool, sched, t->p, t->m,
                 fit[0] ? ", " : "", fit);
    else if (t->p > 1)
        snprintf(what, sizeof what, "%s: memory per rank, pipeline %s, p = %d%s%s", t->tool, sched, t->p,
                 fit[0] ? ", " : "", fit);
    else snprintf(what, sizeof what, "%s: memory per rank%s%s", t->tool, fit[0] ? ", " : "", fit);
    tx += 12 + dtv_text(c, tx + 12, area.y + 6, DTV_FONT_NORMAL, DTV_LEFT, DTV_DIM, "%s", what);
    const char *hint = NULL;
    if (t->p > 1 && !strcmp(sched, "gpipe"))
        hint = "gpipe: a stage holds all m micro-batches' activations before its first backward (grows with m)";
    else if (t->p > 1 && !strcmp(sched, "1f1b"))
        hint = "1f1b: stage s holds at most p - s micro-batches' activations (flat in m)";
    else if (t->p > 1 && !strncmp(sched, "pipedream", 9))
        hint =
            "pipedream: 1f1b's activations plus stashed weight versions (up to p - s) for the micro-batches in flight";
    if (hint) dtv_text(c, tx + 16, area.y + 6, DTV_FONT_NORMAL, DTV_LEFT, DTV_FG, "%s", hint);
    if (L.n_panels == 0) {
        const int y = area.y + area.h / 2 - 20;
        dtv_text(c, area.x + area.w / 2, y, DTV_FONT_BOLD, DTV_CENTER, DTV_FG, "This trace has no memory counters.");
        dtv_text(c, area.x + area.w / 2, y + 24, DTV_FONT_NORMAL, DTV_CENTER, DTV_DIM,
                 "dtsim run --trace FILE models every rank's memory (static, activations, stash); "
                 "dtrain --trace FILE records its activation memory.");
        SDL_RenderSetClipRect(c->r, NULL);
        return;
    }
    if (L.full)
        dtv_text(c, area.x + 8, area.y + 24, DTV_FONT_NORMAL, DTV_LEFT, DTV_FG,
                 "Modelled memory: static (weights, gradients, optimizer state) + stashed weight versions + "
                 "activations saved for backward; one y axis for every rank.");
    else
        dtv_text(c, area.x + 8, area.y + 24, DTV_FONT_NORMAL, DTV_LEFT, DTV_WARN,
                 "dtrain's trace records activation memory only (%s, and the arena's high-water mark); weights, "
                 "gradients and optimizer state are not recorded: dtsim run --trace models them.",
                 t->mem_live ? "held after each layer" : "after the forward");
    if (L.omitted) {
        char b[96];
        snprintf(b, sizeof b, "first %d ranks shown, %d more left out", L.n_panels, L.omitted);
        dtv_text(c, area.x + area.w - 8, area.y + 6, DTV_FONT_NORMAL, DTV_RIGHT, DTV_ACCENT, "%s", b);
    }
    /* real runs: the arena's high-water mark */
    dtv_series *hw = NULL;
    if (!L.full) {
        hw = calloc((size_t)t->n_ranks, sizeof *hw);
        if (hw && dtv_trace_counter_series(t, "peak_activation_bytes", hw) != DT_OK) {
            free(hw);
            hw = NULL;
        }
    }
    const int64_t lim = v->now < v->t1 ? v->now : v->t1;
    const SDL_Color hw_col = dtv_kind_color(DTV_TP);
    for (int i = 0; i < L.n_panels; i++) {
        const SDL_Rect *r = &L.plot[i];
        const int k = L.rank[i];
        dtv_text(c, r->x, r->y - DTV__M_PTITLE, DTV_FONT_SMALL, DTV_LEFT, DTV_FG, "%s", t->pname[k]);
        dtv_fill(c, r->x, r->y, r->w, r->h, DTV_PANEL);
        /* shared y grid */
        for (double b = 0; b <= L.y_max * (1 + 1e-9); b += L.y_tick) {
            const int y = dtv_memory_y_of(&L, i, b);
            dtv_line(c, r->x, y, r->x + r->w, y, DTV_GRID);
            char lab[32];
            dtv__m_tick(lab, sizeof lab, b, L.y_max);
            dtv_text(c, r->x - 4, y - dtv_text_height(c, DTV_FONT_SMALL) / 2, DTV_FONT_SMALL, DTV_RIGHT, DTV_DIM, "%s",
                     lab);
        }
        SDL_Rect clip = {r->x, r->y - 1, r->w + 1, r->h + 2};
        SDL_Rect cl;
        SDL_IntersectRect(&clip, &area, &cl);
        SDL_RenderSetClipRect(c->r, &cl);
        const dtv_point *peak = NULL;
        dtv__m_areas(c, &L, i, &t->memory[k], v, lim, &peak);
        if (hw) dtv__m_line(c, &L, i, &hw[k], v, lim, hw_col);
        SDL_RenderSetClipRect(c->r, &area);
        dtv_line(c, r->x, r->y + r->h, r->x + r->w, r->y + r->h, DTV_DIM);
        dtv_line(c, r->x, r->y, r->x, r->y + r->h, DTV_DIM);
        dtv_time_axis(c, r->x, r->y + r->h, r->w, v);
        /* the peak so far */
        if (peak) {
            const double pv = dtv__m_top(peak);
            const int px = (int)lround(dtv_x_of(v, r->x, r->w, peak->t < v->t0 ? v->t0 : peak->t));
            const int py = dtv_memory_y_of(&L, i, pv);
            dtv_disc(c, px, py, 3, DTV_ACCENT);
            char b[32], lab[160];
            dtv_fmt_bytes(b, sizeof b, pv);
            if (L.full) {
                char a[32], s[32], st[32];
                dtv_fmt_bytes(a, sizeof a, peak->b);
                dtv_fmt_bytes(s, sizeof s, peak->c);
                dtv_fmt_bytes(st, sizeof st, peak->a);
                if (peak->c > 0) snprintf(lab, sizeof lab, "peak %s (act %s, stash %s, static %s)", b, a, s, st);
                else snprintf(lab, sizeof lab, "peak %s (act %s, static %s)", b, a, st);
            } else {
                /* a real run: the area is the activations after the forward; the
                 * arena's high-water mark (the line) is the real peak */
                double hwm = -1;
                for (int j = 0; hw && j < hw[k].n && hw[k].p[j].t <= lim; j++)
                    if (hw[k].p[j].v > hwm) hwm = hw[k].p[j].v;
                if (hwm >= 0) {
                    char h[32];
                    dtv_fmt_bytes(h, sizeof h, hwm);
                    snprintf(lab, sizeof lab, "%s %s, high-water mark %s", t->mem_live ? "held" : "after forward", b,
                             h);
                } else {
                    snprintf(lab, sizeof lab, "%s %s", t->mem_live ? "held" : "after forward", b);
                }
            }
            int tw = 0;
            TTF_SizeUTF8(c->small, lab, &tw, NULL);
            int lx = px + 6;
            if (lx + tw > r->x + r->w) lx = px - 6 - tw;
            if (lx < r->x + 2) lx = r->x + 2;
            int ly = py - dtv_text_height(c, DTV_FONT_SMALL) - 2;
            if (ly < r->y + 1) ly = py + 4;
            dtv_fill(c, lx - 2, ly, tw + 4, dtv_text_height(c, DTV_FONT_SMALL), DTV_BG);
            dtv_text(c, lx, ly, DTV_FONT_SMALL, DTV_LEFT, DTV_ACCENT, "%s", lab);
        } else {
            dtv_text(c, r->x + r->w / 2, r->y + r->h / 2 - 6, DTV_FONT_SMALL, DTV_CENTER, DTV_DIM, "nothing yet");
        }
    }
    /* legend */
    int lx = area.x + 8;
    const int ly = area.y + area.h - DTV__M_LEGEND + 3, lh = dtv_text_height(c, DTV_FONT_SMALL);
    if (L.full) {
        dtv_fill(c, lx, ly + 2, 12, lh - 4, DTV__M_STATIC);
        lx += 16 +
              dtv_text(c, lx + 16, ly, DTV_FONT_SMALL, DTV_LEFT, DTV_FG,
                       "static: weights + gradients + optimizer state") +
              16;
        dtv_fill(c, lx, ly + 2, 12, lh - 4, dtv__m_stash());
        int any_stash = 0;
        for (int k = 0; k < t->n_ranks && !any_stash; k++)
            for (int i = 0; i < t->memory[k].n && !any_stash; i++) any_stash = t->memory[k].p[i].c > 0;
        lx += 16 +
              dtv_text(c, lx + 16, ly, DTV_FONT_SMALL, DTV_LEFT, DTV_FG, "stash: PipeDream's weight versions%s",
                       any_stash ? "" : " (none in this trace)") +
              16;
    }
    dtv_fill(c, lx, ly + 2, 12, lh - 4, dtv__m_act());
    lx += 16 +
          dtv_text(c, lx + 16, ly, DTV_FONT_SMALL, DTV_LEFT, DTV_FG,
                   L.full        ? "activations saved for backward"
                   : t->mem_live ? "activations held, after each layer (live_activation_bytes)"
                                 : "activations after the forward (activation_bytes)") +
          16;
    if (hw) {
        dtv_fill(c, lx, ly + lh / 2 - 1, 16, 2, hw_col);
        lx += 20 +
              dtv_text(c, lx + 20, ly, DTV_FONT_SMALL, DTV_LEFT, DTV_FG,
                       "activation arena high-water mark (peak_activation_bytes)") +
              16;
    }
    dtv_disc(c, lx + 4, ly + lh / 2, 3, DTV_ACCENT);
    dtv_text(c, lx + 12, ly, DTV_FONT_SMALL, DTV_LEFT, DTV_FG, "peak so far");
    if (hw) {
        for (int k = 0; k < t->n_ranks; k++) free(hw[k].p);
        free(hw);
    }
    SDL_RenderSetClipRect(c->r, NULL);
}
