/* check_grid.c: the process grid (include/dt_grid.h) against tables worked
 * out by hand in Megatron-LM's order (tensor fastest, then context, data,
 * pipeline): every rank's coordinates and every group's members, index
 * and places for 8 ranks as t=2 x d=2 x p=2; the tied-embedding group's
 * ends for p=4 (and zb-v's one stage); the ZeRO group spanning context and
 * data with c=2; parameter servers outside the grid; the one-line
 * refusals, word for word where dtrain's users meet them (tests/pp.sh and
 * tests/badinput.sh look for the same text); and the split on the one-rank
 * communicator. Under mpirun (tests/grid.sh: 1 to 4 ranks) every layout
 * of the world is split into each kind of group and checked. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* t=2, d=2, p=2 over 8 ranks: rank = tensor + 2 * (data + 2 * stage). */
static const int coords_8[8][DT_GRID_DIMS] = {
    /* tensor, context, data, pipeline */
    {0, 0, 0, 0}, {1, 0, 0, 0}, {0, 0, 1, 0}, {1, 0, 1, 0}, {0, 0, 0, 1}, {1, 0, 0, 1}, {0, 0, 1, 1}, {1, 0, 1, 1},
};

/* Each rank's group of each kind: its index among the kind's groups and
 * its members in order (the rank's place is its position there). */
typedef struct {
    dt_grid_group grp;
    int size, count;
    int index[8];
    int members[8][8];
} group_table;

static const group_table groups_8[] = {
    {DT_GRID_TENSOR, 2, 4, {0, 0, 1, 1, 2, 2, 3, 3}, {{0, 1}, {0, 1}, {2, 3}, {2, 3}, {4, 5}, {4, 5}, {6, 7}, {6, 7}}},
    {DT_GRID_CONTEXT, 1, 8, {0, 1, 2, 3, 4, 5, 6, 7}, {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}},
    {DT_GRID_DATA, 2, 4, {0, 1, 0, 1, 2, 3, 2, 3}, {{0, 2}, {1, 3}, {0, 2}, {1, 3}, {4, 6}, {5, 7}, {4, 6}, {5, 7}}},
    {DT_GRID_PIPELINE,
     2,
     4,
     {0, 1, 2, 3, 0, 1, 2, 3},
     {{0, 4}, {1, 5}, {2, 6}, {3, 7}, {0, 4}, {1, 5}, {2, 6}, {3, 7}}},
    /* c = 1: ZeRO shards over the data group */
    {DT_GRID_ZERO, 2, 4, {0, 1, 0, 1, 2, 3, 2, 3}, {{0, 2}, {1, 3}, {0, 2}, {1, 3}, {4, 6}, {5, 7}, {4, 6}, {5, 7}}},
    /* p = 2: both stages are ends, one group per pipeline */
    {DT_GRID_EMBEDDING,
     2,
     4,
     {0, 1, 2, 3, 0, 1, 2, 3},
     {{0, 4}, {1, 5}, {2, 6}, {3, 7}, {0, 4}, {1, 5}, {2, 6}, {3, 7}}},
};

/* A group's place of rank: its position in the members. */
static int place_in(const int *members, int n, int rank)
{
    for (int k = 0; k < n; k++)
        if (members[k] == rank) return k;
    return -1;
}

