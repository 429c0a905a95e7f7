/* scheduler/identity.c - the job's identity and the registration check. */
#include "scheduler/identity.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "common/error.h"

void ps_identity_init(ps_identity_t *id, const char *job_id, const ps_job_t *job, int servers,
                      int workers, const ps_secret_t *secret)
{
    memset(id, 0, sizeof *id);
    if (secret && secret->set) {
        id->secret = *secret;
    }
    if (getrandom(id->nonce_key, sizeof id->nonce_key, 0) != (ssize_t)sizeof id->nonce_key) {
        ps_sha256(id, sizeof *id, id->nonce_key); /* unpredictable still: the secret is in it */
    }
    if (job_id && job_id[0]) {
        id->named = 1;
        snprintf(id->job_id, sizeof id->job_id, "%s", job_id);
    } else {
        ps_job_new_id(id->job_id, sizeof id->job_id);
    }
    ps_job_hash(job, servers, workers, id->job_hash, sizeof id->job_hash);
    ps_codec_build_id(id->build, sizeof id->build);
}

int ps_identity_check(const ps_identity_t *id, const Shardps__Register *reg, char *why, size_t cap)
{
    if (strcmp(reg->build, id->build)) {
        snprintf(why, cap, "the node's build '%s' is not the scheduler's '%s' (job %s)",
                 reg->build, id->build, id->job_id);
    } else if (!reg->job_id[0] && id->named) {
        snprintf(why, cap, "the node names no job, this scheduler runs job '%s': start it with "
                 "--job-id %s", id->job_id, id->job_id);
    } else if (reg->job_id[0] && strcmp(reg->job_id, id->job_id)) {
        snprintf(why, cap, "the node belongs to job '%s', this scheduler runs job '%s'",
                 reg->job_id, id->job_id);
    } else if (reg->job_hash[0] && strcmp(reg->job_hash, id->job_hash)) {
        snprintf(why, cap, "the node's job configuration %s is not job %s's %s (other job "
                 "flags)", reg->job_hash, id->job_id, id->job_hash);
    } else {
        return 0;
    }
    return PS_EINVAL;
}

/* The connection a message came on, as bytes a tag can cover: the kernel's
 * cookie of its socket (SO_COOKIE: unique until the host reboots and never
 * reused, unlike the fd's number or a routing id, which the client may
 * choose) and the peer's address and port. A kernel without SO_COOKIE
 * (before Linux 4.12) leaves the address and port. fd < 0 (inproc: no
 * socket, no stranger) binds to the route alone. Returns the length, or -1
 * when fd is no longer a connected socket (the connection is gone). */
enum { S_CONN_MAX = 8 + sizeof(struct sockaddr_storage) };
static int s_conn(int fd, uint8_t conn[S_CONN_MAX])
{
    if (fd < 0) {
        return 0;
    }
    uint64_t cookie = 0;
    socklen_t len = sizeof cookie;
    if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len) != 0 && errno != ENOPROTOOPT) {
        return -1;
    }
    memcpy(conn, &cookie, 8);
    struct sockaddr_storage peer;
    len = sizeof peer;
    if (getpeername(fd, (struct sockaddr *)&peer, &len) != 0) {
        return -1;
    }
    memcpy(conn + 8, &peer, len < sizeof peer ? len : sizeof peer);
    return 8 + (int)(len < sizeof peer ? len : sizeof peer);
}

/* A nonce's tag: HMAC(nonce_key, time and random part || route ||
 * connection)[:16]. */
static void s_tag(const ps_identity_t *id, const uint8_t *head, const ps_route_t *route,
                  const uint8_t *conn, size_t conn_len, uint8_t *tag)
{
    uint8_t mac[PS_HMAC_LEN];
    const void *parts[3] = {head, route->id, conn};
    const size_t lens[3] = {24, route->len, conn_len};
    ps_hmac_sha256(id->nonce_key, sizeof id->nonce_key, parts, lens, 3, mac);
    memcpy(tag, mac, 16);
}

ps_identity_proof_t ps_identity_prove(const ps_identity_t *id, const Shardps__Register *reg,
                                      const ps_route_t *route, int fd, double now,
                                      uint8_t *nonce, size_t *nonce_len)
{
    if (!id->secret.set) {
        return PS_IDENTITY_PROVEN;
    }
    uint8_t conn[S_CONN_MAX];
    const int conn_len = s_conn(fd, conn);
    if (conn_len < 0) {
        return PS_IDENTITY_REFUSED; /* closed already: nobody to challenge or admit */
    }
    /* nonce = milliseconds (8, big-endian) || 16 random bytes || tag (16) */
    if (reg->nonce.len == 0 && reg->proof.len == 0) {
        const uint64_t ms = (uint64_t)(now * 1000);
        for (int i = 0; i < 8; i++) {
            nonce[i] = (uint8_t)(ms >> (56 - 8 * i));
        }
        if (getrandom(nonce + 8, 16, 0) != 16) {
            ps_sha256(nonce, 8, nonce + 8); /* the tag still binds it to us */
        }
        s_tag(id, nonce, route, conn, (size_t)conn_len, nonce + 24);
        *nonce_len = PS_IDENTITY_NONCE_LEN;
        return PS_IDENTITY_CHALLENGED;
    }
    if (reg->nonce.len != PS_IDENTITY_NONCE_LEN || reg->proof.len != PS_HMAC_LEN) {
        return PS_IDENTITY_REFUSED;
    }
    const uint8_t *n = reg->nonce.data;
    uint8_t tag[16], proof[PS_HMAC_LEN];
    uint64_t ms = 0;
    for (int i = 0; i < 8; i++) {
        ms = ms << 8 | n[i];
    }
    s_tag(id, n, route, conn, (size_t)conn_len, tag);
    const double age = now - (double)ms / 1000;
    if (!ps_secret_equal(tag, n + 24, sizeof tag) || age < -1 ||
        age > PS_IDENTITY_NONCE_SECONDS) {
        return PS_IDENTITY_REFUSED;
    }
    ps_secret_proof(&id->secret, n, PS_IDENTITY_NONCE_LEN, reg->role, reg->job_id, proof);
    return ps_secret_equal(proof, reg->proof.data, sizeof proof) ? PS_IDENTITY_PROVEN
                                                                 : PS_IDENTITY_REFUSED;
}
