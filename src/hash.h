/* The keyed hash of every table whose keys a client can choose (host names,
 * request paths, luxd.shared keys): SipHash (Aumasson and Bernstein, "SipHash:
 * a fast short-input PRF", 2012), keyed once per process from getrandom(2),
 * so that nobody who does not know the key can pick keys that collide. */
#ifndef LX_HASH_H
#define LX_HASH_H

#include <stddef.h>
#include <stdint.h>

/* SipHash-c-d of data under a 128-bit key (16 bytes, read little-endian as
 * k0 then k1), as the paper specifies it. For the unit tests, which check
 * SipHash-2-4 against the paper's vectors and SipHash-1-3 against published
 * ones; luxd itself uses lx_hash. */
uint64_t lx_siphash(int c, int d, const uint8_t key[16], const void *data, size_t len);

/* Chooses the process's key: getrandom(2), waiting for the kernel's
 * generator to be ready if it is not yet (early boot). Returns 0, or a
 * negative errno when no randomness could be had. Called once, at start,
 * before any table is built; a process that never calls it (a unit test, a
 * fuzzer) hashes under the all-zero key. */
int lx_hash_seed(void);

/* For tests: sets the key. */
void lx_hash_set_key(const uint8_t key[16]);

/* A value that identifies the key without revealing it (SipHash of the
 * empty string), printed by -T so that a test can see two runs differ. */
uint64_t lx_hash_fingerprint(void);

#endif
