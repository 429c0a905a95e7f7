/*
 * proto/curve.c - a job's CurveZMQ keys: made (keygen), read from owner-only
 * files, and checked for every connection by a ZAP handler thread (ZeroMQ's
 * RFC 27: libzmq asks inproc://zeromq.zap.01 of the socket's context whether
 * to admit a client key; without a handler it would admit any). A peer that
 * fails before the key check (no CurveZMQ, or not knowing our public key) is
 * told by the bound socket's monitor events, read by the same thread, so
 * every refused connection is counted and logged alike.
 */
#include "proto/sock_zmq.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "common/ratelog.h"

enum { S_KEY_BIN = 32, S_MAX_ALLOWED = 2, S_MAX_WATCHED = 4 };

/* The three identities of a job: the scheduler's (file "job"), the servers'
 * and the workers'. */
enum { S_JOB, S_SERVER, S_WORKER, S_NIDS };
static const char *const s_id_file[S_NIDS] = {"job", "server", "worker"};

struct ps_curve {
    char pub[PS_CURVE_KEY_LEN];     /* this process's keypair (Z85) */
    char sec[PS_CURVE_KEY_LEN];
    char job[PS_CURVE_KEY_LEN];     /* the scheduler's public key: connects expect it */
    uint8_t allowed[S_MAX_ALLOWED][S_KEY_BIN]; /* client keys the ZAP handler admits */
    const char *allowed_name[S_MAX_ALLOWED];   /* their roles: the ZAP user id */
    int nallowed;
    /* The ZAP handler; zap is its socket (the thread's alone once started). */
    void *zap;
    void *zctx; /* the context it serves */
    pthread_t thread;
    int running;
    atomic_int stop;
    /* Monitor sockets of the bound sockets (handshake failures), handed to
     * the thread under lock. */
    pthread_mutex_t lock;
    void *mon[S_MAX_WATCHED];
    int nmon;
    atomic_uint_fast64_t refused;
    ps_ratelog_t *log; /* the thread's */
};

int ps_curve_available(void)
{
    return zmq_has("curve");
}

/* ---- key files -------------------------------------------------------------- */

/* Writes one owner-only file (refusing to replace one). */
static int s_write(const char *dir, const char *name, const char *text, char *err,
                   size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create key file %s: %s", path, strerror(errno));
        return errno == EEXIST ? PS_EINVAL : PS_EIO;
    }
    size_t n = strlen(text);
    int ok = write(fd, text, n) == (ssize_t)n && fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok) {
        snprintf(err, errlen, "cannot write key file %s: %s", path, strerror(errno));
        return PS_EIO;
    }
    return 0;
}

int ps_curve_files_make(ps_curve_files_t *f, char *err, size_t errlen)
{
    if (!ps_curve_available()) {
        snprintf(err, errlen, "this libzmq cannot encrypt (built without CURVE)");
        return PS_ENOTSUP;
    }
    for (int i = 0; i < S_NIDS; i++) {
        char pub[PS_CURVE_KEY_LEN], sec[PS_CURVE_KEY_LEN];
        if (zmq_curve_keypair(pub, sec) != 0) {
            snprintf(err, errlen, "cannot make a keypair: %s", zmq_strerror(zmq_errno()));
            ps_curve_files_wipe(f);
            return PS_EIO;
        }
        snprintf(f->name[2 * i], sizeof f->name[0], "%s.key", s_id_file[i]);
        snprintf(f->text[2 * i], sizeof f->text[0],
                 "# shardps %s keypair (CurveZMQ, Z85): keep it private\n"
                 "public %s\nsecret %s\n",
                 s_id_file[i], pub, sec);
        explicit_bzero(sec, sizeof sec);
        snprintf(f->name[2 * i + 1], sizeof f->name[0], "%s.pub", s_id_file[i]);
        snprintf(f->text[2 * i + 1], sizeof f->text[0],
                 "# shardps %s public key (CurveZMQ, Z85)\npublic %s\n", s_id_file[i], pub);
    }
    return 0;
}

void ps_curve_files_wipe(ps_curve_files_t *f)
{
    explicit_bzero(f, sizeof *f);
}

int ps_curve_keygen(const char *dir, char *err, size_t errlen)
{
    ps_curve_files_t f;
    int rc = ps_curve_files_make(&f, err, errlen);
    if (rc != 0) {
        return rc;
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        rc = PS_EIO;
    }
    for (int i = 0; i < PS_CURVE_NFILES && rc == 0; i++) {
        rc = s_write(dir, f.name[i], f.text[i], err, errlen);
    }
    ps_curve_files_wipe(&f);
    return rc;
}