START_TEST(test_grid_8_coords)
{
    dt_grid g;
    ck_dt(dt_grid_init(&g, 8, 0, 2, 1, 2));
    ck_assert_int_eq(g.size[DT_GRID_TENSOR], 2);
    ck_assert_int_eq(g.size[DT_GRID_CONTEXT], 1);
    ck_assert_int_eq(g.size[DT_GRID_DATA], 2);
    ck_assert_int_eq(g.size[DT_GRID_PIPELINE], 2);
    ck_assert_int_eq(g.workers, 8);
    ck_assert_int_eq(g.world, 8);
    ck_assert_int_eq(g.servers, 0);
    for (int r = 0; r < 8; r++) {
        for (int i = 0; i < DT_GRID_DIMS; i++)
            ck_assert_msg(dt_grid_coord(&g, r, (dt_grid_group)i) == coords_8[r][i], "rank %d dim %d: %d, expected %d",
                          r, i, dt_grid_coord(&g, r, (dt_grid_group)i), coords_8[r][i]);
        ck_assert_int_eq(dt_grid_rank(&g, coords_8[r]), r);
    }
    ck_assert_int_eq(dt_grid_coord(&g, 8, DT_GRID_TENSOR), -1);
    ck_assert_int_eq(dt_grid_coord(&g, -1, DT_GRID_DATA), -1);
    ck_assert_int_eq(dt_grid_coord(&g, 0, DT_GRID_ZERO), -1); /* not a dimension */
    ck_assert_int_eq(dt_grid_stride(&g, DT_GRID_TENSOR), 1);
    ck_assert_int_eq(dt_grid_stride(&g, DT_GRID_CONTEXT), 2);
    ck_assert_int_eq(dt_grid_stride(&g, DT_GRID_DATA), 2);
    ck_assert_int_eq(dt_grid_stride(&g, DT_GRID_PIPELINE), 4);
    ck_assert_int_eq(dt_grid_stride(&g, DT_GRID_EMBEDDING), 0);
    const int outside[DT_GRID_DIMS] = {0, 0, 2, 0};
    ck_assert_int_eq(dt_grid_rank(&g, outside), -1);
}
END_TEST

START_TEST(test_grid_8_groups)
{
    dt_grid g;
    ck_dt(dt_grid_init(&g, 8, 0, 2, 1, 2));
    for (size_t k = 0; k < sizeof groups_8 / sizeof groups_8[0]; k++) {
        const group_table *want = &groups_8[k];
        ck_assert_int_eq(dt_grid_group_size(&g, want->grp), want->size);
        ck_assert_int_eq(dt_grid_group_count(&g, want->grp), want->count);
        for (int r = 0; r < 8; r++) {
            int got[8] = {0};
            ck_assert_int_eq(dt_grid_group_members(&g, want->grp, r, got), want->size);
            for (int m = 0; m < want->size; m++)
                ck_assert_msg(got[m] == want->members[r][m], "group %d of rank %d: member %d is %d, expected %d",
                              (int)want->grp, r, m, got[m], want->members[r][m]);
            ck_assert_int_eq(dt_grid_group_index(&g, want->grp, r), want->index[r]);
            ck_assert_int_eq(dt_grid_group_rank(&g, want->grp, r), place_in(want->members[r], want->size, r));
        }
    }
}
END_TEST

/* p = 4 over 8 ranks (t = 1, d = 2): the embedding group joins stages 0
 * and 3 of each pipeline; stages 1 and 2 are in none. */
START_TEST(test_grid_embedding_ends)
{
    dt_grid g;
    ck_dt(dt_grid_init(&g, 8, 0, 1, 1, 4));
    ck_assert_int_eq(g.size[DT_GRID_DATA], 2);
    ck_assert_int_eq(g.embedding[0], 0);
    ck_assert_int_eq(g.embedding[1], 3);
    ck_assert_int_eq(dt_grid_group_size(&g, DT_GRID_EMBEDDING), 2);
    ck_assert_int_eq(dt_grid_group_count(&g, DT_GRID_EMBEDDING), 2);
    static const int index[8] = {0, 1, -1, -1, -1, -1, 0, 1}, place[8] = {0, 0, -1, -1, -1, -1, 1, 1};
    static const int members[8][2] = {{0, 6}, {1, 7}, {0}, {0}, {0}, {0}, {0, 6}, {1, 7}};
    for (int r = 0; r < 8; r++) {
        int got[2] = {-5, -5};
        const int n = dt_grid_group_members(&g, DT_GRID_EMBEDDING, r, got);
        ck_assert_int_eq(dt_grid_group_index(&g, DT_GRID_EMBEDDING, r), index[r]);
        ck_assert_int_eq(dt_grid_group_rank(&g, DT_GRID_EMBEDDING, r), place[r]);
        ck_assert_int_eq(n, index[r] < 0 ? 0 : 2);
        for (int m = 0; m < n; m++) ck_assert_int_eq(got[m], members[r][m]);
    }
    /* the pipelines themselves: stage-ordered */
    int pipe[4];
    ck_assert_int_eq(dt_grid_group_members(&g, DT_GRID_PIPELINE, 3, pipe), 4);
    ck_assert_int_eq(pipe[0], 1);
    ck_assert_int_eq(pipe[1], 3);
    ck_assert_int_eq(pipe[2], 5);
    ck_assert_int_eq(pipe[3], 7);
    /* zb-v: the first and last virtual stages both on stage 0, a group of one */
    g.embedding[0] = g.embedding[1] = 0;
    ck_assert_int_eq(dt_grid_group_size(&g, DT_GRID_EMBEDDING), 1);
    ck_assert_int_eq(dt_grid_group_members(&g, DT_GRID_EMBEDDING, 1, pipe), 1);
    ck_assert_int_eq(pipe[0], 1);
    ck_assert_int_eq(dt_grid_group_index(&g, DT_GRID_EMBEDDING, 7), -1);
    /* ends given in either order: members by stage */
    g.embedding[0] = 3;
    g.embedding[1] = 1;
    ck_assert_int_eq(dt_grid_group_members(&g, DT_GRID_EMBEDDING, 6, pipe), 2);
    ck_assert_int_eq(pipe[0], 2);
    ck_assert_int_eq(pipe[1], 6);
    ck_assert_int_eq(dt_grid_group_rank(&g, DT_GRID_EMBEDDING, 6), 1);
}
END_TEST

