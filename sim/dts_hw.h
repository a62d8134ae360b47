/* dts_hw.h: the simulator's description of a machine (sim/hw.c): one
 * device's compute and memory, the nodes it is grouped in, and the α-β
 * links between devices (time of a message of S bytes = α + S/β).
 *
 * Units: time in nanoseconds, bandwidth of a link in bytes per nanosecond
 * (numerically GB/s), FLOP/s and bytes/s for the device. A device is what
 * one rank drives: one GPU, or on the CPU one core (dtrain under mpirun
 * runs one single-threaded rank per core).
 *
 * JSON (a file sim/hw/NAME.json, or the "hardware" object of a scenario
 * config: the same object, read and written by the functions below only):
 *   {"format": "dtsim-hw", "version": 1, "name": ..., "source": ...,
 *    "peak_flops": ..., "peak_flops_bf16": ..., "bf16_pass_ns": ... (both optional),
 *    "mem_bytes_per_s": ...,
 *    "efficiency": ...,
 *    "kernel_overhead_ns": ..., "sleep_overshoot_ns": ...,
 *    "mem_capacity_bytes": ..., "devices_per_node": ...,
 *    "intra": {"alpha_ns": ..., "bytes_per_ns": ...},
 *    "inter": {"alpha_ns": ..., "bytes_per_ns": ...},
 *    "contention": [1, s2, s3, ...],
 *    "gemm_efficiency": [{"flops": F1, "efficiency": e1}, ...],
 *    "collectives": "messages" | "analytic" | "auto"}
 * Every key is required ("format" and "version" too) except
 * "peak_flops_bf16" and "bf16_pass_ns" (absent: 0; written when > 0),
 * "sleep_overshoot_ns" (absent: DTS_HW_SLEEP_OVERSHOOT_UNMEASURED_NS; it is
 * always written), "contention" (absent: [1], no slowdown; written when
 * it has more than one entry), "gemm_efficiency" (absent: every GEMM at
 * "efficiency"; written when it has entries) and "collectives" (absent: "auto"; written
 * only when it is not "auto", so the descriptions and configs written
 * before the key existed read and write back unchanged); an unknown key is
 * refused (a misspelt key would otherwise silently keep a default).
 *
 * "contention": the compute slowdown of a node's ranks against one rank
 * alone, by how many compute at once: entry k-1 for k ranks (entry 0 is 1;
 * beyond the list, its last entry). On a CPU, ranks on one node share its
 * caches, memory bandwidth and, with more ranks than cores, the cores
 * themselves; the list is measured (dts_fit_contention: k single-rank
 * profiles run at once against one alone), so it holds all of that. Used
 * only with cores_per_node > 0 (dtsim --cores-per-node): see
 * dts_hw_compute_rate, which takes the sharing of cores out of it.
 *
 * "gemm_efficiency": the fraction of peak_flops one GEMM achieves by its
 * size, as measured points: each entry a GEMM's FLOPs (2 M N K, > 0) and
 * its efficiency (0, 1], sorted by strictly ascending flops, 1 to
 * DTS_HW_MAX_GEMM_EFF entries. Between two entries the efficiency is
 * interpolated linearly in log(flops); below the first and above the last
 * it is theirs (dts_hw_gemm_efficiency). The roofline prices each GEMM of
 * a layer (on one tensor rank: its 1/t share) at its own efficiency; the
 * single "efficiency" stays the fallback when the table is absent.
 *
 * "collectives" chooses how the simulator prices a data-parallel
 * collective (sim/dts_coll.h): "messages" runs every step's messages
 * through the links' ports (time and memory grow with members^2 per
 * collective), "analytic" prices each phase from the members' links in
 * closed form (linear in members; sim/coll_analytic.c), "auto" is
 * messages up to DTS_HW_COLL_AUTO_MAX_MEMBERS members and analytic above.
 *
 * Invariants of a loaded or default dts_hw: peak_flops, mem_bytes_per_s,
 * bytes_per_ns > 0; 0 < efficiency <= 1; alpha_ns, kernel_overhead_ns,
 * sleep_overshoot_ns in 0..DTS_HORIZON_NS (2^60: no duration exceeds the
 * engine's horizon, so sums of them cannot overflow); mem_capacity_bytes, devices_per_node >= 1;
 * name non-empty. */
