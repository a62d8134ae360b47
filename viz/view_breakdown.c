/* view_breakdown.c: the breakdown view (see dtv_view.h): where each rank's
 * step goes, the figures of `dtsim analyze` (lib's dt_breakdown_all,
 * computed when the trace was loaded; docs/breakdown.md).
 *
 * Layout, top to bottom: a title line (trace, tool, the steps counted), a
 * line with the ranks' mean shares, then one row per rank: on the left its
 * name, step time and (a pipeline stage) its bubble; a bar whose length is
 * its step to the scale of the longest, split into compute, optimizer,
 * comm exposed, waiting and idle (the background, inside a frame), each
 * wide enough labelled with its share; under it a thin strip as long as
 * the communication that ran under compute or the optimizer. The legend
 * at the bottom. A summary of the whole trace: the playback time and the
 * zoom do not change it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dtv_view.h"

enum { DTV__BD_GUTTER = 250, DTV__BD_TITLE = 48, DTV__BD_LEGEND = 30 };

/* compute: forward's blue; optimizer: orange; comm exposed: reduce-scatter's
 * pink; waiting: a receive's light grey; idle: the background; overlapped:
 * all-gather's violet */
SDL_Color dtv_breakdown_color(int cat)
{
    switch (cat) {
    case DT_BREAKDOWN_COMPUTE: return dtv_kind_color(DTV_FORWARD);
    case DT_BREAKDOWN_OPTIM: return dtv_kind_color(DTV_OPTIM);
    case DT_BREAKDOWN_COMM_EXPOSED: return dtv_kind_color(DTV_RS);
    case DT_BREAKDOWN_WAITING: return dtv_kind_color(DTV_RECV);
    case DT_BREAKDOWN_IDLE: return DTV_BG;
    default: return dtv_kind_color(DTV_AG);
    }
}

void dtv_breakdown_layout_of(const dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v,
                             dtv_breakdown_layout *out)
{
    (void)c;
    memset(out, 0, sizeof *out);
    out->x = area.x + DTV__BD_GUTTER;
    out->w = area.w - DTV__BD_GUTTER - 20;
    if (out->w < 10) out->w = 10;
    const int top = area.y + DTV__BD_TITLE, h = area.h - DTV__BD_TITLE - DTV__BD_LEGEND;
    const int n = t->n_breakdown;
    int rows = n < DTV_BREAKDOWN_ROWS ? n : DTV_BREAKDOWN_ROWS;
    int pitch = rows > 0 ? h / rows : h;
    if (pitch > 44) pitch = 44;
    if (pitch < 8) { /* the rows that fit */
        pitch = 8;
        rows = h / pitch < rows ? h / pitch : rows;
    }
    out->n_rows = rows;
    out->omitted = n - rows;
    out->bar_h = pitch * 2 / 3;
    out->strip_h = pitch - out->bar_h - 3 >= 2 ? pitch - out->bar_h - 3 : 1;
    out->step_max = v->bd_scale_ns > 0 ? v->bd_scale_ns : 0;
    for (int r = 0; r < rows; r++)
        if (t->breakdown[r].step_ns > out->step_max) out->step_max = t->breakdown[r].step_ns;
    for (int r = 0; r < rows; r++) {
        const dt_breakdown *b = &t->breakdown[r];
        out->y[r] = top + r * pitch;
        /* cumulative rounding: the segments tile the bar with no gap */
        double cum = 0;
        out->seg[r][0] = out->x;
        for (int k = 0; k < DT_BREAKDOWN_N_CATS; k++) {
            cum += dt_breakdown_per_step(b, (dt_breakdown_cat)k);
            out->seg[r][k + 1] = out->x + (out->step_max > 0 ? (int)lround(cum / out->step_max * out->w) : 0);
        }
        const double ov = (double)b->comm_overlapped_ns / (double)b->steps;
        out->strip_x1[r] = out->x + (out->step_max > 0 ? (int)lround(ov / out->step_max * out->w) : 0);
    }
}

