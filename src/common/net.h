/*
 * net.h — socket and address helpers shared by the transports, the metadata clients and the
 * servers: "host:port" parsing, listening, connecting with a timeout, whole-buffer send/recv,
 * the machine's advertised address, and a host identity for same-host detection.
 *
 * Functions return 0 / a non-negative fd, or a negative store error code (errno is left set for
 * the caller's log line). Thread-safe.
 */
#ifndef MC_COMMON_NET_H
#define MC_COMMON_NET_H

#include "clock.h" /* the deadline-bounded forms below are on its clock */

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define MC_HOST_MAX 256
#define MC_ENDPOINT_MAX (MC_HOST_MAX + 8)

/* 1 when a and b hold the same IPv4 or IPv6 address (ports ignored); 0 otherwise. */
struct sockaddr;
int mc_net_same_host(const struct sockaddr *a, const struct sockaddr *b);

/* 1 when host means every interface: NULL, "", "0.0.0.0", "::" or "*". */
int mc_net_is_wildcard(const char *host);
/*
 * The name of the network interface ("lo", "eth0") holding an address `host` resolves to (a
 * numeric address or a name), into out[0..cap). 0, or MC_ERR_INVALID_PARAMS when host is a
 * wildcard, does not resolve, or no interface of this host holds it.
 */
int mc_net_interface_of(const char *host, char *out, size_t cap);
/*
 * Splits "host:port", "host" (port = default_port) or "[v6]:port". Returns MC_ERR_INVALID_PARAMS
 * for an empty host, a port outside 0..65535 or trailing garbage.
 */
int mc_net_split_endpoint(const char *endpoint, int default_port, char host[MC_HOST_MAX],
                          int *port);

/*
 * The address peers should use for this machine when a wildcard (0.0.0.0, "", "::") was given:
 * the first up, non-loopback IPv4 interface address, else 127.0.0.1.
 */
void mc_net_primary_address(char out[MC_HOST_MAX]);

/* Replaces a wildcard host with mc_net_primary_address(); copies anything else. */
void mc_net_advertised_host(const char *host, char out[MC_HOST_MAX]);

/*
 * Listening TCP socket on host:port (port 0 = kernel's choice; *bound_port receives the port).
 * SO_REUSEADDR is set. Returns the fd or MC_ERR_INVALID_PARAMS (bad host) / MC_ERR_INTERNAL_ERROR.
 */
int mc_net_listen_tcp(const char *host, int port, int backlog, int *bound_port);

/*
 * Connects to host:port within timeout_ms, with TCP_NODELAY set. Returns the fd (blocking mode),
 * MC_ERR_RPC_TIMEOUT on timeout, or MC_ERR_RPC_FAIL when refused or unresolvable.
 */
int mc_net_connect_tcp(const char *host, int port, int timeout_ms);

/* TCP_NODELAY and large socket buffers on an accepted or connected socket. */
void mc_net_tune_socket(int fd);
/* SO_RCVTIMEO / SO_SNDTIMEO in ms (0 = none). */
void mc_net_set_timeouts(int fd, int timeout_ms);

/*
 * Sends/receives exactly len bytes, retrying on EINTR. Return 0, or MC_ERR_TRANSFER_FAIL when the
 * peer closed or the socket failed or timed out.
 */
int mc_net_send_all(int fd, const void *buf, size_t len);
int mc_net_recv_all(int fd, void *buf, size_t len);

/*
 * Deadline-bounded forms: the whole buffer must move before deadline_ms (mc_now_ms() clock), not
 * each call (a socket timeout restarts on every partial progress, so a peer trickling one byte
 * at a time would never time out). They set SO_RCVTIMEO / SO_SNDTIMEO to the time left before
 * each blocking call, overwriting what mc_net_set_timeouts() set. Return 0, or
 * MC_ERR_TRANSFER_FAIL when the peer closed, the socket failed, or the deadline passed (then
 * errno is ETIMEDOUT). The sendmsg form advances `iov` in place.
 */
int mc_net_recv_all_by(int fd, void *buf, size_t len, uint64_t deadline_ms);
int mc_net_sendmsg_all_by(int fd, struct iovec *iov, int iovcnt, uint64_t deadline_ms);

/*
 * Receive timestamps: how long bytes have been waiting in a socket's receive queue. After
 * mc_net_stamp_arrivals(fd) (on a listening socket it holds for every socket accepted from it),
 * the kernel stamps each arriving segment (SO_TIMESTAMPNS, CLOCK_REALTIME).
 * mc_net_recv_stamped receives what is queued, up to len bytes, without waiting (MSG_DONTWAIT)
 * and sets *queued_ms to how long ago the last segment it read arrived; UINT64_MAX when the
 * kernel gave no stamp (not enabled, or the segment arrived before) or the stamp is not
 * believable (in the future, or more than a day old: a clock step). Returns recv()'s value.
 * Used by a receiver to learn that a request sat unread, e.g. while this process was stopped,
 * for longer than its sender was going to wait.
 */
int mc_net_stamp_arrivals(int fd);
ssize_t mc_net_recv_stamped(int fd, void *buf, size_t len, uint64_t *queued_ms);

/*
 * Aborts a connection: SO_LINGER {on, 0}, then close. The kernel discards bytes still queued in
 * either direction and sends RST, so nothing queued before the abort is ever delivered later
 * (a graceful close keeps retransmitting queued bytes, e.g. once a cut link comes back).
 * Use it for every connection on which an exchange failed or timed out. fd < 0 is a no-op.
 */
void mc_net_abort(int fd);
/*
 * 1 when the peer of a connected TCP socket is no longer there to wait for an answer: it reset
 * the connection (an initiator that gave up aborts it) or closed its side (state not
 * ESTABLISHED). Linux keeps bytes queued before an RST readable, so a receiver that was stalled
 * would otherwise serve a request whose sender already reported it failed. 0 when established
 * (or the state cannot be read).
 */
int mc_net_peer_gone(int fd);

/* A string equal for two processes on one host: boot id + hostname. */
void mc_net_host_id(char out[MC_HOST_MAX]);

#endif /* MC_COMMON_NET_H */
