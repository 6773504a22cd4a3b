/*
 * key_regex.h — the patterns of RemoveByRegex: PCRE2 (8-bit, no UTF) with bounded work, so a
 * hostile pattern costs a bounded amount of CPU per key instead of stalling the master.
 *
 * Semantics: a key is removed when the pattern matches anywhere in it (a search, like upstream's
 * std::regex_search and POSIX regexec; anchor with ^ and $). Upstream compiles the pattern as a
 * C++ std::regex in ECMAScript mode; PCRE2 is compiled here with the options that make it behave
 * like ECMAScript where the two differ:
 *   PCRE2_ALT_BSUX          \uHHHH and \xHH as in ECMAScript, \U is a literal U
 *   PCRE2_MATCH_UNSET_BACKREF  a back-reference to a group that did not take part matches empty
 *   PCRE2_ALLOW_EMPTY_CLASS [] never matches, [^] matches any byte
 *   PCRE2_DOLLAR_ENDONLY    $ matches only at the very end (not before a final newline)
 *   newline CR, LF or CRLF  so . matches neither \r nor \n
 * Keys are bytes (no UTF mode): \w, \d, \s and case folding are ASCII, as with std::regex on
 * std::string. PCRE2 accepts more than ECMAScript (lookbehind, possessive quantifiers, named
 * groups, \A \z, inline flags); patterns using only ECMAScript syntax mean the same thing.
 *
 * Limits (each exceeded -> MC_ERR_INVALID_PARAMS, with a message):
 *   MC_KEY_REGEX_MAX_PATTERN bytes of pattern (checked before compiling; the compiled program is
 *     in any case capped by PCRE2's 64 KiB link size);
 *   per key: MC_KEY_REGEX_MATCH_LIMIT backtracking steps (pcre2_set_match_limit),
 *     MC_KEY_REGEX_DEPTH_LIMIT nested backtracking frames (pcre2_set_depth_limit) and
 *     MC_KEY_REGEX_HEAP_LIMIT_KIB of backtracking memory (pcre2_set_heap_limit).
 * "(a*)*\1b" against 224 'a's hits the match limit within a few milliseconds.
 *
 * A compiled pattern (handle) is made once per request and used from one thread at a time.
 */
#ifndef MC_MASTER_KEY_REGEX_H
#define MC_MASTER_KEY_REGEX_H

#include <stddef.h>

#define MC_KEY_REGEX_MAX_PATTERN 4096
#define MC_KEY_REGEX_MATCH_LIMIT 1000000u
#define MC_KEY_REGEX_DEPTH_LIMIT 10000u
#define MC_KEY_REGEX_HEAP_LIMIT_KIB 16384u

typedef struct mc_key_regex mc_key_regex_t;

/*
 * Compiles `pattern` (NUL-terminated). 0 and *out, or MC_ERR_INVALID_PARAMS (too long, or not a
 * valid pattern: `msg` says why and where) or MC_ERR_INTERNAL_ERROR (out of memory).
 */
int mc_key_regex_compile(const char *pattern, mc_key_regex_t **out, char *msg, size_t msglen);
/*
 * 1 when the pattern matches somewhere in key[0..len), 0 when not, MC_ERR_INVALID_PARAMS when a
 * limit above was hit on this key (`msg` names the limit), MC_ERR_INTERNAL_ERROR otherwise.
 */
int mc_key_regex_match(mc_key_regex_t *re, const char *key, size_t len, char *msg, size_t msglen);
/* NULL is a no-op. */
void mc_key_regex_free(mc_key_regex_t *re);

#endif /* MC_MASTER_KEY_REGEX_H */
