/*
 * The SAI text analyzer (Cassandra 5.0's NonTokenizingAnalyzer): for an
 * index with case_sensitive=false, normalize=true or ascii=true, in that
 * order, lower case (Java's String.toLowerCase: simple mappings, U+0130 to
 * "i" + U+0307, final sigma), Unicode NFC, ASCII folding (Lucene's
 * ASCIIFoldingFilter for Latin letters: Latin-1 Supplement, Latin
 * Extended-A/-B, Latin Extended Additional). Both the indexed values and
 * the query's values go through it (docs/indexes.md, "Text analysis").
 * Tables: storage/sai_unicode_tables.h, written by
 * scripts/gen_sai_unicode.py.
 */
#include <stdlib.h>

#include "common/buf.h"
#include "common/err.h"
#include "storage/sai_unicode_tables.h"
#include "storage/schema.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Code points of a UTF-8 string; -1 when it is not valid UTF-8. */
static int decode(const uint8_t *p, size_t n, uint32_t *out, size_t *count)
{
	size_t k = 0;
	for (size_t i = 0; i < n;) {
		uint8_t c = p[i];
		uint32_t cp;
		size_t len;
		if (c < 0x80) {
			cp = c;
			len = 1;
		} else if (c >= 0xC2 && c < 0xE0) {
			cp = c & 0x1F;
			len = 2;
		} else if (c >= 0xE0 && c < 0xF0) {
			cp = c & 0x0F;
			len = 3;
		} else if (c >= 0xF0 && c < 0xF5) {
			cp = c & 0x07;
			len = 4;
		} else {
			return -1;
		}
		if (i + len > n)
			return -1;
		for (size_t j = 1; j < len; j++) {
			if ((p[i + j] & 0xC0) != 0x80)
				return -1;
			cp = cp << 6 | (p[i + j] & 0x3F);
		}
		if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
		    cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000))
			return -1;
		out[k++] = cp;
		i += len;
	}
	*count = k;
	return 0;
}

static int encode(const uint32_t *cp, size_t n, struct buf *out)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t c = cp[i];
		uint8_t b[4];
		size_t len;
		if (c < 0x80) {
			b[0] = (uint8_t)c;
			len = 1;
		} else if (c < 0x800) {
			b[0] = (uint8_t)(0xC0 | c >> 6);
			b[1] = (uint8_t)(0x80 | (c & 0x3F));
			len = 2;
		} else if (c < 0x10000) {
			b[0] = (uint8_t)(0xE0 | c >> 12);
			b[1] = (uint8_t)(0x80 | (c >> 6 & 0x3F));
			b[2] = (uint8_t)(0x80 | (c & 0x3F));
			len = 3;
		} else {
			b[0] = (uint8_t)(0xF0 | c >> 18);
			b[1] = (uint8_t)(0x80 | (c >> 12 & 0x3F));
			b[2] = (uint8_t)(0x80 | (c >> 6 & 0x3F));
			b[3] = (uint8_t)(0x80 | (c & 0x3F));
			len = 4;
		}
		if (buf_append(out, b, len))
			return -1;
	}
	return 0;
}

static uint32_t lower_of(uint32_t c)
{
	if (c < 0x80)
		return c >= 'A' && c <= 'Z' ? c + 32 : c;
	size_t lo = 0, hi = N_OF(sai_lower_runs);
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct sai_lower_run *r = &sai_lower_runs[mid];
		if (c < r->first)
			hi = mid;
		else if (c > r->last)
			lo = mid + 1;
		else
			return (c - r->first) % r->stride == 0
				       ? (uint32_t)((int32_t)c + r->delta)
				       : c;
	}
	return c;
}

static bool is_cased(uint32_t c)
{
	size_t lo = 0, hi = N_OF(sai_cased);
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (c < sai_cased[mid].first)
			hi = mid;
		else if (c > sai_cased[mid].last)
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

static unsigned ccc_of(uint32_t c)
{
	if (c < 0x300)
		return 0;
	size_t lo = 0, hi = N_OF(sai_ccc_runs);
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (c < sai_ccc_runs[mid].first)
			hi = mid;
		else if (c > sai_ccc_runs[mid].last)
			lo = mid + 1;
		else
			return sai_ccc_runs[mid].ccc;
	}
	return 0;
}

static const struct sai_decomp *decomp_of(uint32_t c)
{
	size_t lo = 0, hi = N_OF(sai_decomps);
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (c < sai_decomps[mid].cp)
			hi = mid;
		else if (c > sai_decomps[mid].cp)
			lo = mid + 1;
		else
			return &sai_decomps[mid];
	}
	return NULL;
}

/* Hangul syllables (Unicode 3.12, algorithmic). */
#define H_S  0xAC00u
#define H_L  0x1100u
#define H_V  0x1161u
#define H_T  0x11A7u
#define H_VN 21u
#define H_TN 28u
#define H_N  (H_VN * H_TN)
#define H_SN (19u * H_N)

static uint32_t compose_pair(uint32_t a, uint32_t b)
{
	if (a >= H_L && a < H_L + 19 && b >= H_V && b < H_V + H_VN)
		return H_S + ((a - H_L) * H_VN + (b - H_V)) * H_TN;
	if (a >= H_S && a < H_S + H_SN && (a - H_S) % H_TN == 0 && b > H_T &&
	    b < H_T + H_TN)
		return a + (b - H_T);
	size_t lo = 0, hi = N_OF(sai_comps);
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct sai_comp *e = &sai_comps[mid];
		if (a < e->a || (a == e->a && b < e->b))
			hi = mid;
		else if (a > e->a || b > e->b)
			lo = mid + 1;
		else
			return e->c;
	}
	return 0;
}

