/*
 * common/version.h - every program's --version: one line on stdout,
 * "PROG BUILD", where BUILD is the build's identity and protocol version as
 * nodes exchange them at registration (ps_codec_build_id(): "d23a751+
 * protocol 6"). Nodes of different builds refuse each other, so this is
 * what to compare across hosts. common/ knows no protocol: the caller passes
 * the function that writes BUILD (ps_codec_build_id).
 */
#ifndef PS_COMMON_VERSION_H
#define PS_COMMON_VERSION_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The --help line of the flag, as ps_config_usage() prints it. */
#define PS_VERSION_HELP "print the build and protocol version, then exit"

/* Writes the build's identity into buf (cap bytes); ps_codec_build_id is one. */
typedef void ps_version_build_fn(char *buf, size_t cap);

/*
 * When argv[1..argc) holds "--version" before any bare "--", prints
 * "PROG BUILD" to stdout and returns 1 (the caller exits 0); else returns 0
 * and prints nothing. Call first in main(), before flags are parsed or
 * anything starts, so that --version works beside any other flags.
 */
int ps_version_flag(const char *prog, ps_version_build_fn *build, int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