/* Reads the "public" and (when sec is not NULL) "secret" lines of one key
 * file, after checking it is a regular file only its owner may read or write. */
static int s_read(const char *dir, const char *name, char *pub, char *sec, char *err,
                  size_t errlen)
{
    char path[4200], text[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (ps_file_read_private(path, "key file", " (make the job's keys with shardps-keygen DIR)",
                             text, sizeof text, err, errlen) != 0) {
        return PS_EINVAL;
    }
    int got_pub = 0, got_sec = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char *dst = !strncmp(line, "public ", 7)   ? pub
                    : !strncmp(line, "secret ", 7) ? sec
                                                   : NULL;
        uint8_t bin[S_KEY_BIN];
        if (!dst || strlen(line + 7) != PS_CURVE_KEY_LEN - 1 ||
            !zmq_z85_decode(bin, line + 7)) {
            continue;
        }
        memcpy(dst, line + 7, PS_CURVE_KEY_LEN);
        got_pub |= dst == pub;
        got_sec |= dst == sec;
    }
    explicit_bzero(text, sizeof text);
    if (!got_pub || (sec && !got_sec)) {
        snprintf(err, errlen, "key file %s: no valid %s key line", path,
                 got_pub ? "secret" : "public");
        return PS_EINVAL;
    }
    return 0;
}

int ps_curve_load(const char *dir, ps_role_t role, ps_curve_t **out, char *err,
                  size_t errlen)
{
    *out = NULL;
    if (!ps_curve_available()) {
        snprintf(err, errlen, "this libzmq cannot encrypt (built without CURVE)");
        return PS_ENOTSUP;
    }
    ps_curve_t *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return PS_ENOMEM;
    }
    pthread_mutex_init(&c->lock, NULL);
    /* Who may connect to this role's bound sockets: workers reach servers and
     * each other (the ring), and every node reaches the scheduler. */
    const int own = role == PS_ROLE_SCHEDULER ? S_JOB
                    : role == PS_ROLE_SERVER  ? S_SERVER
                                              : S_WORKER;
    const int admits_server = role == PS_ROLE_SCHEDULER;
    char pub[S_NIDS][PS_CURVE_KEY_LEN], name[32];
    int rc = 0;
    for (int i = 0; i < S_NIDS && rc == 0; i++) {
        snprintf(name, sizeof name, "%s.pub", s_id_file[i]);
        rc = s_read(dir, name, pub[i], NULL, err, errlen);
    }
    snprintf(name, sizeof name, "%s.key", s_id_file[own]);
    rc = rc ? rc : s_read(dir, name, c->pub, c->sec, err, errlen);
    if (rc == 0 && strcmp(c->pub, pub[own]) != 0) {
        snprintf(err, errlen, "key files %s/%s and %s/%s.pub are of different jobs", dir,
                 name, dir, s_id_file[own]);
        rc = PS_EINVAL;
    }
    if (rc != 0) {
        ps_curve_destroy(&c);
        return rc;
    }
    memcpy(c->job, pub[S_JOB], PS_CURVE_KEY_LEN);
    for (int i = S_SERVER; i <= S_WORKER; i++) {
        if (i == S_WORKER || admits_server) {
            zmq_z85_decode(c->allowed[c->nallowed], pub[i]);
            c->allowed_name[c->nallowed++] = s_id_file[i];
        }
    }
    *out = c;
    return 0;
}

void ps_curve_destroy(ps_curve_t **cp)
{
    ps_curve_t *c = *cp;
    if (!c) {
        return;
    }
    if (c->running) {
        atomic_store(&c->stop, 1);
        pthread_join(c->thread, NULL);
    }
    if (c->zap) {
        zmq_close(c->zap);
    }
    for (int i = 0; i < c->nmon; i++) {
        zmq_close(c->mon[i]);
    }
    pthread_mutex_destroy(&c->lock);
    ps_ratelog_destroy(&c->log);
    explicit_bzero(c->sec, sizeof c->sec);
    free(c);
    *cp = NULL;
}

const char *ps_curve_public(const ps_curve_t *c)
{
    return c->pub;
}

const char *ps_curve_secret(const ps_curve_t *c)
{
    return c->sec;
}

const char *ps_curve_job_key(const ps_curve_t *c)
{
    return c->job;
}

uint64_t ps_curve_refused(const ps_curve_t *c)
{
    return atomic_load(&c->refused);
}

