/* generate_zero.h: a checkpoint's shards as generation reads them, with
 * ZeRO's segments put back together (generate_zero.c). Private to
 * lib/train/ and its tests. */
#ifndef DT_GENERATE_ZERO_H
#define DT_GENERATE_ZERO_H

#include "dt_checkpoint.h"

/* Rank `rank`'s shard of the verified checkpoint m, as generation reads
 * it (records param/<tensor>; free it with dt_checkpoint_shard_free).
 * Without ZeRO in the manifest's config: the shard file itself. With
 * ZeRO (any stage, whatever the grid): the param/<tensor> records of the
 * whole tensors (or tensor-parallel slices) that rank's ZeRO group holds,
 * joined from its members' segments, when rank is the group's first
 * member (data and context coordinates 0); no records for the other
 * members, so each group is read once. */
dt_status dt__gen_read_shard(const dt_checkpoint_manifest *m, int rank, dt_checkpoint_shard *out);

#endif
