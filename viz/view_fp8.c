/* view_fp8.c: the FP8 scaling view (see dtv_view.h): for one tensor of
 * t->fp8 (trace_fp8.c; by default the one with the most saturated values),
 * over the steps on a log2 axis of magnitudes, the window of values each
 * step's scale s converts as a band (top max / s: above it values saturate
 * to +-max; bottom smallest subnormal / (2 s): at or below it they flush to
 * 0), the step's amax as a line, and a red marker on every step with
 * saturated values, sized by their count, with a red stroke from the
 * band's top up to the amax that overshot it. Beside the plot the tensors,
 * most saturated first; the shown one is highlighted, and a click on
 * another (or the keys, interactive.c) shows it.
 *
 * Delayed scaling's band comes from the amax history before the step, so
 * an amax that rises faster than the history leaves the band: the step
 * saturates. Tensorwise and blockwise scales follow the step's own amax:
 * the band's top is drawn from it (dtv_fp8_window), and the legend says
 * so. Only the steps whose event was written by the playback time v->now
 * are drawn, as view_scale.c reveals its steps; the readout counts them.
 *
 * Invariants: the geometry depends on the area, the trace and the tensor
 * shown, not on v->now (the axes stay put while playing); nothing outside
 * `area` is drawn; the same state gives the same pixels. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_fp8.h"
#include "dtv_view.h"

enum { DTV__F_LEFT = 62, DTV__F_RIGHT = 16, DTV__F_TOP = 80, DTV__F_AXIS = 34, DTV__F_LEGEND = 40 };
enum { DTV__F_LIST_W = 250, DTV__F_GAP = 20, DTV__F_ROW_H = 16, DTV__F_LIST_MIN_AREA = 800 };
/* The axis reaches at most this many powers of two below the lowest amax (a band's bottom further down is cut). */
enum { DTV__F_BELOW = 40 };
enum { DTV__F_LABELS = 12 }; /* saturated steps labelled with their count, the largest first */

static const SDL_Color DTV__F_BAND = {218, 236, 212, 255};  /* the values a step's scale converts */
static const SDL_Color DTV__F_TOP_C = {0, 128, 64, 255};    /* max / s */
static const SDL_Color DTV__F_BOT_C = {140, 150, 140, 255}; /* smallest subnormal / (2 s) */
static const SDL_Color DTV__F_AMAX = {0, 114, 178, 255};    /* the amax: forward's blue, as the loss scale's line */
static const SDL_Color DTV__F_SEL = {222, 232, 245, 255};   /* the list's row of the tensor shown */

SDL_Color dtv_fp8_band_color(void) { return DTV__F_BAND; }

int dtv_fp8_tensor_of(const dtv_trace *t, const dtv_view *v)
{
    const dtv_fp8 *f = t->fp8;
    if (!f || f->n < 1) return -1;
    return v->fp8_tensor >= 1 && v->fp8_tensor <= f->n ? v->fp8_tensor - 1 : f->dflt;
}

int dtv_fp8_cycle(const dtv_trace *t, dtv_view *v, int dir)
{
    const dtv_fp8 *f = t->fp8;
    const int cur = dtv_fp8_tensor_of(t, v);
    if (cur < 0) return -1;
    int p = 0;
    while (p < f->n && f->order[p] != cur) p++;
    p = ((p + (dir > 0 ? 1 : -1)) % f->n + f->n) % f->n;
    v->fp8_tensor = f->order[p] + 1;
    return f->order[p];
}

/* When step k starts: the previous step's event (the trace's start for the first). */
static int64_t dtv__step_t0(const dtv_trace *t, const dtv_fp8_tensor *x, int k)
{
    return k == 0 ? t->t_min : x->s[k - 1].t;
}

