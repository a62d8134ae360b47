/* json_mutate.c: the value catalogue's helper (tests/badvalues.sh). It owns
 * finding the numeric fields of a JSON file and replacing one of them by a
 * raw token, leaving every other byte of the file as it was.
 *
 *   json_mutate list FILE
 *       one line per distinct numeric field: "PATH<TAB>CLASS". PATH names
 *       one field (keys joined by '.', array elements as [N]:
 *       otherData.config.num_layers, traceEvents[4].args.iter,
 *       intra.alpha_ns). CLASS is what the listing generalizes over: for a
 *       trace's events the event's name/cat/ph and the field
 *       (forward/compute/X:args.layer), so that each kind of event gives its
 *       fields once, from the first event of that kind; elsewhere the path
 *       with array indices as [*] (pipeline_split[*]), the first element.
 *   json_mutate set FILE PATH VALUE OUT
 *       FILE with the number at PATH replaced by VALUE, written to OUT.
 *       VALUE is a raw token, not checked: NaN, Infinity, 1e999 and
 *       9223372036854775808 go into the file as they are.
 *   json_mutate reseal MANIFEST
 *       a checkpoint manifest's "manifest_crc32c" line set to the CRC32C of
 *       the bytes before it (lib/train/checkpoint.c), in place, so that a
 *       mutated value reaches the reader's range checks instead of stopping
 *       at the checksum.
 *
 * A small scanner of its own rather than jansson: jansson would re-dump
 * the whole file (the trace's "ts":12.000 as 12.0, keys reordered,
 * whitespace lost) and cannot write the bare tokens that must be tested.
 * Exit status: 0 done, 1 a file that cannot be read or written, 2 bad
 * usage, a file that is not JSON or a PATH with no number. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_checkpoint.h"

typedef struct {
    char *path;  /* concrete path */
    char *klass; /* what list generalizes over */
    size_t start, end;
} jm_num;

typedef struct {
    const char *s;
    size_t n, pos;
    char path[1024];
    size_t plen;
    jm_num *nums;
    size_t n_nums, cap_nums;
    /* the current event of "traceEvents" (depth 2) and its identity */
    long ev;
    char ev_name[64], ev_cat[32], ev_ph[8];
    size_t ev_first; /* index in nums of the event's first number */
    const char *err;
} jm_scan;

static void jm__ws(jm_scan *j)
{
    while (j->pos < j->n && strchr(" \t\r\n", j->s[j->pos])) j->pos++;
}

/* A string token; its contents (unescaped only as far as copying goes) to out. */
static int jm__string(jm_scan *j, char *out, size_t cap)
{
    size_t k = 0;
    if (j->pos >= j->n || j->s[j->pos] != '"') return j->err = "expected a string", -1;
    j->pos++;
    while (j->pos < j->n && j->s[j->pos] != '"') {
        char c = j->s[j->pos++];
        if (c == '\\') {
            if (j->pos >= j->n) break;
            c = j->s[j->pos++];
            if (c == 'u') j->pos += 4;
            c = '?'; /* escapes never name a field worth mutating */
        }
        if (out && k + 1 < cap) out[k++] = c;
    }
    if (j->pos >= j->n) return j->err = "unterminated string", -1;
    j->pos++;
    if (out && cap) out[k] = '\0';
    return 0;
}

static int jm__push(jm_scan *j, const char *fmt, const char *key, long idx)
{
    char part[256];
    if (key) snprintf(part, sizeof part, fmt, key);
    else snprintf(part, sizeof part, fmt, idx);
    const size_t l = strlen(part);
    if (j->plen + l + 1 >= sizeof j->path) return j->err = "path too long", -1;
    memcpy(j->path + j->plen, part, l + 1);
    j->plen += l;
    return 0;
}

static int jm__add(jm_scan *j, size_t start, size_t end)
{
    if (j->n_nums == j->cap_nums) {
        j->cap_nums = j->cap_nums ? 2 * j->cap_nums : 256;
        jm_num *p = realloc(j->nums, j->cap_nums * sizeof *p);
        if (!p) return j->err = "out of memory", -1;
        j->nums = p;
    }
    jm_num *m = &j->nums[j->n_nums++];
    m->path = strdup(j->path);
    m->klass = NULL;
    m->start = start;
    m->end = end;
    return m->path ? 0 : (j->err = "out of memory", -1);
}

static int jm__value(jm_scan *j, int depth);

