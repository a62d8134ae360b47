/* grid.c: the process grid (include/dt_grid.h), the one place that turns
 * (world, t, c, p) into each rank's coordinates and groups. The trainer,
 * the pipeline runtime, the configuration checks, dtrain's report and the
 * simulator all ask it.
 *
 * A group kind is a set of dimensions (a mask): a group is the ranks that
 * share every coordinate outside the mask. Its members are numbered in
 * mixed radix over the mask's dimensions and the groups over the others,
 * tensor fastest in both, so the same two loops serve every kind but the
 * embedding group (two stages of a pipeline, written out below).
 *
 * Invariants: pure arithmetic except dt_grid_split; a group's index and a
 * rank's place in it are the color and key of the split, so the
 * communicators order their ranks as dt_grid_group_members lists them. */
#include "dt_grid.h"

#include <limits.h>
#include <stdint.h>

#include "dt_internal.h"

/* The dimensions each kind spans (bit i: dimension i). */
static unsigned dt__grid_mask(dt_grid_group grp)
{
    switch (grp) {
    case DT_GRID_TENSOR: return 1u << DT_GRID_TENSOR;
    case DT_GRID_CONTEXT: return 1u << DT_GRID_CONTEXT;
    case DT_GRID_DATA: return 1u << DT_GRID_DATA;
    case DT_GRID_PIPELINE: return 1u << DT_GRID_PIPELINE;
    case DT_GRID_ZERO: return 1u << DT_GRID_CONTEXT | 1u << DT_GRID_DATA;
    case DT_GRID_EMBEDDING: return 1u << DT_GRID_PIPELINE;
    }
    return 0;
}

static int dt__grid_known(dt_grid_group grp) { return grp >= DT_GRID_TENSOR && grp <= DT_GRID_EMBEDDING; }

int dt_grid_data_size(int world, int servers, int t, int c, int p)
{
    if (t < 1 || c < 1 || p < 1) return 0;
    return (int)(((int64_t)world - servers) / ((int64_t)t * c * p));
}

/* The shared part of the two inits: d is known and the world fits. */
static void dt__grid_fill(dt_grid *g, int t, int c, int d, int p, int servers)
{
    g->size[DT_GRID_TENSOR] = t;
    g->size[DT_GRID_CONTEXT] = c;
    g->size[DT_GRID_DATA] = d;
    g->size[DT_GRID_PIPELINE] = p;
    g->workers = t * c * d * p;
    g->servers = servers;
    g->world = g->workers + servers;
    g->embedding[0] = 0;
    g->embedding[1] = p - 1;
}

static dt_status dt__grid_check_sizes(int t, int c, int p)
{
    if (t < 1) return DT_FAIL(DT_ERR_INVALID, "--tensor-model-parallel-size %d: expected an integer >= 1", t);
    if (c < 1) return DT_FAIL(DT_ERR_INVALID, "--context-parallel-size %d: expected an integer >= 1", c);
    if (p < 1) return DT_FAIL(DT_ERR_INVALID, "--pipeline-model-parallel-size %d: expected an integer >= 1", p);
    return DT_OK;
}

dt_status dt_grid_init(dt_grid *g, int world, int servers, int t, int c, int p)
{
    if (!g) return DT_FAIL(DT_ERR_INVALID, "dt_grid_init: g is NULL");
    DT_CHECK(dt__grid_check_sizes(t, c, p));
    if (world < 1) return DT_FAIL(DT_ERR_INVALID, "process grid: %d ranks: expected at least 1", world);
    if (servers < 0 || servers >= world)
        return DT_FAIL(DT_ERR_INVALID, "--num-ps-servers %d: with %d ranks expected 0..%d (at least one worker)",
                       servers, world, world - 1);
    const int n = world - servers;
    const int64_t tcp = (int64_t)t * c * p;
    if (tcp > n || n % (int)tcp) {
        const char *who = servers ? "workers" : "ranks"; /* a parameter server's ranks stand outside the grid */
        if (t == 1 && c == 1)
            return DT_FAIL(DT_ERR_INVALID,
                           "--pipeline-model-parallel-size %d: %d %s are not a multiple of it (run "
                           "mpirun -np p x d)",
                           p, n, who);
        if (c == 1)
            return DT_FAIL(DT_ERR_INVALID,
                           "--tensor-model-parallel-size %d x --pipeline-model-parallel-size %d: %d %s "
                           "are not a multiple of %lld (run mpirun -np t x p x d)",
                           t, p, n, who, (long long)tcp);
        return DT_FAIL(DT_ERR_INVALID,
                       "--tensor-model-parallel-size %d x --context-parallel-size %d x "
                       "--pipeline-model-parallel-size %d: %d %s are not a multiple of %lld (run mpirun -np t x c x "
                       "p x d)",
                       t, c, p, n, who, (long long)tcp);
    }
    dt__grid_fill(g, t, c, dt_grid_data_size(world, servers, t, c, p), p, servers);
    return DT_OK;
}

