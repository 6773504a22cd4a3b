/*
 * rpc_server.h — the master's RPC server: frames (frame.h) with store.proto bodies over TCP,
 * dispatched to the Master Service (master_service.h). The client side is src/wire/rpc.h.
 *
 * Threads: `threads` libuv event loops, each on its own thread. The first loop also accepts on
 * the listening socket and hands each new connection to the loops in turn, so one connection is
 * always served by one thread and its replies leave in request order. Handlers call the master
 * directly on the loop thread (the master does no I/O on its request path).
 *
 * Protocol errors are a connection's own business: a bad magic or version, a body longer than
 * MC_RPC_MAX_BODY, a body that does not decode as the opcode's message, or an unknown opcode
 * logs one WARNING naming the peer and closes that connection only. Batches larger than
 * MC_RPC_MAX_BATCH keys (or MC_RPC_MAX_SEGMENTS segments) get a whole-request
 * MC_ERR_INVALID_PARAMS reply and the connection stays open.
 *
 * Limits (mc_rpc_limits_t; mooncake_master flags in brackets):
 *   - at most max_connections open connections [--max_connections]; one more is accepted and
 *     closed at once, counted (connections_rejected) with a WARNING at most once a second; one
 *     peer address (whatever its ports) holds at most max_per_peer of them (a quarter of the
 *     cap), so a peer that floods the port leaves room for everybody else (also counted in
 *     connections_rejected_per_peer; the WARNING names the peer);
 *   - a connection holding part of a frame, or replies the peer does not read, that makes no
 *     progress (no byte received, no reply written) for frame_timeout_ms is closed
 *     [--rpc_frame_timeout_seconds], counted (connections_stalled);
 *   - a connection with nothing in flight for idle_timeout_ms is closed
 * [--rpc_conn_timeout_seconds, upstream's name; 0 = never], counted (connections_idle_closed).
 * Never one whose next request has already arrived in the kernel, and our clients (rpc.h) check a
 * pooled connection before reusing it, so a pooled connection is never cut mid-request;
 *   - the receive buffers of all connections together hold at most max_buffered_bytes
 *     [--rpc_max_buffered_size]. A frame's whole length is reserved against it once its header
 *     is in (so reserved frames can always complete); a connection that cannot reserve stops
 *     being read until memory is released (counted in buffer_waits; it is not timed out while
 *     it waits, and resumes within one sweep period). An empty buffer is released at once.
 *   Timeouts are checked by a sweep on each loop (every min(1 s, timeout / 4)).
 *
 * Spin [--rpc_spin_us]: after handling a frame, a worker keeps polling its sockets without
 * blocking for spin_us µs (0 = off) before it sleeps in epoll again, so the next request of a
 * busy client does not pay a wake-up of a halted CPU (tens of µs on a VM; a small request's whole
 * cost). The worker burns its CPU only during that window after each frame, yields to any other
 * runnable thread while it spins, and does not spin at all while more threads are runnable than
 * the host has CPUs (mc_cpus_contended); idle, it sleeps.
 *
 * The process must ignore SIGPIPE (a peer that vanishes mid-reply would otherwise kill it);
 * mooncake_master does.
 *
 * Ownership: the server borrows `master`, which must outlive it. Thread-safety: start/stop from
 * one thread; mc_rpc_server_port and mc_rpc_server_get_stats from any thread.
 */
#ifndef MC_MASTER_RPC_SERVER_H
#define MC_MASTER_RPC_SERVER_H

#include "master_service.h"
#include "rpc.h"

#include <stddef.h>
#include <stdint.h>