/* c = 2 (reserved, not a flag yet): 16 ranks as t=2 x c=2 x d=2 x p=2,
 * rank = tensor + 2 * (context + 2 * (data + 2 * stage)). */
START_TEST(test_grid_context)
{
    dt_grid g;
    ck_dt(dt_grid_init(&g, 16, 0, 2, 2, 2));
    ck_assert_int_eq(g.size[DT_GRID_DATA], 2);
    /* rank 13 = 1 + 2 * (0 + 2 * (1 + 2 * 1)) */
    ck_assert_int_eq(dt_grid_coord(&g, 13, DT_GRID_TENSOR), 1);
    ck_assert_int_eq(dt_grid_coord(&g, 13, DT_GRID_CONTEXT), 0);
    ck_assert_int_eq(dt_grid_coord(&g, 13, DT_GRID_DATA), 1);
    ck_assert_int_eq(dt_grid_coord(&g, 13, DT_GRID_PIPELINE), 1);
    int m[4];
    ck_assert_int_eq(dt_grid_group_members(&g, DT_GRID_CONTEXT, 13, m), 2);
    ck_assert_int_eq(m[0], 13);
    ck_assert_int_eq(m[1], 15);
    ck_assert_int_eq(dt_grid_group_index(&g, DT_GRID_CONTEXT, 13),
                     1 + 2 * (1 + 2 * 1)); /* tensor + t*(data + d*stage) */
    ck_assert_int_eq(dt_grid_group_members(&g, DT_GRID_DATA, 13, m), 2);
    ck_assert_int_eq(m[0], 9);
    ck_assert_int_eq(m[1], 13);
    ck_assert_int_eq(dt_grid_group_index(&g, DT_GRID_DATA, 13),
                     1 + 2 * (0 + 2 * 1)); /* tensor + t*(context + c*stage) */
    /* ZeRO: the context x data ranks of (tensor 1, stage 1), context fastest */
    ck_assert_int_eq(dt_grid_group_size(&g, DT_GRID_ZERO), 4);
    ck_assert_int_eq(dt_grid_group_count(&g, DT_GRID_ZERO), 4);
    ck_assert_int_eq(dt_grid_group_members(&g, DT_GRID_ZERO, 13, m), 4);
    ck_assert_int_eq(m[0], 9);
    ck_assert_int_eq(m[1], 11);
    ck_assert_int_eq(m[2], 13);
    ck_assert_int_eq(m[3], 15);
    ck_assert_int_eq(dt_grid_group_index(&g, DT_GRID_ZERO, 13), 1 + 2 * 1);
    ck_assert_int_eq(dt_grid_group_rank(&g, DT_GRID_ZERO, 13), 2);
    ck_assert_int_eq(dt_grid_group_members(&g, DT_GRID_PIPELINE, 13, m), 2);
    ck_assert_int_eq(m[0], 5);
    ck_assert_int_eq(m[1], 13);
    ck_assert_int_eq(dt_grid_group_count(&g, DT_GRID_PIPELINE), 8);
    ck_assert_int_eq(dt_grid_group_index(&g, DT_GRID_PIPELINE, 13), 1 + 2 * (0 + 2 * 1));
}
END_TEST

