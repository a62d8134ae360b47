/* view_scale.c: the loss-scale view (see dtv_view.h): fp16's dynamic loss
 * scale as a step function on a log2 axis over the steps, with a red
 * marker at every overflow (filled: the step was skipped; hollow: it was
 * not), the layer whose gradient overflowed written above it, the minimum
 * scale as a dashed line and a warning when the scale collapses onto it.
 *
 * The scale of step i is the one it ran with: the configuration's
 * initial (or static) scale for step 0, then the loss_scale counter that
 * step i-1 wrote at its end (the counter is "the scale for the next
 * step"). x is the iteration when the trace has one counter per step (the
 * k-th ends step k), else trace time. Only what happened by the playback
 * time v->now is drawn: step i from the moment step i-1 ended, a marker
 * from its overflow event.
 *
 * Invariants: at most two vertices per pixel column for the scale (steps
 * that fall into one column become one vertical stroke); nothing outside
 * `area` is drawn; the same state gives the same pixels. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dtv_view.h"

enum { DTV__S_LEFT = 62, DTV__S_RIGHT = 24, DTV__S_TOP = 76, DTV__S_AXIS = 34, DTV__S_LEGEND = 22 };
/* The minimum scale is on the axis when within this many powers of two of the lowest scale. */
enum { DTV__S_MIN_REACH = 4 };

static const SDL_Color DTV__S_LINE = {0, 114, 178, 255};       /* the scale: forward's blue */
static const SDL_Color DTV__S_BAND = {252, 222, 222, 255};     /* behind an overflowing step */
static const SDL_Color DTV__S_COLLAPSE = {255, 214, 160, 255}; /* steps stuck at the minimum, overflowing */

/* The number of steps with a scale when x is the iteration (0: by time). */
static int dtv__scale_by_iter(const dtv_trace *t) { return t->loss_scale.n > 0 && t->n_steps == t->loss_scale.n; }

/* The scale step 0 ran with. */
static double dtv__scale0(const dtv_trace *t)
{
    for (int o = 0; o < t->n_overflow; o++)
        if (t->overflow[o].iter == 0 && t->overflow[o].scale > 0) return t->overflow[o].scale;
    const double st = dtv_trace_config_number(t, "loss_scale", 0);
    if (st > 0) return st;
    const double in = dtv_trace_config_number(t, "initial_loss_scale", 0);
    if (in > 0) return in;
    return t->loss_scale.n ? t->loss_scale.p[0].v : 1.0;
}

/* The scale of step i (0 <= i <= n). */
static double dtv__scale_of(const dtv_trace *t, double s0, int i) { return i == 0 ? s0 : t->loss_scale.p[i - 1].v; }

/* When step i started (its scale is known from then on). */
static int64_t dtv__step_start(const dtv_trace *t, int i) { return i == 0 ? t->t_min : t->loss_scale.p[i - 1].t; }

