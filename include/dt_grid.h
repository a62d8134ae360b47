/* dt_grid.h: the process grid (lib/parallel/grid.c), computed in one place.
 * The world's ranks are t x c x d x p workers (tensor, context, data,
 * pipeline), then any parameter servers, which stand outside the grid:
 *
 *   rank = tensor + t * (context + c * (data + d * pipeline))   (rank < t*c*d*p)
 *
 * tensor fastest, as Megatron-LM orders them, so that a tensor-parallel
 * group (the most communication) is neighbouring ranks, on one node where
 * one node holds t ranks. The context dimension is reserved: nothing
 * splits a sequence yet, and every caller passes c = 1.
 *
 * Groups (each rank of the grid is in one group of each kind, except the
 * embedding group's):
 *   DT_GRID_TENSOR     the t ranks of one (context, data, pipeline): f and g
 *   DT_GRID_CONTEXT    the c ranks of one (tensor, data, pipeline)
 *   DT_GRID_DATA       the d ranks of one (tensor, context, pipeline): the
 *                      gradient allreduce
 *   DT_GRID_PIPELINE   the p ranks of one (tensor, context, data): the
 *                      activations and their gradients
 *   DT_GRID_ZERO       the c x d ranks of one (tensor, pipeline): what ZeRO
 *                      shards over (the data group while c = 1)
 *   DT_GRID_EMBEDDING  the two ends of one pipeline (stages embedding[0] and
 *                      embedding[1]): the tied embedding's gradient. Ranks
 *                      of other stages are in none.
 * A group's members are ordered by their coordinates in it (tensor fastest),
 * so member k of the data group is the rank whose data coordinate is k.
 * Groups of one kind are numbered the same way, over the coordinates the
 * group does not span: pipeline group i is the pipeline whose (tensor +
 * t * (context + c * data)) is i.
 *
 * Everything but dt_grid_split is arithmetic: no communicator, no
 * allocation, usable before MPI starts (the configuration checks, the
 * simulator). Invariants after dt_grid_init: every size >= 1,
 * workers = t*c*d*p, world = workers + servers. */
#ifndef DT_GRID_H
#define DT_GRID_H

#include "dt_comm.h"
#include "dt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The four dimensions (also the groups that span one of them), then the
 * two groups that are not a single dimension. */
typedef enum dt_grid_group {
    DT_GRID_TENSOR = 0,
    DT_GRID_CONTEXT = 1,
    DT_GRID_DATA = 2,
    DT_GRID_PIPELINE = 3,
    DT_GRID_ZERO = 4,
    DT_GRID_EMBEDDING = 5
} dt_grid_group;
#define DT_GRID_DIMS 4

typedef struct dt_grid {
    int size[DT_GRID_DIMS]; /* t, c, d, p */
    int workers;            /* t*c*d*p: ranks 0 .. workers-1 */
    int servers;            /* parameter servers: ranks workers .. world-1 */
    int world;
    /* the stages of the embedding group: 0 and p-1 after init; a schedule
     * that puts its first and last virtual stage elsewhere sets them (zb-v:
     * both on stage 0, a group of one) */
    int embedding[2];
} dt_grid;

/* The data-parallel size of a world: (world - servers) / (t*c*p), rounded
 * down, no check (0 when t, c or p < 1). For the places that must name it
 * before the configuration is checked: a default batch, a manifest. */
DT_API int dt_grid_data_size(int world, int servers, int t, int c, int p);

/* The grid of a job of `world` ranks, the last `servers` of them parameter
 * servers: d = (world - servers) / (t*c*p). Refuses, with one line naming
 * the flags, sizes < 1 and a worker count that t*c*p does not divide. */
DT_API dt_status dt_grid_init(dt_grid *g, int world, int servers, int t, int c, int p);
/* The same from the four sizes (the simulator's scenario names d). */
DT_API dt_status dt_grid_init_sizes(dt_grid *g, int t, int c, int d, int p, int servers);

/* rank's coordinate along dimension dim (DT_GRID_TENSOR .. DT_GRID_PIPELINE);
 * -1 for a parameter server or a rank outside the world. */
DT_API int dt_grid_coord(const dt_grid *g, int rank, dt_grid_group dim);
/* The rank at coord[DT_GRID_DIMS], or -1 when one is out of range. */
DT_API int dt_grid_rank(const dt_grid *g, const int coord[DT_GRID_DIMS]);
/* The distance between ranks one apart along dimension dim: 1 (tensor),
 * t (context), t*c (data), t*c*d (pipeline); 0 for a kind that is not a
 * dimension. A group along one dimension is evenly spaced ranks. */
DT_API int dt_grid_stride(const dt_grid *g, dt_grid_group dim);

/* Ranks in one group of the kind. */
DT_API int dt_grid_group_size(const dt_grid *g, dt_grid_group grp);
/* Groups of the kind (pipelines: t*c*d). */
DT_API int dt_grid_group_count(const dt_grid *g, dt_grid_group grp);
/* The number of rank's group among the kind's (0 .. count-1), or -1 where
 * rank is in none (a server; the embedding group's other stages). */
DT_API int dt_grid_group_index(const dt_grid *g, dt_grid_group grp, int rank);
/* rank's place in its group (0 .. size-1), or -1 where it is in none. */
DT_API int dt_grid_group_rank(const dt_grid *g, dt_grid_group grp, int rank);
/* The members of rank's group, in order, into members (group_size
 * entries); returns how many (0 where rank is in none). */
DT_API int dt_grid_group_members(const dt_grid *g, dt_grid_group grp, int rank, int *members);

/* rank's group of the kind as a communicator split from world (whose
 * ranks are the grid's): collective over world; *out NULL where the rank
 * is in none. */
DT_API dt_status dt_grid_split(const dt_grid *g, dt_comm *world, dt_grid_group grp, dt_comm **out);

#ifdef __cplusplus
}
#endif
#endif
