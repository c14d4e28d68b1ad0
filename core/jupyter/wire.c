/* wire.c - Jupyter's wire protocol over libzmq (wire.h). */
#include "jupyter/wire.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <cJSON.h>
#include <zmq.h>

#include "base/error.h"
#include "base/sha256.h"

#define DELIM "<IDS|MSG>"
#define LINGER_MS 2000 /* how long closing waits for the last replies to leave */

struct sr_wire {
    void *ctx;
    void *sock[SR_WIRE_CHANNELS]; /* control: owned by the control thread */
    void *hb;                     /* owned by the heartbeat thread */
    void *pair_main, *pair_ctl;   /* main <-> control thread */
    char *key, *session;
    void (*on_interrupt)(void);
    pthread_t hb_thread, ctl_thread;
    int hb_started, ctl_started;
    atomic_long dropped;
    long ctl_count; /* the control thread's reply counter (its msg_ids) */
};

/* ------------------------------------------------------------------------
 * Frames
 * ---------------------------------------------------------------------- */

typedef struct {
    int n, cap;
    char **data;
    size_t *len;
} frames;

static void frames_free(frames *f)
{
    for (int i = 0; i < f->n; i++)
        free(f->data[i]);
    free(f->data);
    free(f->len);
    memset(f, 0, sizeof *f);
}

static int frames_add(frames *f, const void *p, size_t n)
{
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 8;
        char **d = realloc(f->data, cap * sizeof *d);
        if (!d)
            return -1;
        f->data = d;
        size_t *l = realloc(f->len, cap * sizeof *l);
        if (!l)
            return -1;
        f->len = l;
        f->cap = cap;
    }
    char *c = malloc(n + 1); /* NUL-terminated: JSON frames are read as strings */
    if (!c)
        return -1;
    if (n)
        memcpy(c, p, n);
    c[n] = '\0';
    f->data[f->n] = c;
    f->len[f->n++] = n;
    return 0;
}

/* A whole multipart message: 0, or -1 with errno (EINTR, ETERM, EAGAIN). */
static int recv_frames(void *sock, frames *f, int flags)
{
    memset(f, 0, sizeof *f);
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, flags) < 0) {
            int e = errno;
            zmq_msg_close(&m);
            if (f->n > 0 && e == EINTR)
                continue; /* the rest of a message is already here */
            frames_free(f);
            errno = e;
            return -1;
        }
        int more = zmq_msg_more(&m);
        int r = frames_add(f, zmq_msg_data(&m), zmq_msg_size(&m));
        zmq_msg_close(&m);
        if (r < 0) {
            frames_free(f);
            errno = ENOMEM;
            return -1;
        }
        if (!more)
            return 0;
        flags = 0;
    }
}

static int send_parts(void *sock, const void *const *p, const size_t *n, int count)
{
    for (int i = 0; i < count; i++) {
        int r;
        do
            r = zmq_send(sock, p[i], n[i], i + 1 < count ? ZMQ_SNDMORE : 0);
        while (r < 0 && errno == EINTR);
        if (r < 0)
            return sr_fail("kernel: sending a message failed: %s", zmq_strerror(errno));
    }
    return 0;
}

/* The signature of header, parent, metadata, content (hex; "" without a key). */
static void sign(const sr_wire *w, const char *const *json, const size_t *lens, char hex[2 * SR_SHA256_LEN + 1])
{
    if (!w->key[0]) {
        hex[0] = '\0';
        return;
    }
    uint8_t mac[SR_SHA256_LEN];
    sr_hmac_sha256(w->key, strlen(w->key), (const void *const *)json, lens, 4, mac);
    sr_hex(mac, sizeof mac, hex);
}

static int send_signed(sr_wire *w, void *sock, const char *const *ids, const size_t *idlens, int nids,
                       const char *header, const char *parent, const char *metadata, const char *content)
{
    const char *json[4] = {header, parent, metadata, content};
    size_t lens[4];
    for (int i = 0; i < 4; i++)
        lens[i] = strlen(json[i]);
    char hex[2 * SR_SHA256_LEN + 1];
    sign(w, json, lens, hex);
    int count = nids + 6;
    const void *p[count];
    size_t n[count];
    for (int i = 0; i < nids; i++) {
        p[i] = ids[i];
        n[i] = idlens[i];
    }
    p[nids] = DELIM;
    n[nids] = strlen(DELIM);
    p[nids + 1] = hex;
    n[nids + 1] = strlen(hex);
    for (int i = 0; i < 4; i++) {
        p[nids + 2 + i] = json[i];
        n[nids + 2 + i] = lens[i];
    }
    return send_parts(sock, p, n, count);
}