/* ---- the ZAP handler ---------------------------------------------------------- */

/* ZAP request frames (RFC 27): version, request id, domain, address,
 * routing id, mechanism, then the mechanism's credentials (CURVE: the
 * client's 32-byte public key). */
enum { S_ZAP_VERSION, S_ZAP_ID, S_ZAP_DOMAIN, S_ZAP_ADDRESS, S_ZAP_ROUTING, S_ZAP_MECH,
       S_ZAP_KEY, S_ZAP_FRAMES };

/* Answers one ZAP request: 200 for a key this role admits, 400 otherwise. */
static void s_zap_answer(ps_curve_t *c)
{
    zmq_msg_t f[S_ZAP_FRAMES], extra;
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t *m = n < S_ZAP_FRAMES ? &f[n] : &extra;
        zmq_msg_init(m);
        if (zmq_msg_recv(m, c->zap, 0) < 0) {
            zmq_msg_close(m);
            break;
        }
        more = zmq_msg_more(m);
        if (m == &extra) {
            zmq_msg_close(m);
        } else {
            n++;
        }
    }
    if (n < S_ZAP_MECH) { /* not a request libzmq would send: nothing to answer */
        for (int i = 0; i < n; i++) {
            zmq_msg_close(&f[i]);
        }
        return;
    }
    const char *user = NULL;
    int curve = n == S_ZAP_FRAMES && zmq_msg_size(&f[S_ZAP_MECH]) == 5 &&
                !memcmp(zmq_msg_data(&f[S_ZAP_MECH]), "CURVE", 5) &&
                zmq_msg_size(&f[S_ZAP_KEY]) == S_KEY_BIN;
    for (int i = 0; curve && i < c->nallowed && !user; i++) {
        if (!memcmp(zmq_msg_data(&f[S_ZAP_KEY]), c->allowed[i], S_KEY_BIN)) {
            user = c->allowed_name[i];
        }
    }
    if (!user) {
        char addr[80]; /* "tcp://" and the peer's address, as the monitor names it */
        int len = (int)zmq_msg_size(&f[S_ZAP_ADDRESS]);
        snprintf(addr, sizeof addr, "tcp://%.*s", len < 64 ? len : 64,
                 (const char *)zmq_msg_data(&f[S_ZAP_ADDRESS]));
        atomic_fetch_add(&c->refused, 1);
        ps_ratelog_reject(c->log, "connection", addr,
                          curve ? "its key is not one of this job's" : "not CurveZMQ");
    }
    const char *code = user ? "200" : "400", *text = user ? "OK" : "key not of this job";
    zmq_send(c->zap, "1.0", 3, ZMQ_SNDMORE);
    zmq_msg_send(&f[S_ZAP_ID], c->zap, ZMQ_SNDMORE);
    zmq_send(c->zap, code, 3, ZMQ_SNDMORE);
    zmq_send(c->zap, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(c->zap, user ? user : "", user ? strlen(user) : 0, ZMQ_SNDMORE);
    zmq_send(c->zap, "", 0, 0);
    for (int i = 0; i < n; i++) {
        if (i != S_ZAP_ID) {
            zmq_msg_close(&f[i]);
        }
    }
}

/* Reads one monitor event: a handshake that failed before the key check
 * (the peer speaks no CurveZMQ, or does not know our public key) is a
 * refused connection too. */
static void s_on_event(ps_curve_t *c, void *mon)
{
    zmq_msg_t ev, addr;
    zmq_msg_init(&ev);
    zmq_msg_init(&addr);
    if (zmq_msg_recv(&ev, mon, 0) >= 0 && zmq_msg_more(&ev) &&
        zmq_msg_recv(&addr, mon, 0) >= 0 && zmq_msg_size(&ev) >= 2) {
        uint16_t id;
        memcpy(&id, zmq_msg_data(&ev), sizeof id);
        if (id &
            (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)) {
            /* "tcp://127.0.0.1:53114": the peer, less its port (one log line per host) */
            char peer[80];
            size_t len = zmq_msg_size(&addr);
            len = len < sizeof peer - 1 ? len : sizeof peer - 1;
            memcpy(peer, zmq_msg_data(&addr), len);
            peer[len] = '\0';
            char *colon = strrchr(peer, ':');
            if (colon && colon > strstr(peer, "//")) {
                *colon = '\0';
            }
            atomic_fetch_add(&c->refused, 1);
            ps_ratelog_reject(c->log, "connection", peer,
                              "its handshake failed (no CurveZMQ, or not this job's keys)");
        }
    }
    zmq_msg_close(&ev);
    zmq_msg_close(&addr);
}

