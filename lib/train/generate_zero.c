/* generate_zero.c: a ZeRO checkpoint's segments joined back into whole
 * tensors for generation and --export-hf (dt__gen_read_shard,
 * generate_zero.h; generate.c reads every shard through it).
 *
 * What a ZeRO shard holds (lib/train/checkpoint_io.c, docs/zero.md): the
 * ranks of a ZeRO group -- the c x d ranks of one (tensor, pipeline)
 * position, dt_grid's DT_GRID_ZERO (the data group while c = 1) -- share
 * one flat buffer: the model's layout under data parallelism, the stage's
 * (its tensor rank's slices) on a grid. Member k of the group owns segment
 * k of every unit of that buffer (stage 1: one unit, the whole buffer;
 * stage 2: the gradient buckets; stage 3: the layers) and saves the pieces
 * of the buffer's tensors inside its segments, each named as its tensor:
 * param/<tensor> (stage 1 in FP32) or master/<tensor> (stage 1 under
 * mixed precision, stages 2 and 3; the FP32 masters). A unit never cuts a
 * tensor and a unit's segments follow each other in member order
 * (dt_comm_segment), so a tensor's pieces taken in member order are the
 * tensor (the alignment padding lies between tensors, in no piece). That
 * is the whole reassembly: neither the units (--bucket-size-mb) nor the
 * offsets need to be known. What comes out is the shard the group's first
 * member would have written without ZeRO -- param/<tensor> whole, or its
 * tensor rank's slice -- which generate.c puts together as for any
 * layout.
 *
 * Invariants checked here: FP32 records; one piece of a tensor per member
 * (the file format forbids a name twice, and param/ beside master/ of one
 * tensor is refused); a tensor's pieces on consecutive members (a gap
 * would mean another order). That the pieces add up to the whole tensor
 * (or slice) is generate.c's size check. */
#define _POSIX_C_SOURCE 200809L
#include "generate_zero.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_grid.h"
#include "dt_internal.h"

/* One tensor being joined. */
typedef struct dt__gz_tensor {
    char name[DT_CHECKPOINT_NAME_MAX + 1]; /* param/<tensor> */
    float *data;                           /* (count) the pieces so far, in member order */
    size_t count;
    int last; /* the member whose piece came last */
} dt__gz_tensor;

typedef struct dt__gz {
    dt__gz_tensor *t; /* (n) in the order first seen: the first member's records' */
    int n, cap;
} dt__gz;

static int dt__gz_size(json_t *cfg, const char *key, int least)
{
    const json_int_t v = json_integer_value(json_object_get(cfg, key));
    return v > least && v <= INT_MAX ? (int)v : least;
}

/* The manifest's grid, and whether it was saved with ZeRO (*zero 0: g unset). */
static dt_status dt__gz_grid(const dt_checkpoint_manifest *m, dt_grid *g, int *zero)
{
    json_error_t err;
    json_t *cfg = json_loads(m->config_json ? m->config_json : "{}", 0, &err);
    if (!cfg) return DT_FAIL(DT_ERR_FORMAT, "%s: the manifest's config does not parse (%s)", m->dir, err.text);
    *zero = json_integer_value(json_object_get(cfg, "zero_stage")) > 0 ||
            json_is_true(json_object_get(cfg, "use_distributed_optimizer"));
    const int t = dt__gz_size(cfg, "tensor_model_parallel_size", 1), c = dt__gz_size(cfg, "context_parallel_size", 1);
    const int p = dt__gz_size(cfg, "pipeline_model_parallel_size", 1), d = dt__gz_size(cfg, "data_parallel_size", 1);
    const int servers = dt__gz_size(cfg, "num_ps_servers", 0);
    json_decref(cfg);
    if (!*zero) return DT_OK;
    if (dt_grid_init(g, m->world_size, servers, t, c, p) != DT_OK || g->size[DT_GRID_DATA] != d)
        return DT_FAIL(DT_ERR_FORMAT,
                       "%s: the manifest's grid (t %d x c %d x d %d x p %d, %d servers) does not fit its %d shards",
                       m->dir, t, c, d, p, servers, m->world_size);
    return DT_OK;
}