void dtv_fp8_layout_of(const dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v, dtv_fp8_layout *out)
{
    (void)c;
    memset(out, 0, sizeof *out);
    out->tensor = dtv_fp8_tensor_of(t, v);
    const int lw = area.w >= DTV__F_LIST_MIN_AREA ? DTV__F_LIST_W : 0;
    out->x = area.x + DTV__F_LEFT;
    out->y = area.y + DTV__F_TOP;
    out->w = area.w - DTV__F_LEFT - DTV__F_RIGHT - (lw ? lw + DTV__F_GAP : 0);
    out->h = area.h - DTV__F_TOP - DTV__F_AXIS - DTV__F_LEGEND;
    if (out->w < 10) out->w = 10;
    if (out->h < 10) out->h = 10;
    out->x_lo = 0;
    out->x_hi = 1;
    out->l2_lo = -1;
    out->l2_hi = 1;
    if (out->tensor < 0) return;
    const dtv_fp8 *f = t->fp8;
    const dtv_fp8_tensor *x = &f->x[out->tensor];
    /* x: the steps whose span (t0, t1] overlaps the visible window */
    int k0 = 0, k1 = 0;
    for (int k = 0; k < x->n; k++) {
        if (x->s[k].t < v->t0) k0 = k + 1;
        if (dtv__step_t0(t, x, k) <= v->t1) k1 = k + 1;
    }
    if (k0 >= x->n) k0 = x->n - 1;
    if (k1 <= k0) k1 = k0 + 1;
    out->k0 = k0;
    out->k1 = k1;
    out->x_lo = (double)x->s[k0].iter;
    out->x_hi = (double)x->s[k1 - 1].iter + 1;
    if (out->x_hi <= out->x_lo) out->x_hi = out->x_lo + 1;
    /* y: every step's amax and window (not only the visible ones: the axis stays put while playing) */
    double lo = INFINITY, hi = -INFINITY, amin = INFINITY;
    for (int k = 0; k < x->n; k++) {
        const double a = x->s[k].amax;
        if (a > 0 && isfinite(a)) {
            lo = fmin(lo, log2(a));
            hi = fmax(hi, log2(a));
            amin = fmin(amin, log2(a));
        }
        double wl, wh;
        if (dtv_fp8_window(f, x, k, &wl, &wh)) {
            lo = fmin(lo, log2(wl));
            hi = fmax(hi, log2(wh));
        }
    }
    if (!isfinite(lo)) lo = hi = 0;
    if (isfinite(amin) && lo < amin - DTV__F_BELOW) lo = amin - DTV__F_BELOW;
    out->l2_lo = floor(lo) - 1;
    out->l2_hi = ceil(hi) + 1;
    /* the list: the tensors in f->order, scrolled so that the one shown is on it */
    if (!lw) return;
    out->list = (SDL_Rect){out->x + out->w + DTV__F_GAP, out->y, lw, out->h};
    out->row_h = DTV__F_ROW_H;
    int rows = out->h / out->row_h;
    if (rows > DTV_FP8_LIST_ROWS) rows = DTV_FP8_LIST_ROWS;
    if (rows < f->n && rows > 1) rows--; /* the last line says how many more */
    if (rows > f->n) rows = f->n;
    int p = 0;
    while (p < f->n && f->order[p] != out->tensor) p++;
    const int first = p >= rows ? p - rows + 1 : 0;
    out->n_rows = rows;
    for (int i = 0; i < rows; i++) out->row_tensor[i] = f->order[first + i];
}

int dtv_fp8_x_of_iter(const dtv_fp8_layout *L, int64_t iter)
{
    return (int)floor(L->x + ((double)iter + 0.5 - L->x_lo) * L->w / (L->x_hi - L->x_lo));
}

/* x of a step boundary: iteration u's start */
static int dtv__xb(const dtv_fp8_layout *L, double u)
{
    return (int)floor(L->x + (u - L->x_lo) * L->w / (L->x_hi - L->x_lo));
}

int dtv_fp8_y_of(const dtv_fp8_layout *L, double mag)
{
    const double l2 = mag > 0 ? log2(mag) : L->l2_lo;
    return (int)lround(L->y + L->h - (l2 - L->l2_lo) * L->h / (L->l2_hi - L->l2_lo));
}