/* The index of the delimiter of a well-formed, correctly signed message,
 * or -1 (a line on stderr says why it was dropped). */
static int check(sr_wire *w, const frames *f, const char *channel)
{
    int d = -1;
    for (int i = 0; i < f->n; i++)
        if (f->len[i] == strlen(DELIM) && memcmp(f->data[i], DELIM, f->len[i]) == 0) {
            d = i;
            break;
        }
    if (d < 0 || f->n < d + 6) {
        fprintf(stderr, "srgeo kernel: dropped a malformed message on %s (%d frames, no %s)\n", channel, f->n,
                d < 0 ? "delimiter" : "content");
        return -1;
    }
    if (w->key[0]) {
        char hex[2 * SR_SHA256_LEN + 1];
        sign(w, (const char *const *)&f->data[d + 2], &f->len[d + 2], hex);
        if (f->len[d + 1] != strlen(hex) || !sr_equal_const_time(hex, f->data[d + 1], strlen(hex))) {
            atomic_fetch_add(&w->dropped, 1);
            fprintf(stderr, "srgeo kernel: dropped a message on %s with a bad signature\n", channel);
            return -1;
        }
    }
    return d;
}

/* ------------------------------------------------------------------------
 * Threads
 * ---------------------------------------------------------------------- */

/* SIGINT is the main thread's (the interrupt of a running cell). */
static void block_sigint(void)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
}

static void *hb_main(void *arg)
{
    sr_wire *w = arg;
    block_sigint();
    for (;;) {
        frames f;
        if (recv_frames(w->hb, &f, 0) < 0) {
            if (errno == EINTR)
                continue;
            break; /* ETERM: closing */
        }
        send_parts(w->hb, (const void *const *)f.data, f.len, f.n);
        frames_free(&f);
    }
    zmq_close(w->hb);
    return NULL;
}

static char *msg_type_of(const char *header)
{
    cJSON *h = cJSON_Parse(header);
    const cJSON *t = h ? cJSON_GetObjectItemCaseSensitive(h, "msg_type") : NULL;
    char *s = cJSON_IsString(t) ? strdup(t->valuestring) : NULL;
    cJSON_Delete(h);
    return s;
}

/* interrupt_request: answered here, since the main thread may be busy. */
static void interrupt_reply(sr_wire *w, const frames *f, int d)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char date[40], header[512];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(header, sizeof header,
             "{\"msg_id\":\"%s_ctl_%ld\",\"session\":\"%s\",\"username\":\"kernel\",\"date\":\"%s.%06ldZ\","
             "\"msg_type\":\"interrupt_reply\",\"version\":\"5.3\"}",
             w->session, ++w->ctl_count, w->session, date, (long)tv.tv_usec);
    send_signed(w, w->sock[SR_WIRE_CONTROL], (const char *const *)f->data, f->len, d, header, f->data[d + 2], "{}",
                "{\"status\":\"ok\"}");
}

