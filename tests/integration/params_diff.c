/*
 * tests/integration/params_diff.c - compares two raw float32 parameter dumps.
 * usage: sps-params-diff A B TOL   (TOL 0 = bitwise equal)
 * The relative difference is max_i |a_i - b_i| / max_i |a_i|: differences
 * measured against the scale of the parameters (the infinity norm), so a
 * parameter that happens to sit near zero does not turn float rounding into
 * a huge ratio. Prints it with the count of bitwise differences and exits 0
 * when it is <= TOL, 1 when not or when the files differ in size.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *s_load(const char *path, long *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *p = malloc(bytes > 0 ? (size_t)bytes : 1);
    if (!p || fread(p, 1, (size_t)bytes, f) != (size_t)bytes) {
        fprintf(stderr, "cannot read %s\n", path);
        free(p);
        fclose(f);
        return NULL;
    }
    fclose(f);
    *n = bytes / 4;
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s A B TOL\n", argv[0]);
        return 2;
    }
    long na = 0, nb = 0;
    float *a = s_load(argv[1], &na), *b = s_load(argv[2], &nb);
    double tol = atof(argv[3]);
    if (!a || !b || na != nb || na == 0) {
        fprintf(stderr, "sizes differ or empty: %ld vs %ld floats\n", na, nb);
        return 1;
    }
    double worst = 0, scale = 0;
    long at = 0, differ = 0;
    for (long i = 0; i < na; i++) {
        if (memcmp(&a[i], &b[i], 4) != 0) {
            differ++;
        }
        double d = fabs((double)a[i] - b[i]);
        scale = fmax(scale, fabs(a[i]));
        if (d > worst || isnan(d)) {
            worst = isnan(d) ? INFINITY : d;
            at = i;
        }
    }
    double rel = scale > 0 ? worst / scale : worst;
    printf("%ld floats, %ld differ bitwise, largest difference %.3g at %ld, relative to "
           "max|a| = %.3g: %.3g\n", na, differ, worst, at, scale, rel);
    worst = rel;
    free(a);
    free(b);
    return (tol == 0 ? differ == 0 : worst <= tol) ? 0 : 1;
}