dt_status dt_grid_init_sizes(dt_grid *g, int t, int c, int d, int p, int servers)
{
    if (!g) return DT_FAIL(DT_ERR_INVALID, "dt_grid_init_sizes: g is NULL");
    DT_CHECK(dt__grid_check_sizes(t, c, p));
    if (d < 1) return DT_FAIL(DT_ERR_INVALID, "--data-parallel-size %d: expected an integer >= 1", d);
    if (servers < 0) return DT_FAIL(DT_ERR_INVALID, "--num-ps-servers %d: expected an integer >= 0", servers);
    if ((int64_t)t * c * d * p + servers > INT_MAX)
        return DT_FAIL(DT_ERR_INVALID, "process grid: %d x %d x %d x %d ranks and %d servers: too many", t, c, d, p,
                       servers);
    dt__grid_fill(g, t, c, d, p, servers);
    return DT_OK;
}

int dt_grid_stride(const dt_grid *g, dt_grid_group dim)
{
    if (!g || dim < DT_GRID_TENSOR || dim > DT_GRID_PIPELINE) return 0;
    int w = 1;
    for (int i = 0; i < (int)dim; i++) w *= g->size[i];
    return w;
}

int dt_grid_coord(const dt_grid *g, int rank, dt_grid_group dim)
{
    if (!g || rank < 0 || rank >= g->workers || dim < DT_GRID_TENSOR || dim > DT_GRID_PIPELINE) return -1;
    return rank / dt_grid_stride(g, dim) % g->size[dim];
}

int dt_grid_rank(const dt_grid *g, const int coord[DT_GRID_DIMS])
{
    if (!g || !coord) return -1;
    int r = 0;
    for (int i = DT_GRID_DIMS - 1; i >= 0; i--) {
        if (coord[i] < 0 || coord[i] >= g->size[i]) return -1;
        r = r * g->size[i] + coord[i];
    }
    return r;
}

/* The coordinates in (in = 1) or outside (in = 0) a mask as one number,
 * tensor fastest; with `span` the product of those dimensions' sizes. */
static int dt__grid_radix(const dt_grid *g, const int coord[DT_GRID_DIMS], unsigned mask, int in, int *span)
{
    int r = 0, w = 1;
    for (int i = 0; i < DT_GRID_DIMS; i++) {
        if (!(mask >> i & 1u) != !in) continue;
        r += coord[i] * w;
        w *= g->size[i];
    }
    if (span) *span = w;
    return r;
}

static int dt__grid_coords(const dt_grid *g, int rank, int coord[DT_GRID_DIMS])
{
    if (!g || rank < 0 || rank >= g->workers) return 0;
    for (int i = 0; i < DT_GRID_DIMS; i++) coord[i] = dt_grid_coord(g, rank, (dt_grid_group)i);
    return 1;
}

/* The embedding group's stages in order, and how many differ (1 or 2). */
static int dt__grid_ends(const dt_grid *g, int ends[2])
{
    const int a = g->embedding[0], b = g->embedding[1];
    ends[0] = a < b ? a : b;
    ends[1] = a < b ? b : a;
    return a == b ? 1 : 2;
}

