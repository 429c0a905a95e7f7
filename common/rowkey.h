/*
 * common/rowkey.h - the hash of an embedding row's key, shared by the wire
 * (which server holds a row, the order keys travel in: proto/range.h) and
 * the arithmetic that sums rows in that order (kernels/optim.h).
 */
#ifndef PS_COMMON_ROWKEY_H
#define PS_COMMON_ROWKEY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A row key's hash: a bijection of 64 bits (MurmurHash3's finaliser), so
 * ids that are neighbours, or hot, land on different servers, and no two
 * keys share a hash. Row keys travel in the order of their hashes: a batch's
 * keys sorted so fall into one run per server, in rank order. */
static inline uint64_t ps_rowkey_hash(uint64_t key)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    key *= 0xc4ceb9fe1a85ec53ull;
    key ^= key >> 33;
    return key;
}

/* The key whose hash is h (ps_rowkey_hash's inverse). */
static inline uint64_t ps_rowkey_unhash(uint64_t h)
{
    h ^= h >> 33;
    h *= 0x9cb4b2f8129337dbull; /* the inverses of the multipliers, mod 2^64 */
    h ^= h >> 33;
    h *= 0x4f74430c22a54005ull;
    h ^= h >> 33;
    return h;
}

/* splitmix64's output function (Steele et al. 2014): another bijection of
 * 64 bits whose every output bit depends on every input bit, independent of
 * ps_rowkey_hash: a row's initial values and a server's table index use it,
 * so neither follows the servers' shares of the hashed keys. */
static inline uint64_t ps_rowkey_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

#ifdef __cplusplus
}
#endif
#endif
