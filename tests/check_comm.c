/* check_comm.c: communicators. Run by tests/comm.sh under mpirun with 1..4
 * ranks; every rank runs the whole suite on the communicator under test,
 * g_world: the MPI world, or a "self" communicator when built without MPI.
 * `check_comm --have-mpi` prints yes or no and starts nothing.
 *
 * Tests: rank and size; rings of isend/irecv completed by wait and by test
 * polling, with 0-byte, small and several-MB messages; tag matching, and
 * the order of messages sharing a tag; barrier (a late rank sees no message
 * sent after the barrier before it enters it); clock offsets to rank 0
 * within their measured bounds; split into even/odd ranks,
 * with reversed keys, with a rank left out, and one group per rank, then
 * p2p, barrier and allreduce inside; allreduce_native on integer-valued
 * floats (exact sums); the paths for counts beyond INT_MAX, run with the
 * per-call limit lowered to 1000; the self backend on its own; argument
 * errors, and MPI errors coming back as statuses (truncation).
 *
 * MPI forbids fork() after MPI_Init, so tests run in the runner's process
 * (CK_NOFORK). Tests communicate first and assert afterwards where they
 * can, so that a wrong value on one rank does not leave the others waiting;
 * a rank that does stop early leaves its peers blocked, and comm.sh's time
 * limit ends the run. Each test uses its own tags. main sums the failure
 * counts of all ranks with allreduce_native, so any rank's failure fails
 * every rank; rank 0 prints the total. Set DT_COMM_EXPECT_SIZE to have
 * the rank/size test check the number of ranks (comm.sh does), which
 * catches processes that each started as a lone singleton. */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "comm_internal.h"
#include "testutil.h"

static dt_comm *g_world; /* the communicator under test */

/* ---- helpers -------------------------------------------------------------- */

/* Byte i of the message identified by (src, key): every message differs. */
static uint8_t pat(int src, int key, size_t i)
{
    return (uint8_t)((unsigned)src * 37u + (unsigned)key * 11u + (unsigned)(i * 7u) + (unsigned)(i >> 10));
}

static void fill(uint8_t *b, size_t bytes, int src, int key)
{
    for (size_t i = 0; i < bytes; i++) b[i] = pat(src, key, i);
}

/* Index of the first byte that differs from message (src, key), or SIZE_MAX. */
static size_t mismatch(const uint8_t *b, size_t bytes, int src, int key)
{
    for (size_t i = 0; i < bytes; i++)
        if (b[i] != pat(src, key, i)) return i;
    return SIZE_MAX;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {}
}

/* Every rank sends send_bytes to rank+1 and receives them into a buffer of
 * recv_bytes >= send_bytes from rank-1 (tag), completing by wait, or by test
 * polling when poll is set; then checks the message and that the rest of the
 * receive buffer was left alone. */
static void ring_exchange(dt_comm *c, size_t send_bytes, size_t recv_bytes, int tag, int poll)
{
    int n = c->size, r = c->rank, right = (r + 1) % n, left = (r + n - 1) % n;
    uint8_t *sb = malloc(send_bytes + 1), *rb = malloc(recv_bytes + 1);
    ck_assert(sb != NULL && rb != NULL);
    fill(sb, send_bytes, r, tag);
    memset(rb, 0xa5, recv_bytes);
    dt_comm_request *rreq = NULL, *sreq = NULL;
    ck_dt(c->ops->irecv(c, rb, recv_bytes, left, tag, &rreq));
    ck_dt(c->ops->isend(c, sb, send_bytes, right, tag, &sreq));
    if (poll) {
        int rdone = 0, sdone = 0;
        while (!rdone || !sdone) {
            if (!sdone) ck_dt(c->ops->test(c, sreq, &sdone));
            if (!rdone) ck_dt(c->ops->test(c, rreq, &rdone));
        }
    } else {
        ck_dt(c->ops->wait(c, sreq));
        ck_dt(c->ops->wait(c, rreq));
    }
    size_t bad = mismatch(rb, send_bytes, left, tag);
    ck_assert_msg(bad == SIZE_MAX, "rank %d of %d (%s): %zu-byte message from rank %d (tag %d) differs at byte %zu", r,
                  n, c->ops->name, send_bytes, left, tag, bad);
    for (size_t i = send_bytes; i < recv_bytes; i++)
        ck_assert_msg(rb[i] == 0xa5, "rank %d: receive buffer changed at byte %zu, past the %zu-byte message", r, i,
                      send_bytes);
    free(sb);
    free(rb);
}

/* ---- world: rank, size, point-to-point, barrier ---------------------------- */

START_TEST(test_rank_size)
{
    dt_comm *c = g_world;
    int n = c->size, r = c->rank;
    ck_assert_int_ge(n, 1);
    ck_assert_int_ge(r, 0);
    ck_assert_int_lt(r, n);
    ck_assert_str_eq(c->ops->name, dt_comm_have_mpi() ? "mpi" : "self");
    const char *expect = getenv("DT_COMM_EXPECT_SIZE");
    if (expect && *expect)
        ck_assert_msg(n == atoi(expect), "rank %d: communicator has %d ranks, DT_COMM_EXPECT_SIZE says %s", r, n,
                      expect);
    const dt_comm_ops *o = c->ops;
    ck_assert(o->isend && o->irecv && o->wait && o->test && o->waitany && o->barrier && o->split &&
              o->allreduce_native && o->destroy);
    /* Ranks are distinct and cover 0..n-1: a one-hot vector sums to all ones. */
    float *v = calloc((size_t)n + 2, sizeof *v);
    ck_assert(v != NULL);
    v[r] = 1.0f;
    v[n] = 1.0f;
    v[n + 1] = (float)r;
    ck_dt(o->allreduce_native(c, v, (size_t)n + 2));
    for (int i = 0; i < n; i++) ck_assert_msg(v[i] == 1.0f, "rank %d: %g ranks claim rank %d", r, v[i], i);
    ck_assert(v[n] == (float)n);
    ck_assert(v[n + 1] == (float)(n * (n - 1) / 2));
    free(v);
}
END_TEST

static const size_t ring_sizes[] = {0, 1, 1000, 4 * 1024 * 1024 + 3};
#define N_RING_SIZES (int)(sizeof ring_sizes / sizeof ring_sizes[0])

START_TEST(test_ring_wait)
{
    ring_exchange(g_world, ring_sizes[_i], ring_sizes[_i], 10 + _i, 0);
    /* twice on the same tag: nothing left over from the first round */
    ring_exchange(g_world, ring_sizes[_i], ring_sizes[_i], 10 + _i, 0);
}
END_TEST

START_TEST(test_ring_test_polling) { ring_exchange(g_world, ring_sizes[_i], ring_sizes[_i], 20 + _i, 1); }
END_TEST

START_TEST(test_ring_short_message)
{
    /* a message shorter than the receive buffer fills its front only */
    ring_exchange(g_world, 100, 4096, 29, 0);
}
END_TEST

/* Three tags sent in one order and received in another, and two messages
 * on one tag, which arrive in the order they were sent. */
START_TEST(test_tags)
{
    dt_comm *c = g_world;
    int n = c->size, r = c->rank, right = (r + 1) % n, left = (r + n - 1) % n;
    enum { B = 64, M = 5 };
    static const int tags[M] = {30, 31, 32, 33, 33};
    uint8_t out[M][B], in[M][B];
    dt_comm_request *sreq[M], *rreq[M];
    for (int k = 0; k < M; k++) fill(out[k], B, r, k);
    for (int k = 0; k < M; k++) ck_dt(c->ops->isend(c, out[k], B, right, tags[k], &sreq[k]));
    static const int recv_order[M] = {2, 3, 0, 4, 1}; /* 32, first 33, 30, second 33, 31 */
    for (int j = 0; j < M; j++) {
        int k = recv_order[j];
        ck_dt(c->ops->irecv(c, in[k], B, left, tags[k], &rreq[k]));
    }
    for (int k = M - 1; k >= 0; k--) ck_dt(c->ops->wait(c, rreq[k]));
    for (int k = 0; k < M; k++) ck_dt(c->ops->wait(c, sreq[k]));
    for (int k = 0; k < M; k++) {
        size_t bad = mismatch(in[k], B, left, k);
        ck_assert_msg(bad == SIZE_MAX, "rank %d: message %d (tag %d) from rank %d differs at byte %zu", r, k, tags[k],
                      left, bad);
    }
}
END_TEST

/* Each rank in turn is late to the barrier: it posts receives for messages
 * that the others send only after the barrier, and none may have arrived
 * before it entered the barrier itself. */
