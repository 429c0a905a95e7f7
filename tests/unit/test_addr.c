/*
 * tests/unit/test_addr.c - the address a node announces (proto/addr.h):
 * loopback and wildcard hosts, splitting endpoints, the node's announcement
 * (--advertise HOST or ENDPOINT, the local end of its route), the
 * scheduler's rewrite (a node on another host at its peer address, one on
 * the scheduler's host at the scheduler's outward address, one host left
 * alone), --advertise's check, and the route to loopback.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "proto/addr.h"
#include "tests/unit/testutil.h"

START_TEST(loopback_and_wildcard_hosts)
{
    static const char *const loop[] = {"127.0.0.1", "127.0.1.1", "127.255.0.9", "::1",
                                       "::ffff:127.0.1.1", "localhost"};
    for (size_t i = 0; i < sizeof loop / sizeof loop[0]; i++) {
        ck_assert_msg(ps_addr_is_loopback(loop[i]), "%s", loop[i]);
    }
    static const char *const not_loop[] = {"10.0.0.1", "128.0.0.1", "::2", "node7", "0.0.0.0"};
    for (size_t i = 0; i < sizeof not_loop / sizeof not_loop[0]; i++) {
        ck_assert_msg(!ps_addr_is_loopback(not_loop[i]), "%s", not_loop[i]);
    }
    ck_assert(ps_addr_is_wildcard("0.0.0.0") && ps_addr_is_wildcard("*") &&
              ps_addr_is_wildcard("::") && ps_addr_is_wildcard(""));
    ck_assert(!ps_addr_is_wildcard("10.0.0.1"));
}
END_TEST

START_TEST(split_takes_host_and_port_and_unbrackets_v6)
{
    char host[64], port[16];
    ck_assert_int_eq(ps_addr_split("tcp://10.0.0.2:5000", host, sizeof host, port, sizeof port), 0);
    ck_assert_str_eq(host, "10.0.0.2");
    ck_assert_str_eq(port, "5000");
    ck_assert_int_eq(ps_addr_split("tcp://[fe80::1]:*", host, sizeof host, port, sizeof port), 0);
    ck_assert_str_eq(host, "fe80::1");
    ck_assert_str_eq(port, "*");
    ck_assert_int_eq(ps_addr_split("ipc:///x", host, sizeof host, port, sizeof port), PS_EINVAL);
    ck_assert_int_eq(ps_addr_split("tcp://h", host, sizeof host, port, sizeof port), PS_EINVAL);
    ck_assert_int_eq(ps_addr_split("tcp://:1", host, sizeof host, port, sizeof port), PS_EINVAL);
    ck_assert_int_eq(ps_addr_split("tcp://h:1", host, 1, port, sizeof port), PS_EINVAL);
}
END_TEST

START_TEST(announce_prefers_advertise_then_the_route_for_a_wildcard_bind)
{
    char out[128];
    ck_assert_int_eq(ps_addr_announce("tcp://0.0.0.0:5000", NULL, "10.0.0.2", out, sizeof out), 0);
    ck_assert_str_eq(out, "tcp://10.0.0.2:5000");
    ck_assert_int_eq(ps_addr_announce("tcp://0.0.0.0:5000", "node7", "10.0.0.2", out, sizeof out), 0);
    ck_assert_str_eq(out, "tcp://node7:5000");
    ck_assert_int_eq(ps_addr_announce("tcp://0.0.0.0:5000", "tcp://gw:80", "x", out, sizeof out), 0);
    ck_assert_str_eq(out, "tcp://gw:80");
    ck_assert_int_eq(ps_addr_announce("tcp://0.0.0.0:5000", "fd00::7", NULL, out, sizeof out), 0);
    ck_assert_str_eq(out, "tcp://[fd00::7]:5000");
    /* a bound host is kept; no route known keeps the wildcard for the scheduler */
    ck_assert_int_eq(ps_addr_announce("tcp://127.0.0.1:5000", NULL, "10.0.0.2", out, sizeof out), 0);
    ck_assert_str_eq(out, "tcp://127.0.0.1:5000");
    ck_assert_int_eq(ps_addr_announce("tcp://0.0.0.0:5000", NULL, "", out, sizeof out), 0);
    ck_assert_str_eq(out, "tcp://0.0.0.0:5000");
    ck_assert_int_eq(ps_addr_announce("tcp://0.0.0.0:5000", "node7", NULL, out, 10), PS_EINVAL);
    ck_assert_int_eq(ps_addr_announce("ipc:///x", NULL, NULL, out, sizeof out), PS_EINVAL);
}
END_TEST

