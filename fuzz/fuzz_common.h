/*
 * fuzz_common.h — helpers shared by the fuzz targets (fuzz_*.c): a cursor that cuts a fuzz input
 * into fields, loopback sockets that deliver an input to a production server and wait for its
 * answer, HTTP requests built from fuzz bytes, and scratch directories.
 *
 * None of this decodes anything a production decoder decodes: the targets hand their bytes to
 * the production code unchanged (or framed the way a peer would frame them) and only check what
 * comes back. Single-threaded use by the fuzzing thread; the servers run their own threads.
 */
#ifndef MC_FUZZ_COMMON_H
#define MC_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* A read position in a fuzz input. Reads past the end return zeros / empty fields. */
typedef struct mc_fuzz_in {
    const uint8_t *p;
    size_t n;
} mc_fuzz_in_t;

uint8_t mc_fuzz_u8(mc_fuzz_in_t *in);
uint16_t mc_fuzz_u16(mc_fuzz_in_t *in);
uint32_t mc_fuzz_u32(mc_fuzz_in_t *in);
uint64_t mc_fuzz_u64(mc_fuzz_in_t *in);
/* Up to max bytes (fewer at the end of the input): *len set, a pointer into the input. */
const uint8_t *mc_fuzz_bytes(mc_fuzz_in_t *in, size_t max, size_t *len);
/* A u16 length prefix then that many bytes (clipped to the input). */
const uint8_t *mc_fuzz_chunk(mc_fuzz_in_t *in, size_t *len);
/* The bytes up to the next `sep` (not included; consumed), or the rest of the input. */
const uint8_t *mc_fuzz_until(mc_fuzz_in_t *in, uint8_t sep, size_t *len);
/* A malloc'd NUL-terminated copy of [p, p+len) (the caller frees). */
char *mc_fuzz_strndup(const uint8_t *p, size_t len);

/* Process-wide setup every target runs once: SIGPIPE ignored; unless MC_FUZZ_LOG is set, log
 * lines go on being formatted (so format strings meet fuzzed text) but to /dev/null, except
 * ERROR lines, which the logger always writes to stderr (ctest's -close_fd_mask=3 drops them). */
void mc_fuzz_init(void);

/* Connects to 127.0.0.1:port (blocking, TCP_NODELAY). A descriptor, or -1. */
int mc_fuzz_connect_tcp(int port);
/* Connects to the abstract unix socket "@name". A descriptor, or -1. */
int mc_fuzz_connect_abstract(const char *name);
/*
 * How mc_fuzz_exchange knows a server is done with what it was sent. half_close: shut the write
 * side down once everything is sent (the server then sees the end of its input). Otherwise the
 * exchange is over when the answers contain `marker` (the reply to a request appended after
 * the fuzz bytes), or reach `expect` bytes (when nonzero), or the server went quiet for
 * quiet_ms: then the write side is shut down and the server gets quiet_ms more to close.
 */
typedef struct mc_fuzz_exchange_opts {
    int half_close;
    const uint8_t *marker;
    size_t marker_len;
    size_t expect;
    int quiet_ms;
} mc_fuzz_exchange_opts_t;

/*
 * Sends buf whole (as far as the peer reads it) while reading and discarding the peer's answers,
 * until the peer closes or resets the connection or `opts` says it is done. Returns the number
 * of bytes the peer answered. Closes fd.
 */
size_t mc_fuzz_exchange(int fd, const uint8_t *buf, size_t len,
                        const mc_fuzz_exchange_opts_t *opts);

/*
 * An HTTP/1.1 request built from fuzz bytes: `method`, a request target made of `path` (bytes
 * that cannot stand in a request line are %-escaped, so the server decodes them back), header
 * lines from `headers` (newline-separated; CR and NUL dropped, leading blanks dropped, a line
 * without a colon named "X-Fuzz"), "Connection: close", and `body` with its Content-Length.
 * malloc'd into *out (*out_len bytes); the caller frees.
 */
void mc_fuzz_http_request(const char *method, const uint8_t *path, size_t path_len,
                          const uint8_t *headers, size_t headers_len, const uint8_t *body,
                          size_t body_len, uint8_t **out, size_t *out_len);

/*
 * One HTTP request to 127.0.0.1:port from a fuzz spec, answered and closed before it returns:
 * byte 0 picks the method (GET, HEAD, PUT, DELETE, POST, OPTIONS, PATCH; 0xff: the rest of the
 * spec is sent as raw bytes), then the request target up to a NUL, header lines up to a
 * NUL, and the body (mc_fuzz_http_request). Returns the bytes answered.
 */
size_t mc_fuzz_http(int port, const uint8_t *spec, size_t len);

/* A fresh directory under $TMPDIR (else /dev/shm, else /tmp), removed with everything in it
 * when the process exits; the path is the helper's (do not free it). */
const char *mc_fuzz_tempdir(const char *what);
/* Removes everything under path (and path itself when self is nonzero). */
void mc_fuzz_rmtree(const char *path, int self);
/* Writes len bytes to path (created or truncated). 0 or -1. */
int mc_fuzz_write_file(const char *path, const void *buf, size_t len);

#endif /* MC_FUZZ_COMMON_H */
