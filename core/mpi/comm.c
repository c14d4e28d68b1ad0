/* comm.c - comm.h on Open MPI: the only file of srgeo that includes mpi.h,
 * built alone into build/srgeo_mpi.so (see comm.h for why). */
#include "mpi/comm.h"

#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static __thread char errbuf[768];
static int my_rank, world_size, thread_level;
static MPI_Comm svc = MPI_COMM_NULL; /* the hand-out's own communicator: its tags never meet a collective's */

static const char *comm_error(void) { return errbuf; }

static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
    return -1;
}

/* rc of an MPI call named `call` (with its own error handler set to return). */
static int check(int rc, const char *call)
{
    if (rc == MPI_SUCCESS)
        return 0;
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, s, &len);
    return fail("mpi: %s failed on rank %d of %d: %.*s", call, my_rank, world_size, len, s);
}

static int comm_init(int *rank, int *size, int *local_size)
{
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited && check(MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &thread_level), "MPI_Init_thread"))
        return -1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    MPI_Comm node;
    if (check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
              "MPI_Comm_split_type"))
        return -1;
    MPI_Comm_size(node, local_size);
    MPI_Comm_free(&node);
    if (check(MPI_Comm_dup(MPI_COMM_WORLD, &svc), "MPI_Comm_dup"))
        return -1;
    MPI_Comm_set_errhandler(svc, MPI_ERRORS_RETURN);
    *rank = my_rank;
    *size = world_size;
    return 0;
}

static int serving; /* the service thread runs */

static void comm_finish(int status)
{
    int inited = 0, done = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&done);
    if (!inited || done)
        return;
    if (status == 0 && !serving)
        MPI_Finalize();
    else
        MPI_Abort(MPI_COMM_WORLD, status ? status : 1);
}

