/* bpe_pretok.c: GPT-2's byte-to-unicode alphabet and its pre-tokenization
 * pattern, matched by hand (no regex library):
 *
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *
 * The pattern is used as re.findall: at the end of one piece the next is
 * the first alternative that matches there. Every character is a letter,
 * a number, a space or other, so some alternative always matches and the
 * pieces tile the text. Reading the alternatives in order at position i:
 *   - a contraction (ASCII apostrophe, lower case) wins first;
 *   - " ?" is the ASCII space only: a space followed by a letter, number or
 *     other character joins that character's run, which is maximal
 *     (greedy, and nothing after it needs a backtrack);
 *   - a run of white space that reaches the end of the text is one piece;
 *     one followed by a non-space loses its last character (\s+(?!\S)
 *     backtracks one character so that the space before a word stays with
 *     the word), unless it is a single character, which \s+ then takes.
 *
 * Characters are decoded from UTF-8 leniently: a byte that does not begin
 * a well-formed character (RFC 3629) is one character of class other, so
 * any bytes split into pieces whose concatenation is the input. */
#include "bpe_internal.h"

/* The 188 bytes GPT-2 shows as themselves: '!'..'~', U+00A1..U+00AC,
 * U+00AE..U+00FF. The other 68 (0x00..0x20, 0x7f..0xa0, 0xad) are shown,
 * in byte order, as U+0100..U+0143. */
static int dt__bpe_printable(unsigned b)
{
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

uint32_t dt__bpe_byte_cp(uint8_t b)
{
    if (dt__bpe_printable(b)) return b;
    if (b <= 0x20) return 0x100u + b;                        /* 33 bytes: U+0100..U+0120 */
    if (b >= 0x7f && b <= 0xa0) return 0x121u + (b - 0x7fu); /* 34 bytes: U+0121..U+0142 */
    return 0x143u;                                           /* 0xad, the soft hyphen */
}

int dt__bpe_cp_byte(uint32_t cp)
{
    if (cp < 0x100) return dt__bpe_printable(cp) ? (int)cp : -1;
    if (cp <= 0x120) return (int)(cp - 0x100);
    if (cp <= 0x142) return (int)(cp - 0x121 + 0x7f);
    if (cp == 0x143) return 0xad;
    return -1;
}

/* The class of ASCII byte c. */
static dt__uc_class dt__ascii_class(unsigned c)
{
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return DT__UC_LETTER;
    if (c >= '0' && c <= '9') return DT__UC_NUMBER;
    if (c == ' ' || (c >= 0x09 && c <= 0x0d)) return DT__UC_SPACE;
    return DT__UC_OTHER;
}

/* The class of the character at s[i] (i < n) and its length in bytes. */
static dt__uc_class dt__class_at(const uint8_t *s, size_t n, size_t i, size_t *len)
{
    const unsigned c = s[i];
    *len = 1;
    if (c < 0x80) return dt__ascii_class(c);
    size_t k;
    uint32_t v;
    if (c >= 0xc2 && c <= 0xdf) k = 2, v = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) k = 3, v = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) k = 4, v = c & 0x07;
    else return DT__UC_OTHER; /* a continuation byte, 0xc0, 0xc1, 0xf5..0xff */
    if (n - i < k) return DT__UC_OTHER;
    for (size_t j = 1; j < k; j++) {
        if ((s[i + j] & 0xc0) != 0x80) return DT__UC_OTHER;
        v = v << 6 | (s[i + j] & 0x3fu);
    }
    if ((k == 3 && (v < 0x800 || (v >= 0xd800 && v <= 0xdfff))) || (k == 4 && (v < 0x10000 || v > 0x10ffff)))
        return DT__UC_OTHER; /* overlong, a surrogate, past U+10FFFF */
    *len = k;
    return dt__uc_class_of(v);
}

size_t dt__bpe_pretok_next(const uint8_t *s, size_t n, size_t i)
{
    /* 's|'t|'re|'ve|'m|'ll|'d */
    if (s[i] == '\'' && i + 1 < n) {
        const uint8_t c = s[i + 1];
        if (c == 's' || c == 't' || c == 'm' || c == 'd') return i + 2;
        if (i + 2 < n && (((c == 'r' || c == 'v') && s[i + 2] == 'e') || (c == 'l' && s[i + 2] == 'l'))) return i + 3;
    }
    size_t len;
    dt__uc_class k = dt__class_at(s, n, i, &len);
    size_t j = i + len;
    if (s[i] == ' ' && j < n) { /* " ?": the space leads the next run unless that is white space */
        size_t l2;
        const dt__uc_class k2 = dt__class_at(s, n, j, &l2);
        if (k2 != DT__UC_SPACE) k = k2, j += l2;
    }
    if (k != DT__UC_SPACE) { /* \p{L}+ | \p{N}+ | [^\s\p{L}\p{N}]+ */
        while (j < n && dt__class_at(s, n, j, &len) == k) j += len;
        return j;
    }
    size_t last = i; /* where the run's last character starts */
    while (j < n && dt__class_at(s, n, j, &len) == DT__UC_SPACE) last = j, j += len;
    if (j == n || last == i) return j; /* \s+(?!\S) to the end, or \s+ of one character */
    return last;                       /* \s+(?!\S): all but the last */
}
