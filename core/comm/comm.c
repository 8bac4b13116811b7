/* comm.c: the control plane of the communicator layer (comm.h), and the
 * profiling and totals every collective shares (comm_impl.h).
 *
 * Errors are set to return (MPI_ERRORS_RETURN) so VB_MPI can report the call
 * and line instead of Open MPI's default abort with a generic message. Every
 * collective is timed into the communicator's profiler as a "comm" op with
 * nccl-tests' byte convention (comm.h).
 *
 * Collectives on a size-1 communicator never reach MPI: they are a no-op or a
 * local copy, which keeps tp=1 / cp=1 / dp=1 layouts free of any overhead.
 */
#include "core/comm/comm.h"

#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/comm/comm_impl.h"
#include "core/util/common.h"

/* MPI_COMM_WORLD is a macro for a global object; the handle points at a copy
 * so that later groups (tp/cp/dp) can use the same field for their comms. */
static MPI_Comm g_world_comm;
static bool g_we_initialized = false;

/* Running totals for vb_comm_totals_get (training thread only: FUNNELED). */
static vb_comm_totals g_totals;

MPI_Comm vb_comm_mpi(const vb_comm *c) { return c && c->handle ? *(MPI_Comm *)c->handle : MPI_COMM_WORLD; }
static MPI_Comm comm_of(const vb_comm *c) { return vb_comm_mpi(c); }

bool vb_comm_trivial(const vb_comm *c) { return c && c->size <= 1; }
static bool trivial(const vb_comm *c) { return vb_comm_trivial(c); }

int vb_comm_size_of(const vb_comm *c) {
    int size = c ? c->size : 0;
    if (!c) VB_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    return size;
}

int vb_comm_rank_of(const vb_comm *c) {
    int rank = c ? c->rank : 0;
    if (!c) VB_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    return rank;
}

/* The op's profiler id: "<op>_<group>" when the communicator names its group
 * (allreduce_tp, allgather_cp, iallreduce_dp), so ops.csv and the timeline
 * tell tensor-, context- and data-parallel traffic apart. Looked up by name
 * (a short locked scan), only when a profiler is attached. */
static int comm_op_id(const vb_comm *c, const char *op) {
    if (!c || !c->prof) return 0;
    /* collectives run on the training thread only (MPI_THREAD_FUNNELED), so a
     * small unlocked cache keyed by the call site's literal and the group
     * spares the registry's locked scan on every tp allreduce and DDP bucket */
    static struct {
        const char *op;
        char group[8];
        int id;
    } cache[32];
    static int ncache = 0;
    for (int i = 0; i < ncache; i++)
        if (cache[i].op == op && strcmp(cache[i].group, c->group) == 0) return cache[i].id;
    char name[48];
    if (c->group[0])
        snprintf(name, sizeof name, "%s_%s", op, c->group);
    else
        snprintf(name, sizeof name, "%s", op);
    int id = vb_prof_op(name, VB_CAT_COMM);
    if (ncache < (int)(sizeof cache / sizeof cache[0])) {
        cache[ncache].op = op;
        snprintf(cache[ncache].group, sizeof cache[ncache].group, "%s", c->group);
        cache[ncache].id = id;
        ncache++;
    }
    return id;
}

vb_comm_timer vb_comm_timer_start(const vb_comm *c, const char *op) {
    vb_comm_timer t = {c ? c->prof : NULL, {0, -1}, 0.0};
    t.tok = vb_prof_begin(t.prof, comm_op_id(c, op));
    t.t0 = vb_now();
    return t;
}

void vb_comm_timer_stop(const vb_comm_timer *t, size_t bytes, bool blocking) {
    double dt = vb_now() - t->t0;
    if (blocking) g_totals.blocking_s += dt;
    g_totals.calls++;
    g_totals.bytes += (double)bytes;
    vb_prof_end(t->prof, t->tok, bytes);
}

void vb_comm_totals_add_blocking(double seconds) { g_totals.blocking_s += seconds; }

void vb_comm_totals_get(vb_comm_totals *out) {
    vb_comm_spans_resolve(&g_totals.blocking_s); /* stream-ordered collectives, timed by events */
    *out = g_totals;
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
    world->data = vb_comm_data_mpi();
    if (world->size > 1 && world->data->attach) world->data->attach(world);
}

void vb_world_finalize(void) {
    int initialized = 0, finalized = 0;
    VB_MPI(MPI_Initialized(&initialized));
    if (!initialized) return;
    VB_MPI(MPI_Finalized(&finalized));
    if (finalized || !g_we_initialized) return;
    VB_MPI(MPI_Finalize());
}

int vb_node_local_size(const vb_comm *world) {
    if (trivial(world)) return 1;
    MPI_Comm node = MPI_COMM_NULL;
    VB_MPI(MPI_Comm_split_type(comm_of(world), MPI_COMM_TYPE_SHARED, world->rank, MPI_INFO_NULL, &node));
    int n = 1;
    VB_MPI(MPI_Comm_size(node, &n));
    VB_MPI(MPI_Comm_free(&node));
    return n;
}

