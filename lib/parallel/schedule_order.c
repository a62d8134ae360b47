/* schedule_order.c: the compute orders of the schedules with model chunks or
 * a split backward (interleaved-1f1b, zb-h1, zb-v): for one step on one
 * device, the sequence of F, B (or B and W) and OPT items that
 * lib/parallel/schedule.c expands into instructions. Pure arithmetic.
 *
 * Notation: p devices, v chunks per device, m micro-batches per step, r the
 * device, micro-batch i of step t is t*m + i. Every order below forwards,
 * backwards and weight-grads each chunk's micro-batches in ascending order
 * (schedule_internal.h), and ends with the step's OPT.
 *
 * interleaved-1f1b (Megatron-LM's interleaved schedule): the device's
 * v*m forwards are numbered k = 0 .. v*m-1 and taken in groups of p
 * micro-batches per chunk: forward k is on chunk (k mod p*v) div p, of
 * micro-batch (k div p*v)*p + k mod p; backward k has the same micro-batch
 * on chunk v-1 - (k mod p*v) div p (the chunks in reverse). The device runs
 * w = min(2(p-r-1) + (v-1)p, v*m) warm-up forwards, then v*m - w steady
 * pairs (forward w+k, backward k), then the w remaining backwards. This
 * needs m to be a multiple of p: otherwise the groups would skip
 * micro-batches.
 *
 * zb-h1 (zero bubble H1, arXiv 2401.10241): 1f1b's order with the backward
 * split in B (input gradient) and W (weight gradients). Device r runs
 * w = min(p-1-r, m) warm-up forwards, then m-w steady groups "F(w+k) B(k)"
 * followed by W of its oldest un-W'd micro-batch once k >= r (so device r
 * holds back r W's), then the cool-down "B W" pairs and the W's still
 * owed. A micro-batch is in flight from its F to its W: at most
 * (p-r) + r = p on every device, 1f1b's peak (on its first stage).
 *
 * zb-v (zero bubble V): chunk 0 of device r is virtual stage r, chunk 1 is
 * 2p-1-r. With n = max(m, 2p-1) micro-batches counted (those >= m are then
 * left out, so the order of a small m is that of 2p-1 with the missing ones
 * skipped), device r runs:
 *   warm-up   2(p-r)-1 forwards of chunk 0; r pairs "F chunk 1, F chunk 0";
 *   steady    p-r triples "F B W" of chunk 1; then while chunk 0 has
 *             micro-batches left to forward or chunk 1 lags behind it:
 *             "F chunk 0 (if any left), B W chunk 0, F B W chunk 1";
 *   cool-down r pairs "B chunk 0, B chunk 1"; p-r pairs "B chunk 0, W of
 *             chunk 0's oldest"; the W's still owed, chunk 1's first.
 * In flight (F done, W not): at most 2p chunk-micro-batches, each half a
 * 1f1b stage's layers: 1f1b's peak of p stage-micro-batches. This is the
 * ordering of the paper's ZB-V figure as PyTorch's ScheduleZBVZeroBubble
 * generates it. */
#include "schedule_internal.h"

#include "dt_internal.h"

#define DT__PUT(op_, chunk_, mb_, ph_) \
    (it[n++] = (dt__sched_item){.op = (op_), .chunk = (chunk_), .mb = (mb_), .step = t, .version = t, .phase = (ph_)})

static int dt__put_opt(dt__sched_item *it, int n, int t)
{
    it[n] = (dt__sched_item){
        .op = DT_SCHED_OPTIM_STEP, .chunk = 0, .mb = -1, .step = t, .version = t + 1, .phase = DT_SCHED_COOLDOWN};
    return n + 1;
}

int dt__sched_order_interleaved(int p, int v, int m, int r, int t, dt__sched_item *it)
{
    const int total = v * m, group = p * v, base = t * m;
    const int w = DT_MIN(2 * (p - r - 1) + (v - 1) * p, total);
    int n = 0;
    /* forward / backward number k: its chunk and micro-batch */
#define DT__KMB(k) (base + ((k) / group) * p + (k) % p)
#define DT__FCHUNK(k) (((k) % group) / p)
#define DT__BCHUNK(k) (v - 1 - ((k) % group) / p)
    for (int k = 0; k < w; k++) DT__PUT(DT_SCHED_FORWARD, DT__FCHUNK(k), DT__KMB(k), DT_SCHED_WARMUP);
    for (int k = 0; k < total - w; k++) {
        DT__PUT(DT_SCHED_FORWARD, DT__FCHUNK(w + k), DT__KMB(w + k), DT_SCHED_STEADY);
        DT__PUT(DT_SCHED_BACKWARD, DT__BCHUNK(k), DT__KMB(k), DT_SCHED_STEADY);
    }
    for (int k = total - w; k < total; k++) DT__PUT(DT_SCHED_BACKWARD, DT__BCHUNK(k), DT__KMB(k), DT_SCHED_COOLDOWN);
#undef DT__KMB
#undef DT__FCHUNK
#undef DT__BCHUNK
    return dt__put_opt(it, n, t);
}