START_TEST(test_barrier)
{
    dt_comm *c = g_world;
    int n = c->size, r = c->rank;
    int early[4] = {0};
    for (int late = 0; late < n && late < 4; late++) {
        if (r == late) {
            int *from = calloc((size_t)n, sizeof *from);
            dt_comm_request **req = calloc((size_t)n, sizeof *req);
            ck_assert(from && req);
            for (int p = 0; p < n; p++)
                if (p != r) ck_dt(c->ops->irecv(c, &from[p], sizeof from[p], p, 40, &req[p]));
            sleep_ms(20);
            for (int p = 0; p < n; p++) {
                int done = 0;
                if (p == r) continue;
                ck_dt(c->ops->test(c, req[p], &done));
                if (done) {
                    early[late]++;
                    req[p] = NULL;
                }
            }
            ck_dt(c->ops->barrier(c));
            for (int p = 0; p < n; p++)
                if (req[p]) ck_dt(c->ops->wait(c, req[p]));
            free(from);
            free(req);
        } else {
            ck_dt(c->ops->barrier(c));
            dt_comm_request *s;
            ck_dt(c->ops->isend(c, &r, sizeof r, late, 40, &s));
            ck_dt(c->ops->wait(c, s));
        }
    }
    for (int late = 0; late < 4; late++)
        ck_assert_msg(early[late] == 0, "rank %d: %d message(s) sent after the barrier arrived before it entered", r,
                      early[late]);
    ck_dt(c->ops->barrier(c));
}
END_TEST

/* waitany: rank 0 posts a receive from every other rank; rank p sends
 * after (n - p) * 15 ms, so the highest rank arrives first. Every message
 * completes exactly once, with its own payload, and waitany clears the
 * request it completed. */
START_TEST(test_waitany)
{
    dt_comm *c = g_world;
    int n = c->size, r = c->rank;
    if (r == 0) {
        int vals[4] = {0}, seen[4] = {0};
        dt_comm_request *req[4] = {NULL};
        for (int p = 1; p < n && p < 4; p++) ck_dt(c->ops->irecv(c, &vals[p], sizeof vals[p], p, 45, &req[p]));
        for (int left = (n < 4 ? n : 4) - 1; left > 0; left--) {
            int idx = -1;
            ck_dt(dt_comm_waitany(c, 4, req, &idx));
            ck_assert_int_ge(idx, 1);
            ck_assert_ptr_null(req[idx]);
            ck_assert_int_eq(vals[idx], 1000 + idx);
            seen[idx]++;
        }
        for (int p = 1; p < n && p < 4; p++) ck_assert_int_eq(seen[p], 1);
        int idx = 7;
        ck_assert_int_eq(dt_comm_waitany(c, 4, req, &idx), DT_ERR_INVALID); /* nothing pending */
        ck_assert_int_eq(idx, -1);
    } else if (r < 4) {
        sleep_ms(15 * (n - r));
        int v = 1000 + r;
        dt_comm_request *s;
        ck_dt(c->ops->isend(c, &v, sizeof v, 0, 45, &s));
        ck_dt(c->ops->wait(c, s));
    }
    ck_dt(c->ops->barrier(c));
}
END_TEST

START_TEST(test_world_again)
{
    dt_comm *w = NULL;
    if (!dt_comm_have_mpi()) {
        ck_assert_int_eq(dt_comm_mpi_world(&w), DT_ERR_UNSUPPORTED);
        ck_assert_ptr_null(w);
        ck_assert_msg(strstr(dt_last_error(), "built without MPI") != NULL, "message: %s", dt_last_error());
        ck_dt(dt_comm_finalize());
        return;
    }
    /* A second world is a communicator of its own, with the same ranks. */
    ck_dt(dt_comm_mpi_world(&w));
    ck_assert_int_eq(w->size, g_world->size);
    ck_assert_int_eq(w->rank, g_world->rank);
    ring_exchange(w, 256, 256, 45, 0);
    ck_dt(w->ops->barrier(w));
    dt_comm_free(w);
}
END_TEST

/* The node-local rank, for the GPU choice: MPI_COMM_TYPE_SHARED orders a
 * node's ranks by world rank (key 0), so it is at most the world rank and
 * some rank has 0; splits inherit the process's value; self knows none. */
START_TEST(test_local_rank)
{
    dt_comm *sub = NULL;
    if (!dt_comm_have_mpi()) {
        ck_assert_int_eq(g_world->local_rank, -1);
    } else {
        const int lr = g_world->local_rank;
        ck_assert_msg(lr >= 0 && lr <= g_world->rank, "rank %d: local rank %d", g_world->rank, lr);
        float zeros = lr == 0 ? 1.0f : 0.0f;
        ck_dt(g_world->ops->allreduce_native(g_world, &zeros, 1));
        ck_assert(zeros >= 1.0f);
    }
    ck_dt(g_world->ops->split(g_world, 0, g_world->rank, &sub));
    ck_assert_ptr_nonnull(sub);
    ck_assert_int_eq(sub->local_rank, g_world->local_rank);
    dt_comm_free(sub);
    dt_comm *self = NULL;
    ck_dt(dt_comm_self_create(&self));
    ck_assert_int_eq(self->local_rank, -1);
    dt_comm_free(self);
}
END_TEST

/* ---- split ---------------------------------------------------------------- */

/* p2p, barrier and allreduce inside sub; world_sum is the expected sum of the
 * world ranks of sub's members. */
static void exercise_sub(dt_comm *sub, int tag, float world_sum)
{
    ring_exchange(sub, 1000, 1000, tag, 0);
    ring_exchange(sub, 0, 0, tag + 1, 1);
    ck_dt(sub->ops->barrier(sub));
    float v[2] = {(float)g_world->rank, 1.0f};
    ck_dt(sub->ops->allreduce_native(sub, v, 2));
    ck_assert_msg(v[0] == world_sum && v[1] == (float)sub->size,
                  "world rank %d: sums in its %d-rank group are %g and %g, expected %g and %d", g_world->rank,
                  sub->size, v[0], v[1], world_sum, sub->size);
}

/* Clock offsets to rank 0: the ranks share one host's CLOCK_MONOTONIC, so
 * the true offset is 0 and each estimate must lie within its own bound. */
START_TEST(test_clock_sync)
{
    dt_comm *c = g_world;
    dt_comm_clock k;
    ck_dt(dt_comm_clock_sync(c, 8, &k));
    int64_t id0 = k.sync_id; /* rank 0's, sent to every rank */
    if (c->size > 1) {
        dt_comm_request *q = NULL;
        if (c->rank == 0)
            for (int r = 1; r < c->size; r++) {
                ck_dt(c->ops->isend(c, &k.sync_id, sizeof k.sync_id, r, 90, &q));
                ck_dt(c->ops->wait(c, q));
            }
        else {
            ck_dt(c->ops->irecv(c, &id0, sizeof id0, 0, 90, &q));
            ck_dt(c->ops->wait(c, q));
        }
    }
    ck_assert_msg(k.sync_id == id0 && k.sync_id >= 0, "rank %d: sync id %lld, rank 0's %lld", c->rank,
                  (long long)k.sync_id, (long long)id0);
    ck_assert_msg(k.error_ns >= 0 && (c->rank > 0 || (k.offset_ns == 0 && k.error_ns == 0)), "rank %d", c->rank);
    ck_assert_msg(llabs((long long)k.offset_ns) <= k.error_ns, "rank %d: offset %lld ns, bound %lld ns", c->rank,
                  (long long)k.offset_ns, (long long)k.error_ns);
    ck_assert_int_eq(dt_comm_clock_sync(c, 0, &k), DT_ERR_INVALID);
}
END_TEST

START_TEST(test_split_even_odd)
{
    dt_comm *c = g_world, *sub = NULL;
    int n = c->size, r = c->rank, p = r % 2;
    ck_dt(c->ops->split(c, p, r, &sub));
    ck_assert_ptr_nonnull(sub);
    ck_assert_str_eq(sub->ops->name, c->ops->name);
    ck_assert_int_eq(sub->size, (n - p + 1) / 2);
    ck_assert_int_eq(sub->rank, r / 2);
    float sum = 0;
    for (int k = p; k < n; k += 2) sum += (float)k;
    exercise_sub(sub, 50, sum);
    dt_comm_free(sub);
}
END_TEST

START_TEST(test_split_reversed_keys)
{
    dt_comm *c = g_world, *sub = NULL;
    int n = c->size, r = c->rank;
    ck_dt(c->ops->split(c, 7, n - r, &sub));
    ck_assert_ptr_nonnull(sub);
    ck_assert_int_eq(sub->size, n);
    ck_assert_int_eq(sub->rank, n - 1 - r);
    exercise_sub(sub, 52, (float)(n * (n - 1) / 2));
    dt_comm_free(sub);
}
END_TEST