/* Keys in one KeysRequest, segments in one SegmentRequest. */
#define MC_RPC_MAX_BATCH 65536
#define MC_RPC_MAX_SEGMENTS 1024
/* Defaults of mc_rpc_limits_t. */
#define MC_RPC_DEFAULT_MAX_CONNECTIONS 4096
#define MC_RPC_DEFAULT_IDLE_TIMEOUT_MS (600u * 1000)
#define MC_RPC_DEFAULT_FRAME_TIMEOUT_MS (30u * 1000)
#define MC_RPC_DEFAULT_MAX_BUFFERED (512ull << 20)
#define MC_RPC_DEFAULT_SPIN_US 50u
#define MC_RPC_MAX_SPIN_US 1000u
/* max_buffered_bytes must hold at least one largest frame. */
#define MC_RPC_MIN_BUFFERED ((uint64_t)MC_RPC_MAX_BODY + (1u << 20))
/* Unsent reply bytes per connection above which the server stops reading that connection. */
#define MC_RPC_MAX_PENDING_REPLY_BYTES (64u << 20)
#define MC_RPC_MAX_THREADS 256

typedef struct mc_rpc_server mc_rpc_server_t; /* handle */
typedef struct mc_auth mc_auth_t;             /* wire/auth.h */

typedef struct mc_rpc_limits {
    uint32_t max_connections;    /* >= 1 */
    uint32_t idle_timeout_ms;    /* nothing in flight; 0 = never */
    uint32_t frame_timeout_ms;   /* a partial frame or unread replies without progress; > 0 */
    uint64_t max_buffered_bytes; /* receive buffers of all connections; >= MC_RPC_MIN_BUFFERED */
    uint32_t spin_us;            /* poll without blocking this long after a frame; <= 1000 */
    /* open connections one peer address may hold; 0 (or more than max_connections) =
     * mc_rpc_default_per_peer(max_connections) */
    uint32_t max_per_peer;
} mc_rpc_limits_t;
/* Below this cap there is no per-peer share (a small cap is a test's or a single client's). */
#define MC_RPC_PER_PEER_MIN_CAP 16u
/* One peer's share of max_connections: a quarter, or all of a cap below MC_RPC_PER_PEER_MIN_CAP. */
uint32_t mc_rpc_default_per_peer(uint32_t max_connections);

/* The MC_RPC_DEFAULT_* limits. */
void mc_rpc_limits_default(mc_rpc_limits_t *limits);

/*
 * Binds host:port (host "0.0.0.0" = every interface; port 0 = any free port), starts `threads`
 * (1..MC_RPC_MAX_THREADS) loop threads and serves until mc_rpc_server_stop.
 * Returns 0, MC_ERR_INVALID_PARAMS (bad host, port or thread count) or MC_ERR_INTERNAL_ERROR
 * (cannot bind: one ERROR line names host:port and the reason).
 * auth (borrowed, outlives the server; NULL = no cluster secret): every connection must run the
 * cluster-secret handshake (auth.h) before its first request; anything else is answered with
 * one AUTH_RESULT refusal (-601) and the connection closed. Without a secret, a listener on a
 * wildcard address prints one warning line.
 */
int mc_rpc_server_start(mc_master_t *master, const char *host, int port, int threads,
                        const mc_auth_t *auth, mc_rpc_server_t **out);
/* The same with explicit limits (NULL = defaults); MC_ERR_INVALID_PARAMS for a limit out of its
 * range (see mc_rpc_limits_t). */
int mc_rpc_server_start_limited(mc_master_t *master, const char *host, int port, int threads,
                                const mc_rpc_limits_t *limits, const mc_auth_t *auth,
                                mc_rpc_server_t **out);
/*
 * Master high availability (ha.h): gate(arg, opcode) is asked before each request is executed and
 * again (opcode 0) before its reply is queued; when it answers 0 the request gets no reply and its
 * connection is closed (counted in gate_refused). It runs on the loop thread and may block it
 * briefly (mooncake_master holds new puts back while the operation log is behind). NULL gate:
 * always serve. Thread-safe; set it right after start.
 */
