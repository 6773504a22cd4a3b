/*
 * version.h — the library's version, for programs linked against libmooncake_store.
 *
 * The master refuses clients of another version (MC_ERR_INVALID_VERSION), so a deployment should
 * run one version everywhere; mc_version() tells which one a binary was built from.
 */
#ifndef MOONCAKE_VERSION_H
#define MOONCAKE_VERSION_H

#ifdef __cplusplus
extern "C" {
#endif

/* "2.0.0": static string, never free it. Thread-safe. */
const char *mc_version(void);

#ifdef __cplusplus
}
#endif
#endif /* MOONCAKE_VERSION_H */
