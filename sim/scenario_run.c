/* scenario_run.c: what a real run's configuration records beyond the
 * simulated scenario (dts_scenario.h, dts_recorded): read from dtrain's
 * configuration (a trace header or a summary) with every key range-checked,
 * and named in one line when the simulation leaves it out.
 *
 * Keys (docs/trace-format.md, "The run's environment"): hang_rank,
 * hang_iter, max_staleness, threads, threads_requested, threads_automatic,
 * save_interval, data_bytes, comm_timeout, device and machine {host,
 * online_cores, cluster}. slow_rank and slow_ms are the scenario's own
 * (sim/scenario.c): the straggler is simulated. Of the others the
 * simulator uses none; it checks them so that a damaged header is refused
 * by name rather than half-read, and keeps what dts_scenario_unmodelled
 * reports.
 *
 * Invariants: a dtrain configuration replaces the whole record (absent
 * keys: nothing recorded); *rec is written only when every key is valid. */
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dts_json.h"
#include "dts_scenario.h"

void dts_recorded_default(dts_recorded *rec)
{
    memset(rec, 0, sizeof *rec);
    rec->hang_rank = -1;
    rec->max_staleness = -1;
}

/* o[key] (absent or null: 0) as an integer in lo..hi: 1 read, 0 absent, -1 after DT_FAIL. */
static int dts__rec_int(const char *what, const json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (dts__json_int(v, lo, hi, out)) return 1;
    char want[80];
    snprintf(want, sizeof want, "an integer in %" PRId64 "..%" PRId64 " or null", lo, hi);
    dts__json_expected(DT_ERR_INVALID, what, key, want, v);
    return -1;
}

/* o[key] (absent or null: "") as a string of at most cap - 1 bytes, or a boolean when cap is 0. */
static int dts__rec_text(const char *what, const json_t *o, const char *key, char *out, size_t cap)
{
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (cap == 0 ? json_is_boolean(v) : dts__json_str_copy(v, 0, out, cap)) return 1;
    char want[64];
    if (cap == 0) snprintf(want, sizeof want, "true or false");
    else snprintf(want, sizeof want, "a string of at most %zu bytes or null", cap - 1);
    dts__json_expected(DT_ERR_INVALID, what, key, want, v);
    return -1;
}

dt_status dts_recorded_read(dts_recorded *rec, const json_t *cfg, const char *what)
{
    dts_recorded r;
    dts_recorded_default(&r);
    int64_t v = 0;
    int got;
    char host[256];
#define DTS__REC(expr)                                 \
    do {                                               \
        if ((got = (expr)) < 0) return DT_ERR_INVALID; \
    } while (0)
    DTS__REC(dts__rec_int(what, cfg, "hang_rank", -1, INT_MAX, &v));
    if (got) r.hang_rank = (int)v;
    DTS__REC(dts__rec_int(what, cfg, "hang_iter", 0, INT64_MAX, &r.hang_iter));
    DTS__REC(dts__rec_int(what, cfg, "max_staleness", 0, INT_MAX, &v));
    if (got) r.max_staleness = (int)v;
    /* dtrain's --threads range; 0 (automatic) where no trainer resolved it (dt_train_config_json) */
    DTS__REC(dts__rec_int(what, cfg, "threads", 0, 1024, &v));
    if (got) r.threads = (int)v;
    DTS__REC(dts__rec_int(what, cfg, "threads_requested", 0, 1024, &v));
    DTS__REC(dts__rec_text(what, cfg, "threads_automatic", NULL, 0));
    DTS__REC(dts__rec_int(what, cfg, "save_interval", 0, INT64_MAX, &r.save_interval));
    DTS__REC(dts__rec_int(what, cfg, "data_bytes", 0, INT64_MAX, &v));
    DTS__REC(dts__rec_text(what, cfg, "device", r.device, sizeof r.device));
    const json_t *ct = json_object_get(cfg, "comm_timeout");
    double secs;
    if (ct && !json_is_null(ct) && (!dts__json_num(ct, &secs) || secs < 0 || secs > 1e9))
        return dts__json_expected(DT_ERR_INVALID, what, "comm_timeout", "seconds in 0..1e9 or null", ct);
    const json_t *m = json_object_get(cfg, "machine");
    if (m && !json_is_null(m)) {
        if (!json_is_object(m))
            return dts__json_expected(DT_ERR_INVALID, what, "machine",
                                      "an object (\"host\", \"online_cores\", \"cluster\") or null", m);
        char mwhat[1100];
        snprintf(mwhat, sizeof mwhat, "%s: \"machine\"", what);
        DTS__REC(dts__rec_text(mwhat, m, "host", host, sizeof host));
        DTS__REC(dts__rec_int(mwhat, m, "online_cores", 1, 1 << 20, &v));
        DTS__REC(dts__rec_text(mwhat, m, "cluster", r.cluster, sizeof r.cluster));
    }
#undef DTS__REC
    *rec = r;
    return DT_OK;
}

/* Append ", " (after the first item) and a formatted item to buf. */
static void dts__item(char *buf, size_t cap, int *n, const char *fmt, ...)
{
    size_t len = strlen(buf);
    if (*n && len + 2 < cap) len += (size_t)snprintf(buf + len, cap - len, ", ");
    (*n)++;
    if (len + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
}

int dts_scenario_unmodelled(const dts_scenario *sc, int hw_given, char *buf, size_t cap)
{
    const dts_recorded *r = &sc->recorded;
    int n = 0;
    if (!buf || cap < 2) return 0;
    buf[0] = '\0';
    if (r->hang_rank >= 0 && r->hang_iter > 0 && r->hang_iter <= sc->steps) /* a later hang never happens */
        dts__item(buf, cap, &n, "hang_rank %d at iteration %" PRId64, r->hang_rank, r->hang_iter);
    if (r->max_staleness >= 0 && sc->exchange == DTS_EX_PS_ASYNC)
        dts__item(buf, cap, &n, "max_staleness %d", r->max_staleness);
    if (r->threads > 1 && dts_scenario_world(sc) > 1 && (!r->device[0] || !strcmp(r->device, "cpu")))
        dts__item(buf, cap, &n, "threads %d per rank", r->threads);
    if (sc->fp8 != DT_FP8_OFF) /* the scenario's own, not the record's: also from a dtsim config */
        dts__item(buf, cap, &n,
                  "FP8 GEMMs (%s %s) priced as bf16 without their conversions (`dtsim fp8` predicts "
                  "their numerics)",
                  dt_fp8_mode_name(sc->fp8), dt_fp8_recipe_name(sc->fp8_recipe));
    if (r->save_interval > 0)
        dts__item(buf, cap, &n, "checkpoint saves every %" PRId64 " iterations", r->save_interval);
    if (r->cluster[0] && !hw_given) {
        /* the description as given, on one line, cut short */
        char c[64];
        size_t k = 0;
        for (const char *p = r->cluster; *p && k < sizeof c - 1; p++) c[k++] = (unsigned char)*p < 0x20 ? ' ' : *p;
        while (k > 0 && ((unsigned char)r->cluster[k] & 0xC0) == 0x80) k--; /* not inside a UTF-8 character */
        c[k] = '\0';
        dts__item(buf, cap, &n, "emulated cluster \"%s%s\" (give its links with --hw)", c, r->cluster[k] ? "..." : "");
    }
    return n;
}
