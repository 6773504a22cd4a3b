/*
 * errbuf.h — the caller-supplied error buffer that parsers and validators fill: a function takes
 * (char *err, size_t errlen), and on refusing its input writes one human-readable line there
 * (no trailing newline) for its caller to print or log.
 *
 * Thread-safe: writes only the buffer it is given.
 */
#ifndef MC_COMMON_ERRBUF_H
#define MC_COMMON_ERRBUF_H

#include <stddef.h>

/*
 * Formats fmt into err[0..errlen) (cut to fit, always NUL-terminated; nothing when err is NULL or
 * errlen 0) and returns MC_ERR_INVALID_PARAMS, so a refusal reads `return mc_fail(err, errlen,
 * "bad --x: %s", v);`. Logs nothing: the caller decides whether the message is worth a line.
 */
__attribute__((format(printf, 3, 4))) int mc_fail(char *err, size_t errlen, const char *fmt, ...);

#endif /* MC_COMMON_ERRBUF_H */
