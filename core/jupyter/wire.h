/* wire.h - the Jupyter messaging protocol's wire (5.3) over ZeroMQ: the
 * five sockets of a connection file, signed multipart messages, and the
 * two channels that must answer while a cell runs.  No Lua and no protocol
 * logic here: messages go in and out as JSON strings; lua/srgeo/kernel.lua
 * decides what they mean (core/shell/kernel.c binds this to it).
 *
 *   sr_wire *w = sr_wire_open(&cfg, on_interrupt);
 *   sr_wire_msg m;  if (sr_wire_recv(w, 100, &m) == 1) { ...; sr_wire_msg_free(&m); }
 *   sr_wire_send(w, SR_WIRE_SHELL, ids, lens, nids, header, parent, metadata, content);
 *   sr_wire_close(w);
 *
 * Threads: the heartbeat (a REP socket echoing what it gets) and the
 * control channel each run on a thread of their own, so a busy kernel
 * still answers them.  The control thread answers interrupt_request itself
 * (on_interrupt, then interrupt_reply) and hands every other control
 * message to the main thread through an inproc pair; the main thread's
 * replies go back the same way.  Every message is checked with
 * HMAC-SHA256 under the connection's key; one with a bad or missing
 * signature is dropped with a line on stderr. */
#ifndef SR_WIRE_H
#define SR_WIRE_H

#include <stddef.h>

enum { SR_WIRE_SHELL, SR_WIRE_CONTROL, SR_WIRE_IOPUB, SR_WIRE_STDIN, SR_WIRE_CHANNELS };

typedef struct {
    const char *transport; /* "tcp" or "ipc" */
    const char *ip;
    int ports[SR_WIRE_CHANNELS]; /* shell, control, iopub, stdin */
    int hb_port;
    const char *key;     /* the signing key ("" signs nothing, as the protocol allows) */
    const char *scheme;  /* "hmac-sha256" (the only one) */
    const char *session; /* the kernel's session id, for the control thread's replies */
} sr_wire_config;

typedef struct {
    int channel; /* SR_WIRE_SHELL or SR_WIRE_CONTROL */
    int nids;
    char **ids; /* routing identities */
    size_t *idlens;
    char *header, *parent, *metadata, *content; /* NUL-terminated JSON */
} sr_wire_msg;

typedef struct sr_wire sr_wire;

/* Binds every socket and starts the two threads; NULL with sr_errmsg(). */
sr_wire *sr_wire_open(const sr_wire_config *cfg, void (*on_interrupt)(void));
/* The next shell or control message: 1, 0 when none came within
 * timeout_ms (or a signal arrived), -1 on error. */
int sr_wire_recv(sr_wire *w, int timeout_ms, sr_wire_msg *m);
void sr_wire_msg_free(sr_wire_msg *m);
/* Sign and send; channel SR_WIRE_IOPUB takes the topic as its one id. */
int sr_wire_send(sr_wire *w, int channel, const char *const *ids, const size_t *idlens, int nids, const char *header,
                 const char *parent, const char *metadata, const char *content);
/* Messages dropped for a bad signature so far. */
long sr_wire_dropped(const sr_wire *w);
/* Flushes the control thread's pending replies, stops both threads. */
void sr_wire_close(sr_wire *w);

#endif
