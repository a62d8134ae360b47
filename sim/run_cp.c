/* run_cp.c: context parallelism's exchanges (see run_internal.h): what a
 * block's attention exchanges over the c ranks of its context group in
 * each pass, as lib/parallel/cp.c runs them and with its trace names,
 * priced on the group's links. run_tp.c puts them in the passes beside the
 * tensor group's collectives and writes their spans.
 *
 * A rank holds chunks i and 2c-1-i of the 2c of each sequence: Nl = B T/c
 * rows of every per-token tensor, and its attention is balanced, each ring
 * step two chunk pairs of Tc x Tc (Tc = T/2c), the whole attention over c
 * for the rank. Per block and micro-batch (FP32, C' = C/t, a key/value
 * block Nl x 2C'):
 *   p2p        the forward's c-1 ring steps each send a block to the next
 *              rank while the rank computes its attention against the one
 *              it holds (posted before, waited after: the step adds what
 *              the attention does not hide); B's c steps: c-1 carry the
 *              block so (against the step's attention backward), then,
 *              after each step's compute, its gradient goes on, not
 *              hidden; the last step sends the gradient home only;
 *   allgather  one all-gather of the c blocks forward; B gathers again and
 *              reduce-scatters their gradients (the same price);
 *   a2a        forward, an all-to-all of q, k, v into a head split and one
 *              of the output back; B, four: q, k, v, the output and its
 *              gradient in, the input's gradient back.
 * Recomputation runs the attention's forward again in B (full: the
 * block's; selective: the attention to rebuild its log-sum-exp), its
 * exchanges with it, traced as forward.
 *
 * Prices: unloaded, over the group of rank 0 (t apart): a ring step
 * α + S/β on the ring's slowest link; the all-gather (c-1)·α + (c-1)/c·S/β
 * of the c blocks; an all-to-all α + (c-1)/c·S/β (a rank's port sends its
 * c-1 pieces one after another). A ring step's attention is the block's
 * attention share of its forward or backward, by FLOPs (Q K^T and att V,
 * 4BT²C of 24C²BT + 4BT²C forward, twice each backward: T/(6C + T)), over
 * t c c. No wait for the slowest rank is added (the tensor group's is).
 *
 * Invariants: an exchange's price is what it adds to its pass, >= 0. */
#include "run_internal.h"

void dts__cp_setup(dts__sim *s)
{
    const dts_scenario *sc = s->sc;
    dts__cp_price *p = &s->cpp;
    *p = (dts__cp_price){0};
    if (sc->c < 2) return;
    const int c = sc->c, t = sc->t, stride = dt_grid_stride(&s->grid, DT_GRID_CONTEXT);
    const int64_t Nl = (int64_t)sc->B * dts__Tl(sc), Cr = sc->model.hidden_size / t;
    p->kv_bytes = Nl * 2 * Cr * 4;
    p->msg = dts_net_ring_step_ns(&s->net, 0, stride, c, p->kv_bytes);
    p->gather = dts_net_ring_allgather_ns(&s->net, 0, stride, c, c * p->kv_bytes);
    p->a2a3 = dts_net_alltoall_ns(&s->net, 0, stride, c, Nl * 3 * Cr * 4);
    p->a2a1 = dts_net_alltoall_ns(&s->net, 0, stride, c, Nl * Cr * 4);
    const double T = sc->T, C = sc->model.hidden_size, share = T / (6.0 * C + T), steps = (double)t * c * c;
    p->attn_f = dts__ns((double)sc->cost.fwd_ns[1] * share / steps);
    p->attn_b = dts__ns((double)sc->cost.bwd_ns[1] * share / steps);
}

/* an exchange that adds ns to its pass, its span `overlap` longer (a ring step: the attention it overlaps) */
static dts__tpc dts__cp_x(const char *name, int64_t ns, int64_t overlap, int64_t bytes, int fwd, int rep, int step)
{
    ns = ns > 0 ? ns : 0;
    return (dts__tpc){.name = name,
                      .cat = "cp",
                      .ns = ns,
                      .span = ns + overlap,
                      .bytes = bytes,
                      .fwd = fwd,
                      .rep = rep,
                      .step = step};
}

int dts__cp_block(const dts__sim *s, int k, int recompute, dts__tpc *out)
{
    const dts_scenario *sc = s->sc;
    const dts__cp_price *p = &s->cpp;
    if (sc->c < 2 || (k != DTS__TP_F && k != DTS__TP_B)) return 0;
    const int c = sc->c, fwd = k == DTS__TP_F || recompute;
    const int64_t kv = p->kv_bytes, q3 = kv / 2 * 3 / c * (c - 1), q1 = kv / 2 / c * (c - 1); /* a2a's sent */
    int n = 0;
    switch (sc->cp_comm) {
    case DT_CP_P2P:
        if (fwd) {
            out[n++] = dts__cp_x("cp ring step", p->msg - p->attn_f, p->attn_f, kv, 1, c - 1, 0);
        } else {
            const int64_t hidden = p->msg > p->attn_b ? p->msg - p->attn_b : 0; /* the block's trip */
            out[n++] = dts__cp_x("cp ring step", hidden + p->msg, p->attn_b, 2 * kv, 0, c - 1, 0); /* + the gradient */
            out[n++] = dts__cp_x("cp ring step", p->msg, p->attn_b, kv, 0, 1, c - 1);
        }
        break;
    case DT_CP_ALLGATHER:
        out[n++] = dts__cp_x("cp kv all-gather", p->gather, 0, (c - 1) * kv, fwd, 1, -1);
        if (!fwd) out[n++] = dts__cp_x("cp dkv reduce-scatter", p->gather, 0, (c - 1) * kv, 0, 1, -1);
        break;
    case DT_CP_A2A:
        out[n++] = dts__cp_x("cp all-to-all", p->a2a3, 0, q3, fwd, 1, -1); /* q, k, v in */
        out[n++] = dts__cp_x("cp all-to-all", p->a2a1, 0, q1, fwd, 1, -1); /* the output: back, or B's in */
        if (!fwd) {
            out[n++] = dts__cp_x("cp all-to-all", p->a2a1, 0, q1, 0, 1, -1); /* the output's gradient in */
            out[n++] = dts__cp_x("cp all-to-all", p->a2a3, 0, q3, 0, 1, -1); /* the input's gradient back */
        }
        break;
    }
    return n;
}
