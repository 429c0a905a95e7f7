/*
 * worker/data.h - Fashion-MNIST from gzip IDX files, and the global sample order.
 *
 * Keeps images as their grey levels (bytes) and normalises a sample to floats
 * when it is gathered: a quarter of the memory and no conversion pass at load,
 * which is what lets 64 workers start on one small machine. The sample order of an
 * epoch is one permutation drawn from (seed, epoch); worker r of M with batch b
 * takes, at step k, samples order[(k*M + r)*b ... +b), so every worker sees a
 * disjoint shard and M workers of batch b see exactly what one worker of batch
 * M*b sees. Does not know about models or sockets.
 */
#ifndef PS_WORKER_DATA_H
#define PS_WORKER_DATA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Default location of the Debian package dataset-fashion-mnist. */
#define PS_DATA_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"

typedef struct {
    int n;           /* number of samples */
    int rows, cols;  /* image size (28 x 28) */
    uint8_t *pixels; /* n*rows*cols grey levels, owned; ps_data_images normalises */
    uint8_t *labels; /* n labels in [0,10), owned */
} ps_dataset_t;

/*
 * Reads one IDX file (gzip or plain) into a fresh buffer of u8 values.
 * expect_magic is 0x00000803 (images) or 0x00000801 (labels). On success
 * stores the buffer (caller frees with free()) and the dimensions (dims[0] = count,
 * dims[1], dims[2] = rows, cols for images; 1, 1 for labels). Returns 0,
 * PS_ENOENT (no file), PS_EPROTO (bad magic, truncated, sizes inconsistent),
 * PS_EIO (unreadable), PS_ENOMEM; on failure
 * writes a one-line reason naming the file into err.
 */
int ps_idx_read(const char *path, uint32_t expect_magic, uint8_t **data, int dims[3],
                char *err, size_t errlen);

/*
 * Loads the training set (train != 0: train-images-idx3-ubyte.gz + labels) or
 * the test set (t10k-*) from dir into *ds. Returns 0 or a PS_E* code with a
 * one-line reason in err (naming the missing file and the package to install).
 */
int ps_dataset_load(const char *dir, int train, ps_dataset_t *ds, char *err,
                    size_t errlen);

/* Frees the buffers; safe on a zeroed or already-finished dataset. */
void ps_dataset_fini(ps_dataset_t *ds);

/* Fills order[0..n) with the permutation of epoch `epoch` drawn from seed. */
void ps_data_order(uint64_t seed, int epoch, uint32_t *order, int n);

/* Writes samples [first, first+count) of the file order into x (count*rows*cols
 * floats), each pixel normalised to (pixel/255 - mean)/std. */
void ps_data_images(const ps_dataset_t *ds, int first, int count, float *x);

/* The normalisation as one multiply and one add: a pixel p becomes
 * (float)p * a + c (rounded after each), as ps_data_gather converts it. */
void ps_data_norm(float *a, float *c);

/* Copies the samples order[first .. first+count) into x (count*rows*cols
 * floats, normalised as by ps_data_images) and y (count labels). */
void ps_data_gather(const ps_dataset_t *ds, const uint32_t *order, int first, int count,
                    float *x, uint8_t *y);

#ifdef __cplusplus
}
#endif
#endif