void dtv_draw_breakdown(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v)
{
    dtv_breakdown_layout L;
    dtv_breakdown_layout_of(c, area, t, v, &L);
    int tx = area.x + 8;
    tx += dtv_text(c, tx, area.y + 4, DTV_FONT_BOLD, DTV_LEFT, DTV_FG, "%s", t->name);
    if (!t->breakdown) {
        dtv_text(c, tx + 12, area.y + 6, DTV_FONT_NORMAL, DTV_LEFT, DTV_DIM, "%s: no step breakdown", t->tool);
        dtv_text(c, area.x + 8, area.y + 26, DTV_FONT_NORMAL, DTV_LEFT, DTV_WARN, "%s", t->bd_why);
        return;
    }
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    double mean[DT_BREAKDOWN_N_CATS] = {0}, mean_step = 0;
    for (int r = 0; r < t->n_breakdown; r++) {
        const dt_breakdown *b = &t->breakdown[r];
        if (b->first_iter < lo) lo = b->first_iter;
        if (b->last_iter > hi) hi = b->last_iter;
        mean_step += b->step_ns / t->n_breakdown;
        for (int k = 0; k < DT_BREAKDOWN_N_CATS; k++)
            mean[k] += dt_breakdown_per_step(b, (dt_breakdown_cat)k) / t->n_breakdown;
    }
    char longest[32];
    dtv_fmt_time(longest, sizeof longest, L.step_max);
    dtv_text(c, tx + 12, area.y + 6, DTV_FONT_NORMAL, DTV_LEFT, DTV_DIM,
             "%s, %d ranks: time per step by category, steps %lld..%lld; bars to scale, full width %s", t->tool,
             t->n_breakdown, (long long)lo, (long long)hi, longest);
    char line[256];
    int k0 = snprintf(line, sizeof line, "mean over ranks:");
    for (int k = 0; k < DT_BREAKDOWN_N_CATS && k0 > 0 && (size_t)k0 < sizeof line; k++)
        k0 += snprintf(line + k0, sizeof line - (size_t)k0, " %s %.1f%%%s", dt_breakdown_cat_name((dt_breakdown_cat)k),
                       mean_step > 0 ? 100.0 * mean[k] / mean_step : 0.0, k + 1 < DT_BREAKDOWN_N_CATS ? "," : "");
    dtv_text(c, area.x + 8, area.y + 26, DTV_FONT_NORMAL, DTV_LEFT, DTV_FG, "%s", line);
    const int font = L.bar_h >= 16 ? DTV_FONT_NORMAL : DTV_FONT_SMALL;
    for (int r = 0; r < L.n_rows; r++) {
        const dt_breakdown *b = &t->breakdown[r];
        const int y = L.y[r];
        char step[32];
        dtv_fmt_time(step, sizeof step, b->step_ns);
        if (L.bar_h >= 10) {
            const int ty = y + (L.bar_h - dtv_text_height(c, font)) / 2;
            int lw = dtv_text(c, area.x + 6, ty, font, DTV_LEFT, DTV_FG, "rank %d", b->pid);
            lw += dtv_text(c, area.x + 12 + lw, ty, DTV_FONT_SMALL, DTV_LEFT, DTV_DIM, "step %s", step);
            if (b->pipeline && !isnan(b->bubble))
                dtv_text(c, area.x + 18 + lw, ty, DTV_FONT_SMALL, DTV_LEFT, DTV_ACCENT, "bubble %.3f", b->bubble);
        }
        for (int k = 0; k < DT_BREAKDOWN_N_CATS; k++) {
            const int x0 = L.seg[r][k], x1 = L.seg[r][k + 1];
            if (x1 <= x0) continue;
            if (k != DT_BREAKDOWN_IDLE) dtv_fill(c, x0, y, x1 - x0, L.bar_h, dtv_breakdown_color(k));
            const double share =
                b->step_ns > 0 ? 100.0 * dt_breakdown_per_step(b, (dt_breakdown_cat)k) / b->step_ns : 0;
            char lab[16];
            snprintf(lab, sizeof lab, "%.0f%%", share);
            int tw = 0;
            TTF_SizeUTF8(c->small, lab, &tw, NULL);
            if (tw + 6 <= x1 - x0 && L.bar_h >= 12)
                dtv_text(c, (x0 + x1) / 2, y + (L.bar_h - dtv_text_height(c, DTV_FONT_SMALL)) / 2, DTV_FONT_SMALL,
                         DTV_CENTER, k == DT_BREAKDOWN_WAITING || k == DT_BREAKDOWN_IDLE ? DTV_FG : DTV_BG, "%s", lab);
        }
        /* the frame holds the idle segment (background) inside the bar */
        dtv_frame(c, L.x - 1, y - 1, L.seg[r][DT_BREAKDOWN_N_CATS] - L.x + 2, L.bar_h + 2, DTV_DIM);
        if (L.strip_x1[r] > L.x)
            dtv_fill(c, L.x, y + L.bar_h + 2, L.strip_x1[r] - L.x, L.strip_h, dtv_breakdown_color(DT_BREAKDOWN_N_CATS));
        const double ov = (double)b->comm_overlapped_ns / (double)b->steps;
        const double comm = ov + dt_breakdown_per_step(b, DT_BREAKDOWN_COMM_EXPOSED);
        if (comm > 0 && L.strip_h >= dtv_text_height(c, DTV_FONT_SMALL) - 4) {
            char o[32];
            dtv_fmt_time(o, sizeof o, ov);
            dtv_text(c, L.strip_x1[r] + 6, y + L.bar_h + 2 + (L.strip_h - dtv_text_height(c, DTV_FONT_SMALL)) / 2,
                     DTV_FONT_SMALL, DTV_LEFT, DTV_DIM, "comm overlapped %s (%.0f%% of comm)", o, 100.0 * ov / comm);
        }
    }
    if (L.omitted > 0 && L.n_rows > 0)
        dtv_text(c, area.x + 6, L.y[L.n_rows - 1] + L.bar_h + L.strip_h + 4, DTV_FONT_SMALL, DTV_LEFT, DTV_DIM,
                 "+%d more ranks (dtsim analyze lists every rank)", L.omitted);
    /* legend */
    const int lh = dtv_text_height(c, DTV_FONT_SMALL) + 4;
    int x = area.x + 8, y = area.y + area.h - DTV__BD_LEGEND + 6;
    for (int k = 0; k <= DT_BREAKDOWN_N_CATS; k++) {
        const char *name = k < DT_BREAKDOWN_N_CATS ? dt_breakdown_cat_name((dt_breakdown_cat)k)
                                                   : "comm overlapped (strip: under compute or the optimizer)";
        dtv_fill(c, x, y + 2, 12, lh - 6, dtv_breakdown_color(k));
        dtv_frame(c, x, y + 2, 12, lh - 6, DTV_DIM);
        x += 16 + dtv_text(c, x + 16, y, DTV_FONT_SMALL, DTV_LEFT, DTV_FG, "%s", name) + 14;
    }
}