void dtv_scale_layout_of(const dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v,
                         dtv_scale_layout *out)
{
    (void)c;
    memset(out, 0, sizeof *out);
    out->x = area.x + DTV__S_LEFT;
    out->y = area.y + DTV__S_TOP;
    out->w = area.w - DTV__S_LEFT - DTV__S_RIGHT;
    out->h = area.h - DTV__S_TOP - DTV__S_AXIS - DTV__S_LEGEND;
    if (out->w < 10) out->w = 10;
    if (out->h < 10) out->h = 10;
    const dtv_series *s = &t->loss_scale;
    out->by_iter = dtv__scale_by_iter(t);
    if (out->by_iter) { /* the steps that overlap the visible window */
        int lo = 0, hi = 0;
        for (int i = 0; i < s->n; i++) {
            if (s->p[i].t < v->t0) lo = i + 1;
            if (dtv__step_start(t, i) <= v->t1) hi = i + 1;
        }
        if (lo >= s->n) lo = s->n - 1;
        if (hi <= lo) hi = lo + 1;
        out->x_lo = lo;
        out->x_hi = hi;
    } else {
        out->x_lo = (double)v->t0;
        out->x_hi = (double)v->t1;
    }
    /* y: every scale of the trace (not only the visible ones: the axis stays put while playing), the minimum */
    double lo = INFINITY, hi = -INFINITY;
    const double s0 = dtv__scale0(t);
    for (int i = 0; i <= s->n; i++) {
        const double sc = dtv__scale_of(t, s0, i);
        if (sc > 0 && isfinite(sc)) {
            lo = fmin(lo, log2(sc));
            hi = fmax(hi, log2(sc));
        }
    }
    for (int o = 0; o < t->n_overflow; o++)
        if (t->overflow[o].scale > 0 && isfinite(t->overflow[o].scale)) {
            lo = fmin(lo, log2(t->overflow[o].scale));
            hi = fmax(hi, log2(t->overflow[o].scale));
        }
    if (!isfinite(lo)) lo = hi = 0;
    /* the minimum, unless it lies far below every scale (the plot would be all headroom; the view notes it) */
    const double mn = dtv_trace_config_number(t, "min_loss_scale", 0);
    if (mn > 0 && isfinite(mn) && log2(mn) >= lo - DTV__S_MIN_REACH) lo = fmin(lo, log2(mn));
    out->l2_lo = floor(lo) - 1;
    out->l2_hi = ceil(hi) + 1;
}

int dtv_scale_x_of_iter(const dtv_scale_layout *L, int64_t iter)
{
    if (!L->by_iter) return -1;
    return (int)floor(L->x + ((double)iter + 0.5 - L->x_lo) * L->w / (L->x_hi - L->x_lo));
}

/* x of a step boundary (by_iter) or a time. */
static int dtv__xb(const dtv_scale_layout *L, double u)
{
    return (int)floor(L->x + (u - L->x_lo) * L->w / (L->x_hi - L->x_lo));
}

int dtv_scale_x_of_time(const dtv_scale_layout *L, int64_t ns) { return dtv__xb(L, (double)ns); }

int dtv_scale_y_of(const dtv_scale_layout *L, double scale)
{
    const double l2 = scale > 0 ? log2(scale) : L->l2_lo;
    return (int)lround(L->y + L->h - (l2 - L->l2_lo) * L->h / (L->l2_hi - L->l2_lo));
}

/* "2^16", or "2^16.5" for a scale between powers. */
static void dtv__pow2(char *b, size_t n, double scale)
{
    const double l2 = log2(scale);
    if (fabs(l2 - lround(l2)) < 1e-6) snprintf(b, n, "2^%ld", lround(l2));
    else snprintf(b, n, "2^%.1f", l2);
}

/* A triangle pointing down with its tip at (cx, tip): filled or an outline. */
static void dtv__triangle(dtv_canvas *c, int cx, int tip, int half, int filled, SDL_Color col)
{
    const int h = half + half / 2;
    for (int k = 0; k <= h; k++) {
        const int y = tip - k, dx = k * half / h;
        if (filled || k == h) dtv_line(c, cx - dx, y, cx + dx, y, col);
        else {
            dtv_line(c, cx - dx, y, cx - dx, y, col);
            dtv_line(c, cx + dx, y, cx + dx, y, col);
        }
    }
    if (!filled) { /* a thicker outline */
        dtv_line(c, cx - half, tip - h, cx, tip, col);
        dtv_line(c, cx + half, tip - h, cx, tip, col);
        dtv_line(c, cx - half + 1, tip - h, cx + 1, tip - 1, col);
        dtv_line(c, cx + half - 1, tip - h, cx - 1, tip - 1, col);
        dtv_line(c, cx - half, tip - h + 1, cx + half, tip - h + 1, col);
    }
}