#ifndef DTS_HW_H
#define DTS_HW_H

#include <stdint.h>

#include "dt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DTS_HW_FORMAT "dtsim-hw"
#define DTS_HW_VERSION 1
/* "sleep_overshoot_ns" when a description does not give it: Linux's default
 * timer slack (50 us) plus the wake-up */
#define DTS_HW_SLEEP_OVERSHOOT_UNMEASURED_NS 60000
/* entries of "contention" (ranks computing at once on one node) */
#define DTS_HW_MAX_CONTENTION 64
/* "collectives": "auto" runs collectives of at most this many members as
 * messages, larger ones analytically. 512 is the largest data-parallel
 * group a test or tutorial checks (tutorials/08-simulator: d = 512, and a
 * sweep at d = 128 whose figures the analytic ring moves by 6 us); a ring
 * of 512 members is 0.5 M messages and 21 MB of tables as messages. */
#define DTS_HW_COLL_AUTO_MAX_MEMBERS 512
/* entries of "gemm_efficiency" */
#define DTS_HW_MAX_GEMM_EFF 64

/* The collective model ("collectives"); AUTO is 0, the default. */
typedef enum dts_hw_coll { DTS_HW_COLL_AUTO = 0, DTS_HW_COLL_MESSAGES, DTS_HW_COLL_ANALYTIC } dts_hw_coll;

struct json_t; /* jansson's json_t: include <jansson.h> to build or read one */

/* One point of "gemm_efficiency": a GEMM of `flops` (2 M N K) runs at
 * `efficiency` of peak_flops. */
typedef struct dts_gemm_eff {
    double flops, efficiency;
} dts_gemm_eff;

typedef struct dts_link {
    double alpha_ns;     /* latency α of one message (ns) */
    double bytes_per_ns; /* bandwidth β (bytes per ns = GB/s) */
} dts_link;

typedef struct dts_hw {
    char name[64];
    double peak_flops;          /* FLOP/s of one device for the dense GEMMs (the precision the file says) */
    /* FLOP/s of the same GEMMs with bf16 inputs, FP32 accumulation (the
     * CPU's AMX / AVX512-BF16 through oneDNN); 0 (key absent): the file has
     * one rate, peak_flops, whatever the precision. A bf16 scenario costed
     * from an FP32 profile runs its GEMMs faster by peak_flops_bf16 /
     * peak_flops (dts_cost_to_precision). */
    double peak_flops_bf16;
    /* ns per element of one bf16 pass over FP32 activations on one device
     * (a rounding or a GEMM operand's cast: what a bf16 run does that an
     * FP32 one does not, outside the GEMMs); 0 (key absent): not measured,
     * no such cost. Read with peak_flops_bf16 (dts_cost_to_precision). */
    double bf16_pass_ns;
    double mem_bytes_per_s;     /* device memory bandwidth */
    double efficiency;          /* achieved fraction of peak_flops for the roofline (0,1] */
    int64_t kernel_overhead_ns; /* fixed cost per op (launch / loop overhead) */
    /* how much later than asked a host sleep (nanosleep) wakes up: the
     * parameter server polls with sleeps (lib/parallel/ps.c), so its reaction time
     * depends on it */
    int64_t sleep_overshoot_ns;
    int64_t mem_capacity_bytes;
    int devices_per_node;
    /* cores each node's ranks share for their compute (processor sharing:
     * with k computing, each runs at min(1, cores/k)); 0: a device of its
     * own per rank. Set by --cores-per-node, not read from the JSON. */
    int cores_per_node;
    /* compute slowdown with k ranks of a node computing at once: contention[k-1]
     * for k <= n_contention (contention[0] = 1), else contention[n_contention-1] */
    double contention[DTS_HW_MAX_CONTENTION];
    int n_contention; /* 1..DTS_HW_MAX_CONTENTION */
    dts_gemm_eff gemm_eff[DTS_HW_MAX_GEMM_EFF]; /* "gemm_efficiency", ascending flops */
    int n_gemm_eff;                              /* 0: absent, every GEMM at `efficiency` */
    dts_link intra;    /* link between devices of one node */
    dts_link inter;    /* link between nodes */
    char source[1024]; /* where the figures come from (published spec names, or "calibrated: <command>") */
    /* how collectives are priced ("collectives", above) */
    dts_hw_coll collectives;
} dts_hw;

