/* npy.c: the NumPy .npy files that hold the tutorial's normalisation stats.
 *
 * Format (numpy/lib/format.py): "\x93NUMPY", major, minor, header length
 * (uint16 LE for 1.0, uint32 LE for 2.0), then an ASCII Python dict literal
 * {'descr': '<f4', 'fortran_order': False, 'shape': (1, 20, 1, 1), }
 * padded with spaces and ended by '\n', then the raw data. We parse the dict
 * ourselves and check every part of it: a wrong stats file silently
 * mis-normalises every sample, so anything unexpected is an input error that
 * names the file.
 */
#include "core/data/data.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util/common.h"
#include "core/util/fileio.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy.c assumes a little-endian host (the .npy data is '<f4'/'<f8')"
#endif

#define NPY_MAX_FILE (1 << 20) /* stats are C floats; anything this big is not a stats file */
#define NPY_MAX_DIMS 8

typedef struct {
    const char *path;
    const char *p, *end; /* cursor in the header text */
} npy_parser;

static void npy_skip_ws(npy_parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static bool npy_accept(npy_parser *ps, char c) {
    npy_skip_ws(ps);
    if (ps->p < ps->end && *ps->p == c) {
        ps->p++;
        return true;
    }
    return false;
}

static void npy_expect(npy_parser *ps, char c, const char *what) {
    if (!npy_accept(ps, c)) vb_die_input("%s: malformed .npy header: expected '%c' %s", ps->path, c, what);
}

/* A Python string literal in single or double quotes (no escapes needed for
 * the keys and dtypes we accept). */
static void npy_string(npy_parser *ps, char *out, size_t n) {
    npy_skip_ws(ps);
    if (ps->p >= ps->end || (*ps->p != '\'' && *ps->p != '"'))
        vb_die_input("%s: malformed .npy header: expected a quoted string", ps->path);
    char q = *ps->p++;
    size_t k = 0;
    while (ps->p < ps->end && *ps->p != q) {
        if (k + 1 >= n) vb_die_input("%s: malformed .npy header: string too long", ps->path);
        out[k++] = *ps->p++;
    }
    if (ps->p >= ps->end) vb_die_input("%s: malformed .npy header: unterminated string", ps->path);
    ps->p++;
    out[k] = '\0';
}

static bool npy_word(npy_parser *ps, const char *w) {
    npy_skip_ws(ps);
    size_t n = strlen(w);
    if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, w, n) == 0 &&
        (ps->p + n == ps->end || !isalnum((unsigned char)ps->p[n]))) {
        ps->p += n;
        return true;
    }
    return false;
}

/* A tuple of non-negative ints: (), (5,), (1, 20, 1, 1) */
static int npy_shape(npy_parser *ps, long *dims) {
    npy_expect(ps, '(', "to start 'shape'");
    int nd = 0;
    for (;;) {
        if (npy_accept(ps, ')')) break;
        npy_skip_ws(ps);
        if (ps->p >= ps->end || !isdigit((unsigned char)*ps->p))
            vb_die_input("%s: malformed .npy header: 'shape' must be a tuple of non-negative integers", ps->path);
        long v = 0;
        while (ps->p < ps->end && isdigit((unsigned char)*ps->p)) {
            v = v * 10 + (*ps->p++ - '0');
            if (v > (1L << 40)) vb_die_input("%s: .npy 'shape' entry is absurdly large", ps->path);
        }
        npy_word(ps, "L"); /* Python 2 longs */
        if (nd >= NPY_MAX_DIMS) vb_die_input("%s: .npy 'shape' has more than %d dimensions", ps->path, NPY_MAX_DIMS);
        dims[nd++] = v;
        if (npy_accept(ps, ',')) continue;
        npy_expect(ps, ')', "to close 'shape'");
        break;
    }
    return nd;
}

