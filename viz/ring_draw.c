/* ring_draw.c: the circle views' shared geometry and drawing (see
 * dtv_ring_draw.h): n slots on a circle (slot 0 at the top, clockwise) left
 * of a text panel, curved directed lanes between slots, chunk boxes,
 * node discs and labels, wrapped text, legend entries and the title. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dtv_ring_draw.h"

void dtv__ring_layout_of(SDL_Rect area, int n, dtv__ring_layout *L)
{
    const int pw = dtv__ring_clampi(area.w * 42 / 100, 260, 580);
    const int bw = area.w - pw, bh = area.h - DTV__RING_TOP - DTV__RING_BOTTOM;
    L->cx = area.x + bw / 2;
    L->cy = area.y + DTV__RING_TOP + bh / 2;
    int R = bw / 2 - DTV__RING_MARGIN_X;
    if (bh / 2 - DTV__RING_MARGIN_Y < R) R = bh / 2 - DTV__RING_MARGIN_Y;
    L->R = R < 20 ? 20 : R;
    const double circ = 2.0 * M_PI * L->R / (n > 0 ? n : 1);
    L->node_r = dtv__ring_clampi((int)(circ * 0.22), 3, 16);
    L->box = dtv__ring_clampi(L->node_r / 2 + 2, 3, 8);
    L->lane = L->box / 2 + 1;
    L->panel = (SDL_Rect){area.x + bw, area.y + DTV__RING_TOP, pw - 12, bh};
    L->xlo = area.x + 4;
    L->xhi = area.x + bw - 8;
}

void dtv_ring_point(SDL_Rect area, int n, int i, int *x, int *y)
{
    dtv__ring_layout L;
    dtv__ring_layout_of(area, n, &L);
    const double a = -M_PI / 2 + 2.0 * M_PI * i / (n > 0 ? n : 1);
    *x = (int)lround(L.cx + L.R * cos(a));
    *y = (int)lround(L.cy + L.R * sin(a));
}

void dtv__ring_path_of(SDL_Rect area, const dtv__ring_layout *L, int n, int from, int to, dtv__ring_path *p)
{
    int ax, ay, bx, by;
    dtv_ring_point(area, n, from, &ax, &ay);
    dtv_ring_point(area, n, to, &bx, &by);
    double dx = bx - ax, dy = by - ay;
    const double len = sqrt(dx * dx + dy * dy);
    memset(p, 0, sizeof *p);
    if (len < 1e-9) {
        p->ax = p->bx = p->qx = ax;
        p->ay = p->by = p->qy = ay;
        p->u1 = 1;
        return;
    }
    dx /= len, dy /= len;
    p->px = dy, p->py = -dx; /* screen y grows downward: (dy, -dx) is the left-hand side */
    const double bow = 0.2 * len;
    p->ax = ax + p->px * L->lane, p->ay = ay + p->py * L->lane;
    p->bx = bx + p->px * L->lane, p->by = by + p->py * L->lane;
    p->qx = (ax + bx) / 2.0 + p->px * (L->lane + bow), p->qy = (ay + by) / 2.0 + p->py * (L->lane + bow);
    const double m = (L->node_r + L->box + 3) / (1.1 * len); /* the curve is ~10% longer than the chord */
    p->u0 = m < 0.45 ? m : 0.45;
    p->u1 = 1 - p->u0;
}

void dtv__ring_path_at(const dtv__ring_path *p, double frac, double *x, double *y)
{
    frac = frac < 0 ? 0 : frac > 1 ? 1 : frac;
    const double u = p->u0 + frac * (p->u1 - p->u0), v = 1 - u;
    *x = v * v * p->ax + 2 * u * v * p->qx + u * u * p->bx;
    *y = v * v * p->ay + 2 * u * v * p->qy + u * u * p->by;
}

/* The lane from frac f0 to f1 as a polyline, `thick` pixels wide (1 or 3). */
void dtv__ring_path_draw(dtv_canvas *c, const dtv__ring_path *p, double f0, double f1, SDL_Color col, int thick)
{
    const int segs = 24;
    double x0, y0;
    dtv__ring_path_at(p, f0, &x0, &y0);
    for (int i = 1; i <= segs; i++) {
        double x1, y1;
        dtv__ring_path_at(p, f0 + (f1 - f0) * i / segs, &x1, &y1);
        const int X0 = (int)lround(x0), Y0 = (int)lround(y0), X1 = (int)lround(x1), Y1 = (int)lround(y1);
        dtv_line(c, X0, Y0, X1, Y1, col);
        if (thick > 1) { /* a 3-pixel pen: shifted copies in x and y, no gaps at any slope */
            dtv_line(c, X0 - 1, Y0, X1 - 1, Y1, col);
            dtv_line(c, X0 + 1, Y0, X1 + 1, Y1, col);
            dtv_line(c, X0, Y0 - 1, X1, Y1 - 1, col);
            dtv_line(c, X0, Y0 + 1, X1, Y1 + 1, col);
        }
        x0 = x1, y0 = y1;
    }
}

void dtv_ring_chunk_pos(SDL_Rect area, int n, int from, int to, double frac, int *x, int *y)
{
    dtv__ring_layout L;
    dtv__ring_layout_of(area, n, &L);
    dtv__ring_path p;
    dtv__ring_path_of(area, &L, n, from, to, &p);
    double fx, fy;
    dtv__ring_path_at(&p, frac, &fx, &fy);
    *x = (int)lround(fx);
    *y = (int)lround(fy);
}

/* ---- drawing helpers ---------------------------------------------------- */

