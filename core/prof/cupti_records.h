/* cupti_records.h: what vitbench reads from one CUPTI activity record.
 *
 * CUPTI hands back buffers of records whose layout depends on the kind and on
 * the CUPTI version: with CUPTI 13 (CUDA 13) a CONCURRENT_KERNEL (or KERNEL)
 * record is a CUpti_ActivityKernel10, a MEMCPY record a CUpti_ActivityMemcpy6,
 * a MEMSET record a CUpti_ActivityMemset4. vb_cupti_decode casts by kind and
 * copies the fields the summaries and the timeline use into one plain struct,
 * so the casts live in one place that a unit test can feed hand-built records
 * (this needs CUPTI's headers only, not libcupti or a GPU).
 *
 * Only where CUPTI's headers are (VB_HAVE_CUPTI).
 */
#ifndef VB_CUPTI_RECORDS_H
#define VB_CUPTI_RECORDS_H

#include <cupti_activity.h>
#include <stdint.h>

#include "core/prof/gpu_activity.h"

typedef struct {
    vb_gact_type type;
    /* the kernel's name as CUPTI gives it (mangled; it lives in the record's
     * buffer), or the operation's as nsys names it ("[CUDA memcpy
     * Host-to-Device]", "[CUDA memset]"): static strings */
    const char *name;
    uint32_t stream;
    uint64_t start_ns, end_ns; /* CUPTI's clock; both 0: CUPTI could not time it */
    double bytes;              /* copies and memsets; 0 for kernels */
} vb_cupti_rec;

/* Fills *out and returns 1 for a kernel, memcpy or memset record; returns 0
 * (out untouched) for any other kind. */
int vb_cupti_decode(const CUpti_Activity *rec, vb_cupti_rec *out);

#endif