START_TEST(test_split_leave_out)
{
    /* rank 0 joins no group (color < 0); the others form one */
    dt_comm *c = g_world, *sub = NULL;
    int n = c->size, r = c->rank;
    ck_dt(c->ops->split(c, r == 0 ? -1 : 1, r, &sub));
    if (r == 0) {
        ck_assert_ptr_null(sub);
    } else {
        ck_assert_ptr_nonnull(sub);
        ck_assert_int_eq(sub->size, n - 1);
        ck_assert_int_eq(sub->rank, r - 1);
        exercise_sub(sub, 54, (float)(n * (n - 1) / 2));
        dt_comm_free(sub);
    }
    ck_dt(c->ops->barrier(c));
}
END_TEST

START_TEST(test_split_per_rank)
{
    dt_comm *c = g_world, *sub = NULL, *subsub = NULL;
    ck_dt(c->ops->split(c, c->rank, 0, &sub));
    ck_assert_ptr_nonnull(sub);
    ck_assert_int_eq(sub->size, 1);
    ck_assert_int_eq(sub->rank, 0);
    exercise_sub(sub, 56, (float)c->rank);
    /* and split again: a group of one from a group of one */
    ck_dt(sub->ops->split(sub, 0, 0, &subsub));
    ck_assert_ptr_nonnull(subsub);
    ck_assert_int_eq(subsub->size, 1);
    exercise_sub(subsub, 58, (float)c->rank);
    dt_comm_free(subsub);
    dt_comm_free(sub);
}
END_TEST

/* ---- allreduce_native --------------------------------------------------- */

static const size_t reduce_counts[] = {0, 1, 2, 3, 5, 7, 1000, 1000003};
#define N_REDUCE_COUNTS (int)(sizeof reduce_counts / sizeof reduce_counts[0])

/* buf[i] = (rank + 1) * (i % 97 + 1): the sums are integers below 2^24, exact. */
static void check_allreduce(dt_comm *c, size_t count)
{
    int n = c->size, r = c->rank;
    float *buf = malloc((count + 1) * sizeof *buf);
    ck_assert(buf != NULL);
    for (size_t i = 0; i < count; i++) buf[i] = (float)((r + 1) * (int)(i % 97 + 1));
    ck_dt(c->ops->allreduce_native(c, buf, count));
    size_t bad = SIZE_MAX;
    float want_bad = 0;
    for (size_t i = 0; i < count && bad == SIZE_MAX; i++) {
        float want = (float)((n * (n + 1) / 2) * (int)(i % 97 + 1));
        if (buf[i] != want) {
            bad = i;
            want_bad = want;
        }
    }
    ck_assert_msg(bad == SIZE_MAX, "rank %d: allreduce_native of %zu floats: element %zu is %.9g, expected %.9g", r,
                  count, bad, bad == SIZE_MAX ? 0.0 : buf[bad], want_bad);
    free(buf);
}

START_TEST(test_allreduce_native) { check_allreduce(g_world, reduce_counts[_i]); }
END_TEST

/* ---- beyond INT_MAX, rehearsed with a per-call limit of 1000 ------------- */

static void restore_max_count(void) { dt__comm_set_max_count(0); }

START_TEST(test_large_p2p)
{
    dt__comm_set_max_count(1000);
    ring_exchange(g_world, 1000 * 1000 + 7, 1000 * 1000 + 7, 60, 0);   /* q pieces + a remainder */
    ring_exchange(g_world, 64000, 64000, 61, 1);                       /* whole pieces only */
    ring_exchange(g_world, 1000 * 1000 + 7, 1000 * 1000 + 107, 62, 0); /* into a larger buffer */
    ring_exchange(g_world, 500, 5000, 63, 1);                          /* one plain call into a pieced buffer */
    ring_exchange(g_world, 0, 5000, 64, 0);
    ring_exchange(g_world, 1000, 1000, 65, 0); /* exactly the limit: one call */
    restore_max_count();
}
END_TEST

START_TEST(test_large_allreduce)
{
    dt__comm_set_max_count(1000);
    check_allreduce(g_world, 10007);
    check_allreduce(g_world, 3000);
    check_allreduce(g_world, 1000);
    restore_max_count();
}
END_TEST

/* Opt-in (DT_COMM_TEST_HUGE=1, 2+ ranks, about 4.3 GB): one real message of
 * 2^31 + 11 bytes from rank 0 to rank 1. */
START_TEST(test_huge_message)
{
    dt_comm *c = g_world;
    if (c->size < 2) return;
    size_t bytes = ((size_t)1 << 31) + 11;
    dt_comm_request *req = NULL;
    if (c->rank == 0) {
        uint8_t *b = malloc(bytes);
        ck_assert(b != NULL);
        fill(b, bytes, 0, 66);
        ck_dt(c->ops->isend(c, b, bytes, 1, 66, &req));
        ck_dt(c->ops->wait(c, req));
        free(b);
    } else if (c->rank == 1) {
        uint8_t *b = malloc(bytes);
        ck_assert(b != NULL);
        ck_dt(c->ops->irecv(c, b, bytes, 0, 66, &req));
        ck_dt(c->ops->wait(c, req));
        size_t bad = mismatch(b, bytes, 0, 66);
        ck_assert_msg(bad == SIZE_MAX, "huge message differs at byte %zu", bad);
        free(b);
    }
    ck_dt(c->ops->barrier(c));
}
END_TEST

/* ---- the self backend on its own ------------------------------------------- */

static dt_comm *g_self;
static void self_setup(void) { ck_dt(dt_comm_self_create(&g_self)); }
static void self_teardown(void)
{
    dt_comm_free(g_self);
    g_self = NULL;
}

START_TEST(test_self_basics)
{
    dt_comm *s = g_self;
    ck_assert_str_eq(s->ops->name, "self");
    ck_assert_int_eq(s->rank, 0);
    ck_assert_int_eq(s->size, 1);
    ck_dt(s->ops->barrier(s));
    float v[3] = {1.5f, -2.0f, 3.0f};
    ck_dt(s->ops->allreduce_native(s, v, 3));
    ck_assert(v[0] == 1.5f && v[1] == -2.0f && v[2] == 3.0f);
    ck_dt(s->ops->allreduce_native(s, NULL, 0));
    dt_comm_free(NULL);
}
END_TEST

START_TEST(test_self_send_then_recv)
{
    dt_comm *s = g_self;
    uint8_t out[100], in[100];
    fill(out, sizeof out, 0, 1);
    dt_comm_request *sr, *rr;
    int done = -1;
    ck_dt(s->ops->isend(s, out, sizeof out, 0, 1, &sr));
    ck_dt(s->ops->test(s, sr, &done));
    ck_assert_int_eq(done, 0); /* nobody has received it yet */
    ck_dt(s->ops->irecv(s, in, sizeof in, 0, 1, &rr));
    ck_dt(s->ops->test(s, rr, &done));
    ck_assert_int_eq(done, 1);
    ck_dt(s->ops->wait(s, sr));
    ck_assert(mismatch(in, sizeof in, 0, 1) == SIZE_MAX);
}
END_TEST

START_TEST(test_self_recv_then_send)
{
    dt_comm *s = g_self;
    uint8_t out[100], in[200];
    memset(in, 0xa5, sizeof in);
    fill(out, sizeof out, 0, 2);
    dt_comm_request *sr, *rr;
    int done = -1;
    ck_dt(s->ops->irecv(s, in, sizeof in, 0, 2, &rr));
    ck_dt(s->ops->test(s, rr, &done));
    ck_assert_int_eq(done, 0);
    ck_dt(s->ops->isend(s, out, sizeof out, 0, 2, &sr));
    ck_dt(s->ops->wait(s, rr));
    ck_dt(s->ops->test(s, sr, &done));
    ck_assert_int_eq(done, 1);
    ck_assert(mismatch(in, sizeof out, 0, 2) == SIZE_MAX);
    ck_assert(in[sizeof out] == 0xa5 && in[sizeof in - 1] == 0xa5);
    /* 0 bytes, NULL buffers */
    ck_dt(s->ops->isend(s, NULL, 0, 0, 3, &sr));
    ck_dt(s->ops->irecv(s, NULL, 0, 0, 3, &rr));
    ck_dt(s->ops->wait(s, rr));
    ck_dt(s->ops->wait(s, sr));
}
END_TEST