void vb_npy_load_stats(const char *path, int C, float *out) {
    char label[VB_PATH_MAX + 16];
    vb_snprintf(label, sizeof label, "stats file %s", path);
    FILE *f = vb_fopen_input(path, label);
    unsigned char *buf = vb_malloc_check(NPY_MAX_FILE + 1);
    size_t len = fread(buf, 1, NPY_MAX_FILE + 1, f);
    bool rerr = ferror(f);
    fclose(f);
    if (rerr) vb_die_input("%s: read error", path);
    if (len > NPY_MAX_FILE) vb_die_input("%s: too large for a stats .npy file (> %d bytes)", path, NPY_MAX_FILE);

    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
        vb_die_input("%s: not a NumPy .npy file (bad magic)", path);
    int major = buf[6], minor = buf[7];
    size_t hstart, hlen;
    if (major == 1 && minor == 0) {
        hlen = (size_t)buf[8] | ((size_t)buf[9] << 8);
        hstart = 10;
    } else if (major == 2 && minor == 0) {
        if (len < 12) vb_die_input("%s: truncated .npy header", path);
        hlen = (size_t)buf[8] | ((size_t)buf[9] << 8) | ((size_t)buf[10] << 16) | ((size_t)buf[11] << 24);
        hstart = 12;
    } else {
        vb_die_input("%s: unsupported .npy version %d.%d (need 1.0 or 2.0)", path, major, minor);
    }
    if (hlen > len - hstart) vb_die_input("%s: truncated .npy header (%zu header bytes declared, file has %zu)", path, hlen, len);

    npy_parser ps = {path, (const char *)buf + hstart, (const char *)buf + hstart + hlen};
    if (hlen == 0 || ps.end[-1] != '\n') vb_die_input("%s: malformed .npy header: not terminated by a newline", path);
    for (const char *c = ps.p; c < ps.end; c++)
        if (*c == '\0' || (unsigned char)*c > 127) vb_die_input("%s: malformed .npy header: not ASCII text", path);

    char descr[32] = "";
    int fortran = -1;
    long dims[NPY_MAX_DIMS];
    int ndim = -1;
    npy_expect(&ps, '{', "to start the header dict");
    for (;;) {
        if (npy_accept(&ps, '}')) break;
        char key[32];
        npy_string(&ps, key, sizeof key);
        npy_expect(&ps, ':', "after a dict key");
        if (strcmp(key, "descr") == 0) {
            if (descr[0]) vb_die_input("%s: malformed .npy header: 'descr' given twice", path);
            npy_string(&ps, descr, sizeof descr);
            if (!descr[0]) vb_die_input("%s: malformed .npy header: empty 'descr'", path);
        } else if (strcmp(key, "fortran_order") == 0) {
            if (fortran >= 0) vb_die_input("%s: malformed .npy header: 'fortran_order' given twice", path);
            if (npy_word(&ps, "True")) fortran = 1;
            else if (npy_word(&ps, "False")) fortran = 0;
            else vb_die_input("%s: malformed .npy header: 'fortran_order' must be True or False", path);
        } else if (strcmp(key, "shape") == 0) {
            if (ndim >= 0) vb_die_input("%s: malformed .npy header: 'shape' given twice", path);
            ndim = npy_shape(&ps, dims);
        } else {
            vb_die_input("%s: malformed .npy header: unexpected key '%s'", path, key);
        }
        if (npy_accept(&ps, ',')) continue;
        npy_expect(&ps, '}', "to close the header dict");
        break;
    }
    npy_skip_ws(&ps);
    if (ps.p != ps.end) vb_die_input("%s: malformed .npy header: text after the dict", path);
    if (!descr[0]) vb_die_input("%s: malformed .npy header: no 'descr'", path);
    if (fortran < 0) vb_die_input("%s: malformed .npy header: no 'fortran_order'", path);
    if (ndim < 0) vb_die_input("%s: malformed .npy header: no 'shape'", path);

    size_t isz;
    if (strcmp(descr, "<f4") == 0) isz = 4;
    else if (strcmp(descr, "<f8") == 0) isz = 8;
    else vb_die_input("%s: dtype '%s' not supported (need little-endian float32 '<f4' or float64 '<f8')", path, descr);
    if (fortran) vb_die_input("%s: fortran_order is True (need a C-order array)", path);

    long nfound;
    if (ndim == 4 && dims[0] == 1 && dims[2] == 1 && dims[3] == 1) nfound = dims[1];
    else if (ndim == 1) nfound = dims[0];
    else {
        char sh[128] = "";
        size_t u = 0;
        for (int i = 0; i < ndim && u < sizeof sh - 24; i++)
            u += (size_t)snprintf(sh + u, sizeof sh - u, "%s%ld", i ? ", " : "", dims[i]);
        vb_die_input("%s: shape (%s) is not [1, C, 1, 1] or [C]", path, sh);
    }
    if (nfound != C) vb_die_input("%s: has %ld channels but the data has C=%d", path, nfound, C);
    size_t dstart = hstart + hlen;
    size_t want = (size_t)C * isz;
    if (len - dstart != want)
        vb_die_input("%s: data is %zu bytes, expected %zu for %d x %s", path, len - dstart, want, C, descr);

    for (int c = 0; c < C; c++) {
        double v;
        if (isz == 4) {
            float x;
            memcpy(&x, buf + dstart + 4 * (size_t)c, 4);
            v = x;
        } else {
            memcpy(&v, buf + dstart + 8 * (size_t)c, 8);
        }
        if (!isfinite(v) || fabs(v) > 3.0e38) vb_die_input("%s: value of channel %d is not a finite float32 (%g)", path, c, v);
        out[c] = (float)v;
    }
    free(buf);
}

typedef struct {
    const unsigned char *pre;
    const char *hdr;
    size_t hlen;
    const float *data;
    size_t n;
} npy_out;

static void write_npy(FILE *f, void *ctx) {
    const npy_out *o = ctx;
    /* a short write sets the stream's error flag, which vb_atomic_write checks */
    if (fwrite(o->pre, 1, 10, f) == 10 && fwrite(o->hdr, 1, o->hlen, f) == o->hlen && o->n > 0)
        (void)fwrite(o->data, sizeof(float), o->n, f);
}

int vb_npy_save_f32(const char *path, const float *data, const int *shape, int ndim) {
    if (ndim < 0 || ndim > NPY_MAX_DIMS) return -1;
    char sh[256];
    size_t u = 0;
    size_t n = 1;
    sh[u++] = '(';
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return -1;
        n *= (size_t)shape[i];
        u += (size_t)snprintf(sh + u, sizeof sh - u, "%s%d", i ? ", " : "", shape[i]);
    }
    if (ndim == 1) sh[u++] = ','; /* Python's 1-tuple */
    sh[u++] = ')';
    sh[u] = '\0';
    char hdr[512];
    int k = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }", sh);
    if (k < 0 || (size_t)k + 64 >= sizeof hdr) return -1;
    /* pad so the data starts 64-byte aligned, as numpy >= 1.14 writes it */
    size_t total = 10 + (size_t)k + 1;
    size_t pad = (64 - total % 64) % 64;
    memset(hdr + k, ' ', pad);
    hdr[(size_t)k + pad] = '\n';
    size_t hlen = (size_t)k + pad + 1;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8)};

    npy_out o = {pre, hdr, hlen, data, n};
    /* atomic: a failed write (full disk) leaves no truncated stats file that
     * would later load as garbage; errno names the cause */
    return vb_atomic_write(path, write_npy, &o);
}