static double dtv__nice(double raw)
{
    const double p = pow(10.0, floor(log10(raw)));
    const double f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

/* A horizontal dashed line. */
static void dtv__dash(dtv_canvas *c, int x0, int x1, int y, SDL_Color col)
{
    for (int x = x0; x < x1; x += 10) dtv_line(c, x, y, x + 5 < x1 ? x + 5 : x1, y, col);
}

void dtv_draw_scale(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v)
{
    SDL_RenderSetClipRect(c->r, &area);
    int tx = area.x + 8;
    tx += dtv_text(c, tx, area.y + 4, DTV_FONT_BOLD, DTV_LEFT, DTV_FG, "%s", t->name);
    dtv_text(c, tx + 12, area.y + 6, DTV_FONT_NORMAL, DTV_LEFT, DTV_DIM, "%s: fp16 dynamic loss scale", t->tool);
    const dtv_series *s = &t->loss_scale;
    if (s->n == 0) {
        const int y = area.y + area.h / 2 - 30;
        dtv_text(c, area.x + area.w / 2, y, DTV_FONT_BOLD, DTV_CENTER, DTV_FG, "This trace has no loss scale.");
        dtv_text(c, area.x + area.w / 2, y + 24, DTV_FONT_NORMAL, DTV_CENTER, DTV_DIM,
                 "The loss scale is recorded with fp16's dynamic loss scaling: run dtrain --fp16 --trace FILE,");
        dtv_text(c, area.x + area.w / 2, y + 42, DTV_FONT_NORMAL, DTV_CENTER, DTV_DIM,
                 "or simulate it: dtsim run --fp16 --grad-trace FILE (a real fp16 run's trace) --trace OUT.");
        SDL_RenderSetClipRect(c->r, NULL);
        return;
    }
    dtv_scale_layout L;
    dtv_scale_layout_of(c, area, t, v, &L);
    const int L_layers = dtv_trace_num_layers(t);
    const double s0 = dtv__scale0(t);
    const double mn = dtv_trace_config_number(t, "min_loss_scale", 0);
    const int has_min = mn > 0 && isfinite(mn);

    /* what has happened by `now` */
    int shown = 0; /* steps whose scale is known */
    while (shown < s->n && dtv__step_start(t, shown) <= v->now) shown++;
    int n_ov = 0, n_skip = 0, n_at_min = 0, first_collapse = -1;
    for (int o = 0; o < t->n_overflow; o++) {
        const dtv_overflow *ov = &t->overflow[o];
        if (ov->t > v->now) continue;
        n_ov++;
        n_skip += ov->skipped != 0;
        if (has_min && ov->scale <= mn * (1 + 1e-9)) {
            n_at_min++;
            if (first_collapse < 0 || ov->iter < first_collapse) first_collapse = (int)ov->iter;
        }
    }
    int ended = 0; /* counters written by now */
    while (ended < s->n && s->p[ended].t <= v->now) ended++;
    const double final = ended ? s->p[ended - 1].v : s0;
    const int at_min_now = has_min && final <= mn * (1 + 1e-9);
    const int collapsed = n_at_min > 0 || (at_min_now && n_ov > 0);

    /* summary lines */
    char fin[32], b0[32], bm[32];
    dtv__pow2(fin, sizeof fin, final);
    dtv__pow2(b0, sizeof b0, s0);
    int sx = area.x + 8;
    sx += dtv_text(c, sx, area.y + 24, DTV_FONT_NORMAL, DTV_LEFT, n_ov ? DTV_ACCENT : DTV_FG,
                   "%d overflow%s, %d skipped step%s, final scale %s", n_ov, n_ov == 1 ? "" : "s", n_skip,
                   n_skip == 1 ? "" : "s", fin);
    const double win = dtv_trace_config_number(t, "loss_scale_window", 0);
    const double hyst = dtv_trace_config_number(t, "hysteresis", 0);
    const double stat = dtv_trace_config_number(t, "loss_scale", 0);
    char rule[240] = "";
    if (stat > 0) snprintf(rule, sizeof rule, "static scale %s", b0);
    else {
        int k = snprintf(rule, sizeof rule, "initial %s", b0);
        if (win > 0) k += snprintf(rule + k, sizeof rule - (size_t)k, "; x2 after %.0f steps without overflow", win);
        k += snprintf(rule + k, sizeof rule - (size_t)k, "; /2 on overflow");
        if (hyst == 2)
            k += snprintf(rule + k, sizeof rule - (size_t)k, " (hysteresis 2: the first after a growth is absorbed)");
        else if (hyst > 2)
            k += snprintf(rule + k, sizeof rule - (size_t)k,
                          " (hysteresis %.0f: the first %.0f after a growth are absorbed)", hyst, hyst - 1);
        if (has_min) {
            dtv__pow2(bm, sizeof bm, mn);
            snprintf(rule + k, sizeof rule - (size_t)k, "; minimum %s", bm);
        }
    }
    dtv_text(c, sx + 14, area.y + 24, DTV_FONT_NORMAL, DTV_LEFT, DTV_DIM, "(%s)", rule);
    if (collapsed) {
        char bm2[32];
        dtv__pow2(bm2, sizeof bm2, mn);
        char when[32] = "";
        if (first_collapse >= 0) snprintf(when, sizeof when, " at step %d", first_collapse);
        const int w = dtv_text(c, area.x + 8, area.y + 42, DTV_FONT_BOLD, DTV_LEFT, DTV_ACCENT,
                               "Loss scale collapsed to the minimum %s%s: %d overflow%s there", bm2, when, n_at_min,
                               n_at_min == 1 ? "" : "s");
        dtv_text(c, area.x + 8 + w + 8, area.y + 43, DTV_FONT_NORMAL, DTV_LEFT, DTV_ACCENT,
                 "(DeepSpeed: \"Current loss scale already at minimum\"). fp16 cannot hold these gradients: "
                 "try --bf16 or a lower lr.");
    } else if (n_skip > 0) {
        dtv_text(c, area.x + 8, area.y + 42, DTV_FONT_SMALL, DTV_LEFT, DTV_DIM,
                 "A skipped step applies no update: its gradients held inf/NaN at that scale, so the scale is halved "
                 "and the step's batch is lost.");
    }

    /* plot background, bands behind overflowing steps and steps run at the minimum */
    dtv_fill(c, L.x, L.y, L.w, L.h, DTV_PANEL);
    SDL_Rect plot = {L.x, L.y, L.w + 1, L.h + 1};
    SDL_Rect clip;
    SDL_IntersectRect(&plot, &area, &clip);
    SDL_RenderSetClipRect(c->r, &clip);
    for (int o = 0; o < t->n_overflow; o++) {
        const dtv_overflow *ov = &t->overflow[o];
        if (ov->t > v->now) continue;
        int a, b;
        if (L.by_iter) a = dtv__xb(&L, (double)ov->iter), b = dtv__xb(&L, (double)ov->iter + 1);
        else a = dtv__xb(&L, (double)ov->t) - 1, b = a + 2;
        if (b - a < 3) a = (a + b) / 2 - 1, b = a + 3;
        dtv_fill(c, a, L.y, b - a, L.h, DTV__S_BAND);
    }
    if (collapsed && L.by_iter) /* the steps run at the minimum once it overflowed there */
        for (int i = (int)L.x_lo; i < (int)L.x_hi && i < shown; i++)
            if (i >= first_collapse && dtv__scale_of(t, s0, i) <= mn * (1 + 1e-9)) {
                const int a = dtv__xb(&L, i), b = dtv__xb(&L, i + 1);
                dtv_fill(c, a, L.y, b - a > 1 ? b - a : 1, L.h, DTV__S_COLLAPSE);
            }
    /* y grid: powers of two, at least 16 px apart */
    const double per = L.h / (L.l2_hi - L.l2_lo);
    int every = 1;
    while (every * per < 16) every *= 2;
    SDL_RenderSetClipRect(c->r, &area);
    for (long k = (long)ceil(L.l2_lo); k <= (long)floor(L.l2_hi); k++) {
        if (k % every) continue;
        const int y = dtv_scale_y_of(&L, ldexp(1.0, (int)k));
        dtv_line(c, L.x, y, L.x + L.w, y, DTV_GRID);
        dtv_line(c, L.x - 4, y, L.x, y, DTV_DIM);
        dtv_text(c, L.x - 6, y - dtv_text_height(c, DTV_FONT_SMALL) / 2, DTV_FONT_SMALL, DTV_RIGHT, DTV_DIM, "2^%ld",
                 k);
    }
    dtv_text(c, area.x + 4, L.y - 20, DTV_FONT_SMALL, DTV_LEFT, DTV_DIM, "loss scale (log2)");
    /* x axis */
    const int ay = L.y + L.h;
    dtv_line(c, L.x, ay, L.x + L.w, ay, DTV_DIM);
    dtv_line(c, L.x, L.y, L.x, ay, DTV_DIM);
    if (L.by_iter) {
        const double span = L.x_hi - L.x_lo;
        double step = dtv__nice(span / (L.w / 80.0 > 1 ? L.w / 80.0 : 1));
        if (step < 1) step = 1;
        for (double k = ceil(L.x_lo / step) * step; k <= L.x_hi; k += step) {
            const int px = dtv__xb(&L, k);
            dtv_line(c, px, ay, px, ay + 4, DTV_DIM);
            dtv_text(c, px, ay + 5, DTV_FONT_SMALL, DTV_CENTER, DTV_DIM, "%.0f", k);
        }
        dtv_text(c, L.x + L.w, ay + 18, DTV_FONT_SMALL, DTV_RIGHT, DTV_DIM, "iteration (optimizer step)");
    } else {
        dtv_time_axis(c, L.x, ay, L.w, v);
        dtv_text(c, L.x + L.w, ay + 18, DTV_FONT_SMALL, DTV_RIGHT, DTV_DIM,
                 "trace time (iterations unknown: not one loss_scale counter per step)");
    }
    SDL_RenderSetClipRect(c->r, &clip);
    /* the minimum */
    const int min_on_axis = has_min && log2(mn) >= L.l2_lo;
    if (has_min && !min_on_axis) {
        dtv__pow2(bm, sizeof bm, mn);
        dtv_text(c, L.x + L.w - 4, L.y + L.h - 3 - dtv_text_height(c, DTV_FONT_SMALL), DTV_FONT_SMALL, DTV_RIGHT,
                 DTV_WARN, "min loss scale %s: %.0f powers of two below the lowest scale (off the axis)", bm,
                 L.l2_lo + 1 - log2(mn));
    }
    if (min_on_axis) {
        const int y = dtv_scale_y_of(&L, mn);
        dtv__dash(c, L.x, L.x + L.w, y, DTV_WARN);
        dtv__dash(c, L.x, L.x + L.w, y - 1, DTV_WARN);
        dtv__pow2(bm, sizeof bm, mn);
        dtv_text(c, L.x + 4, y + 3, DTV_FONT_SMALL, DTV_LEFT, DTV_WARN, "min loss scale %s", bm);
    }
    /* the scale: a step function, at most two vertices per pixel column */
    int col = INT32_MIN, ymin = 0, ymax = 0, prev_y = 0, have_prev = 0;
    const int i0 = L.by_iter ? (int)L.x_lo : 0, i1 = L.by_iter ? (int)L.x_hi : s->n;
    for (int i = i0; i < i1 && i < shown; i++) {
        const double sc = dtv__scale_of(t, s0, i);
        const int y = dtv_scale_y_of(&L, sc);
        int xa, xb;
        if (L.by_iter) xa = dtv__xb(&L, i), xb = dtv__xb(&L, i + 1);
        else {
            xa = dtv__xb(&L, (double)dtv__step_start(t, i));
            const int64_t e = s->p[i].t < v->now ? s->p[i].t : v->now;
            xb = dtv__xb(&L, (double)(i + 1 < s->n ? e : s->p[i].t));
        }
        if (L.by_iter && i + 1 == shown && shown < s->n) { /* the step in progress: up to now */
            const int64_t st0 = dtv__step_start(t, i), st1 = s->p[i].t;
            if (v->now < st1 && st1 > st0)
                xb = xa + (int)((double)(xb - xa) * (double)(v->now - st0) / (double)(st1 - st0));
        }
        if (xa != col) { /* flush the previous column's vertical stroke */
            if (col != INT32_MIN && ymax > ymin) {
                dtv_line(c, col, ymin, col, ymax, DTV__S_LINE);
                dtv_line(c, col + 1, ymin, col + 1, ymax, DTV__S_LINE);
            }
            col = xa;
            ymin = ymax = have_prev ? prev_y : y;
        }
        if (y < ymin) ymin = y;
        if (y > ymax) ymax = y;
        if (xb > xa) {
            dtv_line(c, xa, y, xb, y, DTV__S_LINE);
            dtv_line(c, xa, y + 1, xb, y + 1, DTV__S_LINE);
        }
        prev_y = y;
        have_prev = 1;
    }
    if (col != INT32_MIN && ymax > ymin) {
        dtv_line(c, col, ymin, col, ymax, DTV__S_LINE);
        dtv_line(c, col + 1, ymin, col + 1, ymax, DTV__S_LINE);
    }
    /* overflow markers and the layer that overflowed (labels that would overlap are staggered, then left out) */
    enum { MAX_LABELS = 256 };
    SDL_Rect placed[MAX_LABELS];
    int n_placed = 0;
    const int lh = dtv_text_height(c, DTV_FONT_SMALL);
    for (int pass = 0; pass < 2; pass++) /* markers first (labels must not hide them), then labels */
        for (int o = 0; o < t->n_overflow; o++) {
            const dtv_overflow *ov = &t->overflow[o];
            if (ov->t > v->now) continue;
            if (L.by_iter && (ov->iter < (int64_t)L.x_lo || ov->iter >= (int64_t)L.x_hi)) continue;
            const int x = L.by_iter ? dtv_scale_x_of_iter(&L, ov->iter) : dtv_scale_x_of_time(&L, ov->t);
            const double sc = ov->scale > 0                  ? ov->scale
                              : L.by_iter && ov->iter < s->n ? dtv__scale_of(t, s0, (int)ov->iter)
                                                             : final;
            const int tip = dtv_scale_y_of(&L, sc) - 3;
            if (pass == 0) {
                dtv__triangle(c, x, tip, 6, ov->skipped != 0, DTV_ACCENT);
                if (n_placed < MAX_LABELS) placed[n_placed++] = (SDL_Rect){x - 7, tip - 10, 15, 11};
                continue;
            }
            char lab[32];
            dtv_layer_name(lab, sizeof lab, ov->layer, L_layers);
            if (!lab[0] || n_placed == MAX_LABELS) continue;
            if (o > 0 && t->overflow[o - 1].iter == ov->iter - 1 && t->overflow[o - 1].layer == ov->layer &&
                t->overflow[o - 1].t <= v->now)
                continue; /* the same layer as the step before: labelled once per run */
            int tw = 0;
            TTF_SizeUTF8(c->small, lab, &tw, NULL);
            int lx = x - tw / 2;
            if (lx < L.x + 2) lx = L.x + 2;
            if (lx + tw > L.x + L.w - 2) lx = L.x + L.w - 2 - tw;
            /* above the marker, a line higher, below the line, a line lower: the first free place */
            const int cand[4] = {tip - 11 - lh, tip - 11 - 2 * lh, tip + 8, tip + 8 + lh};
            for (int k = 0; k < 4; k++) {
                SDL_Rect r = {lx - 1, cand[k], tw + 2, lh};
                if (r.y < L.y + 1 || r.y + r.h > L.y + L.h - 1) continue;
                int free_ = 1;
                for (int q = 0; q < n_placed && free_; q++) free_ = !SDL_HasIntersection(&r, &placed[q]);
                if (!free_) continue;
                dtv_text(c, lx, r.y, DTV_FONT_SMALL, DTV_LEFT, DTV_ACCENT, "%s", lab);
                placed[n_placed++] = r;
                break;
            }
        }
    /* playback cursor */
    if (v->now != INT64_MAX && shown < s->n) {
        int px;
        if (L.by_iter) {
            const int i = shown > 0 ? shown - 1 : 0;
            const int64_t st0 = dtv__step_start(t, i), st1 = s->p[i].t;
            const double f = st1 > st0 ? fmin(1.0, fmax(0.0, (double)(v->now - st0) / (double)(st1 - st0))) : 0;
            px = dtv__xb(&L, i + f);
        } else {
            px = dtv_scale_x_of_time(&L, v->now);
        }
        dtv_line(c, px, L.y, px, L.y + L.h, DTV_DIM);
    }
    /* legend */
    SDL_RenderSetClipRect(c->r, &area);
    int lx = area.x + 8;
    const int ly = area.y + area.h - DTV__S_LEGEND + 2;
    dtv_fill(c, lx, ly + lh / 2 - 1, 18, 2, DTV__S_LINE);
    lx += 22 + dtv_text(c, lx + 22, ly, DTV_FONT_SMALL, DTV_LEFT, DTV_FG, "loss scale of the step") + 16;
    dtv__triangle(c, lx + 6, ly + lh - 2, 5, 1, DTV_ACCENT);
    lx += 16 + dtv_text(c, lx + 16, ly, DTV_FONT_SMALL, DTV_LEFT, DTV_FG, "overflow, step skipped") + 16;
    if (n_ov > n_skip) {
        dtv__triangle(c, lx + 6, ly + lh - 2, 5, 0, DTV_ACCENT);
        lx += 16 + dtv_text(c, lx + 16, ly, DTV_FONT_SMALL, DTV_LEFT, DTV_FG, "overflow, step applied") + 16;
    }
    dtv_fill(c, lx, ly + 1, 12, lh - 2, DTV__S_BAND);
    lx += 16 + dtv_text(c, lx + 16, ly, DTV_FONT_SMALL, DTV_LEFT, DTV_FG, "overflowing step") + 16;
    lx += dtv_text(c, lx, ly, DTV_FONT_SMALL, DTV_LEFT, DTV_ACCENT, "layer 3") + 4;
    lx += dtv_text(c, lx, ly, DTV_FONT_SMALL, DTV_LEFT, DTV_FG, "first layer with inf/NaN gradients (backward order)") +
          16;
    if (collapsed) {
        dtv_fill(c, lx, ly + 1, 12, lh - 2, DTV__S_COLLAPSE);
        lx += 16 + dtv_text(c, lx + 16, ly, DTV_FONT_SMALL, DTV_LEFT, DTV_FG, "stuck at the minimum") + 16;
    }
    if (min_on_axis) {
        dtv__dash(c, lx, lx + 18, ly + lh / 2, DTV_WARN);
        dtv__dash(c, lx, lx + 18, ly + lh / 2 - 1, DTV_WARN);
        dtv_text(c, lx + 22, ly, DTV_FONT_SMALL, DTV_LEFT, DTV_FG, "minimum scale");
    }
    SDL_RenderSetClipRect(c->r, NULL);
}