START_TEST(test_self_tags)
{
    dt_comm *s = g_self;
    enum { B = 32 };
    uint8_t a[B], b[B], a2[B], in[4][B];
    fill(a, B, 0, 10);
    fill(b, B, 0, 11);
    fill(a2, B, 0, 12);
    dt_comm_request *sreq[3], *rreq[4];
    ck_dt(s->ops->isend(s, a, B, 0, 5, &sreq[0]));
    ck_dt(s->ops->isend(s, b, B, 0, 6, &sreq[1]));
    ck_dt(s->ops->isend(s, a2, B, 0, 5, &sreq[2]));
    ck_dt(s->ops->irecv(s, in[0], B, 0, 6, &rreq[0])); /* b */
    ck_dt(s->ops->irecv(s, in[1], B, 0, 5, &rreq[1])); /* a: the older tag-5 message */
    ck_dt(s->ops->irecv(s, in[2], B, 0, 7, &rreq[2])); /* nothing yet */
    ck_dt(s->ops->irecv(s, in[3], B, 0, 5, &rreq[3])); /* a2 */
    for (int k = 0; k < 3; k++) ck_dt(s->ops->wait(s, sreq[k]));
    int done = -1;
    ck_dt(s->ops->test(s, rreq[2], &done));
    ck_assert_int_eq(done, 0);
    uint8_t c7[B];
    fill(c7, B, 0, 13);
    dt_comm_request *s7;
    ck_dt(s->ops->isend(s, c7, B, 0, 7, &s7));
    for (int k = 0; k < 4; k++) ck_dt(s->ops->wait(s, rreq[k]));
    ck_dt(s->ops->wait(s, s7));
    ck_assert(mismatch(in[0], B, 0, 11) == SIZE_MAX);
    ck_assert(mismatch(in[1], B, 0, 10) == SIZE_MAX);
    ck_assert(mismatch(in[2], B, 0, 13) == SIZE_MAX);
    ck_assert(mismatch(in[3], B, 0, 12) == SIZE_MAX);
}
END_TEST

START_TEST(test_self_unmatched)
{
    dt_comm *s = g_self;
    int x = 1;
    dt_comm_request *req;
    /* wait on something that can never be matched fails instead of hanging, and frees the request */
    ck_dt(s->ops->isend(s, &x, sizeof x, 0, 8, &req));
    ck_assert_int_eq(s->ops->wait(s, req), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "never complete") && strstr(dt_last_error(), "tag 8"), "message: %s",
                  dt_last_error());
    ck_dt(s->ops->irecv(s, &x, sizeof x, 0, 8, &req));
    ck_assert_int_eq(s->ops->wait(s, req), DT_ERR_INVALID);
    /* the failed isend was withdrawn: a new receive does not match it */
    ck_dt(s->ops->irecv(s, &x, sizeof x, 0, 8, &req));
    int done = -1;
    ck_dt(s->ops->test(s, req, &done));
    ck_assert_int_eq(done, 0);
    /* waitany: an unmatched request alone fails instead of hanging; once
     * matched, it is the one completed */
    dt_comm_request *two[2] = {NULL, req};
    int idx = 5;
    ck_assert_int_eq(dt_comm_waitany(s, 2, two, &idx), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "ever complete"), "message: %s", dt_last_error());
    int y = 42;
    dt_comm_request *sr;
    ck_dt(s->ops->isend(s, &y, sizeof y, 0, 8, &sr)); /* matches the pending receive */
    ck_dt(dt_comm_waitany(s, 2, two, &idx));
    ck_assert_int_eq(idx, 1);
    ck_assert_ptr_null(two[1]);
    ck_assert_int_eq(x, 42);
    ck_dt(s->ops->wait(s, sr));
}
END_TEST

START_TEST(test_self_truncation)
{
    dt_comm *s = g_self;
    uint8_t out[10] = {0}, in[5];
    dt_comm_request *sr, *rr;
    ck_dt(s->ops->isend(s, out, sizeof out, 0, 9, &sr));
    ck_dt(s->ops->irecv(s, in, sizeof in, 0, 9, &rr));
    ck_assert_int_eq(s->ops->wait(s, rr), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "10 bytes") && strstr(dt_last_error(), "5-byte"), "message: %s",
                  dt_last_error());
    ck_dt(s->ops->wait(s, sr));
}
END_TEST

START_TEST(test_self_split)
{
    dt_comm *s = g_self, *t = NULL;
    ck_dt(s->ops->split(s, -1, 0, &t));
    ck_assert_ptr_null(t);
    ck_dt(s->ops->split(s, 3, 5, &t));
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->size, 1);
    /* separate communicators: a message on one is not received on the other */
    int x = 42, y = 0;
    dt_comm_request *sr, *rr;
    ck_dt(s->ops->isend(s, &x, sizeof x, 0, 1, &sr));
    ck_dt(t->ops->irecv(t, &y, sizeof y, 0, 1, &rr));
    int done = -1;
    ck_dt(t->ops->test(t, rr, &done));
    ck_assert_int_eq(done, 0);
    ck_dt(t->ops->isend(t, &x, sizeof x, 0, 1, &sr));
    ck_dt(t->ops->wait(t, rr));
    ck_dt(t->ops->wait(t, sr));
    ck_assert_int_eq(y, 42);
    dt_comm_free(t); /* the isend pending on s is freed by the teardown */
}
END_TEST

/* ---- collectives (tests/check_comm.c, written by the collectives engineer) ----
 * Tests of lib/comm/collectives.c on g_world (the MPI world, or a self
 * communicator without MPI). Each test must leave no request pending and
 * use tags no other test uses.
 *
 * Counts {0, 1, n-1, n, n+1, 1000, 1001, 100003} on every algorithm (ring
 * also chunked): integer-valued floats in [-40, 56] give exactly the serial
 * sum on every rank (every partial sum is an integer below 2^24, exact in
 * any order); random floats in [-1, 1) are within (n-1) * 2^-24 * sum|x|
 * of the double-precision sum (the bound for any order of n-1 float
 * additions) and bit-identical on every rank (rank 0 compares the others'
 * checksums). Chunked ring equals unchunked bit for bit. reduce_scatter,
 * all_gather and broadcast (every root) on their own; the hooks (ring:
 * 2(n-1) steps, phases, peers and bytes); sub-communicators from split;
 * user messages on other tags passing through collectives untouched;
 * dt_comm_segment; names and argument errors. Collective failures are
 * recorded and asserted after all ranks are done communicating. Tags used
 * here: 800..809 (the collectives themselves use 32704..32767). */

static const dt_allreduce_algo coll_algos[] = {DT_ALLREDUCE_RING, DT_ALLREDUCE_TREE, DT_ALLREDUCE_NAIVE,
                                               DT_ALLREDUCE_MPI};
#define N_COLL_ALGOS (int)(sizeof coll_algos / sizeof coll_algos[0])
#define N_COLL_COUNTS 8

static void coll_counts(int n, size_t out[N_COLL_COUNTS])
{
    const size_t c[N_COLL_COUNTS] = {0, 1, (size_t)n - 1, (size_t)n, (size_t)n + 1, 1000, 1001, 100003};
    memcpy(out, c, sizeof c);
}

/* The first failure of a test (with the rank's view), asserted at its end. */
typedef struct coll_log {
    int fails;
    char first[400];
} coll_log;

__attribute__((format(printf, 2, 3))) static void coll_fail(coll_log *l, const char *fmt, ...)
{
    if (l->fails++ > 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->first, sizeof l->first, fmt, ap);
    va_end(ap);
}

static void coll_status(coll_log *l, dt_status st, const char *what, size_t count)
{
    if (st != DT_OK)
        coll_fail(l, "%s of %zu floats: %s: %s (%s)", what, count, dt_status_str(st), dt_last_error(),
                  dt_last_error_site());
}

#define coll_assert(l)                                                                                          \
    ck_assert_msg((l)->fails == 0, "rank %d of %d: %d failure(s), the first: %s", g_world->rank, g_world->size, \
                  (l)->fails, (l)->first)

/* Rank r's integer-valued element i. */
static float coll_int(size_t i, int r) { return (float)((int)((i * 7u + (size_t)r * 13u) % 97u) - 40); }

/* Rank r's random element i in [-1, 1) (a hash of (i, r), so any rank can
 * compute any other rank's values). */
static float coll_rand(size_t i, int r)
{
    uint64_t z = (uint64_t)i * 0x9e3779b97f4a7c15u + (uint64_t)(r + 1) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    z ^= z >> 31;
    return (float)((double)(z >> 40) / (double)(1u << 24) * 2.0 - 1.0);
}

static uint64_t coll_checksum(const float *b, size_t count)
{
    uint64_t h = 1469598103934665603u;
    const uint8_t *p = (const uint8_t *)b;
    for (size_t i = 0; i < count * sizeof(float); i++) h = (h ^ p[i]) * 1099511628211u;
    return h;
}

/* Rank 0 receives every rank's checksum (tag) and records the ones that
 * differ from its own; the others send theirs. */
static void coll_same_everywhere(coll_log *l, dt_comm *c, uint64_t h, int tag, const char *what)
{
    dt_comm_request *q = NULL;
    if (c->rank != 0) {
        coll_status(l, c->ops->isend(c, &h, sizeof h, 0, tag, &q), "checksum isend", 1);
        if (q) coll_status(l, c->ops->wait(c, q), "checksum wait", 1);
        return;
    }
    for (int p = 1; p < c->size; p++) {
        uint64_t hp = 0;
        coll_status(l, c->ops->irecv(c, &hp, sizeof hp, p, tag, &q), "checksum irecv", 1);
        if (q) coll_status(l, c->ops->wait(c, q), "checksum wait", 1);
        if (hp != h)
            coll_fail(l, "%s: rank %d's result differs from rank 0's (checksums %016llx, %016llx)", what, p,
                      (unsigned long long)hp, (unsigned long long)h);
    }
}