static TTF_Font *dtv__ttf(const dtv_canvas *c, int font)
{
    return font == DTV_FONT_SMALL ? c->small : font == DTV_FONT_BOLD ? c->bold : c->font;
}

/* Text wrapped into width w from (x, y); returns the height used. */
int dtv__ring_wrap(dtv_canvas *c, int x, int y, int w, int font, SDL_Color col, const char *text)
{
    const int lh = dtv_text_height(c, font);
    char line[512] = "", cand[600];
    int h = 0;
    const char *p = text;
    while (*p) {
        while (*p == ' ') p++;
        const char *q = p;
        while (*q && *q != ' ') q++;
        if (q == p) break;
        snprintf(cand, sizeof cand, "%s%s%.*s", line, line[0] ? " " : "", (int)(q - p), p);
        int tw = 0;
        TTF_SizeUTF8(dtv__ttf(c, font), cand, &tw, NULL);
        if (tw > w && line[0]) {
            dtv_text(c, x, y + h, font, DTV_LEFT, col, "%s", line);
            h += lh;
            snprintf(line, sizeof line, "%.*s", (int)(q - p), p);
        } else {
            memcpy(line, cand, sizeof line - 1); /* cand is a line plus a word: keep the first 511 bytes */
            line[sizeof line - 1] = '\0';
        }
        p = q;
    }
    if (line[0]) {
        dtv_text(c, x, y + h, font, DTV_LEFT, col, "%s", line);
        h += lh;
    }
    return h;
}

void dtv__ring_disc(dtv_canvas *c, int x, int y, int r, SDL_Color fill, SDL_Color edge)
{
    dtv_disc(c, x, y, r, edge);
    if (r > 2) dtv_disc(c, x, y, r - 2, fill);
}

void dtv__ring_box(dtv_canvas *c, int x, int y, int hb, SDL_Color col, int filled)
{
    if (filled) {
        dtv_fill(c, x - hb, y - hb, 2 * hb + 1, 2 * hb + 1, col);
        dtv_frame(c, x - hb - 1, y - hb - 1, 2 * hb + 3, 2 * hb + 3, DTV_FG);
    } else {
        dtv_frame(c, x - hb, y - hb, 2 * hb + 1, 2 * hb + 1, col);
        dtv_frame(c, x - hb + 1, y - hb + 1, 2 * hb - 1, 2 * hb - 1, col);
    }
}

/* A label (one or two lines) next to the circle at angle a, pushed outward
 * by d, kept inside [L->xlo, L->xhi). */
void dtv__ring_node_label(dtv_canvas *c, const dtv__ring_layout *L, double a, int d, int font, SDL_Color col,
                          const char *l1, const char *l2, SDL_Color col2)
{
    const double ca = cos(a), sa = sin(a);
    const int x = (int)lround(L->cx + (L->R + d) * ca), y = (int)lround(L->cy + (L->R + d) * sa);
    const int align = ca > 0.35 ? DTV_LEFT : ca < -0.35 ? DTV_RIGHT : DTV_CENTER;
    char lines[4][96]; /* l1, then l2's lines (split at '\n') */
    int n = 0;
    snprintf(lines[n++], sizeof lines[0], "%s", l1 ? l1 : "");
    for (const char *p = l2; p && *p && n < 4;) {
        const char *q = strchr(p, '\n');
        const int len = q ? (int)(q - p) : (int)strlen(p);
        snprintf(lines[n++], sizeof lines[0], "%.*s", len, p);
        p = q ? q + 1 : p + len;
    }
    const int h1 = dtv_text_height(c, font), hs = dtv_text_height(c, DTV_FONT_SMALL), h = h1 + (n - 1) * hs;
    const int ty = sa < -0.35 ? y - h : sa > 0.35 ? y : y - h / 2;
    for (int line = 0; line < n; line++) {
        const char *txt = lines[line];
        if (!txt[0]) continue;
        const int f = line ? DTV_FONT_SMALL : font;
        int tw = 0;
        TTF_SizeUTF8(line ? c->small : font == DTV_FONT_SMALL ? c->small : c->font, txt, &tw, NULL);
        int x0 = align == DTV_LEFT ? x : align == DTV_RIGHT ? x - tw : x - tw / 2;
        if (x0 + tw > L->xhi) x0 = L->xhi - tw;
        if (x0 < L->xlo) x0 = L->xlo;
        dtv_text(c, x0, line ? ty + h1 + (line - 1) * hs : ty, f, DTV_LEFT, line ? col2 : col, "%s", txt);
    }
}

void dtv__ring_legend_entry(dtv_canvas *c, int *x, int y, SDL_Color col, int filled, const char *label)
{
    dtv__ring_box(c, *x + 6, y + 7, 5, col, filled);
    *x += 18 + dtv_text(c, *x + 16, y, DTV_FONT_SMALL, DTV_LEFT, DTV_FG, "%s", label) + 14;
}

void dtv__ring_title(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v, const char *what)
{
    int tx = area.x + 8;
    tx += dtv_text(c, tx, area.y + 4, DTV_FONT_BOLD, DTV_LEFT, DTV_FG, "%s", t->name);
    char when[32];
    if (v->now >= t->t_max) snprintf(when, sizeof when, "the end");
    else dtv_fmt_time(when, sizeof when, (double)(v->now - t->t_min));
    dtv_text(c, tx + 12, area.y + 6, DTV_FONT_NORMAL, DTV_LEFT, DTV_DIM, "%s, %s, at %s", t->tool, what, when);
}