/* Read the JSON object above. Every error is DT_ERR_FORMAT and names
 * `what` (the source: a file name, `c.json: "hardware"`), the field and
 * what was expected (`sim/hw/x.json: "intra.alpha_ns": expected a number
 * >= 0`); another "format" or "version" is refused. *out is written only on
 * success, with a description that passes dts_hw_validate. */
dt_status dts_hw_from_json(const struct json_t *obj, const char *what, dts_hw *out);
/* hw as the JSON object above (a new reference; NULL when out of memory).
 * Doubles are reals: dumped with jansson's default precision (or
 * JSON_REAL_PRECISION(17)) they read back bit for bit. hw is not checked. */
struct json_t *dts_hw_to_json(const dts_hw *hw);
/* Read a hardware file (dts_hw_from_json, `what` = path); a file that
 * cannot be read gives DT_ERR_IO, one that is not JSON DT_ERR_FORMAT. */
dt_status dts_hw_load(const char *path, dts_hw *out);
/* Write hw as a file (dts_hw_to_json, one key a line, doubles as the
 * shortest text that reads back bit for bit) after dts_hw_validate. */
dt_status dts_hw_save(const char *path, const dts_hw *hw);
/* 1 when every field of a and b is equal (strings by content), else 0. */
int dts_hw_equal(const dts_hw *a, const dts_hw *b);
/* Check the invariants above; `what` names the source in the message. */
dt_status dts_hw_validate(const dts_hw *hw, const char *what);
/* This machine's uncalibrated defaults (the figures of sim/hw/cpu-2core.json
 * before its links were fitted): one core per device, 2 per node. */
void dts_hw_default(dts_hw *out);
/* The link between two ranks: intra when both are on the same node
 * (rank / devices_per_node), inter otherwise. */
dts_link dts_hw_link(const dts_hw *hw, int rank_a, int rank_b);
/* Processor sharing on a node of c cores holding n ranks, k of them
 * computing and the others waiting in MPI (Open MPI's waiting ranks stay
 * runnable: they poll and yield, taking almost no time but a place on a
 * core): the expected speed of a computing rank when the n ranks are
 * spread evenly at random over the cores, each core holding
 * m = ceil(n/c) - 1 others beside it, and sharing its core evenly with the
 * computing ones among them (J, hypergeometric: m draws from n - 1 ranks
 * of which k - 1 compute): E[1 / (1 + J)]. n <= c: 1 (a core each); k = n:
 * c/k where c divides n. */
double dts_hw_share(int k, int n, int c);
/* Speed of each of k ranks computing at once among the n ranks of one node
 * (cores_per_node = c > 0), relative to a rank alone:
 *   dts_hw_share(k, n, c) / cache(min(k, n_contention)),
 * cache(j) = contention[j-1] * dts_hw_share(j, j, c): the measured slowdown
 * of j ranks computing together (co-located profiles) with the sharing of
 * cores it holds taken out, leaving what the ranks' caches and memory
 * bandwidth cost them (at least 1). Without a measured list it is
 * processor sharing alone. k <= 0 or c <= 0: 1. */
double dts_hw_compute_rate(const dts_hw *hw, int k, int n);
/* The efficiency of one GEMM of `flops` (2 M N K): "gemm_efficiency"
 * interpolated linearly in log(flops) (the end entries' beyond them), or
 * hw->efficiency without a table. */
double dts_hw_gemm_efficiency(const dts_hw *hw, double flops);
/* Time of one message of `bytes` on link l: α + bytes/β, rounded to ns. */
int64_t dts_link_ns(dts_link l, double bytes);
/* 1 when a collective of `members` members is priced analytically under
 * hw's "collectives", 0 when as messages. */
int dts_hw_coll_analytic(const dts_hw *hw, int members);
/* "messages", "analytic", "auto"; NULL for a value out of the enum. */
const char *dts_hw_coll_name(dts_hw_coll c);
/* The enum of a name above; -1 for another string. */
int dts_hw_coll_parse(const char *name);

#ifdef __cplusplus
}
#endif
#endif