/* Integer-valued floats: exactly the serial sum, on every rank. */
START_TEST(test_coll_exact)
{
    dt_comm *c = g_world;
    const dt_allreduce_algo algo = coll_algos[_i];
    const int n = c->size, r = c->rank;
    size_t counts[N_COLL_COUNTS];
    coll_counts(n, counts);
    static const size_t chunks[] = {0, 12, 4096};
    const int n_chunks = algo == DT_ALLREDUCE_RING ? 3 : 1;
    coll_log log = {0};
    for (int k = 0; k < N_COLL_COUNTS; k++)
        for (int ch = 0; ch < n_chunks; ch++) {
            const size_t count = counts[k];
            if (count > 10000 && chunks[ch] > 0 && chunks[ch] < 1000) continue; /* thousands of messages */
            float *b = malloc((count + 1) * sizeof *b);
            ck_assert(b != NULL);
            for (size_t i = 0; i < count; i++) b[i] = coll_int(i, r);
            dt_collective_opts o = {.chunk_bytes = chunks[ch]};
            coll_status(&log, dt_comm_allreduce(c, b, count, algo, &o), dt_allreduce_algo_name(algo), count);
            size_t wrong = 0, first = 0;
            for (size_t i = 0; i < count; i++) {
                double want = 0;
                for (int q = 0; q < n; q++) want += coll_int(i, q);
                if ((double)b[i] != want && wrong++ == 0) first = i;
            }
            if (wrong)
                coll_fail(&log, "%s, %zu floats, chunk %zu bytes: %zu element(s) wrong, the first [%zu] = %g",
                          dt_allreduce_algo_name(algo), count, chunks[ch], wrong, first, (double)b[first]);
            free(b);
        }
    coll_assert(&log);
}
END_TEST

/* Random floats: close to the double-precision sum, bit-identical on every rank. */
START_TEST(test_coll_random)
{
    dt_comm *c = g_world;
    const dt_allreduce_algo algo = coll_algos[_i];
    const int n = c->size, r = c->rank;
    size_t counts[N_COLL_COUNTS];
    coll_counts(n, counts);
    coll_log log = {0};
    for (int k = 0; k < N_COLL_COUNTS; k++) {
        const size_t count = counts[k];
        float *b = malloc((count + 1) * sizeof *b);
        ck_assert(b != NULL);
        for (size_t i = 0; i < count; i++) b[i] = coll_rand(i, r);
        coll_status(&log, dt_comm_allreduce(c, b, count, algo, NULL), dt_allreduce_algo_name(algo), count);
        size_t wrong = 0, first = 0;
        double first_want = 0;
        for (size_t i = 0; i < count; i++) {
            double want = 0, mag = 0;
            for (int q = 0; q < n; q++) want += coll_rand(i, q), mag += fabs(coll_rand(i, q));
            if (fabs((double)b[i] - want) > (n - 1) * 0x1p-24 * mag * 1.000001 && wrong++ == 0)
                first = i, first_want = want;
        }
        if (wrong)
            coll_fail(&log,
                      "%s, %zu random floats: %zu element(s) beyond the tolerance, the first [%zu] = %.9g, "
                      "expected %.9g",
                      dt_allreduce_algo_name(algo), count, wrong, first, (double)b[first], first_want);
        char what[64];
        snprintf(what, sizeof what, "%s of %zu random floats", dt_allreduce_algo_name(algo), count);
        coll_same_everywhere(&log, c, coll_checksum(b, count), 800, what);
        free(b);
    }
    coll_assert(&log);
}
END_TEST

/* Chunked ring allreduce (chunks that split segments unevenly, down to one
 * float on the smaller counts, and larger than a segment) equals the
 * unchunked ring bit for bit. */
START_TEST(test_coll_ring_chunked)
{
    dt_comm *c = g_world;
    size_t counts[N_COLL_COUNTS];
    coll_counts(c->size, counts);
    static const size_t chunks[] = {4, 12, 1000, 4096, 65536, 1 << 20};
    coll_log log = {0};
    for (int k = 0; k < N_COLL_COUNTS; k++) {
        const size_t count = counts[k];
        float *ref = malloc((count + 1) * sizeof *ref), *b = malloc((count + 1) * sizeof *b);
        ck_assert(ref != NULL && b != NULL);
        for (size_t i = 0; i < count; i++) ref[i] = coll_rand(i, c->rank);
        coll_status(&log, dt_comm_allreduce(c, ref, count, DT_ALLREDUCE_RING, NULL), "ring", count);
        for (size_t ch = 0; ch < sizeof chunks / sizeof chunks[0]; ch++) {
            if (count > 10000 && chunks[ch] < 1000) continue; /* thousands of messages: slow when oversubscribed */
            for (size_t i = 0; i < count; i++) b[i] = coll_rand(i, c->rank);
            dt_collective_opts o = {.chunk_bytes = chunks[ch]};
            coll_status(&log, dt_comm_allreduce(c, b, count, DT_ALLREDUCE_RING, &o), "chunked ring", count);
            if (count && memcmp(b, ref, count * sizeof *b) != 0)
                coll_fail(&log, "ring of %zu floats in %zu-byte chunks differs from the unchunked ring", count,
                          chunks[ch]);
        }
        free(ref), free(b);
    }
    coll_assert(&log);
}
END_TEST

/* Reduce-scatter leaves the exact sum of segment r on rank r; all-gather
 * copies each rank's segment everywhere; both chunked or not. */
START_TEST(test_coll_reduce_scatter_all_gather)
{
    dt_comm *c = g_world;
    const int n = c->size, r = c->rank;
    size_t counts[N_COLL_COUNTS];
    coll_counts(n, counts);
    static const size_t chunks[] = {0, 12};
    coll_log log = {0};
    for (int k = 0; k < N_COLL_COUNTS; k++)
        for (int ch = 0; ch < 2; ch++) {
            const size_t count = counts[k];
            if (count > 10000 && chunks[ch] > 0) continue; /* thousands of messages */
            float *b = malloc((count + 1) * sizeof *b);
            ck_assert(b != NULL);
            dt_collective_opts o = {.chunk_bytes = chunks[ch]};
            size_t off, len;
            dt_comm_segment(count, n, r, &off, &len);
            for (size_t i = 0; i < count; i++) b[i] = coll_int(i, r);
            coll_status(&log, dt_comm_reduce_scatter(c, b, count, &o), "reduce_scatter", count);
            for (size_t i = off; i < off + len; i++) {
                double want = 0;
                for (int q = 0; q < n; q++) want += coll_int(i, q);
                if ((double)b[i] != want) {
                    coll_fail(&log, "reduce_scatter of %zu floats (chunk %zu): [%zu] = %g, expected %g", count,
                              chunks[ch], i, (double)b[i], want);
                    break;
                }
            }
            for (size_t i = 0; i < count; i++) b[i] = i >= off && i < off + len ? (float)(3 * i + 1) : -1.0f;
            coll_status(&log, dt_comm_all_gather(c, b, count, &o), "all_gather", count);
            for (size_t i = 0; i < count; i++)
                if (b[i] != (float)(3 * i + 1)) {
                    coll_fail(&log, "all_gather of %zu floats (chunk %zu): [%zu] = %g, expected %g", count, chunks[ch],
                              i, (double)b[i], (double)(3 * i + 1));
                    break;
                }
            free(b);
        }
    coll_assert(&log);
}
END_TEST

/* dt_comm_sum_doubles: each rank's doubles added over the ranks to ~48
 * bits, the same on every rank; values a float would round (1/3 + r*1e-9)
 * and of mixed sign, with a reference added in double here. */
START_TEST(test_coll_sum_doubles)
{
    dt_comm *c = g_world;
    const int n = c->size, r = c->rank;
    double v[3] = {1.0 / 3.0 + r * 1e-9, -1e6 * (r + 1) + 0.1, r == 0 ? 7.25 : 0.0};
    ck_dt(dt_comm_sum_doubles(c, v, 3));
    double want0 = 0, want1 = 0;
    for (int q = 0; q < n; q++) want0 += 1.0 / 3.0 + q * 1e-9, want1 += -1e6 * (q + 1) + 0.1;
    ck_assert_msg(fabs(v[0] - want0) <= 1e-13 * fabs(want0), "sum %.17g, expected %.17g", v[0], want0);
    ck_assert_msg(fabs(v[1] - want1) <= 1e-13 * fabs(want1), "sum %.17g, expected %.17g", v[1], want1);
    ck_assert_msg(v[2] == 7.25, "one rank's 7.25 came back as %.17g", v[2]);
    /* a float allreduce would lose the 1e-9 steps: (float)(1/3) alone is 1e-8 off */
    ck_assert(fabs((double)(float)want0 - want0) > 1e-13 * fabs(want0));
    ck_assert(dt_comm_sum_doubles(c, NULL, 1) != DT_OK);
}
END_TEST