/* Parameter servers: the last ranks, outside the grid. */
START_TEST(test_grid_servers)
{
    dt_grid g;
    ck_dt(dt_grid_init(&g, 5, 2, 1, 1, 1));
    ck_assert_int_eq(g.size[DT_GRID_DATA], 3);
    ck_assert_int_eq(g.workers, 3);
    ck_assert_int_eq(g.world, 5);
    for (int r = 0; r < 3; r++) ck_assert_int_eq(dt_grid_coord(&g, r, DT_GRID_DATA), r);
    int m[3];
    for (int r = 3; r < 5; r++) {
        ck_assert_int_eq(dt_grid_coord(&g, r, DT_GRID_DATA), -1);
        ck_assert_int_eq(dt_grid_group_index(&g, DT_GRID_DATA, r), -1);
        ck_assert_int_eq(dt_grid_group_rank(&g, DT_GRID_DATA, r), -1);
        ck_assert_int_eq(dt_grid_group_members(&g, DT_GRID_DATA, r, m), 0);
    }
    ck_assert_int_eq(dt_grid_group_members(&g, DT_GRID_DATA, 1, m), 3);
    ck_assert_int_eq(m[2], 2);
    /* the same grid from its sizes */
    dt_grid h;
    ck_dt(dt_grid_init_sizes(&h, 1, 1, 3, 1, 2));
    ck_assert_mem_eq(&g, &h, sizeof g);
    ck_dt(dt_grid_init_sizes(&h, 2, 1, 2, 2, 0));
    ck_dt(dt_grid_init(&g, 8, 0, 2, 1, 2));
    ck_assert_mem_eq(&g, &h, sizeof g);
    ck_assert_int_eq(dt_grid_data_size(5, 2, 1, 1, 1), 3);
    ck_assert_int_eq(dt_grid_data_size(8, 0, 2, 1, 2), 2);
    ck_assert_int_eq(dt_grid_data_size(3, 0, 1, 1, 2), 1); /* rounded down, unchecked */
    ck_assert_int_eq(dt_grid_data_size(8, 0, 0, 1, 2), 0);
}
END_TEST

/* A refusal: DT_ERR_INVALID with exactly `want` as its one line. */
static void refused(dt_status st, const char *want)
{
    ck_assert_int_eq(st, DT_ERR_INVALID);
    const char *msg = dt_last_error();
    ck_assert_ptr_null(strchr(msg, '\n'));
    if (want) ck_assert_str_eq(msg, want);
}