/* Member k's (rank's) pieces appended to their tensors. */
static dt_status dt__gz_add(dt__gz *z, const dt_checkpoint_shard *s, int k, int rank)
{
    char name[DT_CHECKPOINT_NAME_MAX + 1];
    for (int i = 0; i < s->count; i++) {
        const dt_checkpoint_record *rec = &s->rec[i];
        const char *tensor = !strncmp(rec->name, "param/", 6)    ? rec->name + 6
                             : !strncmp(rec->name, "master/", 7) ? rec->name + 7
                                                                 : NULL;
        if (!tensor) continue; /* the optimizer, the trainer's counters, ... */
        if (rec->kind != DT_CKPT_F32)
            return DT_FAIL(DT_ERR_FORMAT, "%s: record %s is not FP32 (kind %d): expected a segment of weights", s->path,
                           rec->name, (int)rec->kind);
        snprintf(name, sizeof name, "param/%s", tensor); /* master/ is the longer prefix: it fits */
        dt__gz_tensor *e = NULL;
        for (int j = 0; j < z->n && !e; j++)
            if (!strcmp(z->t[j].name, name)) e = &z->t[j];
        if (e && e->last == k)
            return DT_FAIL(DT_ERR_FORMAT, "%s: holds both param/%s and master/%s: expected one segment of the tensor",
                           s->path, tensor, tensor);
        if (e && e->last != k - 1)
            return DT_FAIL(DT_ERR_FORMAT,
                           "%s: a segment of %s on rank %d (ZeRO group member %d) after none on member %d: expected "
                           "a tensor's segments on consecutive members",
                           s->path, tensor, rank, k, k - 1);
        if (!e) {
            if (z->n == z->cap) {
                const int cap = z->cap ? 2 * z->cap : 64;
                dt__gz_tensor *t = realloc(z->t, (size_t)cap * sizeof *t);
                if (!t) return DT_FAIL(DT_ERR_NOMEM, "generate: out of memory");
                z->t = t, z->cap = cap;
            }
            e = &z->t[z->n++];
            memset(e, 0, sizeof *e);
            memcpy(e->name, name, sizeof name);
        }
        float *d = realloc(e->data, (e->count + rec->count) * sizeof *d + 1);
        if (!d) return DT_FAIL(DT_ERR_NOMEM, "generate: out of memory");
        memcpy(d + e->count, rec->data, rec->count * sizeof *d); /* rec->data may be unaligned */
        e->data = d;
        e->count += rec->count;
        e->last = k;
    }
    return DT_OK;
}

dt_status dt__gen_read_shard(const dt_checkpoint_manifest *m, int rank, dt_checkpoint_shard *out)
{
    memset(out, 0, sizeof *out);
    dt_grid g;
    int zero = 0;
    DT_CHECK(dt__gz_grid(m, &g, &zero));
    const int size = zero ? dt_grid_group_size(&g, DT_GRID_ZERO) : 0;
    int *members = size > 0 ? calloc((size_t)size, sizeof *members) : NULL;
    if (size > 0 && !members) return DT_FAIL(DT_ERR_NOMEM, "generate: out of memory");
    const int n = members ? dt_grid_group_members(&g, DT_GRID_ZERO, rank, members) : 0;
    if (n < 1) { /* no ZeRO, or a parameter server's rank: the file as it is */
        free(members);
        return dt_checkpoint_read_shard(m, rank, out);
    }
    dt_checkpoint_shard_init(out, rank, m->world_size, m->iteration);
    /* for messages: the checkpoint and the members whose segments are joined */
    size_t at = (size_t)snprintf(out->path, sizeof out->path, "%s (the ZeRO segments of ranks", m->dir);
    for (int k = 0; k < n && k < 8 && at < sizeof out->path; k++)
        at += (size_t)snprintf(out->path + at, sizeof out->path - at, "%s %d", k ? "," : "", members[k]);
    if (at < sizeof out->path) snprintf(out->path + at, sizeof out->path - at, "%s)", n > 8 ? ", ..." : "");
    if (members[0] != rank) { /* the group is read once, for its first member */
        free(members);
        return DT_OK;
    }
    dt__gz z = {0};
    dt_status st = DT_OK;
    for (int k = 0; k < n && st == DT_OK; k++) {
        dt_checkpoint_shard s;
        memset(&s, 0, sizeof s);
        st = dt_checkpoint_read_shard(m, members[k], &s);
        if (st == DT_OK) st = dt__gz_add(&z, &s, k, members[k]);
        dt_checkpoint_shard_free(&s);
    }
    for (int i = 0; i < z.n; i++) {
        if (st == DT_OK) st = dt_checkpoint_shard_add(out, z.t[i].name, DT_CKPT_F32, z.t[i].data, z.t[i].count, NULL);
        free(z.t[i].data); /* copied: one tensor twice at most */
    }
    free(z.t);
    free(members);
    if (st != DT_OK) dt_checkpoint_shard_free(out);
    return st;
}
