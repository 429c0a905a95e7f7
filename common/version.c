/* common/version.c - --version. */
#include "common/version.h"

#include <stdio.h>
#include <string.h>

int ps_version_flag(const char *prog, ps_version_build_fn *build, int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (!strcmp(argv[i], "--version")) {
            char text[256];
            build(text, sizeof text);
            printf("%s %s\n", prog, text);
            fflush(stdout);
            return 1;
        }
    }
    return 0;
}