static void *s_zap_main(void *arg)
{
    ps_curve_t *c = arg;
    while (!atomic_load(&c->stop)) {
        zmq_pollitem_t it[1 + S_MAX_WATCHED] = {{c->zap, 0, ZMQ_POLLIN, 0}};
        pthread_mutex_lock(&c->lock);
        int n = c->nmon;
        for (int i = 0; i < n; i++) {
            it[1 + i] = (zmq_pollitem_t){c->mon[i], 0, ZMQ_POLLIN, 0};
        }
        pthread_mutex_unlock(&c->lock);
        int got = zmq_poll(it, 1 + n, ps_real_ms(100));
        if (got < 0 && zmq_errno() == ETERM) {
            break;
        }
        if (got > 0 && (it[0].revents & ZMQ_POLLIN)) {
            s_zap_answer(c);
        }
        for (int i = 0; got > 0 && i < n; i++) {
            if (it[1 + i].revents & ZMQ_POLLIN) {
                s_on_event(c, c->mon[i]);
            }
        }
        ps_ratelog_tick(c->log);
    }
    return NULL;
}

int ps_curve_watch(ps_curve_t *c, void *zsock)
{
    pthread_mutex_lock(&c->lock);
    int k = c->nmon;
    pthread_mutex_unlock(&c->lock);
    if (k == S_MAX_WATCHED) {
        return PS_ENOMEM;
    }
    void *mon = ps_zmq_monitor(c->zctx, zsock,
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                                   ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL,
                               "curve-watch");
    if (!mon) {
        return PS_EIO;
    }
    pthread_mutex_lock(&c->lock); /* the thread owns it from here */
    c->mon[c->nmon++] = mon;
    pthread_mutex_unlock(&c->lock);
    return 0;
}

int ps_curve_zap_start(ps_curve_t *c, void *zctx, char *err, size_t errlen)
{
    if (ps_ratelog_new(&c->log, PS_RATELOG_PERIOD) != 0 ||
        !(c->zap = zmq_socket(zctx, ZMQ_REP))) {
        snprintf(err, errlen, "cannot start the key check: out of memory");
        return PS_ENOMEM;
    }
    int linger = 0;
    c->zctx = zctx;
    zmq_setsockopt(c->zap, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(c->zap, "inproc://zeromq.zap.01") != 0) {
        snprintf(err, errlen, "cannot start the key check: %s", zmq_strerror(zmq_errno()));
        return PS_EIO;
    }
    if (pthread_create(&c->thread, NULL, s_zap_main, c) != 0) {
        snprintf(err, errlen, "cannot start the key check thread");
        return PS_EIO;
    }
    c->running = 1;
    return 0;
}

/* ---- the roles' flags --------------------------------------------------------- */

ps_flag_t ps_curve_secure_flag(int *dst)
{
    return (ps_flag_t){"secure", PS_FLAG_BOOL, dst, "0|1",
                       "CurveZMQ on every socket: encrypted, and only the job's keys (--keys) "
                       "may connect"};
}

ps_flag_t ps_curve_keys_flag(const char **dst)
{
    return (ps_flag_t){"keys", PS_FLAG_STR, dst, "DIR",
                       "with --secure: the job's key files (made by shardps-keygen DIR)"};
}

int ps_curve_check_flags(int secure, const char *keys, ps_role_t role, char *err,
                         size_t errlen)
{
    if (!secure) {
        if (keys && keys[0]) {
            snprintf(err, errlen, "--keys %s: without --secure the job would not use them",
                     keys);
            return PS_EINVAL;
        }
        return 0;
    }
    if (!keys || !keys[0]) {
        snprintf(err, errlen,
                 "--secure needs --keys DIR (make one with shardps-keygen DIR)");
        return PS_EINVAL;
    }
    ps_curve_t *c = NULL;
    int rc = ps_curve_load(keys, role, &c, err, errlen);
    ps_curve_destroy(&c);
    return rc;
}

int ps_curve_secure_ctx(ps_ctx_t *ctx, int secure, const char *dir, ps_role_t role,
                        char *err, size_t errlen)
{
    ps_curve_t *c = NULL;
    if (!secure) {
        return 0;
    }
    int rc = ps_curve_load(dir, role, &c, err, errlen);
    return rc ? rc : ps_ctx_secure(ctx, &c, err, errlen);
}
