#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cbor.h>

/* cbor_decref takes a pointer to the item pointer; a helper keeps the Swift side plain. */
static inline void gatehouse_cbor_release(cbor_item_t *item) {
    if (item != NULL) { cbor_decref(&item); }
}

/* cbor_map_add takes a struct by value: built here so Swift passes two pointers. */
static inline bool gatehouse_cbor_map_add(cbor_item_t *map, cbor_item_t *key, cbor_item_t *value) {
    struct cbor_pair pair = { .key = key, .value = value };
    return cbor_map_add(map, pair);
}

/*
 * A bound on what cbor_load will allocate. cbor_load sizes an array or map from its header and
 * fills every slot before reading an element, so five bytes declaring 2^28 items cost gigabytes.
 * gatehouse_cbor_scan walks the first data item with libcbor's own streaming decoder and refuses
 * it when a declared count is larger than the bytes left (every item takes at least one byte),
 * when containers nest deeper than max_depth, or when a length is indefinite. It returns the
 * item's length in bytes, or -1. Nothing here decodes CBOR: libcbor's callbacks report each
 * header, and this only counts.
 */
struct gatehouse_cbor_scan_state {
    size_t left;          /* bytes from the current header to the end of the buffer */
    int depth;
    int max_depth;
    int failed;
    int done;
    size_t pending[16];   /* items still expected in each open container */
};

static inline void gatehouse_cbor_scan_item(struct gatehouse_cbor_scan_state *s) {
    /* One item ended: it counts in its container; a container whose last item ended ends too. */
    while (s->depth > 0) {
        if (--s->pending[s->depth - 1] > 0) { return; }
        s->depth--;
    }
    s->done = 1;
}

static inline void gatehouse_cbor_scan_open(struct gatehouse_cbor_scan_state *s, size_t items) {
    if (s->depth >= s->max_depth || s->depth >= 16) { s->failed = 1; return; }
    if (items == 0) { gatehouse_cbor_scan_item(s); return; }
    s->pending[s->depth++] = items;
}

static inline void gatehouse_cbor_scan_u8(void *c, uint8_t v) { (void)v; gatehouse_cbor_scan_item(c); }
static inline void gatehouse_cbor_scan_u16(void *c, uint16_t v) { (void)v; gatehouse_cbor_scan_item(c); }
static inline void gatehouse_cbor_scan_u32(void *c, uint32_t v) { (void)v; gatehouse_cbor_scan_item(c); }
static inline void gatehouse_cbor_scan_u64(void *c, uint64_t v) { (void)v; gatehouse_cbor_scan_item(c); }
static inline void gatehouse_cbor_scan_simple(void *c) { gatehouse_cbor_scan_item(c); }
static inline void gatehouse_cbor_scan_string(void *c, cbor_data d, size_t n) { (void)d; (void)n; gatehouse_cbor_scan_item(c); }
static inline void gatehouse_cbor_scan_f32(void *c, float v) { (void)v; gatehouse_cbor_scan_item(c); }
static inline void gatehouse_cbor_scan_f64(void *c, double v) { (void)v; gatehouse_cbor_scan_item(c); }
static inline void gatehouse_cbor_scan_bool(void *c, bool v) { (void)v; gatehouse_cbor_scan_item(c); }
static inline void gatehouse_cbor_scan_tag(void *c, uint64_t v) { (void)c; (void)v; /* the tagged item follows */ }
static inline void gatehouse_cbor_scan_refuse(void *c) { ((struct gatehouse_cbor_scan_state *)c)->failed = 1; }
static inline void gatehouse_cbor_scan_array(void *c, size_t n) {
    struct gatehouse_cbor_scan_state *s = c;
    if (n > s->left) { s->failed = 1; return; }
    gatehouse_cbor_scan_open(s, n);
}
static inline void gatehouse_cbor_scan_map(void *c, size_t n) {
    struct gatehouse_cbor_scan_state *s = c;
    if (n > s->left / 2) { s->failed = 1; return; }
    gatehouse_cbor_scan_open(s, n * 2);
}

static inline long gatehouse_cbor_scan(const unsigned char *data, size_t size, int max_depth) {
    struct cbor_callbacks callbacks = cbor_empty_callbacks;
    callbacks.uint8 = gatehouse_cbor_scan_u8;
    callbacks.uint16 = gatehouse_cbor_scan_u16;
    callbacks.uint32 = gatehouse_cbor_scan_u32;
    callbacks.uint64 = gatehouse_cbor_scan_u64;
    callbacks.negint8 = gatehouse_cbor_scan_u8;
    callbacks.negint16 = gatehouse_cbor_scan_u16;
    callbacks.negint32 = gatehouse_cbor_scan_u32;
    callbacks.negint64 = gatehouse_cbor_scan_u64;
    callbacks.byte_string = gatehouse_cbor_scan_string;
    callbacks.string = gatehouse_cbor_scan_string;
    callbacks.byte_string_start = gatehouse_cbor_scan_refuse;
    callbacks.string_start = gatehouse_cbor_scan_refuse;
    callbacks.indef_array_start = gatehouse_cbor_scan_refuse;
    callbacks.indef_map_start = gatehouse_cbor_scan_refuse;
    callbacks.indef_break = gatehouse_cbor_scan_refuse;
    callbacks.array_start = gatehouse_cbor_scan_array;
    callbacks.map_start = gatehouse_cbor_scan_map;
    callbacks.tag = gatehouse_cbor_scan_tag;
    callbacks.float2 = gatehouse_cbor_scan_f32;
    callbacks.float4 = gatehouse_cbor_scan_f32;
    callbacks.float8 = gatehouse_cbor_scan_f64;
    callbacks.undefined = gatehouse_cbor_scan_simple;
    callbacks.null = gatehouse_cbor_scan_simple;
    callbacks.boolean = gatehouse_cbor_scan_bool;
    struct gatehouse_cbor_scan_state s = { .max_depth = max_depth };
    size_t offset = 0;
    while (!s.done && !s.failed) {
        if (offset >= size) { return -1; }
        s.left = size - offset;
        struct cbor_decoder_result r = cbor_stream_decode(data + offset, size - offset, &callbacks, &s);
        if (r.status != CBOR_DECODER_FINISHED || r.read == 0) { return -1; }
        offset += r.read;
    }
    return s.failed ? -1 : (long)offset;
}