typedef int (*mc_rpc_gate_fn)(void *arg, uint16_t opcode);
void mc_rpc_server_set_gate(mc_rpc_server_t *server, mc_rpc_gate_fn gate, void *arg);
/*
 * Durability barrier (HA with the operation log): seq(arg) is the master's journal sequence now,
 * durable(arg) the highest one committed in etcd. A reply to a request during which seq advanced
 * is held until durable reaches it (and so are the replies after it on that connection, which
 * keep their order); mc_rpc_server_durable_advanced, called when durable moved, writes the held
 * replies that may go (each loop thread walks its connections), or closes the connection when
 * the gate no longer lets this master answer. A held reply is never sent by a master that is not
 * leading: an acknowledged write is in the log. Both functions must be cheap and thread-safe.
 * Call set_barrier right after start (seq NULL: none).
 */
typedef uint64_t (*mc_rpc_seq_fn)(void *arg);
void mc_rpc_server_set_barrier(mc_rpc_server_t *server, mc_rpc_seq_fn seq, mc_rpc_seq_fn durable,
                               void *arg);
void mc_rpc_server_durable_advanced(mc_rpc_server_t *server);
/*
 * Liveness: closed(arg, client_id) is called on the loop thread when the peer closes (EOF) or
 * resets a connection that last spoke for client_id (a ping, mount or remount named it). It only
 * says "suspect": a client may close a pooled connection and live on; the hook must check
 * (liveness.h) and must not block. NULL: nobody is told. Thread-safe; set it right after start.
 */
typedef void (*mc_rpc_peer_closed_fn)(void *arg, const char *client_id);
void mc_rpc_server_set_peer_closed(mc_rpc_server_t *server, mc_rpc_peer_closed_fn closed,
                                   void *arg);
/* The port actually bound. */
int mc_rpc_server_port(const mc_rpc_server_t *server);
/* Closes every connection, stops and joins the threads, frees the server. NULL is a no-op. */
void mc_rpc_server_stop(mc_rpc_server_t *server);

/* Per-method counters. A call succeeds when its reply carries code 0 for the request and for
 * every key (ExistKey of an absent key is a success; a miss in GetReplicaList is not). */
typedef struct mc_rpc_method_stats {
    const char *method; /* upstream's RPC name: "PutStart", "GetReplicaList", ... (static) */
    uint64_t total;
    uint64_t success;
} mc_rpc_method_stats_t;

typedef struct mc_rpc_server_stats {
    uint64_t connections_accepted; /* since start */
    uint64_t connections_active;
    uint64_t connections_rejected;          /* over max_connections or one peer's share */
    uint64_t connections_rejected_per_peer; /* of those, over the peer's share */
    uint64_t protocol_errors;               /* connections closed for a malformed frame or body */
    uint64_t connections_stalled;           /* closed: no progress on a partial frame or replies */
    uint64_t connections_idle_closed;       /* closed: nothing in flight for idle_timeout_ms */
    uint64_t buffered_bytes;                /* receive-buffer bytes reserved now, all connections */
    uint64_t buffer_waits;   /* times a connection waited for the max_buffered_bytes budget */
    uint64_t decode_refused; /* bodies over their decoding memory budget (pb_decode.h) */
    mc_rpc_limits_t limits;  /* in force */
    uint64_t auth_refused;   /* connections refused by the cluster-secret check */
    uint64_t gate_refused;   /* requests not served: this master was not leading (HA) */
    uint64_t replies_held;   /* replies held until their changes were durable (HA) */
    uint64_t spin_skipped;   /* frames after which --rpc_spin_us did not spin: CPUs contended */
} mc_rpc_server_stats_t;

/* MC_RPC_METHOD_COUNT (rpc.h, derived from the method list) bounds what
 * mc_rpc_server_get_stats fills. */

/* Fills out (may be NULL) and up to `capacity` method entries (methods may be NULL); returns the
 * number of methods written. A NULL server gives zero counters for every method. */
size_t mc_rpc_server_get_stats(const mc_rpc_server_t *server, mc_rpc_server_stats_t *out,
                               mc_rpc_method_stats_t *methods, size_t capacity);

#endif /* MC_MASTER_RPC_SERVER_H */
