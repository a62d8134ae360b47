/* escape.c: text from input files made safe to print (dt_file.h:
 * dt_escape, dt_fputs_escaped).
 *
 * Owns: the one rule for echoing what a file holds (a hardware file's name,
 * a trace's tool, a config's strings, a parser's excerpt of the bytes it
 * choked on) to a terminal. Programs pass every such string, and every
 * library message (which may quote them), through it before printing.
 *
 * The rule: a byte that could drive a terminal is written as \xHH (two
 * lower-case hex digits): the C0 controls 0x00..0x1f (ESC, BEL, CR, and
 * newline and tab too, so that a message stays one line), DEL 0x7f, and
 * every byte >= 0x80 that is not part of a well-formed UTF-8 character
 * (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF). The C1
 * controls U+0080..U+009F, which some terminals obey as CSI and the like,
 * are escaped byte by byte too (\xc2\x9b). Other UTF-8 text is kept as it
 * is, so names in any script print as written. A backslash is kept: the
 * output is for reading, not for parsing back. */
#include "dt_file.h"

#include <string.h>

/* The length of the well-formed UTF-8 character at s (s[0] >= 0x80) that is
 * printable, or 0 (an invalid sequence, or a C1 control). */
static size_t dt__utf8_len(const unsigned char *s)
{
    const unsigned c = s[0];
    size_t n;
    unsigned cp;
    if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07;
    else return 0; /* a continuation byte, 0xc0/0xc1 (overlong), 0xf5.. (past U+10FFFF) */
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0; /* cut short (a NUL ends it too) */
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff) return 0; /* overlong, too large */
    if (cp >= 0xd800 && cp <= 0xdfff) return 0;                                        /* a surrogate */
    if (cp >= 0x80 && cp <= 0x9f) return 0;                                            /* a C1 control */
    return n;
}

/* Calls put(piece, len, is_escape, ctx) for s's pieces: runs of bytes kept,
 * and escapes; stops when put returns nonzero. */
static int dt__escape_walk(const char *s, int (*put)(const char *, size_t, int, void *), void *ctx)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        size_t run = 0;
        for (;;) {
            const unsigned c = p[run];
            if (c == 0) break;
            if (c >= 0x20 && c < 0x7f) {
                run++;
                continue;
            }
            const size_t u = c >= 0x80 ? dt__utf8_len(p + run) : 0;
            if (u == 0) break;
            run += u;
        }
        if (run > 0 && put((const char *)p, run, 0, ctx)) return -1;
        p += run;
        if (!*p) break;
        const char esc[4] = {'\\', 'x', hex[*p >> 4], hex[*p & 15]};
        if (put(esc, 4, 1, ctx)) return -1;
        p++;
    }
    return 0;
}

typedef struct dt__esc_buf {
    char *out;
    size_t cap, n;
} dt__esc_buf;

/* Appends a whole piece, or as much of a run as fits; an escape is never cut. */
static int dt__esc_put_buf(const char *piece, size_t len, int is_escape, void *ctx)
{
    dt__esc_buf *b = ctx;
    const size_t room = b->cap - 1 - b->n;
    if (len > room) {
        if (is_escape) return 1; /* an escape that does not fit: stop before it */
        size_t k = room;
        while (k > 0 && ((unsigned char)piece[k] & 0xc0) == 0x80) k--; /* not inside a UTF-8 character */
        memcpy(b->out + b->n, piece, k);
        b->n += k;
        return 1;
    }
    memcpy(b->out + b->n, piece, len);
    b->n += len;
    return 0;
}

const char *dt_escape(const char *s, char *out, size_t cap)
{
    if (!out || cap == 0) return "";
    dt__esc_buf b = {out, cap, 0};
    (void)dt__escape_walk(s, dt__esc_put_buf, &b);
    out[b.n] = '\0';
    return out;
}

static int dt__esc_put_file(const char *piece, size_t len, int is_escape, void *ctx)
{
    (void)is_escape;
    return fwrite(piece, 1, len, (FILE *)ctx) != len;
}

int dt_fputs_escaped(const char *s, FILE *f) { return dt__escape_walk(s, dt__esc_put_file, f) == 0 ? 0 : EOF; }