static void *ctl_main(void *arg)
{
    sr_wire *w = arg;
    block_sigint();
    zmq_pollitem_t items[2] = {{w->sock[SR_WIRE_CONTROL], 0, ZMQ_POLLIN, 0}, {w->pair_ctl, 0, ZMQ_POLLIN, 0}};
    for (;;) {
        if (zmq_poll(items, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        frames f;
        if ((items[1].revents & ZMQ_POLLIN) && recv_frames(w->pair_ctl, &f, 0) == 0) {
            int stop = f.n == 1 && f.len[0] == 0; /* sr_wire_close's empty frame */
            if (!stop)
                send_parts(w->sock[SR_WIRE_CONTROL], (const void *const *)f.data, f.len, f.n);
            frames_free(&f);
            if (stop)
                break;
        }
        if ((items[0].revents & ZMQ_POLLIN) && recv_frames(w->sock[SR_WIRE_CONTROL], &f, 0) == 0) {
            int d = check(w, &f, "control");
            char *type = d >= 0 ? msg_type_of(f.data[d + 2]) : NULL;
            if (type && strcmp(type, "interrupt_request") == 0) {
                if (w->on_interrupt)
                    w->on_interrupt();
                interrupt_reply(w, &f, d);
            } else if (d >= 0) {
                send_parts(w->pair_ctl, (const void *const *)f.data, f.len, f.n);
            }
            free(type);
            frames_free(&f);
        }
    }
    zmq_close(w->sock[SR_WIRE_CONTROL]);
    zmq_close(w->pair_ctl);
    return NULL;
}

/* ------------------------------------------------------------------------
 * Open, receive, send, close
 * ---------------------------------------------------------------------- */

static void *bind_socket(sr_wire *w, int type, const sr_wire_config *c, int port, const char *what)
{
    char ep[512];
    if (strcmp(c->transport, "ipc") == 0)
        snprintf(ep, sizeof ep, "ipc://%s-%d", c->ip, port);
    else
        snprintf(ep, sizeof ep, "%s://%s:%d", c->transport, c->ip, port);
    void *s = zmq_socket(w->ctx, type);
    int linger = LINGER_MS;
    if (!s || zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger) != 0 || zmq_bind(s, ep) != 0) {
        sr_fail("kernel: cannot bind the %s socket to %s: %s", what, ep, zmq_strerror(errno));
        if (s)
            zmq_close(s);
        return NULL;
    }
    return s;
}

sr_wire *sr_wire_open(const sr_wire_config *c, void (*on_interrupt)(void))
{
    if (!c->transport || (strcmp(c->transport, "tcp") != 0 && strcmp(c->transport, "ipc") != 0)) {
        sr_fail("kernel: transport must be tcp or ipc, got '%s'", c->transport ? c->transport : "(none)");
        return NULL;
    }
    if (c->key && c->key[0] && (!c->scheme || strcmp(c->scheme, "hmac-sha256") != 0)) {
        sr_fail("kernel: signature_scheme must be hmac-sha256, got '%s'", c->scheme ? c->scheme : "(none)");
        return NULL;
    }
    sr_wire *w = calloc(1, sizeof *w);
    if (!w) {
        sr_fail("kernel: out of memory");
        return NULL;
    }
    w->key = strdup(c->key ? c->key : "");
    w->session = strdup(c->session ? c->session : "kernel");
    w->on_interrupt = on_interrupt;
    w->ctx = zmq_ctx_new();
    static const int types[SR_WIRE_CHANNELS] = {ZMQ_ROUTER, ZMQ_ROUTER, ZMQ_PUB, ZMQ_ROUTER};
    static const char *const names[SR_WIRE_CHANNELS] = {"shell", "control", "iopub", "stdin"};
    char inproc[64];
    snprintf(inproc, sizeof inproc, "inproc://srgeo-control-%p", (void *)w);
    int ok = w->key && w->session && w->ctx;
    for (int i = 0; ok && i < SR_WIRE_CHANNELS; i++)
        ok = (w->sock[i] = bind_socket(w, types[i], c, c->ports[i], names[i])) != NULL;
    ok = ok && (w->hb = bind_socket(w, ZMQ_REP, c, c->hb_port, "heartbeat")) != NULL;
    if (ok) {
        w->pair_main = zmq_socket(w->ctx, ZMQ_PAIR);
        w->pair_ctl = zmq_socket(w->ctx, ZMQ_PAIR);
        ok = w->pair_main && w->pair_ctl && zmq_bind(w->pair_main, inproc) == 0 &&
             zmq_connect(w->pair_ctl, inproc) == 0;
        if (!ok)
            sr_fail("kernel: cannot open the control pair: %s", zmq_strerror(errno));
    }
    ok = ok && (w->hb_started = pthread_create(&w->hb_thread, NULL, hb_main, w) == 0);
    ok = ok && (w->ctl_started = pthread_create(&w->ctl_thread, NULL, ctl_main, w) == 0);
    if (!ok) {
        if (!w->ctx || !w->key || !w->session)
            sr_fail("kernel: out of memory");
        sr_wire_close(w);
        return NULL;
    }
    return w;
}

void sr_wire_msg_free(sr_wire_msg *m)
{
    for (int i = 0; i < m->nids; i++)
        free(m->ids[i]);
    free(m->ids);
    free(m->idlens);
    free(m->header);
    free(m->parent);
    free(m->metadata);
    free(m->content);
    memset(m, 0, sizeof *m);
}

/* Move the frames of a checked message into m (the frames are consumed). */
static void take(frames *f, int d, int channel, sr_wire_msg *m)
{
    m->channel = channel;
    m->nids = d;
    m->ids = malloc((d ? d : 1) * sizeof *m->ids);
    m->idlens = malloc((d ? d : 1) * sizeof *m->idlens);
    for (int i = 0; i < d; i++) {
        m->ids[i] = f->data[i];
        m->idlens[i] = f->len[i];
        f->data[i] = NULL;
    }
    char **json[4] = {&m->header, &m->parent, &m->metadata, &m->content};
    for (int i = 0; i < 4; i++) {
        *json[i] = f->data[d + 2 + i];
        f->data[d + 2 + i] = NULL;
    }
    frames_free(f);
}

int sr_wire_recv(sr_wire *w, int timeout_ms, sr_wire_msg *m)
{
    memset(m, 0, sizeof *m);
    zmq_pollitem_t items[2] = {{w->pair_main, 0, ZMQ_POLLIN, 0}, {w->sock[SR_WIRE_SHELL], 0, ZMQ_POLLIN, 0}};
    int r = zmq_poll(items, 2, timeout_ms);
    if (r < 0)
        return errno == EINTR ? 0 : sr_fail("kernel: poll failed: %s", zmq_strerror(errno));
    for (int i = 0; i < 2; i++) {
        if (!(items[i].revents & ZMQ_POLLIN))
            continue;
        frames f;
        if (recv_frames(items[i].socket, &f, ZMQ_DONTWAIT) < 0)
            continue;
        /* control messages were checked by the control thread */
        int d = check(w, &f, i == 0 ? "control" : "shell");
        if (d < 0) {
            frames_free(&f);
            continue;
        }
        take(&f, d, i == 0 ? SR_WIRE_CONTROL : SR_WIRE_SHELL, m);
        if (!m->ids || !m->idlens) {
            sr_wire_msg_free(m);
            return sr_fail("kernel: out of memory");
        }
        return 1;
    }
    return 0;
}

int sr_wire_send(sr_wire *w, int channel, const char *const *ids, const size_t *idlens, int nids, const char *header,
                 const char *parent, const char *metadata, const char *content)
{
    if (channel < 0 || channel >= SR_WIRE_CHANNELS)
        return sr_fail("kernel: no channel %d", channel);
    void *s = channel == SR_WIRE_CONTROL ? w->pair_main : w->sock[channel];
    return send_signed(w, s, ids, idlens, nids, header, parent, metadata, content);
}

long sr_wire_dropped(const sr_wire *w) { return atomic_load(&((sr_wire *)w)->dropped); }

void sr_wire_close(sr_wire *w)
{
    if (!w)
        return;
    if (w->ctl_started) { /* an empty frame stops it after the replies queued before */
        zmq_send(w->pair_main, "", 0, 0);
        pthread_join(w->ctl_thread, NULL);
    } else {
        if (w->sock[SR_WIRE_CONTROL])
            zmq_close(w->sock[SR_WIRE_CONTROL]);
        if (w->pair_ctl)
            zmq_close(w->pair_ctl);
    }
    for (int i = 0; i < SR_WIRE_CHANNELS; i++)
        if (i != SR_WIRE_CONTROL && w->sock[i])
            zmq_close(w->sock[i]);
    if (w->pair_main)
        zmq_close(w->pair_main);
    if (w->ctx)
        zmq_ctx_shutdown(w->ctx); /* the heartbeat's recv returns ETERM */
    if (w->hb_started)
        pthread_join(w->hb_thread, NULL);
    else if (w->hb)
        zmq_close(w->hb);
    if (w->ctx)
        zmq_ctx_term(w->ctx);
    free(w->key);
    free(w->session);
    free(w);
}