START_TEST(test_grid_refusals)
{
    dt_grid g;
    refused(dt_grid_init(&g, 3, 0, 1, 1, 2),
            "--pipeline-model-parallel-size 2: 3 ranks are not a multiple of it (run mpirun -np p x d)");
    refused(dt_grid_init(&g, 3, 0, 2, 1, 1), "--tensor-model-parallel-size 2 x --pipeline-model-parallel-size 1: 3 "
                                             "ranks are not a multiple of 2 (run mpirun -np t x p x d)");
    refused(dt_grid_init(&g, 8, 0, 2, 1, 3), "--tensor-model-parallel-size 2 x --pipeline-model-parallel-size 3: 8 "
                                             "ranks are not a multiple of 6 (run mpirun -np t x p x d)");
    refused(dt_grid_init(&g, 2, 0, 1, 1, 4),
            "--pipeline-model-parallel-size 4: 2 ranks are not a multiple of it (run mpirun -np p x d)");
    refused(dt_grid_init(&g, 8, 0, 2, 3, 1), "--tensor-model-parallel-size 2 x --context-parallel-size 3 x "
                                             "--pipeline-model-parallel-size 1: 8 ranks are not a multiple of 6 (run "
                                             "mpirun -np t x c x p x d)");
    refused(dt_grid_init(&g, 5, 1, 1, 1, 3),
            "--pipeline-model-parallel-size 3: 4 workers are not a multiple of it (run mpirun -np p x d)");
    refused(dt_grid_init(&g, 4, 0, 0, 1, 1), "--tensor-model-parallel-size 0: expected an integer >= 1");
    refused(dt_grid_init(&g, 4, 0, 1, 0, 1), "--context-parallel-size 0: expected an integer >= 1");
    refused(dt_grid_init(&g, 4, 0, 1, 1, -1), "--pipeline-model-parallel-size -1: expected an integer >= 1");
    refused(dt_grid_init(&g, 0, 0, 1, 1, 1), NULL);
    refused(dt_grid_init(&g, 4, 4, 1, 1, 1), "--num-ps-servers 4: with 4 ranks expected 0..3 (at least one worker)");
    refused(dt_grid_init(&g, 4, -1, 1, 1, 1), NULL);
    refused(dt_grid_init(&g, 64, 0, 64, 64, 64), NULL); /* t*c*p beyond the world, no overflow */
    refused(dt_grid_init(NULL, 4, 0, 1, 1, 1), NULL);
    refused(dt_grid_init_sizes(&g, 1, 1, 0, 1, 0), "--data-parallel-size 0: expected an integer >= 1");
    refused(dt_grid_init_sizes(&g, 1, 1, 1, 1, -1), NULL);
    refused(dt_grid_init_sizes(&g, 1 << 16, 1, 1 << 16, 1, 0), NULL); /* 2^32 ranks */
    /* the split's own refusals; unknown group kinds */
    ck_dt(dt_grid_init(&g, 4, 0, 2, 1, 2));
    refused(dt_grid_split(&g, NULL, DT_GRID_DATA, NULL), NULL);
    ck_assert_int_eq(dt_grid_group_size(&g, (dt_grid_group)17), 0);
    ck_assert_int_eq(dt_grid_group_index(&g, (dt_grid_group)-1, 0), -1);
}
END_TEST

/* One rank: every group is the rank itself, through the self communicator;
 * a grid of another world is refused. */
START_TEST(test_grid_split_self)
{
    dt_comm *self = NULL;
    ck_dt(dt_comm_self_create(&self));
    dt_grid g;
    ck_dt(dt_grid_init(&g, 1, 0, 1, 1, 1));
    for (int k = DT_GRID_TENSOR; k <= DT_GRID_EMBEDDING; k++) {
        dt_comm *c = NULL;
        ck_dt(dt_grid_split(&g, self, (dt_grid_group)k, &c));
        ck_assert_ptr_nonnull(c);
        ck_assert_int_eq(c->size, 1);
        ck_assert_int_eq(c->rank, 0);
        dt_comm_free(c);
    }
    dt_grid two;
    ck_dt(dt_grid_init(&two, 2, 0, 1, 1, 2));
    dt_comm *c = (dt_comm *)&two; /* poisoned: must come back NULL */
    refused(dt_grid_split(&two, self, DT_GRID_DATA, &c), "process grid: the communicator has 1 rank, the grid 2");
    ck_assert_ptr_null(c);
    dt_comm_free(self);
}
END_TEST

/* ---- the world's groups (under mpirun: tests/grid.sh) ------------------ */

static dt_comm *g_world; /* the MPI world under mpirun, else NULL */

/* Every layout t x d x p of the world (t, p dividing it) and every group
 * kind, split from the world: each rank's communicator has its group's
 * size and its place there, and an allreduce of the world ranks inside it
 * sums its members. The ranks communicate first and count mismatches,
 * asserting once at the end, so that one rank's mismatch does not leave
 * the others waiting in a split. */