int dt__sched_order_zbh1(int p, int m, int r, int t, dt__sched_item *it)
{
    const int w = DT_MIN(p - 1 - r, m), base = t * m;
    int n = 0, nw = 0; /* W's emitted */
    for (int i = 0; i < w; i++) DT__PUT(DT_SCHED_FORWARD, 0, base + i, DT_SCHED_WARMUP);
    for (int k = 0; k < m - w; k++) {
        DT__PUT(DT_SCHED_FORWARD, 0, base + w + k, DT_SCHED_STEADY);
        DT__PUT(DT_SCHED_BACKWARD_B, 0, base + k, DT_SCHED_STEADY);
        if (k >= r) DT__PUT(DT_SCHED_BACKWARD_W, 0, base + nw++, DT_SCHED_STEADY);
    }
    for (int k = m - w; k < m; k++) {
        DT__PUT(DT_SCHED_BACKWARD_B, 0, base + k, DT_SCHED_COOLDOWN);
        DT__PUT(DT_SCHED_BACKWARD_W, 0, base + nw++, DT_SCHED_COOLDOWN);
    }
    while (nw < m) DT__PUT(DT_SCHED_BACKWARD_W, 0, base + nw++, DT_SCHED_COOLDOWN);
    return dt__put_opt(it, n, t);
}

int dt__sched_order_zbv(int p, int m, int r, int t, dt__sched_item *it)
{
    const int N = DT_MAX(m, 2 * p - 1), base = t * m;
    int n = 0, f0 = 0, f1 = 0, b0 = 0, b1 = 0, w0, w1;
    /* an item of a micro-batch >= m does not exist: skip it */
#define DT__ZB(op_, c_, i_, ph_)                                                   \
    do {                                                                           \
        const int i__ = (i_); /* evaluated once: the counters are passed as x++ */ \
        if (i__ < m) DT__PUT((op_), (c_), base + i__, (ph_));                      \
    } while (0)
    for (int i = 0; i < 2 * (p - r) - 1; i++) DT__ZB(DT_SCHED_FORWARD, 0, f0++, DT_SCHED_WARMUP);
    for (int i = 0; i < r; i++) {
        DT__ZB(DT_SCHED_FORWARD, 1, f1++, DT_SCHED_WARMUP);
        DT__ZB(DT_SCHED_FORWARD, 0, f0++, DT_SCHED_WARMUP);
    }
    for (int i = 0; i < p - r; i++) {
        DT__ZB(DT_SCHED_FORWARD, 1, f1++, DT_SCHED_STEADY);
        DT__ZB(DT_SCHED_BACKWARD_B, 1, b1, DT_SCHED_STEADY);
        DT__ZB(DT_SCHED_BACKWARD_W, 1, b1++, DT_SCHED_STEADY);
    }
    while (f1 < f0 || f0 < N) {
        if (f0 < N) DT__ZB(DT_SCHED_FORWARD, 0, f0++, DT_SCHED_STEADY);
        DT__ZB(DT_SCHED_BACKWARD_B, 0, b0, DT_SCHED_STEADY);
        DT__ZB(DT_SCHED_BACKWARD_W, 0, b0++, DT_SCHED_STEADY);
        DT__ZB(DT_SCHED_FORWARD, 1, f1++, DT_SCHED_STEADY);
        DT__ZB(DT_SCHED_BACKWARD_B, 1, b1, DT_SCHED_STEADY);
        DT__ZB(DT_SCHED_BACKWARD_W, 1, b1++, DT_SCHED_STEADY);
    }
    w0 = b0;
    w1 = b1;
    for (int i = 0; i < r; i++) {
        DT__ZB(DT_SCHED_BACKWARD_B, 0, b0++, DT_SCHED_COOLDOWN);
        DT__ZB(DT_SCHED_BACKWARD_B, 1, b1++, DT_SCHED_COOLDOWN);
    }
    for (int i = 0; i < p - r; i++) {
        DT__ZB(DT_SCHED_BACKWARD_B, 0, b0++, DT_SCHED_COOLDOWN);
        DT__ZB(DT_SCHED_BACKWARD_W, 0, w0++, DT_SCHED_COOLDOWN);
    }
    while (w1 < b1) DT__ZB(DT_SCHED_BACKWARD_W, 1, w1++, DT_SCHED_COOLDOWN);
    while (w0 < b0) DT__ZB(DT_SCHED_BACKWARD_W, 0, w0++, DT_SCHED_COOLDOWN);
#undef DT__ZB
    return dt__put_opt(it, n, t);
}
