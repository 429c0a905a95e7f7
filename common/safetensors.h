/*
 * common/safetensors.h - tensor files in the safetensors format.
 *
 * The format (huggingface/safetensors): an 8-byte little-endian header
 * length N, N bytes of a JSON object {"name": {"dtype": "F32", "shape": [..],
 * "data_offsets": [begin, end]}, ..., "__metadata__": {"key": "value"}},
 * then the raw little-endian tensor bytes, offsets relative to their start.
 * Used for the trained model (PyTorch state_dict names: fc1.weight ...) and
 * for checkpoints. Writes are atomic (ps_file_write_atomic: temp file, fsync,
 * rename, fsync of the directory). Reads check everything and never trust
 * the file: any corruption or truncation is PS_EPROTO with a one-line reason
 * naming it.
 * The dtypes are F32 (every float tensor) and the unsigned integers U32 and
 * U64 (a checkpoint's embedding row keys and counts); a tensor's data must
 * start at a multiple of its element size (8-byte ones first), so it is read
 * in place. ps_safetensors_find gives F32 tensors only: a reader of floats
 * never meets another dtype by mistake. Files are read whole into memory
 * (models and shards here are small). The header is written with
 * common/json.h (jansson) and read token by token with common/jscan.h, so
 * reading any header, hostile or not, costs under 4 times its size (its
 * text, and per tensor an entry and two pointers: no tree of values); the
 * atomic write is common/file.h's.
 */
#ifndef PS_COMMON_SAFETENSORS_H
#define PS_COMMON_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    PS_SAFETENSORS_MAX_DIMS = 8,             /* the most dimensions a tensor may have */
    PS_SAFETENSORS_MAX_HEADER = 100 << 20,   /* header length limit, as the reference */
};

/* A tensor's element type (the format's dtype). */
typedef enum {
    PS_SAFETENSORS_F32 = 0, /* "F32": float32 (zero: the default) */
    PS_SAFETENSORS_U32,     /* "U32": uint32 */
    PS_SAFETENSORS_U64,     /* "U64": uint64 */
} ps_safetensors_dtype_t;

/* One tensor: plain data. */
typedef struct {
    const char *name;                        /* e.g. "fc1.weight"; borrowed */
    int ndim;                                /* 0 .. PS_SAFETENSORS_MAX_DIMS */
    int64_t shape[PS_SAFETENSORS_MAX_DIMS];  /* row-major (PyTorch's) sizes */
    size_t numel;                            /* product of shape (1 for ndim 0); set by
                                                the reader, ignored by the writer */
    union {                                  /* numel elements of dtype; borrowed */
        const float *data;                   /* F32 */
        const uint32_t *u32;                 /* U32 */
        const uint64_t *u64;                 /* U64 */
    };
    ps_safetensors_dtype_t dtype;            /* the elements' type (F32 unless set) */
} ps_safetensors_tensor_t;

/* A file read into memory; opaque. */
typedef struct ps_safetensors ps_safetensors_t;

/*
 * Writes n tensors (in this order) and n_meta metadata pairs (meta[2i] the key,
 * meta[2i+1] the value; meta may be NULL when n_meta is 0) to path,
 * atomically: a temp file in the same directory, fsync, rename over path,
 * fsync of the directory. Names must be unique and not "__metadata__"; each
 * tensor's data must start at a multiple of its element size (the U64 ones
 * before the others does it). Returns 0, PS_EINVAL (bad tensor list: names,
 * shapes, dtypes, alignment), PS_ENOMEM, or PS_EIO (the file
 * could not be written; nothing is left at path or its temp name); on failure
 * a one-line reason naming path goes to why (may be NULL). Thread-safe.
 */
int ps_safetensors_write(const char *path, const ps_safetensors_tensor_t *tensors, int n,
                         const char *const *meta, int n_meta, char *why, size_t why_cap);

/*
 * Reads and validates path: header length within the file and the limit,
 * strict JSON, dtype F32, U32 or U64, shapes matching byte sizes,
 * data_offsets contiguous from 0 to the end of the file (so none overlap or
 * leave gaps) and each a multiple of its element size, unique names.
 * Caller owns *st_p; destroy with ps_safetensors_destroy().
 * Returns 0, PS_ENOENT (no such file), PS_EIO (unreadable), PS_EPROTO
 * (corrupt or truncated) or PS_ENOMEM, with a one-line reason naming path in
 * why (may be NULL).
 */
int ps_safetensors_read(const char *path, ps_safetensors_t **st_p, char *why, size_t why_cap);

/* As ps_safetensors_read, and (each unless NULL) the file's size in *bytes
 * and zlib's CRC-32 of the bytes read in *crc: what was loaded is what
 * was summed. */
int ps_safetensors_read_sum(const char *path, ps_safetensors_t **st_p, uint64_t *bytes,
                            uint32_t *crc, char *why, size_t why_cap);

/* NULL-safe; sets *st_p to NULL. */
void ps_safetensors_destroy(ps_safetensors_t **st_p);

/* The number of tensors. */
int ps_safetensors_count(const ps_safetensors_t *st);

/* Tensor i (0 .. count-1) in file-data order, of any dtype. Borrowed; valid
 * until destroy. */
const ps_safetensors_tensor_t *ps_safetensors_at(const ps_safetensors_t *st, int i);

/* The F32 tensor called name, or NULL (none, or of another dtype).
 * Borrowed; valid until destroy. */
const ps_safetensors_tensor_t *ps_safetensors_find(const ps_safetensors_t *st, const char *name);

/* The tensor called name when its dtype is dtype, else NULL. Borrowed;
 * valid until destroy. */
const ps_safetensors_tensor_t *ps_safetensors_find_dtype(const ps_safetensors_t *st,
                                                         const char *name,
                                                         ps_safetensors_dtype_t dtype);

/* The metadata value of key, or NULL. Borrowed; valid until destroy. */
const char *ps_safetensors_meta(const ps_safetensors_t *st, const char *key);

#ifdef __cplusplus
}
#endif
#endif
