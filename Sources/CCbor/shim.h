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
