/* pyfloat.c: Python's repr() of a float (pyfloat.h). */
#include "core/util/pyfloat.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/util/common.h"

void vb_pyfloat(char *buf, size_t n, double x) {
    if (isnan(x)) {
        vb_snprintf(buf, n, "nan");
        return;
    }
    if (isinf(x)) {
        vb_snprintf(buf, n, x > 0 ? "inf" : "-inf");
        return;
    }
    /* shortest mantissa that reads back as the same double: what repr() uses */
    char e[64];
    for (int p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, x);
        if (strtod(e, NULL) == x) break;
    }
    const char *s = e;
    bool neg = false;
    if (*s == '-') {
        neg = true;
        s++;
    }
    char digits[32];
    int nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9') digits[nd++] = *s;
    digits[nd] = '\0';
    int exp10 = atoi(s + 1);
    while (nd > 1 && digits[nd - 1] == '0') digits[--nd] = '\0';

    char out[96];
    int k = 0;
    if (neg) out[k++] = '-';
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 >= 0) {
            for (int i = 0; i <= exp10; i++) out[k++] = i < nd ? digits[i] : '0';
            out[k++] = '.';
            if (nd > exp10 + 1)
                for (int i = exp10 + 1; i < nd; i++) out[k++] = digits[i];
            else
                out[k++] = '0';
        } else {
            out[k++] = '0';
            out[k++] = '.';
            for (int i = 0; i < -exp10 - 1; i++) out[k++] = '0';
            for (int i = 0; i < nd; i++) out[k++] = digits[i];
        }
        out[k] = '\0';
    } else {
        out[k++] = digits[0];
        if (nd > 1) {
            out[k++] = '.';
            for (int i = 1; i < nd; i++) out[k++] = digits[i];
        }
        snprintf(out + k, sizeof out - (size_t)k, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    }
    vb_snprintf(buf, n, "%s", out);
}
