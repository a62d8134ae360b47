/* dtv_ring_draw.h: what the circle views share (viz/ring_draw.c), internal
 * to viz/: view_ring.c (the gradient allreduce and the parameter server)
 * and view_cp.c (the context-parallel ring) put their ranks on one circle
 * on the left of their area with a text panel on the right, move blocks
 * along curved directed lanes between them, and label them alike.
 *
 * Invariants: the geometry depends on the area and the number of slots
 * only (the public dtv_ring_point and dtv_ring_chunk_pos, which tests
 * probe, are these functions'); drawing goes through the canvas. */
#ifndef DTV_RING_DRAW_H
#define DTV_RING_DRAW_H

#include "dtv_view.h"

/* The title line's and the legend's heights, and the circle's margins. */
enum { DTV__RING_TOP = 50, DTV__RING_BOTTOM = 30, DTV__RING_MARGIN_X = 104, DTV__RING_MARGIN_Y = 46 };

typedef struct dtv__ring_layout {
    int cx, cy, R;  /* the circle */
    int node_r;     /* node disc radius */
    int box;        /* chunk box half-size */
    int lane;       /* offset of a directed link from the chord */
    SDL_Rect panel; /* text and histogram, on the right */
    int xlo, xhi;   /* node labels stay in [xlo, xhi) */
} dtv__ring_layout;

static inline int dtv__ring_clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The layout of n slots in `area`. */
void dtv__ring_layout_of(SDL_Rect area, int n, dtv__ring_layout *L);

/* The lane of a directed link: a quadratic curve from slot `from` to slot
 * `to` that bows to the left of its direction (on screen: outward for a
 * clockwise ring link; the two ways of an exchange bow apart, so their
 * chunks never meet), shifted left by L->lane and trimmed by the node
 * discs. */
typedef struct dtv__ring_path {
    double ax, ay, qx, qy, bx, by; /* ends and control point */
    double u0, u1;                 /* the part outside the discs */
    double px, py;                 /* unit vector to the left of the direction */
} dtv__ring_path;
void dtv__ring_path_of(SDL_Rect area, const dtv__ring_layout *L, int n, int from, int to, dtv__ring_path *p);
/* The point `frac` (0..1, clamped) of the way along the lane. */
void dtv__ring_path_at(const dtv__ring_path *p, double frac, double *x, double *y);
/* The lane from frac f0 to f1 as a polyline, `thick` pixels wide (1 or 3). */
void dtv__ring_path_draw(dtv_canvas *c, const dtv__ring_path *p, double f0, double f1, SDL_Color col, int thick);

/* Text wrapped into width w from (x, y); returns the height used. */
int dtv__ring_wrap(dtv_canvas *c, int x, int y, int w, int font, SDL_Color col, const char *text);
/* A node: a disc of radius r filled with `fill` inside a 2-pixel `edge`. */
void dtv__ring_disc(dtv_canvas *c, int x, int y, int r, SDL_Color fill, SDL_Color edge);
/* A chunk box of half-size hb centred on (x, y): filled and framed, or hollow. */
void dtv__ring_box(dtv_canvas *c, int x, int y, int hb, SDL_Color col, int filled);
/* A label next to the circle at angle a, pushed outward by d, kept inside
 * [L->xlo, L->xhi): l1 in `font` and `col`, under it l2 (NULL or "": none;
 * up to 3 lines split at '\n') small in col2. */
void dtv__ring_node_label(dtv_canvas *c, const dtv__ring_layout *L, double a, int d, int font, SDL_Color col,
                          const char *l1, const char *l2, SDL_Color col2);
/* A legend entry (a box and its label) at (*x, y); advances *x. */
void dtv__ring_legend_entry(dtv_canvas *c, int *x, int y, SDL_Color col, int filled, const char *label);
/* The title line: the trace's name, its tool, `what` and the playback time. */
void dtv__ring_title(dtv_canvas *c, SDL_Rect area, const dtv_trace *t, const dtv_view *v, const char *what);

#endif