START_TEST(test_coll_broadcast)
{
    dt_comm *c = g_world;
    const int n = c->size, r = c->rank;
    size_t counts[N_COLL_COUNTS];
    coll_counts(n, counts);
    coll_log log = {0};
    for (int k = 0; k < N_COLL_COUNTS; k++)
        for (int root = 0; root < n; root++) {
            const size_t count = counts[k];
            float *b = malloc((count + 1) * sizeof *b);
            ck_assert(b != NULL);
            for (size_t i = 0; i < count; i++) b[i] = r == root ? coll_rand(i, root) : -7.0f;
            coll_status(&log, dt_comm_broadcast(c, b, count, root, NULL), "broadcast", count);
            for (size_t i = 0; i < count; i++)
                if (b[i] != coll_rand(i, root)) {
                    coll_fail(&log, "broadcast of %zu floats from root %d: [%zu] = %g, expected %g", count, root, i,
                              (double)b[i], (double)coll_rand(i, root));
                    break;
                }
            free(b);
        }
    coll_assert(&log);
}
END_TEST

/* ---- hooks ---- */

enum { COLL_MAX_CALLS = 64 };
typedef struct coll_calls {
    int n;
    char phase[COLL_MAX_CALLS][16];
    int step[COLL_MAX_CALLS], peer[COLL_MAX_CALLS];
    size_t bytes[COLL_MAX_CALLS];
    int64_t t0[COLL_MAX_CALLS], t1[COLL_MAX_CALLS];
} coll_calls;

static void coll_record(void *ctx, const char *phase, int step, int peer, size_t bytes, int64_t t0, int64_t t1)
{
    coll_calls *k = ctx;
    if (k->n < COLL_MAX_CALLS) {
        snprintf(k->phase[k->n], sizeof k->phase[0], "%s", phase);
        k->step[k->n] = step, k->peer[k->n] = peer, k->bytes[k->n] = bytes;
        k->t0[k->n] = t0, k->t1[k->n] = t1;
    }
    k->n++;
}

/* Ring: 2(n-1) calls, reduce-scatter steps 0..n-2 then all-gather steps
 * 0..n-2, all to rank r+1, each with the bytes of the segment sent (step k:
 * segment r-k-1 then r-k), in time order; chunking does not change them;
 * reduce_scatter and all_gather alone give their half. */
START_TEST(test_coll_ring_hook)
{
    dt_comm *c = g_world;
    const int n = c->size, r = c->rank;
    const size_t count = 1001;
    float b[1001];
    coll_log log = {0};
    for (int run = 0; run < 4; run++) {
        coll_calls calls = {0};
        dt_collective_opts o = {.chunk_bytes = run == 1 ? 40 : 0, .hook = coll_record, .hook_ctx = &calls};
        for (size_t i = 0; i < count; i++) b[i] = coll_int(i, r);
        int first = run == 3 ? n - 1 : 0, last = run == 2 ? n - 1 : 2 * (n - 1); /* global steps [first, last) */
        if (run <= 1) coll_status(&log, dt_comm_allreduce(c, b, count, DT_ALLREDUCE_RING, &o), "ring", count);
        if (run == 2) coll_status(&log, dt_comm_reduce_scatter(c, b, count, &o), "reduce_scatter", count);
        if (run == 3) coll_status(&log, dt_comm_all_gather(c, b, count, &o), "all_gather", count);
        if (calls.n != last - first) {
            coll_fail(&log, "run %d: %d hook calls, expected %d", run, calls.n, last - first);
            continue;
        }
        for (int j = first; j < last; j++) {
            const int x = j - first, rs = j < n - 1, k = rs ? j : j - (n - 1);
            size_t off, len;
            dt_comm_segment(count, n, ((rs ? r - k - 1 : r - k) % n + n) % n, &off, &len);
            if (strcmp(calls.phase[x], rs ? "reduce-scatter" : "all-gather") != 0 || calls.step[x] != k ||
                calls.peer[x] != (r + 1) % n || calls.bytes[x] != len * sizeof(float) || calls.t1[x] < calls.t0[x] ||
                (x > 0 && calls.t0[x] < calls.t1[x - 1]))
                coll_fail(&log,
                          "run %d: call %d is (%s, step %d, peer %d, %zu bytes, %lld ns), expected (%s, step %d, "
                          "peer %d, %zu bytes) after the previous one",
                          run, x, calls.phase[x], calls.step[x], calls.peer[x], calls.bytes[x],
                          (long long)(calls.t1[x] - calls.t0[x]), rs ? "reduce-scatter" : "all-gather", k, (r + 1) % n,
                          len * sizeof(float));
        }
    }
    coll_assert(&log);
}
END_TEST

/* Tree, naive, mpi and broadcast: only the documented phases, steps from 0
 * in each phase, bytes only with a peer (the native "allreduce" step
 * reports the buffer's bytes, as it cannot know whom MPI sends to); tree
 * on a power of two: log2 n halving and log2 n doubling steps; naive: a
 * non-root rank makes one reduce step to rank 0, receives the broadcast,
 * then only forwards it; one call for mpi; none on one rank. */
START_TEST(test_coll_other_hooks)
{
    dt_comm *c = g_world;
    const int n = c->size, r = c->rank;
    float b[100];
    coll_log log = {0};
    static const char *const phases[] = {"reduce-scatter", "all-gather", "reduce", "broadcast", "allreduce"};
    for (int a = 1; a <= N_COLL_ALGOS; a++) { /* a == N_COLL_ALGOS: broadcast from rank n-1 */
        coll_calls calls = {0};
        dt_collective_opts o = {.hook = coll_record, .hook_ctx = &calls};
        for (int i = 0; i < 100; i++) b[i] = coll_int((size_t)i, r);
        const char *name = a < N_COLL_ALGOS ? dt_allreduce_algo_name(coll_algos[a]) : "broadcast";
        if (a < N_COLL_ALGOS) coll_status(&log, dt_comm_allreduce(c, b, 100, coll_algos[a], &o), name, 100);
        else coll_status(&log, dt_comm_broadcast(c, b, 100, n - 1, &o), name, 100);
        int per_phase[5] = {0};
        for (int x = 0; x < calls.n && x < COLL_MAX_CALLS; x++) {
            int p = 0;
            while (p < 5 && strcmp(calls.phase[x], phases[p]) != 0) p++;
            if (p == 5 || calls.step[x] < per_phase[p] || calls.peer[x] < -1 || calls.peer[x] >= n ||
                (calls.peer[x] == -1 && calls.bytes[x] != 0 && p != 4))
                coll_fail(&log, "%s: call %d (%s, step %d, peer %d, %zu bytes) is not a valid next step", name, x,
                          calls.phase[x], calls.step[x], calls.peer[x], calls.bytes[x]);
            else per_phase[p] = calls.step[x] + 1;
        }
        int expect = -1; /* -1: not checked */
        if (n == 1 && coll_algos[a % N_COLL_ALGOS] != DT_ALLREDUCE_MPI) expect = 0;
        if (a < N_COLL_ALGOS && coll_algos[a] == DT_ALLREDUCE_MPI) expect = 1;
        if (a < N_COLL_ALGOS && coll_algos[a] == DT_ALLREDUCE_TREE && n > 1 && (n & (n - 1)) == 0) {
            int lg = 0;
            while ((1 << lg) < n) lg++;
            expect = 2 * lg;
            if (per_phase[0] != lg || per_phase[1] != lg)
                coll_fail(&log, "tree on %d ranks: %d halving and %d doubling steps, expected %d each", n, per_phase[0],
                          per_phase[1], lg);
        }
        if (a < N_COLL_ALGOS && coll_algos[a] == DT_ALLREDUCE_NAIVE && n > 1 && r != 0) {
            if (calls.n < 2 || strcmp(calls.phase[0], "reduce") != 0 || calls.peer[0] != 0 ||
                calls.bytes[0] != sizeof b || strcmp(calls.phase[1], "broadcast") != 0 || calls.peer[1] != -1)
                coll_fail(&log,
                          "naive on rank %d: %d calls, the first two (%s to %d, %s from %d), expected "
                          "(reduce to 0, broadcast received)",
                          r, calls.n, calls.phase[0], calls.peer[0], calls.phase[1], calls.peer[1]);
            for (int x = 2; x < calls.n && x < COLL_MAX_CALLS; x++)
                if (strcmp(calls.phase[x], "broadcast") != 0 || calls.peer[x] < 0)
                    coll_fail(&log, "naive on rank %d: call %d (%s to %d) after the broadcast was received", r, x,
                              calls.phase[x], calls.peer[x]);
        }
        if (expect >= 0 && calls.n != expect)
            coll_fail(&log, "%s on %d ranks: %d hook calls, expected %d", name, n, calls.n, expect);
    }
    coll_assert(&log);
}
END_TEST