static int jm__object(jm_scan *j, int depth)
{
    j->pos++; /* '{' */
    jm__ws(j);
    if (j->pos < j->n && j->s[j->pos] == '}') return j->pos++, 0;
    for (;;) {
        char key[256];
        jm__ws(j);
        if (jm__string(j, key, sizeof key)) return -1;
        jm__ws(j);
        if (j->pos >= j->n || j->s[j->pos] != ':') return j->err = "expected ':'", -1;
        j->pos++;
        jm__ws(j);
        const size_t save = j->plen, had = j->n_nums;
        /* keys with characters of the path syntax are not listed (none of the formats has them) */
        const int plain = !strpbrk(key, ".[]\t\n ") && key[0];
        if (jm__push(j, j->plen ? ".%s" : "%s", plain ? key : "?", 0)) return -1;
        if (depth == 2 && j->ev >= 0 && j->pos < j->n && j->s[j->pos] == '"') {
            char *dst = !strcmp(key, "name") ? j->ev_name : !strcmp(key, "cat") ? j->ev_cat
                                                        : !strcmp(key, "ph")    ? j->ev_ph
                                                                                : NULL;
            const size_t cap = !strcmp(key, "name") ? sizeof j->ev_name
                               : !strcmp(key, "cat") ? sizeof j->ev_cat
                                                     : sizeof j->ev_ph;
            if (jm__string(j, dst, dst ? cap : 0)) return -1;
        } else if (jm__value(j, depth + 1)) {
            return -1;
        }
        if (!plain) /* forget what was found under an unlisted key */
            while (j->n_nums > had) free(j->nums[--j->n_nums].path);
        j->plen = save;
        j->path[save] = '\0';
        jm__ws(j);
        if (j->pos < j->n && j->s[j->pos] == ',') {
            j->pos++;
            continue;
        }
        if (j->pos < j->n && j->s[j->pos] == '}') return j->pos++, 0;
        return j->err = "expected ',' or '}'", -1;
    }
}

/* The class of each number of one trace event: name/cat/ph:field. */
static int jm__event_done(jm_scan *j)
{
    for (size_t i = j->ev_first; i < j->n_nums; i++) {
        const char *field = strchr(j->nums[i].path, ']');
        field = field && field[1] == '.' ? field + 2 : "";
        const size_t l = strlen(j->ev_name) + strlen(j->ev_cat) + strlen(j->ev_ph) + strlen(field) + 8;
        if (!(j->nums[i].klass = malloc(l))) return j->err = "out of memory", -1;
        snprintf(j->nums[i].klass, l, "%s/%s/%s:%s", j->ev_name, j->ev_cat, j->ev_ph, field);
    }
    return 0;
}

static int jm__array(jm_scan *j, int depth)
{
    j->pos++; /* '[' */
    const int events = depth == 1 && !strcmp(j->path, "traceEvents");
    jm__ws(j);
    if (j->pos < j->n && j->s[j->pos] == ']') return j->pos++, 0;
    for (long i = 0;; i++) {
        const size_t save = j->plen;
        if (jm__push(j, "[%ld]", NULL, i)) return -1;
        jm__ws(j);
        if (events) {
            j->ev = i;
            j->ev_name[0] = j->ev_cat[0] = j->ev_ph[0] = '\0';
            j->ev_first = j->n_nums;
        }
        if (jm__value(j, events ? 2 : depth + 1)) return -1;
        if (events && jm__event_done(j)) return -1;
        if (events) j->ev = -1;
        j->plen = save;
        j->path[save] = '\0';
        jm__ws(j);
        if (j->pos < j->n && j->s[j->pos] == ',') {
            j->pos++;
            continue;
        }
        if (j->pos < j->n && j->s[j->pos] == ']') return j->pos++, 0;
        return j->err = "expected ',' or ']'", -1;
    }
}

static int jm__value(jm_scan *j, int depth)
{
    jm__ws(j);
    if (j->pos >= j->n) return j->err = "unexpected end of file", -1;
    const char c = j->s[j->pos];
    if (c == '{') return jm__object(j, depth);
    if (c == '[') return jm__array(j, depth);
    if (c == '"') return jm__string(j, NULL, 0);
    if (c == '-' || (c >= '0' && c <= '9')) {
        const size_t start = j->pos;
        while (j->pos < j->n && strchr("+-.0123456789eE", j->s[j->pos])) j->pos++;
        return jm__add(j, start, j->pos);
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        const size_t l = strlen(words[k]);
        if (j->n - j->pos >= l && !memcmp(j->s + j->pos, words[k], l)) return j->pos += l, 0;
    }
    return j->err = "unexpected character", -1;
}

