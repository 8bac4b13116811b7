/* pyfloat.h: a double as Python's repr() writes it (the shortest form that
 * reads back as the same double, ".0" on integers, "nan", "inf", exponent
 * form outside 1e-4 <= |x| < 1e16), so that lines vitbench prints in
 * benchy's and train.py's words read exactly as theirs. */
#ifndef VB_PYFLOAT_H
#define VB_PYFLOAT_H

#include <stddef.h>

void vb_pyfloat(char *buf, size_t n, double x);

#endif