/* ---- communicators, tags, arguments ---- */

/* Collectives on split communicators (even/odd ranks; one rank each) sum
 * over the group only. */
START_TEST(test_coll_sub)
{
    dt_comm *c = g_world, *sub = NULL, *one = NULL;
    const int n = c->size, r = c->rank, p = r % 2;
    ck_dt(c->ops->split(c, p, r, &sub));
    ck_dt(c->ops->split(c, r, 0, &one));
    coll_log log = {0};
    for (int a = 0; a < N_COLL_ALGOS; a++) {
        float v[3] = {(float)r, 1.0f, (float)(r * r)}, w[3] = {(float)r, 1.0f, (float)(r * r)};
        coll_status(&log, dt_comm_allreduce(sub, v, 3, coll_algos[a], NULL), dt_allreduce_algo_name(coll_algos[a]), 3);
        coll_status(&log, dt_comm_allreduce(one, w, 3, coll_algos[a], NULL), dt_allreduce_algo_name(coll_algos[a]), 3);
        float want[3] = {0, 0, 0};
        for (int k = p; k < n; k += 2) want[0] += (float)k, want[1] += 1.0f, want[2] += (float)(k * k);
        if (memcmp(v, want, sizeof v) != 0)
            coll_fail(&log, "%s in the %d-rank group of parity %d: (%g, %g, %g), expected (%g, %g, %g)",
                      dt_allreduce_algo_name(coll_algos[a]), sub->size, p, (double)v[0], (double)v[1], (double)v[2],
                      (double)want[0], (double)want[1], (double)want[2]);
        if (w[0] != (float)r || w[1] != 1.0f || w[2] != (float)(r * r))
            coll_fail(&log, "%s in a group of one changed the buffer", dt_allreduce_algo_name(coll_algos[a]));
    }
    dt_comm_free(sub);
    dt_comm_free(one);
    coll_assert(&log);
}
END_TEST

/* A user message sent before collectives and received after them, and a
 * receive posted before them, on the user's own tags, are untouched by the
 * collectives' messages (and do not disturb them). */
START_TEST(test_coll_user_tags)
{
    dt_comm *c = g_world;
    const int n = c->size, r = c->rank, right = (r + 1) % n, left = (r + n - 1) % n;
    uint8_t out1[100], out2[100], in1[100], in2[100];
    fill(out1, sizeof out1, r, 801);
    fill(out2, sizeof out2, r, 802);
    dt_comm_request *s1 = NULL, *s2 = NULL, *r1 = NULL, *r2 = NULL;
    ck_dt(c->ops->irecv(c, in2, sizeof in2, left, 802, &r2));
    ck_dt(c->ops->isend(c, out1, sizeof out1, right, 801, &s1));
    coll_log log = {0};
    float *b = malloc(5000 * sizeof *b);
    ck_assert(b != NULL);
    for (int a = 0; a < N_COLL_ALGOS; a++) {
        for (int i = 0; i < 5000; i++) b[i] = coll_int((size_t)i, r);
        dt_collective_opts o = {.chunk_bytes = 1024};
        coll_status(&log, dt_comm_allreduce(c, b, 5000, coll_algos[a], &o), dt_allreduce_algo_name(coll_algos[a]),
                    5000);
        for (int i = 0; i < 5000; i++) {
            double want = 0;
            for (int q = 0; q < n; q++) want += coll_int((size_t)i, q);
            if ((double)b[i] != want) {
                coll_fail(&log, "%s with user messages pending: [%d] = %g, expected %g",
                          dt_allreduce_algo_name(coll_algos[a]), i, (double)b[i], want);
                break;
            }
        }
    }
    coll_status(&log, dt_comm_broadcast(c, b, 5000, 0, NULL), "broadcast", 5000);
    ck_dt(c->ops->isend(c, out2, sizeof out2, right, 802, &s2));
    ck_dt(c->ops->irecv(c, in1, sizeof in1, left, 801, &r1));
    ck_dt(c->ops->wait(c, r1));
    ck_dt(c->ops->wait(c, r2));
    ck_dt(c->ops->wait(c, s1));
    ck_dt(c->ops->wait(c, s2));
    free(b);
    coll_assert(&log);
    ck_assert_msg(mismatch(in1, sizeof in1, left, 801) == SIZE_MAX, "rank %d: the tag-801 message was changed", r);
    ck_assert_msg(mismatch(in2, sizeof in2, left, 802) == SIZE_MAX, "rank %d: the tag-802 message was changed", r);
}
END_TEST

START_TEST(test_coll_segment)
{
    static const size_t counts[] = {0, 1, 2, 3, 7, 8, 1000, 1001, 100003};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
        for (int size = 1; size <= 9; size++) {
            size_t next = 0;
            for (int s = 0; s < size; s++) {
                size_t off, len;
                dt_comm_segment(counts[k], size, s, &off, &len);
                ck_assert_msg(off == next, "segment %d of %zu over %d starts at %zu, expected %zu", s, counts[k], size,
                              off, next);
                ck_assert_msg(len == counts[k] / (size_t)size + ((size_t)s < counts[k] % (size_t)size),
                              "segment %d of %zu over %d has %zu elements", s, counts[k], size, len);
                next = off + len;
            }
            ck_assert_uint_eq(next, counts[k]);
        }
}
END_TEST

/* Names round-trip; bad arguments fail with a message and send nothing
 * (every rank fails alike, so nothing is left waiting); count 0 with no
 * buffer is fine; "mpi" on a communicator without a native allreduce is
 * DT_ERR_UNSUPPORTED. */
START_TEST(test_coll_arguments)
{
    dt_comm *c = g_world;
    for (int a = 0; a < N_COLL_ALGOS; a++) {
        dt_allreduce_algo back = (dt_allreduce_algo)-1;
        ck_dt(dt_allreduce_algo_parse(dt_allreduce_algo_name(coll_algos[a]), &back));
        ck_assert_int_eq(back, coll_algos[a]);
        ck_dt(dt_comm_allreduce(c, NULL, 0, coll_algos[a], NULL));
    }
    dt_allreduce_algo out;
    ck_assert_int_eq(dt_allreduce_algo_parse("rings", &out), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "'rings'") && strstr(dt_last_error(), "ring, tree, naive, mpi or nccl"),
                  "message: %s", dt_last_error());
    ck_assert_int_eq(dt_allreduce_algo_parse(NULL, &out), DT_ERR_INVALID);
    ck_assert_str_eq(dt_allreduce_algo_name((dt_allreduce_algo)42), "unknown");
    float x[4] = {1, 2, 3, 4};
    ck_assert_int_eq(dt_comm_allreduce(c, NULL, 4, DT_ALLREDUCE_RING, NULL), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "NULL"), "message: %s", dt_last_error());
    ck_assert_int_eq(dt_comm_allreduce(NULL, x, 4, DT_ALLREDUCE_RING, NULL), DT_ERR_INVALID);
    ck_assert_int_eq(dt_comm_allreduce(c, x, 4, (dt_allreduce_algo)42, NULL), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "42"), "message: %s", dt_last_error());
    ck_assert_int_eq(dt_comm_broadcast(c, x, 4, c->size, NULL), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "root"), "message: %s", dt_last_error());
    ck_assert_int_eq(dt_comm_broadcast(c, x, 4, -1, NULL), DT_ERR_INVALID);
    ck_assert_int_eq(dt_comm_reduce_scatter(c, NULL, 4, NULL), DT_ERR_INVALID);
    ck_assert_int_eq(dt_comm_all_gather(c, NULL, 4, NULL), DT_ERR_INVALID);
    ck_dt(dt_comm_broadcast(c, NULL, 0, 0, NULL));
    ck_dt(dt_comm_reduce_scatter(c, NULL, 0, NULL));
    ck_dt(dt_comm_all_gather(c, NULL, 0, NULL));
    ck_assert(x[0] == 1 && x[3] == 4);
    /* a one-rank communicator whose ops table has no native allreduce */
    dt_comm *self = NULL;
    ck_dt(dt_comm_self_create(&self));
    dt_comm_ops ops = *self->ops;
    ops.allreduce_native = NULL;
    dt_comm bare = {.ops = &ops, .rank = 0, .size = 1, .impl = self->impl};
    ck_assert_int_eq(dt_comm_allreduce(&bare, x, 4, DT_ALLREDUCE_MPI, NULL), DT_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(dt_last_error(), "no such native allreduce"), "message: %s", dt_last_error());
    ck_dt(dt_comm_allreduce(&bare, x, 4, DT_ALLREDUCE_RING, NULL));
    ck_assert(x[0] == 1 && x[3] == 4);
    /* nccl is NCCL's own: refused on a host communicator */
    ck_assert_int_eq(dt_comm_allreduce(self, x, 4, DT_ALLREDUCE_NCCL, NULL), DT_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(dt_last_error(), "'nccl'"), "message: %s", dt_last_error());
    dt_comm_free(self);
}
END_TEST