static char *jm__read(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap);
    for (size_t r; b && (r = fread(b + len, 1, cap - len, f)) > 0;) {
        len += r;
        if (len == cap) {
            char *q = realloc(b, cap *= 2);
            if (!q) free(b);
            b = q;
        }
    }
    if (b && ferror(f)) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = len;
    return b;
}

/* Generalize a path outside traceEvents: every [N] becomes [*]. */
static char *jm__general(const char *path)
{
    char *g = malloc(strlen(path) + 1), *o = g;
    if (!g) return NULL;
    for (const char *p = path; *p;) {
        if (*p == '[') {
            *o++ = '[';
            *o++ = '*';
            while (*p && *p != ']') p++;
            continue;
        }
        *o++ = *p++;
    }
    *o = '\0';
    return g;
}

/* reseal: 0, 1 (read or write), 2 (no checksum line) */
static int jm__reseal(const char *path)
{
    size_t n;
    char *text = jm__read(path, &n);
    if (!text) {
        fprintf(stderr, "json_mutate: %s: cannot read\n", path);
        return 1;
    }
    static const char key[] = "\"manifest_crc32c\"";
    char *k = NULL;
    for (char *p = strstr(text, key); p; p = strstr(p + 1, key)) k = p;
    char *line = k, *hex = k ? strchr(k + sizeof key - 1, '"') : NULL;
    while (line && line > text && line[-1] != '\n') line--;
    if (!hex || hex + 9 > text + n) {
        fprintf(stderr, "json_mutate: %s: no manifest_crc32c line\n", path);
        free(text);
        return 2;
    }
    char crc[9];
    snprintf(crc, sizeof crc, "%08" PRIx32, dt_crc32c(text, (size_t)(line - text)));
    memcpy(hex + 1, crc, 8);
    FILE *f = fopen(path, "wb");
    int bad = !f || fwrite(text, 1, n, f) != n;
    if (f && fclose(f) != 0) bad = 1;
    free(text);
    if (bad) fprintf(stderr, "json_mutate: %s: cannot write\n", path);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "reseal")) return jm__reseal(argv[2]);
    const int list = argc == 3 && !strcmp(argv[1], "list"), set = argc == 6 && !strcmp(argv[1], "set");
    if (!list && !set) {
        fprintf(stderr, "usage: json_mutate list FILE | json_mutate set FILE PATH VALUE OUT | json_mutate reseal "
                        "MANIFEST\n");
        return 2;
    }
    size_t n;
    char *text = jm__read(argv[2], &n);
    if (!text) {
        fprintf(stderr, "json_mutate: %s: cannot read\n", argv[2]);
        return 1;
    }
    jm_scan j = {.s = text, .n = n, .ev = -1};
    int rc = jm__value(&j, 0);
    jm__ws(&j);
    if (rc == 0 && j.pos != j.n) j.err = "junk after the value", rc = -1;
    if (rc) {
        fprintf(stderr, "json_mutate: %s: byte %zu: %s\n", argv[2], j.pos, j.err);
        return 2;
    }
    rc = 0;
    if (list) {
        char **seen = calloc(j.n_nums + 1, sizeof *seen);
        size_t n_seen = 0;
        for (size_t i = 0; i < j.n_nums && seen; i++) {
            char *k = j.nums[i].klass ? strdup(j.nums[i].klass) : jm__general(j.nums[i].path);
            int dup = !k;
            for (size_t s = 0; s < n_seen && !dup; s++) dup = !strcmp(seen[s], k);
            if (dup) {
                free(k);
                continue;
            }
            seen[n_seen++] = k;
            printf("%s\t%s\n", j.nums[i].path, k);
        }
        for (size_t s = 0; s < n_seen; s++) free(seen[s]);
        free(seen);
    } else {
        const jm_num *m = NULL;
        for (size_t i = 0; i < j.n_nums && !m; i++)
            if (!strcmp(j.nums[i].path, argv[3])) m = &j.nums[i];
        if (!m) {
            fprintf(stderr, "json_mutate: %s: no number at %s\n", argv[2], argv[3]);
            rc = 2;
        } else {
            FILE *o = fopen(argv[5], "wb");
            if (!o || fwrite(text, 1, m->start, o) != m->start || fputs(argv[4], o) < 0 ||
                fwrite(text + m->end, 1, n - m->end, o) != n - m->end || fclose(o) != 0) {
                fprintf(stderr, "json_mutate: %s: cannot write\n", argv[5]);
                rc = 1;
            }
        }
    }
    for (size_t i = 0; i < j.n_nums; i++) {
        free(j.nums[i].path);
        free(j.nums[i].klass);
    }
    free(j.nums);
    free(text);
    return rc;
}