static int comm_barrier(void) { return check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

/* MPI counts are int: large buffers go in pieces. */
#define PIECE (1 << 28)

static int comm_bcast(void *buf, int64_t bytes, int root)
{
    for (int64_t at = 0; at < bytes; at += PIECE) {
        int n = (int)(bytes - at < PIECE ? bytes - at : PIECE);
        if (check(MPI_Bcast((char *)buf + at, n, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast"))
            return -1;
    }
    return 0;
}

static MPI_Request *reqs; /* the started nonblocking reductions */
static int nreqs, capreqs;

/* Blocking, or nonblocking with the requests appended to reqs. */
static int reduce(void *buf, int64_t n, sr_comm_type t, sr_comm_op op, int nonblocking)
{
    MPI_Datatype dt = t == SR_COMM_F64 ? MPI_DOUBLE : t == SR_COMM_F32 ? MPI_FLOAT : MPI_INT64_T;
    size_t es = t == SR_COMM_F32 ? 4 : 8;
    MPI_Op mop = op == SR_COMM_SUM ? MPI_SUM : op == SR_COMM_MAX ? MPI_MAX : MPI_MIN;
    for (int64_t at = 0; at < n; at += PIECE) {
        int k = (int)(n - at < PIECE ? n - at : PIECE);
        void *p = (char *)buf + (size_t)at * es;
        if (!nonblocking) {
            if (check(MPI_Allreduce(MPI_IN_PLACE, p, k, dt, mop, MPI_COMM_WORLD), "MPI_Allreduce"))
                return -1;
            continue;
        }
        if (nreqs == capreqs) {
            int cap = capreqs ? 2 * capreqs : 64;
            MPI_Request *r = realloc(reqs, sizeof *r * (size_t)cap);
            if (!r)
                return fail("mpi: out of memory for %d pending reductions", cap);
            reqs = r;
            capreqs = cap;
        }
        if (check(MPI_Iallreduce(MPI_IN_PLACE, p, k, dt, mop, MPI_COMM_WORLD, &reqs[nreqs]), "MPI_Iallreduce"))
            return -1;
        nreqs++;
    }
    return 0;
}

static int comm_allreduce(void *buf, int64_t n, sr_comm_type t, sr_comm_op op) { return reduce(buf, n, t, op, 0); }
static int comm_iallreduce(void *buf, int64_t n, sr_comm_type t, sr_comm_op op) { return reduce(buf, n, t, op, 1); }

static int comm_itest(void)
{
    int done = 0;
    if (nreqs && check(MPI_Testall(nreqs, reqs, &done, MPI_STATUSES_IGNORE), "MPI_Testall"))
        return -1;
    if (done)
        nreqs = 0;
    return 0;
}

static int comm_iwait(void)
{
    int n = nreqs;
    nreqs = 0;
    return n ? check(MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE), "MPI_Waitall") : 0;
}

static int comm_gather(const void *bytes, int64_t len, int root, void **out, int64_t *lens)
{
    *out = NULL;
    int64_t mine = len;
    if (check(MPI_Gather(&mine, 1, MPI_INT64_T, lens, 1, MPI_INT64_T, root, MPI_COMM_WORLD), "MPI_Gather"))
        return -1;
    int *counts = NULL, *displs = NULL;
    int bad = 0;
    if (my_rank == root) {
        int64_t total = 0;
        for (int r = 0; r < world_size; r++)
            total += lens[r];
        counts = malloc(sizeof *counts * (size_t)world_size);
        displs = malloc(sizeof *displs * (size_t)world_size);
        *out = malloc(total > 0 ? (size_t)total : 1);
        if (total > INT_MAX)
            bad = fail("mpi.gather: %lld bytes from %d ranks; at most 2 GiB per gather", (long long)total,
                       world_size);
        else if (!counts || !displs || !*out)
            bad = fail("mpi.gather: out of memory for %lld bytes", (long long)total);
        for (int r = 0, at = 0; !bad && r < world_size; r++) {
            counts[r] = (int)lens[r];
            displs[r] = at;
            at += (int)lens[r];
        }
    }
    /* Every rank must enter the Gatherv (or none): rank 0 says whether it can. */
    if (check(MPI_Bcast(&bad, 1, MPI_INT, root, MPI_COMM_WORLD), "MPI_Bcast"))
        bad = -1;
    int rc = bad ? (my_rank == root ? -1 : fail("mpi.gather: rank %d cannot receive the values", root))
                 : check(MPI_Gatherv(bytes, (int)len, MPI_BYTE, *out, counts, displs, MPI_BYTE, root,
                                     MPI_COMM_WORLD),
                         "MPI_Gatherv");
    free(counts);
    free(displs);
    if (rc) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

/* --- hand-out -------------------------------------------------------- */

enum { TAG_ASK = 1, TAG_ITEM = 2, TAG_RESULT = 3 };

typedef struct result {
    int64_t item, len;
    void *bytes;
    struct result *next;
} result;

static pthread_t server;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t arrived = PTHREAD_COND_INITIALIZER;
static int64_t next_item, total_items;
static int told_done, stopping;
static result *head, *tail;
static char server_error[768];

static int comm_dynamic(void) { return world_size == 1 || thread_level >= MPI_THREAD_MULTIPLE; }

/* Caller holds mu. */
static int64_t take_item(void) { return next_item < total_items ? next_item++ : -1; }

static void push(result *r)
{
    r->next = NULL;
    if (tail)
        tail->next = r;
    else
        head = r;
    tail = r;
    pthread_cond_signal(&arrived);
}

/* One message from another rank: a request for work or a result. */
static int handle(const MPI_Status *st)
{
    int src = st->MPI_SOURCE;
    if (st->MPI_TAG == TAG_ASK) {
        if (check(MPI_Recv(NULL, 0, MPI_BYTE, src, TAG_ASK, svc, MPI_STATUS_IGNORE), "MPI_Recv"))
            return -1;
        pthread_mutex_lock(&mu);
        int64_t item = take_item();
        if (item < 0) {
            told_done++;
            pthread_cond_signal(&arrived); /* serve_take may be waiting for the last result */
        }
        pthread_mutex_unlock(&mu);
        return check(MPI_Send(&item, 1, MPI_INT64_T, src, TAG_ITEM, svc), "MPI_Send");
    }
    int count = 0;
    MPI_Get_count(st, MPI_BYTE, &count);
    result *r = malloc(sizeof *r);
    char *buf = malloc(count > 0 ? (size_t)count : 1);
    if (!r || !buf || count < 8) {
        free(r);
        free(buf);
        return fail("mpi: a result of %d bytes from rank %d cannot be received", count, src);
    }
    if (check(MPI_Recv(buf, count, MPI_BYTE, src, TAG_RESULT, svc, MPI_STATUS_IGNORE), "MPI_Recv")) {
        free(r);
        free(buf);
        return -1;
    }
    memcpy(&r->item, buf, 8);
    r->len = count - 8;
    memmove(buf, buf + 8, (size_t)r->len);
    r->bytes = buf;
    pthread_mutex_lock(&mu);
    push(r);
    pthread_mutex_unlock(&mu);
    return 0;
}

/* Rank 0's service thread: answers until serve_end and every other rank
 * has been told there is no more work.  Idle, it sleeps 20 µs growing to
 * 1 ms between polls (a few µs each), so it costs the computing thread
 * nothing measurable. */
static void *serve(void *arg)
{
    (void)arg;
    long nap = 20000;
    for (;;) {
        pthread_mutex_lock(&mu);
        int done = stopping && told_done == world_size - 1;
        pthread_mutex_unlock(&mu);
        if (done)
            break;
        int flag = 0;
        MPI_Status st;
        if (check(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, svc, &flag, &st), "MPI_Iprobe") ||
            (flag && handle(&st))) {
            pthread_mutex_lock(&mu);
            snprintf(server_error, sizeof server_error, "%s", errbuf);
            pthread_cond_signal(&arrived);
            pthread_mutex_unlock(&mu);
            break;
        }
        if (flag) {
            nap = 20000;
            continue;
        }
        struct timespec ts = {0, nap};
        nanosleep(&ts, NULL);
        if (nap < 1000000)
            nap *= 2;
    }
    return NULL;
}

static int comm_serve_begin(int64_t next, int64_t total)
{
    if (serving)
        return fail("mpi: a hand-out is already running");
    next_item = next;
    total_items = total;
    told_done = 0;
    stopping = 0;
    server_error[0] = 0;
    if (my_rank == 0 && world_size > 1 && comm_dynamic()) {
        if (pthread_create(&server, NULL, serve, NULL))
            return fail("mpi: cannot start the hand-out thread");
        serving = 1;
    }
    return 0;
}

static int comm_serve_next(int64_t *item)
{
    if (my_rank == 0) {
        pthread_mutex_lock(&mu);
        *item = take_item();
        pthread_mutex_unlock(&mu);
        return 0;
    }
    if (!comm_dynamic()) {
        *item = -1;
        return 0;
    }
    if (check(MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_ASK, svc), "MPI_Send"))
        return -1;
    return check(MPI_Recv(item, 1, MPI_INT64_T, 0, TAG_ITEM, svc, MPI_STATUS_IGNORE), "MPI_Recv");
}

static int comm_serve_put(int64_t item, const void *bytes, int64_t len)
{
    if (len < 0 || len > INT_MAX - 8)
        return fail("mpi: the result of item %lld is %lld bytes; at most 2 GiB", (long long)item + 1,
                    (long long)len);
    if (my_rank == 0) {
        result *r = malloc(sizeof *r);
        void *b = malloc(len > 0 ? (size_t)len : 1);
        if (!r || !b) {
            free(r);
            free(b);
            return fail("mpi: out of memory keeping a result of %lld bytes", (long long)len);
        }
        memcpy(b, bytes, (size_t)len);
        r->item = item;
        r->len = len;
        r->bytes = b;
        pthread_mutex_lock(&mu);
        push(r);
        pthread_mutex_unlock(&mu);
        return 0;
    }
    char *buf = malloc((size_t)len + 8);
    if (!buf)
        return fail("mpi: out of memory sending a result of %lld bytes", (long long)len);
    memcpy(buf, &item, 8);
    memcpy(buf + 8, bytes, (size_t)len);
    int rc = check(MPI_Send(buf, (int)len + 8, MPI_BYTE, 0, TAG_RESULT, svc), "MPI_Send");
    free(buf);
    return rc;
}

static int comm_serve_take(int wait, int64_t *item, void **bytes, int64_t *len)
{
    if (my_rank != 0)
        return fail("mpi: only rank 0 takes results");
    for (;;) {
        pthread_mutex_lock(&mu);
        while (wait && serving && !head && !server_error[0] && told_done < world_size - 1)
            pthread_cond_wait(&arrived, &mu);
        result *r = head;
        if (r) {
            head = r->next;
            if (!head)
                tail = NULL;
        }
        int bad = server_error[0] != 0;
        pthread_mutex_unlock(&mu);
        if (r) {
            *item = r->item;
            *bytes = r->bytes;
            *len = r->len;
            free(r);
            return 1;
        }
        if (bad)
            return fail("%s", server_error);
        /* Nothing queued and every other rank told there is no more work:
         * its results came before its last request (MPI keeps a sender's
         * order), so none is on its way. */
        if (serving || world_size == 1)
            return 0;
        /* No service thread (no MPI_THREAD_MULTIPLE): receive here. */
        int flag = 1;
        MPI_Status st;
        if (wait ? check(MPI_Probe(MPI_ANY_SOURCE, TAG_RESULT, svc, &st), "MPI_Probe")
                 : check(MPI_Iprobe(MPI_ANY_SOURCE, TAG_RESULT, svc, &flag, &st), "MPI_Iprobe"))
            return -1;
        if (!flag)
            return 0;
        if (handle(&st))
            return -1;
    }
}

static int comm_serve_end(void)
{
    if (!serving)
        return 0;
    pthread_mutex_lock(&mu);
    stopping = 1;
    pthread_mutex_unlock(&mu);
    pthread_join(server, NULL);
    serving = 0;
    while (head) {
        result *r = head;
        head = r->next;
        free(r->bytes);
        free(r);
    }
    tail = NULL;
    return server_error[0] ? fail("%s", server_error) : 0;
}

static const sr_comm_api api = {
    .version = SR_COMM_API_VERSION,
    .init = comm_init,
    .finish = comm_finish,
    .barrier = comm_barrier,
    .bcast = comm_bcast,
    .allreduce = comm_allreduce,
    .iallreduce = comm_iallreduce,
    .itest = comm_itest,
    .iwait = comm_iwait,
    .gather = comm_gather,
    .dynamic = comm_dynamic,
    .serve_begin = comm_serve_begin,
    .serve_next = comm_serve_next,
    .serve_put = comm_serve_put,
    .serve_take = comm_serve_take,
    .serve_end = comm_serve_end,
    .error = comm_error,
};

const sr_comm_api *sr_comm_api_get(void) { return &api; }