int dt_grid_group_size(const dt_grid *g, dt_grid_group grp)
{
    if (!g || !dt__grid_known(grp)) return 0;
    int ends[2], n = 1;
    if (grp == DT_GRID_EMBEDDING) return dt__grid_ends(g, ends);
    for (int i = 0; i < DT_GRID_DIMS; i++)
        if (dt__grid_mask(grp) >> i & 1u) n *= g->size[i];
    return n;
}

int dt_grid_group_count(const dt_grid *g, dt_grid_group grp)
{
    if (!g || !dt__grid_known(grp)) return 0;
    if (grp == DT_GRID_EMBEDDING) return dt_grid_group_count(g, DT_GRID_PIPELINE); /* one per pipeline */
    return g->workers / dt_grid_group_size(g, grp);
}

/* rank's place in the embedding group, or -1 where its stage is neither end. */
static int dt__grid_emb_place(const dt_grid *g, const int coord[DT_GRID_DIMS])
{
    int ends[2];
    const int n = dt__grid_ends(g, ends);
    for (int k = 0; k < n; k++)
        if (coord[DT_GRID_PIPELINE] == ends[k]) return k;
    return -1;
}

int dt_grid_group_index(const dt_grid *g, dt_grid_group grp, int rank)
{
    int x[DT_GRID_DIMS];
    if (!dt__grid_known(grp) || !dt__grid_coords(g, rank, x)) return -1;
    if (grp == DT_GRID_EMBEDDING && dt__grid_emb_place(g, x) < 0) return -1;
    return dt__grid_radix(g, x, dt__grid_mask(grp), 0, NULL);
}

int dt_grid_group_rank(const dt_grid *g, dt_grid_group grp, int rank)
{
    int x[DT_GRID_DIMS];
    if (!dt__grid_known(grp) || !dt__grid_coords(g, rank, x)) return -1;
    if (grp == DT_GRID_EMBEDDING) return dt__grid_emb_place(g, x);
    return dt__grid_radix(g, x, dt__grid_mask(grp), 1, NULL);
}

int dt_grid_group_members(const dt_grid *g, dt_grid_group grp, int rank, int *members)
{
    int x[DT_GRID_DIMS], ends[2];
    if (!members || dt_grid_group_index(g, grp, rank) < 0 || !dt__grid_coords(g, rank, x)) return 0;
    if (grp == DT_GRID_EMBEDDING) {
        const int n = dt__grid_ends(g, ends);
        for (int k = 0; k < n; k++) {
            x[DT_GRID_PIPELINE] = ends[k];
            members[k] = dt_grid_rank(g, x);
        }
        return n;
    }
    const unsigned mask = dt__grid_mask(grp);
    const int n = dt_grid_group_size(g, grp);
    for (int k = 0; k < n; k++) {
        int rest = k; /* k's digits, tensor fastest, into the mask's coordinates */
        for (int i = 0; i < DT_GRID_DIMS; i++) {
            if (!(mask >> i & 1u)) continue;
            x[i] = rest % g->size[i];
            rest /= g->size[i];
        }
        members[k] = dt_grid_rank(g, x);
    }
    return n;
}

dt_status dt_grid_split(const dt_grid *g, dt_comm *world, dt_grid_group grp, dt_comm **out)
{
    if (!out) return DT_FAIL(DT_ERR_INVALID, "dt_grid_split: out is NULL");
    *out = NULL;
    if (!g || !world) return DT_FAIL(DT_ERR_INVALID, "dt_grid_split: grid or communicator is NULL");
    if (!dt__grid_known(grp)) return DT_FAIL(DT_ERR_INVALID, "dt_grid_split: unknown group kind %d", (int)grp);
    if (world->size != g->world)
        return DT_FAIL(DT_ERR_INVALID, "process grid: the communicator has %d rank%s, the grid %d", world->size,
                       world->size == 1 ? "" : "s", g->world);
    const int color = dt_grid_group_index(g, grp, world->rank), key = dt_grid_group_rank(g, grp, world->rank);
    return world->ops->split(world, color, key < 0 ? 0 : key, out);
}