/* a non-negative integer from the environment, or -1 */
static int env_rank(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v) return -1;
    char *end = NULL;
    long x = strtol(v, &end, 10);
    return *end == '\0' && x >= 0 && x < INT_MAX ? (int)x : -1;
}

int vb_node_local_rank(const vb_comm *world) {
    if (world && !trivial(world)) {
        /* MPI's answer wins over any launcher variable: under MPICH or Intel
         * MPI's mpiexec inside a Slurm job, Hydra starts its per-node proxy
         * with srun, so every rank of a node inherits SLURM_LOCALID=0 */
        int local = 0;
        MPI_Comm node = MPI_COMM_NULL;
        VB_MPI(MPI_Comm_split_type(comm_of(world), MPI_COMM_TYPE_SHARED, world->rank, MPI_INFO_NULL, &node));
        VB_MPI(MPI_Comm_rank(node, &local));
        VB_MPI(MPI_Comm_free(&node));
        return local;
    }
    /* alone in its world (or without one): several single-rank processes a
     * launcher started side by side still spread over the node's GPUs; the
     * MPI launchers' own per-rank variables before Slurm's per-task one */
    const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        int v = env_rank(vars[i]);
        if (v >= 0) return v;
    }
    return 0;
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
    if (trivial(c)) return;
    vb_comm_timer t = vb_comm_timer_start(c, "barrier");
    VB_MPI(MPI_Barrier(comm_of(c)));
    vb_comm_timer_stop(&t, 0, true);
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

void vb_allreduce_sum_f64(const vb_comm *c, double *buf, size_t n) {
    if (trivial(c)) return;
    vb_comm_timer t = vb_comm_timer_start(c, "allreduce");
    allreduce_chunked(c, buf, n, sizeof(double), MPI_DOUBLE, MPI_SUM);
    vb_comm_timer_stop(&t, n * sizeof(double), true);
}

void vb_allreduce_max_f64(const vb_comm *c, double *buf, size_t n) {
    if (trivial(c)) return;
    vb_comm_timer t = vb_comm_timer_start(c, "allreduce");
    allreduce_chunked(c, buf, n, sizeof(double), MPI_DOUBLE, MPI_MAX);
    vb_comm_timer_stop(&t, n * sizeof(double), true);
}

void vb_broadcast(const vb_comm *c, void *buf, size_t bytes, int root) {
    if (trivial(c)) return;
    vb_comm_timer t = vb_comm_timer_start(c, "broadcast");
    const size_t chunk = (size_t)1 << 30;
    char *p = buf;
    for (size_t done = 0; done < bytes; done += chunk) {
        size_t k = bytes - done < chunk ? bytes - done : chunk;
        VB_MPI(MPI_Bcast(p + done, (int)k, MPI_BYTE, root, comm_of(c)));
    }
    vb_comm_timer_stop(&t, bytes, true);
}

void vb_gather_bytes(const vb_comm *c, const void *send, size_t bytes, void *recv, int root) {
    if (trivial(c)) {
        if (recv != send && bytes) memmove(recv, send, bytes);
        return;
    }
    int size = c ? c->size : 0;
    if (!c) VB_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    if (bytes > (size_t)INT_MAX)
        vb_die_internal("vb_gather_bytes: %zu bytes per rank exceeds MPI's int count", bytes);
    vb_comm_timer t = vb_comm_timer_start(c, "gather");
    VB_MPI(MPI_Gather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, root, comm_of(c)));
    vb_comm_timer_stop(&t, bytes * (size_t)size, true);
}

/* ---- process groups ---- */

void vb_comm_from_ranks(const vb_comm *parent, const int *ranks, int n, vb_comm *out) {
    memset(out, 0, sizeof *out);
    int me = parent ? parent->rank : 0;
    if (!parent) VB_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &me));
    /* my position in the list is my rank in the new comm; the smallest member
     * names the group (groups of one kind partition the parent, so no two
     * groups share it) */
    int key = -1, color = INT_MAX;
    for (int i = 0; i < n; i++) {
        if (ranks[i] == me) key = i;
        if (ranks[i] < color) color = ranks[i];
    }
    if (n < 1 || key < 0)
        vb_die_internal("vb_comm_from_ranks: rank %d is not in its own group list (%d members)", me, n);

    out->rank = key;
    out->size = n;
    out->prof = parent ? parent->prof : NULL;
    out->group[0] = '\0'; /* the caller names it */
    MPI_Comm *h = vb_malloc_check(sizeof *h);
    /* MPI_Comm_split is collective over the parent, so every rank calls it,
     * including those whose group is just themselves: they opt out with
     * MPI_UNDEFINED and use MPI_COMM_SELF, which no collective here reaches
     * because size-1 collectives short-circuit. */
    MPI_Comm nc = MPI_COMM_NULL;
    VB_MPI(MPI_Comm_split(comm_of(parent), n > 1 ? color : MPI_UNDEFINED, key, &nc));
    if (n > 1) {
        int got = 0, grank = 0;
        VB_MPI(MPI_Comm_size(nc, &got));
        VB_MPI(MPI_Comm_rank(nc, &grank));
        /* a mismatch means the ranks were handed inconsistent lists */
        if (got != n || grank != key)
            vb_die_internal("vb_comm_from_ranks: group of rank %d has %d members at position %d, expected %d at %d",
                            me, got, grank, n, key);
        VB_MPI(MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN));
        *h = nc;
    } else {
        *h = MPI_COMM_SELF;
    }
    out->handle = h;
    /* the group moves data the way its parent does */
    out->data = vb_comm_data_plane(parent);
    if (n > 1 && out->data->attach) out->data->attach(out);
}