START_TEST(fix_never_leaves_a_loopback_address_for_another_host)
{
    static const struct {
        const char *ep, *peer, *outward, *want;
    } cases[] = {
        /* one host: loopback stays, a wildcard becomes the peer (loopback) */
        {"tcp://127.0.0.1:5000", "127.0.0.1", "", NULL},
        {"tcp://0.0.0.0:5000", "127.0.0.1", "", "tcp://127.0.0.1:5000"},
        /* a node on the scheduler's host (it came over 127.0.1.1) of a job
         * with other hosts: the scheduler's outward address */
        {"tcp://127.0.1.1:5000", "127.0.1.1", "10.0.0.1", "tcp://10.0.0.1:5000"},
        {"tcp://*:5000", "127.0.0.1", "10.0.0.1", "tcp://10.0.0.1:5000"},
        /* a node on another host: the address its connection came from */
        {"tcp://127.0.0.1:5000", "10.0.0.9", "10.0.0.1", "tcp://10.0.0.9:5000"},
        {"tcp://0.0.0.0:5000", "fd00::9", "", "tcp://[fd00::9]:5000"},
        /* a real address, or an unknown peer, is left alone */
        {"tcp://10.0.0.3:5000", "10.0.0.9", "10.0.0.1", NULL},
        {"tcp://0.0.0.0:5000", "", "", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char ep[128];
        strcpy(ep, cases[i].ep);
        ck_assert_int_eq(ps_addr_fix(ep, sizeof ep, cases[i].peer, cases[i].outward),
                         cases[i].want != NULL);
        ck_assert_str_eq(ep, cases[i].want ? cases[i].want : cases[i].ep);
    }
}
END_TEST

START_TEST(check_advertise_takes_a_host_or_where_allowed_an_endpoint)
{
    char err[256];
    ck_assert_int_eq(ps_addr_check_advertise(NULL, 0, err, sizeof err), 0);
    ck_assert_int_eq(ps_addr_check_advertise("node7.cluster", 0, err, sizeof err), 0);
    ck_assert_int_eq(ps_addr_check_advertise("10.0.0.2", 0, err, sizeof err), 0);
    ck_assert_int_eq(ps_addr_check_advertise("fd00::2", 0, err, sizeof err), 0);
    ck_assert_int_eq(ps_addr_check_advertise("tcp://h:5", 1, err, sizeof err), 0);
    ck_assert_int_eq(ps_addr_check_advertise("tcp://h:5", 0, err, sizeof err), PS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "--advertise tcp://h:5"));
    ck_assert_int_eq(ps_addr_check_advertise("tcp://h:*", 1, err, sizeof err), PS_EINVAL);
    ck_assert_int_eq(ps_addr_check_advertise("0.0.0.0", 1, err, sizeof err), PS_EINVAL);
    ck_assert_int_eq(ps_addr_check_advertise("", 1, err, sizeof err), PS_EINVAL);
    ck_assert_int_eq(ps_addr_check_advertise("a b", 1, err, sizeof err), PS_EINVAL);
}
END_TEST

START_TEST(route_to_loopback_is_from_loopback)
{
    char out[PS_ADDR_MAX];
    ck_assert_int_eq(ps_addr_route_from("127.0.0.1", out, sizeof out), 0);
    ck_assert(ps_addr_is_loopback(out));
    ck_assert_int_eq(ps_addr_route_from("tcp://127.0.0.1:9000", out, sizeof out), 0);
    ck_assert(ps_addr_is_loopback(out));
    ck_assert_int_eq(ps_addr_route_from("no-such-host.invalid", out, sizeof out), PS_EINVAL);
}
END_TEST

/* Loopback endpoints are local, and so is the address this host reaches
 * another from (where it has a route); the other is not, nor a non-endpoint. */
START_TEST(local_endpoints_are_loopback_or_our_own_addresses)
{
    ck_assert(ps_addr_is_local("tcp://127.0.0.1:9000"));
    ck_assert(ps_addr_is_local("tcp://[::1]:9000"));
    ck_assert(ps_addr_is_local("tcp://localhost:9000"));
    ck_assert(!ps_addr_is_local("127.0.0.1"));
    ck_assert(!ps_addr_is_local("tcp://no-such-host.invalid:9000"));
    char own[PS_ADDR_MAX], ep[PS_ADDR_MAX + 16];
    if (ps_addr_route_from("192.0.2.1", own, sizeof own) == 0 && !ps_addr_is_loopback(own)) {
        ck_assert(!ps_addr_is_local("tcp://192.0.2.1:9000")); /* documentation's, not ours */
        snprintf(ep, sizeof ep, "tcp://%s:9000", own);
        ck_assert_msg(ps_addr_is_local(ep), "%s", ep);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("addr");
    TCase *tc = tcase_create("addr");
    tcase_add_test(tc, loopback_and_wildcard_hosts);
    tcase_add_test(tc, split_takes_host_and_port_and_unbrackets_v6);
    tcase_add_test(tc, announce_prefers_advertise_then_the_route_for_a_wildcard_bind);
    tcase_add_test(tc, fix_never_leaves_a_loopback_address_for_another_host);
    tcase_add_test(tc, check_advertise_takes_a_host_or_where_allowed_an_endpoint);
    tcase_add_test(tc, route_to_loopback_is_from_loopback);
    tcase_add_test(tc, local_endpoints_are_loopback_or_our_own_addresses);
    suite_add_tcase(s, tc);
    return ps_test_run(s);
}
