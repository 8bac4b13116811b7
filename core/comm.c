/* comm.c: the MPI communicator layer (comm.h).
 *
 * Errors are set to return (MPI_ERRORS_RETURN) so VB_MPI can report the call
 * and line instead of Open MPI's default abort with a generic message. Every
 * collective is timed into the communicator's profiler as a "comm" op with the
 * bytes this rank contributes.
 */
#include "core/comm.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"

/* MPI_COMM_WORLD is a macro for a global object; the handle points at a copy
 * so that later groups (tp/cp/dp) can use the same field for their comms. */
static MPI_Comm g_world_comm;
static bool g_we_initialized = false;

static MPI_Comm comm_of(const vb_comm *c) {
    return c && c->handle ? *(MPI_Comm *)c->handle : MPI_COMM_WORLD;
}

void vb_world_init(int *argc, char ***argv, vb_comm *world) {
    int initialized = 0;
    VB_MPI(MPI_Initialized(&initialized));
    if (!initialized) {
        /* FUNNELED: only the training thread calls MPI; loader threads never do. */
        int provided = 0;
        VB_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
        if (provided < MPI_THREAD_FUNNELED)
            vb_die_internal("MPI provides thread level %d, need MPI_THREAD_FUNNELED", provided);
        VB_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        g_world_comm = MPI_COMM_WORLD;
        g_we_initialized = true;
    }
    memset(world, 0, sizeof *world);
    VB_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &world->rank));
    VB_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world->size));
    g_world_comm = MPI_COMM_WORLD;
    world->handle = &g_world_comm;
    world->prof = NULL;
    vb_set_log_rank(world->rank);
}

void vb_world_finalize(void) {
    int initialized = 0, finalized = 0;
    VB_MPI(MPI_Initialized(&initialized));
    if (!initialized) return;
    VB_MPI(MPI_Finalized(&finalized));
    if (finalized || !g_we_initialized) return;
    VB_MPI(MPI_Finalize());
}

void vb_hostname(char *buf, size_t n) {
    if (n == 0) return;
    if (gethostname(buf, n) != 0) vb_snprintf(buf, n, "unknown");
    buf[n - 1] = '\0';
}

void vb_mpi_version(char *buf, size_t n) {
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    VB_MPI(MPI_Get_library_version(v, &len));
    /* Open MPI's string ends in a newline and can carry build details after a
     * comma; keep the first line, which names the implementation and version. */
    v[len < MPI_MAX_LIBRARY_VERSION_STRING ? len : MPI_MAX_LIBRARY_VERSION_STRING - 1] = '\0';
    char *nl = strpbrk(v, "\r\n");
    if (nl) *nl = '\0';
    char *comma = strchr(v, ',');
    if (comma) *comma = '\0';
    snprintf(buf, n, "%s", v);
}

void vb_barrier(const vb_comm *c) {
    vb_profiler *prof = c ? c->prof : NULL;
    int id = VB_OP_ID(prof, "barrier", VB_CAT_COMM);
    double t0 = vb_prof_begin(prof, id);
    VB_MPI(MPI_Barrier(comm_of(c)));
    vb_prof_end(prof, id, t0, 0);
}

/* MPI counts are int; chunk large buffers so n beyond 2^31 still works. */
static void allreduce_chunked(const vb_comm *c, void *buf, size_t n, size_t elem, MPI_Datatype type, MPI_Op op) {
    const size_t chunk = (size_t)1 << 30;
    char *p = buf;
    for (size_t done = 0; done < n; done += chunk) {
        size_t k = n - done < chunk ? n - done : chunk;
        VB_MPI(MPI_Allreduce(MPI_IN_PLACE, p + done * elem, (int)k, type, op, comm_of(c)));
    }
}

void vb_allreduce_sum_f32(const vb_comm *c, float *buf, size_t n) {
    vb_profiler *prof = c ? c->prof : NULL;
    int id = VB_OP_ID(prof, "allreduce", VB_CAT_COMM);
    double t0 = vb_prof_begin(prof, id);
    allreduce_chunked(c, buf, n, sizeof(float), MPI_FLOAT, MPI_SUM);
    vb_prof_end(prof, id, t0, n * sizeof(float));
}

void vb_allreduce_sum_f64(const vb_comm *c, double *buf, size_t n) {
    vb_profiler *prof = c ? c->prof : NULL;
    int id = VB_OP_ID(prof, "allreduce", VB_CAT_COMM);
    double t0 = vb_prof_begin(prof, id);
    allreduce_chunked(c, buf, n, sizeof(double), MPI_DOUBLE, MPI_SUM);
    vb_prof_end(prof, id, t0, n * sizeof(double));
}

void vb_allreduce_max_f64(const vb_comm *c, double *buf, size_t n) {
    vb_profiler *prof = c ? c->prof : NULL;
    int id = VB_OP_ID(prof, "allreduce", VB_CAT_COMM);
    double t0 = vb_prof_begin(prof, id);
    allreduce_chunked(c, buf, n, sizeof(double), MPI_DOUBLE, MPI_MAX);
    vb_prof_end(prof, id, t0, n * sizeof(double));
}

void vb_broadcast(const vb_comm *c, void *buf, size_t bytes, int root) {
    vb_profiler *prof = c ? c->prof : NULL;
    int id = VB_OP_ID(prof, "broadcast", VB_CAT_COMM);
    double t0 = vb_prof_begin(prof, id);
    const size_t chunk = (size_t)1 << 30;
    char *p = buf;
    for (size_t done = 0; done < bytes; done += chunk) {
        size_t k = bytes - done < chunk ? bytes - done : chunk;
        VB_MPI(MPI_Bcast(p + done, (int)k, MPI_BYTE, root, comm_of(c)));
    }
    vb_prof_end(prof, id, t0, bytes);
}

void vb_abort_all(const vb_comm *c, int code) {
    fflush(stdout);
    fflush(stderr);
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    if (initialized) MPI_Finalized(&finalized);
    int size = 1;
    if (initialized && !finalized) MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* A single process exits with the real code; with several, MPI_Abort takes
     * every rank down so none waits forever in a collective. */
    if (size > 1) MPI_Abort(comm_of(c), code);
    if (initialized && !finalized) MPI_Finalize();
    exit(code);
}