/* Appends c's full canonical decomposition; out has room (a code point
 * decomposes into at most 4 in the tables, Hangul into 3). */
static size_t decompose(uint32_t c, uint32_t *out)
{
	if (c >= H_S && c < H_S + H_SN) {
		uint32_t s = c - H_S;
		out[0] = H_L + s / H_N;
		out[1] = H_V + s % H_N / H_TN;
		if (s % H_TN == 0)
			return 2;
		out[2] = H_T + s % H_TN;
		return 3;
	}
	const struct sai_decomp *d = c >= 0xC0 ? decomp_of(c) : NULL;
	if (!d) {
		out[0] = c;
		return 1;
	}
	size_t n = decompose(d->a, out);
	if (d->b)
		out[n++] = d->b;
	return n;
}

/* NFC of cp[0..n) into out (room for 4n); its length. */
static size_t nfc(const uint32_t *cp, size_t n, uint32_t *out)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += decompose(cp[i], out + k);
	/* canonical order: each run of non-starters sorted by class, stably */
	for (size_t i = 1; i < k; i++) {
		unsigned cc = ccc_of(out[i]);
		if (cc == 0)
			continue;
		uint32_t c = out[i];
		size_t j = i;
		while (j > 0 && ccc_of(out[j - 1]) > cc) {
			out[j] = out[j - 1];
			j--;
		}
		out[j] = c;
	}
	if (k == 0)
		return 0;
	size_t o = 1, starter = 0;
	bool have = ccc_of(out[0]) == 0;
	unsigned last = have ? 0 : 256;
	for (size_t i = 1; i < k; i++) {
		uint32_t c = out[i];
		unsigned cc = ccc_of(c);
		bool adjacent = o - 1 == starter;
		uint32_t comp = 0;
		if (have && (adjacent ? true : last < cc && cc != 0))
			comp = compose_pair(out[starter], c);
		if (comp) {
			out[starter] = comp;
			continue;
		}
		if (cc == 0) {
			starter = o;
			have = true;
		}
		last = cc;
		out[o++] = c;
	}
	return o;
}

static const char *fold_of(uint32_t c)
{
	size_t lo = 0, hi = N_OF(sai_folds);
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (c < sai_folds[mid].cp)
			hi = mid;
		else if (c > sai_folds[mid].cp)
			lo = mid + 1;
		else
			return sai_folds[mid].to;
	}
	return NULL;
}

int storage_sai_analyze(unsigned analyzer, const uint8_t *p, size_t n,
			struct buf *out)
{
	bool ascii = true;
	for (size_t i = 0; i < n && ascii; i++)
		ascii = p[i] < 0x80;
	if (ascii || !analyzer) { /* NFC and folding change nothing */
		uint8_t *d = buf_extend(out, n);
		if (!d)
			return -1;
		for (size_t i = 0; i < n; i++) {
			uint8_t c = p[i];
			d[i] = (analyzer & STORAGE_SAI_LOWER) && c >= 'A' &&
					       c <= 'Z'
				       ? (uint8_t)(c + 32)
				       : c;
		}
		return 0;
	}
	/* code points: at most n; lower case keeps their count within n (only
	 * U+0130, 2 bytes, gives 2); NFC's full decompositions give at most
	 * 4 of a non-ASCII one (2 or more bytes: scripts/gen_sai_unicode.py
	 * checks), so at most 2n; folding is encoded on the fly */
	uint32_t *a = malloc((n + 1) * sizeof(*a));
	uint32_t *b = malloc((2 * n + 8) * sizeof(*b));
	size_t k = 0;
	int rc = -1;
	if (!a || !b) {
		err_set(ERR_NOMEM, "text analysis");
		goto out;
	}
	if (decode(p, n, b, &k) != 0) { /* not UTF-8: the bytes as given */
		rc = buf_append(out, p, n);
		goto out;
	}
	if (analyzer & STORAGE_SAI_LOWER) {
		size_t m = 0;
		for (size_t i = 0; i < k; i++) {
			uint32_t c = b[i];
			if (c == 0x130) { /* İ: i and a combining dot above */
				a[m++] = 'i';
				a[m++] = 0x307;
			} else if (c == 0x3A3) { /* Σ: ς at a word's end
						  * (combining marks skipped) */
				size_t x = i, y = i + 1;
				while (x > 0 && ccc_of(b[x - 1]) != 0)
					x--;
				while (y < k && ccc_of(b[y]) != 0)
					y++;
				bool before = x > 0 && is_cased(b[x - 1]);
				bool after = y < k && is_cased(b[y]);
				a[m++] = before && !after ? 0x3C2 : 0x3C3;
			} else {
				a[m++] = lower_of(c);
			}
		}
		k = m;
	} else {
		memcpy(a, b, k * sizeof(*a));
	}
	const uint32_t *src = a;
	if (analyzer & STORAGE_SAI_NORMALIZE) {
		k = nfc(a, k, b);
		src = b;
	}
	if (!(analyzer & STORAGE_SAI_ASCII)) {
		rc = encode(src, k, out);
		goto out;
	}
	rc = 0;
	for (size_t i = 0; i < k && !rc; i++) {
		const char *f = src[i] >= 0xC0 ? fold_of(src[i]) : NULL;
		rc = f ? buf_append(out, f, strlen(f))
		       : encode(src + i, 1, out);
	}
out:
	free(a);
	free(b);
	return rc;
}
