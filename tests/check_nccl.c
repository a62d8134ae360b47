/* check_nccl.c: the "nccl" communicator on device memory. Run by
 * tests/nccl.sh: with one rank always (skipped, exit 77, when no CUDA
 * device or no CUDA build), and under mpirun with one rank per GPU when
 * more than one GPU is visible.
 *
 * Tests (every buffer is device memory of the CUDA backend): every
 * allreduce algorithm (our ring, tree and naive over NCCL's send/receive,
 * and ncclAllReduce) on integer-valued floats, whose sums are exact, for
 * counts 0, 1, fewer than the ranks, odd, and 1M + 7; the ring exchange of
 * isend/irecv completed by wait and by test polling; barrier; split into
 * even and odd ranks with an allreduce inside; "mpi" refused on it.
 *
 * As in check_comm, tests run in the runner's process (CK_NOFORK: neither
 * MPI nor CUDA survive a fork) and every rank's failures are summed. */
#include <stdint.h>
#include <string.h>

#include "dt_backend.h"
#include "dt_comm.h"
#include "testutil.h"

static dt_backend *g_be;
static dt_comm *g_host, *g_nccl;

/* Device buffer of n floats filled from host values. */
static float *dev_from(const float *h, size_t n)
{
    void *d = NULL;
    ck_dt(g_be->alloc(g_be, n ? n * sizeof(float) : 4, &d));
    if (n) ck_dt(g_be->copy(g_be, d, h, n * sizeof(float), DT_COPY_H2D));
    return d;
}

static void to_host(float *h, const float *d, size_t n)
{
    if (n) ck_dt(g_be->copy(g_be, h, d, n * sizeof(float), DT_COPY_D2H));
}

static const size_t counts[] = {0, 1, 3, 1001, (1u << 20) + 7};
#define N_COUNTS (int)(sizeof counts / sizeof counts[0])
static const dt_allreduce_algo algos[] = {DT_ALLREDUCE_RING, DT_ALLREDUCE_TREE, DT_ALLREDUCE_NAIVE, DT_ALLREDUCE_NCCL};

/* rank r contributes r + 1 + (i % 7): the sum is n(n+1)/2 + n (i % 7), exact in FP32 */
START_TEST(test_allreduce)
{
    dt_comm *c = g_nccl;
    const int n = c->size, r = c->rank;
    for (int a = 0; a < 4; a++) {
        size_t count = counts[_i];
        float *h = malloc((count + 1) * sizeof *h);
        ck_assert(h != NULL);
        for (size_t i = 0; i < count; i++) h[i] = (float)(r + 1 + (int)(i % 7));
        float *d = dev_from(h, count);
        const dt_collective_opts opts = {.chunk_bytes = 4096};
        ck_dt(dt_comm_allreduce(c, d, count, algos[a], &opts));
        to_host(h, d, count);
        size_t bad = SIZE_MAX;
        for (size_t i = 0; i < count && bad == SIZE_MAX; i++)
            if (h[i] != (float)(n * (n + 1) / 2 + n * (int)(i % 7))) bad = i;
        ck_assert_msg(bad == SIZE_MAX, "rank %d: %s allreduce of %zu floats wrong at %zu: %g", r,
                      dt_allreduce_algo_name(algos[a]), count, bad, bad == SIZE_MAX ? 0.0 : (double)h[bad]);
        g_be->free(g_be, d);
        free(h);
    }
}
END_TEST

/* Each rank sends 1000 floats to rank+1 and receives from rank-1. */
static void ring_exchange(int poll)
{
    dt_comm *c = g_nccl;
    const int n = c->size, r = c->rank, right = (r + 1) % n, left = (r + n - 1) % n;
    enum { M = 1000 };
    float h[M];
    for (int i = 0; i < M; i++) h[i] = (float)(r * 10000 + i);
    float *out = dev_from(h, M), *in = dev_from(h, M);
    dt_comm_request *rq = NULL, *sq = NULL;
    ck_dt(c->ops->irecv(c, in, sizeof h, left, 7, &rq));
    ck_dt(c->ops->isend(c, out, sizeof h, right, 7, &sq));
    if (poll) {
        int rd = 0, sd = 0;
        while (!rd || !sd) {
            if (!rd) ck_dt(c->ops->test(c, rq, &rd));
            if (!sd) ck_dt(c->ops->test(c, sq, &sd));
        }
    } else {
        ck_dt(c->ops->wait(c, sq));
        ck_dt(c->ops->wait(c, rq));
    }
    to_host(h, in, M);
    for (int i = 0; i < M; i++)
        ck_assert_msg(h[i] == (float)(left * 10000 + i), "rank %d: element %d is %g", r, i, h[i]);
    g_be->free(g_be, out);
    g_be->free(g_be, in);
}

START_TEST(test_p2p_wait) { ring_exchange(0); }
END_TEST

START_TEST(test_p2p_test) { ring_exchange(1); }
END_TEST

START_TEST(test_barrier_split)
{
    dt_comm *c = g_nccl, *sub = NULL;
    ck_dt(c->ops->barrier(c));
    ck_dt(c->ops->split(c, c->rank % 2, c->rank, &sub));
    ck_assert_ptr_nonnull(sub);
    ck_assert_int_eq(sub->size, (c->size + 1 - c->rank % 2) / 2);
    float one = 1.0f, *d = dev_from(&one, 1);
    ck_dt(dt_comm_allreduce(sub, d, 1, DT_ALLREDUCE_RING, NULL));
    to_host(&one, d, 1);
    ck_assert(one == (float)sub->size);
    g_be->free(g_be, d);
    dt_comm_free(sub);
}
END_TEST

START_TEST(test_mpi_refused)
{
    float x = 1.0f, *d = dev_from(&x, 1);
    ck_assert_int_eq(dt_comm_allreduce(g_nccl, d, 1, DT_ALLREDUCE_MPI, NULL), DT_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(dt_last_error(), "nccl") != NULL, "message: %s", dt_last_error());
    g_be->free(g_be, d);
}
END_TEST

static Suite *nccl_suite(void)
{
    Suite *s = suite_create("nccl");
    TCase *tc = tcase_create("nccl");
    tcase_add_loop_test(tc, test_allreduce, 0, N_COUNTS);
    tcase_add_test(tc, test_p2p_wait);
    tcase_add_test(tc, test_p2p_test);
    tcase_add_test(tc, test_barrier_split);
    tcase_add_test(tc, test_mpi_refused);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (dt_backend_create("cuda", 0, &g_be) != DT_OK) {
        printf("check_nccl: skipped: %s\n", dt_last_error());
        return 77;
    }
    const int under_mpirun = getenv("OMPI_COMM_WORLD_SIZE") != NULL;
    dt_status st = under_mpirun ? dt_comm_mpi_world(&g_host) : dt_comm_self_create(&g_host);
    if (st == DT_OK) st = dt_comm_nccl_create(g_host, g_be, &g_nccl);
    if (st != DT_OK) {
        fprintf(stderr, "check_nccl: no NCCL communicator: %s (%s)\n", dt_last_error(), dt_last_error_site());
        return EXIT_FAILURE;
    }
    int ok = dt_test_run_ranks(nccl_suite(), g_host, "check_nccl", 0);
    dt_comm_free(g_nccl);
    dt_comm_free(g_host);
    dt_backend_destroy(g_be);
    if (dt_comm_finalize() != DT_OK) ok = 0;
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
