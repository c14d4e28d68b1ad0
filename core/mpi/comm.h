/* comm.h - srgeo's one seam to MPI: a table of plain-C functions over
 * byte buffers and numbers, implemented by comm.c on Open MPI.
 *
 * comm.c is the only file that includes <mpi.h>.  It is built alone into
 * build/srgeo_mpi.so, linked with libmpi; srgeo (the shell and srgeo.so)
 * does not link it: core/lua/mpi.c dlopens it, RTLD_GLOBAL so that Open
 * MPI's own plugins resolve against libmpi, and only when the process was
 * launched by mpirun.  A plain `srgeo script.lua` never loads libmpi.
 *
 * Every function returns 0 or -1; on -1, error() gives the message (MPI's
 * error string, naming the call).  All but the hand-out functions are
 * collectives: every rank calls them, in the same order.
 *
 * Work hand-out.  serve_begin(next, total) starts a hand-out of the items
 * [next, total) (0-based): serve_next gives each caller the next one (-1
 * when none are left), so ranks that finish early take more; serve_put
 * deposits an item's result (any bytes) with rank 0, which takes them with
 * serve_take in arrival order, until all `count` results of the map (the
 * caller knows how many) are taken; serve_end closes it.  Rank 0 answers
 * requests from a service thread (MPI_THREAD_MULTIPLE) that sleeps between
 * polls, so a rank asking for work never waits for rank 0 to finish an
 * item, whatever the interconnect (one-sided MPI_Fetch_and_op does, over
 * TCP: measured 2 s while rank 0 computed for 2 s).  Without
 * MPI_THREAD_MULTIPLE dynamic() is 0 and serve_next always gives -1: the
 * caller hands out every item statically. */
#ifndef SR_COMM_H
#define SR_COMM_H

#include <stdint.h>

#define SR_COMM_API_VERSION 2

typedef enum { SR_COMM_SUM = 0, SR_COMM_MAX = 1, SR_COMM_MIN = 2 } sr_comm_op;
typedef enum { SR_COMM_F64 = 0, SR_COMM_F32 = 1, SR_COMM_I64 = 2 } sr_comm_type;

typedef struct sr_comm_api {
    int version; /* SR_COMM_API_VERSION */
    /* MPI_Init_thread; the rank, the world size and the ranks on this node. */
    int (*init)(int *rank, int *size, int *local_size);
    /* At exit: status 0 finalizes, anything else aborts the whole job with
     * that code (the other ranks may be waiting in a collective for us). */
    void (*finish)(int status);
    int (*barrier)(void);
    int (*bcast)(void *buf, int64_t bytes, int root);
    /* buf (n values of type t) is replaced by the reduction over ranks;
     * every rank receives the same bits. */
    int (*allreduce)(void *buf, int64_t n, sr_comm_type t, sr_comm_op op);
    /* The same, nonblocking (MPI_Iallreduce): buf must stay untouched until
     * iwait returns.  itest advances the started reductions (Open MPI has
     * no progress thread: they move only inside MPI calls); iwait
     * completes them all. */
    int (*iallreduce)(void *buf, int64_t n, sr_comm_type t, sr_comm_op op);
    int (*itest)(void);
    int (*iwait)(void);
    /* Rank `root` receives every rank's bytes (malloc'ed *out, lens[size]
     * in rank order; free(*out) after); elsewhere *out = NULL. */
    int (*gather)(const void *bytes, int64_t len, int root, void **out, int64_t *lens);
    int (*dynamic)(void);
    int (*serve_begin)(int64_t next, int64_t total);
    int (*serve_next)(int64_t *item);
    int (*serve_put)(int64_t item, const void *bytes, int64_t len);
    /* rank 0: 1 and the next result (*bytes malloc'ed, free after), or 0
     * when none has arrived and !wait; with wait it waits for one, and
     * gives 0 only once no other rank can send one. */
    int (*serve_take)(int wait, int64_t *item, void **bytes, int64_t *len);
    int (*serve_end)(void);
    const char *(*error)(void);
} sr_comm_api;

/* The table (the one symbol core/lua/mpi.c looks up). */
const sr_comm_api *sr_comm_api_get(void);

#endif