static TCase *collective_tcase(void)
{
    TCase *tc = tcase_create("collectives");
    tcase_add_loop_test(tc, test_coll_exact, 0, N_COLL_ALGOS);
    tcase_add_loop_test(tc, test_coll_random, 0, N_COLL_ALGOS);
    tcase_add_test(tc, test_coll_ring_chunked);
    tcase_add_test(tc, test_coll_reduce_scatter_all_gather);
    tcase_add_test(tc, test_coll_broadcast);
    tcase_add_test(tc, test_coll_sum_doubles);
    tcase_add_test(tc, test_coll_ring_hook);
    tcase_add_test(tc, test_coll_other_hooks);
    tcase_add_test(tc, test_coll_sub);
    tcase_add_test(tc, test_coll_user_tags);
    tcase_add_test(tc, test_coll_segment);
    tcase_add_test(tc, test_coll_arguments);
    return tc;
}

/* ---- end of collectives ---------------------------------------------------- */

/* ---- errors: bad arguments, and MPI errors as statuses ------------------- */

START_TEST(test_bad_arguments)
{
    dt_comm *c = g_world;
    int x = 0, done = 0;
    dt_comm_request *req = (dt_comm_request *)&x;
    ck_assert_int_eq(c->ops->isend(c, &x, sizeof x, c->size, 0, &req), DT_ERR_INVALID);
    ck_assert_ptr_null(req);
    ck_assert_msg(strstr(dt_last_error(), "peer"), "message: %s", dt_last_error());
    ck_assert_int_eq(c->ops->irecv(c, &x, sizeof x, -1, 0, &req), DT_ERR_INVALID);
    ck_assert_int_eq(c->ops->isend(c, &x, sizeof x, 0, -1, &req), DT_ERR_INVALID);
    ck_assert_msg(strstr(dt_last_error(), "tag -1"), "message: %s", dt_last_error());
    ck_assert_int_eq(c->ops->irecv(c, &x, sizeof x, 0, DT__COMM_TAG_MAX + 1, &req), DT_ERR_INVALID);
    ck_assert_int_eq(c->ops->isend(c, NULL, 4, 0, 0, &req), DT_ERR_INVALID);
    ck_assert_int_eq(c->ops->isend(c, &x, sizeof x, 0, 0, NULL), DT_ERR_INVALID);
    ck_assert_int_eq(c->ops->wait(c, NULL), DT_ERR_INVALID);
    ck_assert_int_eq(c->ops->test(c, NULL, &done), DT_ERR_INVALID);
    ck_assert_int_eq(c->ops->allreduce_native(c, NULL, 3), DT_ERR_INVALID);
    ck_assert_int_eq(c->ops->split(c, 0, 0, NULL), DT_ERR_INVALID);
    ck_assert_int_eq(dt_comm_self_create(NULL), DT_ERR_INVALID);
}
END_TEST

START_TEST(test_request_of_another_comm)
{
    dt_comm *c = g_world, *s = NULL;
    ck_dt(dt_comm_self_create(&s));
    int x = 7, y = 0;
    dt_comm_request *rr, *sr;
    ck_dt(c->ops->irecv(c, &y, sizeof y, c->rank, 92, &rr));
    ck_assert_int_eq(s->ops->wait(s, rr), DT_ERR_INVALID); /* not consumed */
    ck_assert_msg(strstr(dt_last_error(), "another communicator"), "message: %s", dt_last_error());
    ck_dt(c->ops->isend(c, &x, sizeof x, c->rank, 92, &sr));
    ck_dt(c->ops->wait(c, rr));
    ck_dt(c->ops->wait(c, sr));
    ck_assert_int_eq(y, 7);
    dt_comm_free(s);
}
END_TEST

/* A message longer than the receive buffer: the receive's wait fails with a
 * status (MPI_ERR_TRUNCATE comes back through MPI_ERRORS_RETURN instead of
 * aborting), the send completes, and the communicator still works. Sent
 * around the ring, send first: on a message to itself with the receive
 * posted first, OpenMPI 4.1 (ob1, btl self) silently delivers only the
 * buffer's worth and reports success, which dtrain cannot see. */
START_TEST(test_truncation)
{
    dt_comm *c = g_world;
    int n = c->size, r = c->rank, right = (r + 1) % n, left = (r + n - 1) % n;
    uint8_t out[10] = {1, 2, 3}, in[5];
    dt_comm_request *sr, *rr;
    ck_dt(c->ops->isend(c, out, sizeof out, right, 91, &sr));
    ck_dt(c->ops->irecv(c, in, sizeof in, left, 91, &rr));
    dt_status st = c->ops->wait(c, rr);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", dt_last_error());
    ck_dt(c->ops->wait(c, sr));
    ck_dt(c->ops->barrier(c));
    ring_exchange(c, 10, 10, 93, 0);
    ck_assert_int_eq(st, dt_comm_have_mpi() ? DT_ERR_BACKEND : DT_ERR_INVALID);
    ck_assert_msg(strstr(msg, "tag 91"), "message: %s", msg);
    if (dt_comm_have_mpi())
        ck_assert_msg((strstr(msg, "MPI_Wait failed") || strstr(msg, "MPI_Test failed")) && strstr(msg, "TRUNCATE"),
                      "message: %s", msg); /* MPI_Test: the wait polls to --comm-timeout */
}
END_TEST

/* ---- main ------------------------------------------------------------------ */

static Suite *comm_suite(void)
{
    Suite *s = suite_create("comm");
    TCase *tc = tcase_create("world");
    tcase_add_test(tc, test_rank_size);
    tcase_add_loop_test(tc, test_ring_wait, 0, N_RING_SIZES);
    tcase_add_loop_test(tc, test_ring_test_polling, 0, N_RING_SIZES);
    tcase_add_test(tc, test_ring_short_message);
    tcase_add_test(tc, test_tags);
    tcase_add_test(tc, test_barrier);
    tcase_add_test(tc, test_waitany);
    tcase_add_test(tc, test_world_again);
    tcase_add_test(tc, test_local_rank);
    tcase_add_test(tc, test_clock_sync);
    suite_add_tcase(s, tc);

    tc = tcase_create("split");
    tcase_add_test(tc, test_split_even_odd);
    tcase_add_test(tc, test_split_reversed_keys);
    tcase_add_test(tc, test_split_leave_out);
    tcase_add_test(tc, test_split_per_rank);
    suite_add_tcase(s, tc);

    tc = tcase_create("allreduce_native");
    tcase_add_loop_test(tc, test_allreduce_native, 0, N_REDUCE_COUNTS);
    suite_add_tcase(s, tc);

    tc = tcase_create("large");
    tcase_add_checked_fixture(tc, NULL, restore_max_count);
    tcase_add_test(tc, test_large_p2p);
    tcase_add_test(tc, test_large_allreduce);
    const char *huge = getenv("DT_COMM_TEST_HUGE");
    if (huge && strcmp(huge, "1") == 0) tcase_add_test(tc, test_huge_message);
    suite_add_tcase(s, tc);

    tc = tcase_create("self");
    tcase_add_checked_fixture(tc, self_setup, self_teardown);
    tcase_add_test(tc, test_self_basics);
    tcase_add_test(tc, test_self_send_then_recv);
    tcase_add_test(tc, test_self_recv_then_send);
    tcase_add_test(tc, test_self_tags);
    tcase_add_test(tc, test_self_unmatched);
    tcase_add_test(tc, test_self_truncation);
    tcase_add_test(tc, test_self_split);
    suite_add_tcase(s, tc);

    suite_add_tcase(s, collective_tcase());

    tc = tcase_create("errors");
    tcase_add_test(tc, test_bad_arguments);
    tcase_add_test(tc, test_request_of_another_comm);
    tcase_add_test(tc, test_truncation);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--have-mpi") == 0) {
        puts(dt_comm_have_mpi() ? "yes" : "no");
        return EXIT_SUCCESS;
    }
    if (argc != 1) {
        fprintf(stderr, "usage: check_comm [--have-mpi]\n");
        return 2;
    }
    dt_status st = dt_comm_have_mpi() ? dt_comm_mpi_world(&g_world) : dt_comm_self_create(&g_world);
    if (st != DT_OK) {
        fprintf(stderr, "check_comm: no communicator to test: %s (%s)\n", dt_last_error(), dt_last_error_site());
        return EXIT_FAILURE;
    }
    int ok = dt_test_run_ranks(comm_suite(), g_world, "check_comm", 0);
    dt_comm_free(g_world);
    st = dt_comm_finalize();
    if (st != DT_OK) {
        fprintf(stderr, "check_comm: %s (%s)\n", dt_last_error(), dt_last_error_site());
        ok = 0;
    }
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