#ifndef VB_HAVE_NCCL
const vb_comm_data_ops *vb_comm_data_nccl(void) { return NULL; }
#endif

const vb_comm_data_ops *vb_comm_data_by_name(const char *name) {
    if (!name) return NULL;
    if (strcmp(name, "mpi") == 0) return vb_comm_data_mpi();
    if (strcmp(name, "nccl") == 0) return vb_comm_data_nccl();
    return NULL;
}

const vb_comm_data_ops *vb_comm_data_plane(const vb_comm *c) {
    return c && c->data ? c->data : vb_comm_data_mpi();
}

void vb_comm_set_data_plane(vb_comm *c, const vb_comm_data_ops *plane) {
    if (!c || !plane) vb_die_internal("vb_comm_set_data_plane: no communicator or no plane");
    const vb_comm_data_ops *old = vb_comm_data_plane(c);
    if (old == plane && c->data) return;
    if (c->data && c->size > 1 && old->detach) old->detach(c);
    c->data = plane;
    c->data_impl = NULL;
    if (c->size > 1 && plane->attach) plane->attach(c);
}

void vb_comm_free(vb_comm *c) {
    if (!c || !c->handle) return;
    if (c->data && c->size > 1 && c->data->detach) c->data->detach(c);
    MPI_Comm *h = c->handle;
    if (h != &g_world_comm) {
        if (*h != MPI_COMM_SELF && *h != MPI_COMM_WORLD && *h != MPI_COMM_NULL) VB_MPI(MPI_Comm_free(h));
        free(h);
    }
    memset(c, 0, sizeof *c);
}

/* prefix sums of counts into displs; returns the total (dies past INT_MAX) */
static int displacements(const int *counts, int n, int *displs, const char *what) {
    long long total = 0;
    for (int r = 0; r < n; r++) {
        if (counts[r] < 0) vb_die_internal("%s: negative count %d for rank %d", what, counts[r], r);
        displs[r] = (int)total;
        total += counts[r];
        if (total > INT_MAX) vb_die_internal("%s: %lld elements exceed MPI's int displacements", what, total);
    }
    return (int)total;
}

char *vb_gatherv_bytes(const vb_comm *c, const void *send, size_t bytes, int root, size_t *total) {
    if (bytes > (size_t)INT_MAX)
        vb_die_internal("vb_gatherv_bytes: %zu bytes from one rank exceed MPI's int count", bytes);
    if (trivial(c)) {
        /* a copy, so the caller frees the result the same way for any size */
        char *out = vb_malloc_check(bytes + 1);
        if (bytes) memcpy(out, send, bytes);
        out[bytes] = '\0';
        if (total) *total = bytes;
        return out;
    }
    int size = c ? c->size : 0, rank = c ? c->rank : 0;
    if (!c) {
        VB_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
        VB_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    }
    const bool is_root = rank == root;
    int stack[2 * 64];
    int *counts = size <= 64 ? stack : vb_malloc_check(2 * (size_t)size * sizeof *counts);
    int *displs = counts + size;
    vb_comm_timer t = vb_comm_timer_start(c, "gatherv");
    /* root must know every count before it can size the buffer and place the
     * pieces: the lengths travel first, in the same timed collective */
    int mine = (int)bytes;
    VB_MPI(MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, root, comm_of(c)));
    char *out = NULL;
    size_t sum = bytes; /* non-root ranks count what they sent: they never learn the total */
    if (is_root) {
        sum = (size_t)displacements(counts, size, displs, "vb_gatherv_bytes");
        out = vb_malloc_check(sum + 1);
        out[sum] = '\0';
    }
    VB_MPI(MPI_Gatherv(send, mine, MPI_BYTE, out, counts, displs, MPI_BYTE, root, comm_of(c)));
    vb_comm_timer_stop(&t, sum, true);
    if (counts != stack) free(counts);
    if (is_root && total) *total = sum;
    return out;
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