START_TEST(test_grid_split_world)
{
    dt_comm *w = g_world;
    const int n = w->size, r = w->rank;
    int bad = 0, layouts = 0;
    char first[256] = "";
    int *members = malloc((size_t)n * sizeof *members);
    ck_assert_ptr_nonnull(members);
    for (int t = 1; t <= n; t++)
        for (int p = 1; t * p <= n; p++) {
            if (n % (t * p)) continue;
            dt_grid g;
            ck_dt(dt_grid_init(&g, n, 0, t, 1, p));
            layouts++;
            for (int k = DT_GRID_TENSOR; k <= DT_GRID_EMBEDDING; k++) {
                const dt_grid_group grp = (dt_grid_group)k;
                dt_comm *sub = NULL;
                const dt_status st = dt_grid_split(&g, w, grp, &sub);
                const int m = dt_grid_group_members(&g, grp, r, members);
                float v[2] = {(float)r, 1.0f}, want = 0.0f;
                for (int i = 0; i < m; i++) want += (float)members[i];
                const dt_status ast = st == DT_OK && sub ? sub->ops->allreduce_native(sub, v, 2) : DT_OK;
                const int ok = st == DT_OK && ast == DT_OK &&
                               (m == 0 ? sub == NULL
                                       : sub && sub->size == m && sub->rank == dt_grid_group_rank(&g, grp, r) &&
                                             v[0] == want && v[1] == (float)m);
                if (!ok && !bad++)
                    snprintf(first, sizeof first,
                             "rank %d, t=%d p=%d, group %d: status %d/%d, %s of %d ranks (rank %d), sums %g/%g; "
                             "expected %d members summing to %g, place %d",
                             r, t, p, k, (int)st, (int)ast, sub ? "a communicator" : "none", sub ? sub->size : 0,
                             sub ? sub->rank : -1, (double)v[0], (double)v[1], m, (double)want,
                             dt_grid_group_rank(&g, grp, r));
                dt_comm_free(sub);
            }
        }
    free(members);
    ck_assert_msg(bad == 0, "%d mismatches, the first: %s", bad, first);
    ck_assert_int_ge(layouts, 1);
}
END_TEST

static Suite *grid_suite(void)
{
    Suite *s = suite_create("grid");
    TCase *tc = tcase_create("arithmetic");
    tcase_add_test(tc, test_grid_8_coords);
    tcase_add_test(tc, test_grid_8_groups);
    tcase_add_test(tc, test_grid_embedding_ends);
    tcase_add_test(tc, test_grid_context);
    tcase_add_test(tc, test_grid_servers);
    tcase_add_test(tc, test_grid_refusals);
    suite_add_tcase(s, tc);
    tc = tcase_create("split");
    tcase_add_test(tc, test_grid_split_self);
    if (g_world) tcase_add_test(tc, test_grid_split_world);
    suite_add_tcase(s, tc);
    return s;
}

/* Alone (make check's run): the arithmetic and the one-rank split. Under
 * mpirun (tests/grid.sh, through tests/comm.sh's runner): the same on
 * every rank, and the world's groups; DT_COMM_EXPECT_SIZE catches ranks
 * that each started alone. */
int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--have-mpi") == 0) {
        puts(dt_comm_have_mpi() ? "yes" : "no");
        return EXIT_SUCCESS;
    }
    if (argc != 1) {
        fprintf(stderr, "usage: check_grid [--have-mpi]\n");
        return 2;
    }
    if (!dt_comm_have_mpi() || !dt_comm_launched()) return dt_test_run(grid_suite());
    if (dt_comm_mpi_world(&g_world) != DT_OK) {
        fprintf(stderr, "check_grid: no MPI world: %s (%s)\n", dt_last_error(), dt_last_error_site());
        return EXIT_FAILURE;
    }
    const char *expect = getenv("DT_COMM_EXPECT_SIZE");
    const int size_ok = !(expect && *expect && atoi(expect) != g_world->size);
    if (!size_ok)
        fprintf(stderr, "check_grid: rank %d: the world has %d ranks, DT_COMM_EXPECT_SIZE says %s\n", g_world->rank,
                g_world->size, expect);
    int ok = dt_test_run_ranks(grid_suite(), g_world, "check_grid", !size_ok);
    dt_comm_free(g_world);
    if (dt_comm_finalize() != DT_OK) {
        fprintf(stderr, "check_grid: %s (%s)\n", dt_last_error(), dt_last_error_site());
        ok = 0;
    }
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