int dtv_fp8_marker_radius(double saturated)
{
    const int r = 3 + (int)lround(1.5 * log10(saturated > 1 ? saturated : 1));
    return r > 11 ? 11 : r;
}

int dtv_fp8_hit(const dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v, int px, int py)
{
    dtv_fp8_layout L;
    dtv_fp8_layout_of(c, area, t, v, &L);
    if (L.n_rows < 1 || px < L.list.x || px >= L.list.x + L.list.w || py < L.list.y) return -1;
    const int i = (py - L.list.y) / L.row_h;
    return i < L.n_rows ? L.row_tensor[i] : -1;
}

/* "0.314%", "6.5e-05%", "0%" */
static void dtv__pct(char *b, size_t n, double part, double whole)
{
    const double p = whole > 0 ? 100.0 * part / whole : 0;
    if (p == 0) snprintf(b, n, "0%%");
    else if (p >= 0.001) snprintf(b, n, "%.3g%%", p);
    else snprintf(b, n, "%.2g%%", p);
}

/* a count of values: exact below a million, else "23.6M" */
static void dtv__count(char *b, size_t n, double v)
{
    if (v < 1e6) snprintf(b, n, "%.0f", v);
    else if (v < 1e9) snprintf(b, n, "%.3gM", v * 1e-6);
    else snprintf(b, n, "%.3gG", v * 1e-9);
}

/* "2^-16", or "2^-16.5" between powers */
static void dtv__pow2(char *b, size_t n, double v)
{
    const double l2 = log2(v);
    if (fabs(l2 - lround(l2)) < 1e-6) snprintf(b, n, "2^%ld", lround(l2));
    else snprintf(b, n, "2^%.1f", l2);
}

/* "block 0, the qkv projection's output gradient (dy)" from "h.0.qkv.dy"; "" when the name is another's */
static void dtv__describe(char *b, size_t n, const char *name)
{
    int L = -1, used = 0;
    char lin[16] = "", role[8] = "";
    b[0] = '\0';
    if (sscanf(name, "h.%d.%15[^.].%7s%n", &L, lin, role, &used) != 3 || name[used] != '\0') return;
    const char *ln = !strcmp(lin, "qkv")       ? "the attention's qkv projection"
                     : !strcmp(lin, "attproj") ? "the attention's output projection"
                     : !strcmp(lin, "fc")      ? "the MLP's first linear (fc)"
                     : !strcmp(lin, "fcproj")  ? "the MLP's second linear (fcproj)"
                                               : NULL;
    const char *rn = !strcmp(role, "x")    ? "input activation (x)"
                     : !strcmp(role, "w")  ? "weight (w)"
                     : !strcmp(role, "dy") ? "output gradient (dy)"
                                           : NULL;
    if (ln && rn) snprintf(b, n, "block %d, %s: its %s", L, ln, rn);
}

static double dtv__nice(double raw)
{
    const double p = pow(10.0, floor(log10(raw)));
    const double f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

/* The message of a trace without FP8 events. */
static void dtv__no_fp8(dtv_canvas *c, SDL_Rect area)
{
    const int y = area.y + area.h / 2 - 30, cx = area.x + area.w / 2;
    dtv_text(c, cx, y, DTV_FONT_BOLD, DTV_CENTER, DTV_FG, "This trace has no FP8 events.");
    dtv_text(c, cx, y + 24, DTV_FONT_NORMAL, DTV_CENTER, DTV_DIM,
             "FP8 training records each tensor's amax, scale and saturated and flushed values per step:");
    dtv_text(c, cx, y + 42, DTV_FONT_NORMAL, DTV_CENTER, DTV_DIM,
             "run dtrain --fp8-format e4m3|hybrid [--fp8-recipe delayed|tensorwise|blockwise] --trace FILE.");
}

/* The run's settings, for the title. */
static void dtv__settings(char *b, size_t n, const dtv_fp8 *f)
{
    const char *mode = f->mode == DT_FP8_MODE_HYBRID ? "hybrid (E4M3 activations and weights, E5M2 gradients)"
                       : f->mode == DT_FP8_MODE_E4M3 ? "E4M3"
                                                     : "format not in the trace's config (E4M3 assumed)";
    char rule[200];
    if (f->recipe == DT_FP8_DELAYED) {
        char hist[48] = "";
        if (f->history_len > 0) snprintf(hist, sizeof hist, " (%d steps)", f->history_len);
        snprintf(rule, sizeof rule, "delayed scaling: a step's scale from the %s of the amax history before it%s",
                 f->algo == DT_FP8_AMAX_MOST_RECENT ? "latest entry" : "max", hist);
    } else if (f->recipe == DT_FP8_TENSORWISE) {
        snprintf(rule, sizeof rule, "tensorwise scaling: a step's scale from its own amax");
    } else {
        snprintf(rule, sizeof rule, "blockwise scaling: a power-of-two scale per 1x128 / 128x128 tile from its amax");
    }
    snprintf(b, n, "FP8 %s, %s, margin %d%s", mode, rule, f->margin,
             f->recipe_known ? "" : " (recipe not in the trace's config: from its events)");
}

/* A step function through (xa[k], y[k]) .. (xb[k], y[k]): horizontal strokes joined by vertical ones. */
typedef struct dtv__stepline {
    int have, px, py; /* the last stroke's end */
} dtv__stepline;

static void dtv__stepline_add(dtv_canvas *c, dtv__stepline *s, int xa, int xb, int y, int thick, SDL_Color col)
{
    if (s->have && s->px >= xa - 1)
        for (int d = 0; d < thick; d++) dtv_line(c, xa + d, s->py, xa + d, y, col);
    for (int d = 0; d < thick; d++) dtv_line(c, xa, y + d, xb > xa ? xb : xa, y + d, col);
    s->have = 1;
    s->px = xb;
    s->py = y;
}

static const dtv_fp8_step *dtv__sat_steps; /* qsort context of dtv__cmp_sat */

/* steps by saturated values, most first, then by iteration */
static int dtv__cmp_sat(const void *a, const void *b)
{
    const dtv_fp8_step *x = &dtv__sat_steps[*(const int *)a], *y = &dtv__sat_steps[*(const int *)b];
    if (x->saturated != y->saturated) return x->saturated < y->saturated ? 1 : -1;
    return (x->iter > y->iter) - (x->iter < y->iter);
}

void dtv_draw_fp8(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v)
{
    SDL_RenderSetClipRect(c->r, &area);
    int tx = area.x + 8;
    tx += dtv_text(c, tx, area.y + 4, DTV_FONT_BOLD, DTV_LEFT, DTV_FG, "%s", t->name);
    const dtv_fp8 *f = t->fp8;
    if (!f) {
        dtv_text(c, tx + 12, area.y + 6, DTV_FONT_NORMAL, DTV_LEFT, DTV_DIM, "%s: FP8 scaling", t->tool);
        dtv__no_fp8(c, area);
        SDL_RenderSetClipRect(c->r, NULL);
        return;
    }
    char set[400];
    dtv__settings(set, sizeof set, f);
    dtv_text(c, tx + 12, area.y + 6, DTV_FONT_NORMAL, DTV_LEFT, DTV_DIM, "%s: %s", t->tool, set);
    dtv_fp8_layout L;
    dtv_fp8_layout_of(c, area, t, v, &L);
    const dtv_fp8_tensor *x = &f->x[L.tensor];
    const dt_fp8_format fmt = (dt_fp8_format)x->format;
    const int shown = dtv_fp8_steps_by(x, v->now);
    dtv_fp8_sum sum;
    dtv_fp8_sums(x, shown, &sum);
    const int lh = dtv_text_height(c, DTV_FONT_SMALL);

    /* the tensor, its format, the keys */
    char desc[160], mx[32], sub[32], fname[16];
    dtv__describe(desc, sizeof desc, x->name);
    snprintf(fname, sizeof fname, "%s", dt_fp8_format_name(fmt)); /* "e5m2" -> "E5M2" */
    for (char *p = fname; *p; p++) *p = (char)toupper((unsigned char)*p);
    dtv__pow2(sub, sizeof sub, dt_fp8_min_subnormal(fmt));
    snprintf(mx, sizeof mx, "%.0f", dt_fp8_max(fmt));
    int lx = area.x + 8;
    lx += dtv_text(c, lx, area.y + 24, DTV_FONT_BOLD, DTV_LEFT, DTV_FG, "%s", x->name);
    lx += dtv_text(c, lx, area.y + 24, DTV_FONT_NORMAL, DTV_LEFT, DTV_FG, "%s%s: %s, max %s, smallest subnormal %s",
                   desc[0] ? ": " : "", desc, fname, mx, sub);
    if (L.list.w > 0)
        dtv_text(c, area.x + area.w - 8, area.y + 26, DTV_FONT_SMALL, DTV_RIGHT, DTV_DIM,
                 "[ ] or up/down, or a click in the list: another tensor");
    /* the readout: the steps shown so far (the whole run when everything is played) */
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    const int ry = area.y + 44;
    if (sum.steps == 0) {
        dtv_text(c, area.x + 8, ry, DTV_FONT_NORMAL, DTV_LEFT, DTV_DIM, "no step of this tensor has ended yet");
    } else {
        dtv__count(b1, sizeof b1, sum.saturated);
        dtv__count(b2, sizeof b2, sum.values);
        dtv__pct(b3, sizeof b3, sum.saturated, sum.values);
        int rx = area.x + 8;
        rx += dtv_text(c, rx, ry, DTV_FONT_NORMAL, DTV_LEFT, sum.saturated > 0 ? DTV_ACCENT : DTV_FG,
                       "saturated: %s of %s values (%s) in %d of %d step%s", b1, b2, b3, sum.steps_saturated, sum.steps,
                       sum.steps == 1 ? "" : "s");
        if (sum.worst >= 0) {
            const dtv_fp8_step *w = &x->s[sum.worst];
            dtv__count(b4, sizeof b4, w->saturated);
            dtv__pct(b5, sizeof b5, w->saturated, w->values);
            rx += dtv_text(c, rx, ry, DTV_FONT_NORMAL, DTV_LEFT, DTV_ACCENT, ", the most at step %lld: %s (%s)",
                           (long long)w->iter, b4, b5);
        }
        dtv__count(b1, sizeof b1, sum.flushed);
        dtv__pct(b3, sizeof b3, sum.flushed, sum.values);
        dtv_text(c, rx + 24, ry, DTV_FONT_NORMAL, DTV_LEFT, DTV_FG, "flushed to 0: %s (%s)", b1, b3);
    }

    /* the plot: background, grid, axes */
    dtv_fill(c, L.x, L.y, L.w, L.h, DTV_PANEL);
    const double per = L.h / (L.l2_hi - L.l2_lo);
    int every = 1;
    while (every * per < 16) every *= 2;
    for (long k = (long)ceil(L.l2_lo); k <= (long)floor(L.l2_hi); k++) {
        if (k % every) continue;
        const int y = dtv_fp8_y_of(&L, ldexp(1.0, (int)k));
        dtv_line(c, L.x, y, L.x + L.w, y, DTV_GRID);
        dtv_line(c, L.x - 4, y, L.x, y, DTV_DIM);
        dtv_text(c, L.x - 6, y - lh / 2, DTV_FONT_SMALL, DTV_RIGHT, DTV_DIM, "2^%ld", k);
    }
    dtv_text(c, area.x + 4, L.y - 18, DTV_FONT_SMALL, DTV_LEFT, DTV_DIM, "|x| before scaling (log2)");
    const int ay = L.y + L.h;
    dtv_line(c, L.x, ay, L.x + L.w, ay, DTV_DIM);
    dtv_line(c, L.x, L.y, L.x, ay, DTV_DIM);
    {
        const double span = L.x_hi - L.x_lo;
        double step = dtv__nice(span / (L.w / 80.0 > 1 ? L.w / 80.0 : 1));
        if (step < 1) step = 1;
        for (double k = ceil(L.x_lo / step) * step; k <= L.x_hi; k += step) {
            const int px = dtv__xb(&L, k);
            dtv_line(c, px, ay, px, ay + 4, DTV_DIM);
            dtv_text(c, px, ay + 5, DTV_FONT_SMALL, DTV_CENTER, DTV_DIM, "%.0f", k);
        }
        dtv_text(c, L.x + L.w, ay + 18, DTV_FONT_SMALL, DTV_RIGHT, DTV_DIM, "iteration (optimizer step)");
    }
    SDL_Rect plot = {L.x, L.y, L.w + 1, L.h + 1}, clip;
    SDL_IntersectRect(&plot, &area, &clip);
    SDL_RenderSetClipRect(c->r, &clip);
    const int kend = L.k1 < shown ? L.k1 : shown;
    /* the bands, then their edges as step functions */
    for (int k = L.k0; k < kend; k++) {
        double lo, hi;
        if (!dtv_fp8_window(f, x, k, &lo, &hi)) continue;
        const int xa = dtv__xb(&L, (double)x->s[k].iter), xb = dtv__xb(&L, (double)x->s[k].iter + 1);
        const int yt = dtv_fp8_y_of(&L, hi), yb = dtv_fp8_y_of(&L, lo);
        dtv_fill(c, xa, yt, xb - xa > 1 ? xb - xa : 1, yb - yt > 1 ? yb - yt : 1, DTV__F_BAND);
    }
    dtv__stepline top = {0, 0, 0}, bot = {0, 0, 0};
    for (int k = L.k0; k < kend; k++) {
        double lo, hi;
        if (!dtv_fp8_window(f, x, k, &lo, &hi)) {
            top.have = bot.have = 0;
            continue;
        }
        const int xa = dtv__xb(&L, (double)x->s[k].iter), xb = dtv__xb(&L, (double)x->s[k].iter + 1);
        dtv__stepline_add(c, &top, xa, xb, dtv_fp8_y_of(&L, hi), 2, DTV__F_TOP_C);
        dtv__stepline_add(c, &bot, xa, xb, dtv_fp8_y_of(&L, lo), 1, DTV__F_BOT_C);
    }
    /* the amax: a line through the steps' middles, a dot per step where they are 6 px apart */
    const double px_per_step = L.w / (L.x_hi - L.x_lo);
    int have = 0, px0 = 0, py0 = 0;
    for (int k = L.k0; k < kend; k++) {
        const double a = x->s[k].amax;
        if (!(a > 0 && isfinite(a))) {
            have = 0;
            continue;
        }
        const int px = dtv_fp8_x_of_iter(&L, x->s[k].iter), py = dtv_fp8_y_of(&L, a);
        if (have) {
            dtv_line(c, px0, py0, px, py, DTV__F_AMAX);
            dtv_line(c, px0, py0 + 1, px, py + 1, DTV__F_AMAX);
        }
        if (px_per_step >= 6) dtv_disc(c, px, py, 2, DTV__F_AMAX);
        have = 1, px0 = px, py0 = py;
    }
    /* saturated steps: a tick on the plot's top edge, the overshoot from the band's top to the amax, the marker */
    int n_sat = 0;
    for (int k = L.k0; k < kend; k++) n_sat += x->s[k].saturated > 0;
    int *sat = n_sat ? malloc((size_t)n_sat * sizeof *sat) : NULL;
    n_sat = 0;
    for (int k = L.k0; k < kend; k++) {
        const dtv_fp8_step *s = &x->s[k];
        if (!(s->saturated > 0)) continue;
        if (sat) sat[n_sat++] = k;
        const int px = dtv_fp8_x_of_iter(&L, s->iter);
        const int py = s->amax > 0 && isfinite(s->amax) ? dtv_fp8_y_of(&L, s->amax) : L.y;
        dtv_fill(c, px - 1, L.y, 3, 6, DTV_ACCENT);
        double lo, hi;
        if (dtv_fp8_window(f, x, k, &lo, &hi)) {
            const int yt = dtv_fp8_y_of(&L, hi);
            if (yt > py) dtv_fill(c, px - 1, py, 3, yt - py + 1, DTV_ACCENT);
        }
        dtv_disc(c, px, py, dtv_fp8_marker_radius(s->saturated), DTV_ACCENT);
    }
    /* their counts, the largest first, where they overlap no marker or label placed before */
    if (sat) {
        dtv__sat_steps = x->s;
        qsort(sat, (size_t)n_sat, sizeof *sat, dtv__cmp_sat);
        SDL_Rect placed[2 * DTV__F_LABELS];
        int n_placed = 0;
        for (int i = 0; i < n_sat && i < DTV__F_LABELS; i++) { /* the markers of the labelled steps */
            const dtv_fp8_step *s = &x->s[sat[i]];
            const int px = dtv_fp8_x_of_iter(&L, s->iter), r = dtv_fp8_marker_radius(s->saturated);
            const int py = s->amax > 0 && isfinite(s->amax) ? dtv_fp8_y_of(&L, s->amax) : L.y;
            placed[n_placed++] = (SDL_Rect){px - r, py - r, 2 * r + 1, 2 * r + 1};
        }
        for (int i = 0; i < n_sat && i < DTV__F_LABELS; i++) {
            const dtv_fp8_step *s = &x->s[sat[i]];
            const int px = dtv_fp8_x_of_iter(&L, s->iter), r = dtv_fp8_marker_radius(s->saturated);
            const int py = s->amax > 0 && isfinite(s->amax) ? dtv_fp8_y_of(&L, s->amax) : L.y;
            char txt[32];
            dtv__count(txt, sizeof txt, s->saturated);
            int tw = 0;
            TTF_SizeUTF8(c->small, txt, &tw, NULL);
            /* above the marker, right of it, left of it */
            const int cand[3][2] = {
                {px - tw / 2, py - r - 2 - lh}, {px + r + 3, py - lh / 2}, {px - r - 3 - tw, py - lh / 2}};
            for (int q = 0; q < 3; q++) {
                SDL_Rect rr = {cand[q][0] - 1, cand[q][1], tw + 2, lh};
                if (rr.x < L.x + 1 || rr.x + rr.w > L.x + L.w - 1 || rr.y < L.y + 7 || rr.y + rr.h > L.y + L.h - 1)
                    continue;
                int free_ = 1;
                for (int p = 0; p < n_placed && free_; p++) free_ = !SDL_HasIntersection(&rr, &placed[p]);
                if (!free_) continue;
                dtv_text(c, cand[q][0], cand[q][1], DTV_FONT_SMALL, DTV_LEFT, DTV_ACCENT, "%s", txt);
                placed[n_placed++] = rr;
                break;
            }
        }
        free(sat);
    }
    /* playback cursor: inside the step in progress */
    if (v->now != INT64_MAX && shown < x->n) {
        const int64_t st0 = dtv__step_t0(t, x, shown), st1 = x->s[shown].t;
        const double fr = st1 > st0 ? fmin(1.0, fmax(0.0, (double)(v->now - st0) / (double)(st1 - st0))) : 0;
        const int px = dtv__xb(&L, (double)x->s[shown].iter + fr);
        dtv_line(c, px, L.y, px, L.y + L.h, DTV_DIM);
    }
    SDL_RenderSetClipRect(c->r, &area);

    /* the tensors, most saturated first (the whole run) */
    if (L.list.w > 0) {
        dtv_text(c, L.list.x, L.y - 18, DTV_FONT_SMALL, DTV_LEFT, DTV_DIM, "tensors by saturated values (run)");
        for (int i = 0; i < L.n_rows; i++) {
            const dtv_fp8_tensor *y = &f->x[L.row_tensor[i]];
            const int yy = L.list.y + i * L.row_h;
            if (L.row_tensor[i] == L.tensor) dtv_fill(c, L.list.x, yy, L.list.w, L.row_h, DTV__F_SEL);
            dtv_text(c, L.list.x + 4, yy + (L.row_h - lh) / 2, DTV_FONT_SMALL, DTV_LEFT, DTV_FG, "%s", y->name);
            dtv__count(b1, sizeof b1, y->saturated);
            dtv_text(c, L.list.x + L.list.w - 4, yy + (L.row_h - lh) / 2, DTV_FONT_SMALL, DTV_RIGHT,
                     y->saturated > 0 ? DTV_ACCENT : DTV_DIM, "%s", b1);
        }
        if (L.n_rows < f->n)
            dtv_text(c, L.list.x + 4, L.list.y + L.n_rows * L.row_h + (L.row_h - lh) / 2, DTV_FONT_SMALL, DTV_LEFT,
                     DTV_DIM, "... %d more", f->n - L.n_rows);
    }

    /* legend: the band (what it means under this recipe), then the marks */
    int gx = area.x + 8;
    const int gy = area.y + area.h - DTV__F_LEGEND + 2;
    dtv_fill(c, gx, gy + 1, 18, lh - 2, DTV__F_BAND);
    dtv_line(c, gx, gy + 1, gx + 18, gy + 1, DTV__F_TOP_C);
    dtv_line(c, gx, gy + lh - 2, gx + 18, gy + lh - 2, DTV__F_BOT_C);
    gx += 24;
    if (f->recipe == DT_FP8_DELAYED)
        dtv_text(c, gx, gy, DTV_FONT_SMALL, DTV_LEFT, DTV_FG,
                 "the values the step's scale s converts, s from the amax history before the step: above the top "
                 "(max / s) they saturate to +-max, at or below the bottom (smallest subnormal / 2s) they flush to 0");
    else if (f->recipe == DT_FP8_TENSORWISE)
        dtv_text(c, gx, gy, DTV_FONT_SMALL, DTV_LEFT, DTV_FG,
                 "tensorwise: s follows the step's own amax, so the band is drawn from it (top = amax%s): nothing "
                 "saturates; at or below the bottom (smallest subnormal / 2s) values flush to 0",
                 f->margin ? " x 2^margin" : "");
    else
        dtv_text(c, gx, gy, DTV_FONT_SMALL, DTV_LEFT, DTV_FG,
                 "blockwise: the band of the tile that holds the step's amax, drawn from it (its power-of-two s puts "
                 "the top at amax%s .. 2x that); tiles with a smaller amax reach further down",
                 f->margin ? " x 2^margin" : "");
    const int gy2 = gy + lh + 2;
    gx = area.x + 8;
    dtv_fill(c, gx, gy2 + lh / 2 - 1, 18, 2, DTV__F_AMAX);
    gx += 24 + dtv_text(c, gx + 24, gy2, DTV_FONT_SMALL, DTV_LEFT, DTV_FG, "amax of the step (largest |x|)") + 18;
    dtv_disc(c, gx + 5, gy2 + lh / 2, 4, DTV_ACCENT);
    dtv_fill(c, gx + 4, gy2 - 1, 3, lh / 2, DTV_ACCENT);
    dtv_text(c, gx + 16, gy2, DTV_FONT_SMALL, DTV_LEFT, DTV_FG,
             "a step with saturated values (size and label: their count), the stroke from the band's top up to its "
             "amax");
    SDL_RenderSetClipRect(c->r, NULL);
}
