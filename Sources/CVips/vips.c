// setenv
#define _POSIX_C_SOURCE 200809L

#include "gatehouse_vips.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

// From libvips' headers (8.14, soname libvips.so.42): VipsAccess and VipsSize.
enum { GH_VIPS_ACCESS_SEQUENTIAL = 1, GH_VIPS_SIZE_DOWN = 2 };
// glib's gboolean.
enum { GH_TRUE = 1, GH_FALSE = 0 };

// The functions resolved from the library, with libvips' prototypes; variadic ones are called
// through variadic pointers, which is how C calls them when linked.
struct gh_vips_functions {
    int (*init)(const char *argv0);
    void (*concurrency_set)(int concurrency);
    void (*cache_set_max)(int max);
    void (*cache_set_max_mem)(size_t max_mem);
    void (*cache_set_max_files)(int max_files);
    void (*block_untrusted_set)(int state);
    void (*operation_block_set)(const char *name, int state);
    GhVipsImage *(*image_new_from_buffer)(const void *buf, size_t len, const char *option_string, ...);
    int (*thumbnail_buffer)(void *buf, size_t len, GhVipsImage **out, int width, ...);
    int (*image_get_width)(const GhVipsImage *image);
    int (*image_get_height)(const GhVipsImage *image);
    int (*image_get_string)(const GhVipsImage *image, const char *name, const char **out);
    int (*jpegsave_buffer)(GhVipsImage *in, void **buf, size_t *len, ...);
    int (*pngsave_buffer)(GhVipsImage *in, void **buf, size_t *len, ...);
    int (*webpsave_buffer)(GhVipsImage *in, void **buf, size_t *len, ...);
    int (*black)(GhVipsImage **out, int width, int height, ...);
    int (*linear)(GhVipsImage *in, GhVipsImage **out, const double *a, const double *b, int n, ...);
    const char *(*error_buffer)(void);
    void (*error_clear)(void);
    void (*object_unref)(void *object);
    void (*free)(void *memory);
};

static struct gh_vips_functions vips;

// Written under `lock`; `started` is also read without it, on the path every photo takes.
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int started;
static int init_failed;
static char init_failure[256];

// Before main, so before any thread: no plug-in module folder (see the header), and libvips
// finds VIPSHOME set instead of setting it while the server's threads run.
__attribute__((constructor)) static void gh_vips_environment(void) {
    setenv("VIPSHOME", "/dev/null", 1);
}

// Opens `library` and fills `f`; the handle, or NULL with the reason in `error`.
static void *open_library(const char *library, struct gh_vips_functions *f, char *error, size_t capacity) {
    void *handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *reason = dlerror();
        snprintf(error, capacity, "cannot load %s: %s", library, reason ? reason : "unknown reason");
        return NULL;
    }
    struct { const char *name; void **slot; } symbols[] = {
        {"vips_init", (void **)&f->init},
        {"vips_concurrency_set", (void **)&f->concurrency_set},
        {"vips_cache_set_max", (void **)&f->cache_set_max},
        {"vips_cache_set_max_mem", (void **)&f->cache_set_max_mem},
        {"vips_cache_set_max_files", (void **)&f->cache_set_max_files},
        {"vips_block_untrusted_set", (void **)&f->block_untrusted_set},
        {"vips_operation_block_set", (void **)&f->operation_block_set},
        {"vips_image_new_from_buffer", (void **)&f->image_new_from_buffer},
        {"vips_thumbnail_buffer", (void **)&f->thumbnail_buffer},
        {"vips_image_get_width", (void **)&f->image_get_width},
        {"vips_image_get_height", (void **)&f->image_get_height},
        {"vips_image_get_string", (void **)&f->image_get_string},
        {"vips_jpegsave_buffer", (void **)&f->jpegsave_buffer},
        {"vips_pngsave_buffer", (void **)&f->pngsave_buffer},
        {"vips_webpsave_buffer", (void **)&f->webpsave_buffer},
        {"vips_black", (void **)&f->black},
        {"vips_linear", (void **)&f->linear},
        {"vips_error_buffer", (void **)&f->error_buffer},
        {"vips_error_clear", (void **)&f->error_clear},
        // glib's, found through libvips' own dependencies.
        {"g_object_unref", (void **)&f->object_unref},
        {"g_free", (void **)&f->free},
    };
    for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
        *symbols[i].slot = dlsym(handle, symbols[i].name);
        if (*symbols[i].slot == NULL) {
            snprintf(error, capacity, "%s has no %s", library, symbols[i].name);
            dlclose(handle);
            return NULL;
        }
    }
    return handle;
}

int gh_vips_check(const char *library, char *error, size_t capacity) {
    struct gh_vips_functions f;
    void *handle = open_library(library, &f, error, capacity);
    if (handle == NULL) return -1;
    dlclose(handle);
    return 0;
}

static int start_locked(const char *library, char *error, size_t capacity) {
    if (atomic_load(&started)) return 0;
    if (init_failed) {
        snprintf(error, capacity, "%s", init_failure);
        return -1;
    }
    struct gh_vips_functions f;
    // Kept open for the life of the process once started.
    void *handle = open_library(library, &f, error, capacity);
    if (handle == NULL) return -1;
    if (f.init("gatehouse") != 0) {
        const char *reason = f.error_buffer();
        snprintf(init_failure, sizeof init_failure, "vips_init failed: %s", reason && *reason ? reason : "no reason given");
        f.error_clear();
        init_failed = 1;
        snprintf(error, capacity, "%s", init_failure);
        return -1;
    }
    f.concurrency_set(1);
    f.cache_set_max(0);
    f.cache_set_max_mem(0);
    f.cache_set_max_files(0);
    f.block_untrusted_set(GH_TRUE);
    f.operation_block_set("VipsForeignLoad", GH_TRUE);
    f.operation_block_set("VipsForeignLoadJpegBuffer", GH_FALSE);
    f.operation_block_set("VipsForeignLoadPngBuffer", GH_FALSE);
    f.operation_block_set("VipsForeignLoadWebpBuffer", GH_FALSE);
    f.operation_block_set("VipsForeignLoadNsgifBuffer", GH_FALSE);
    vips = f;
    atomic_store(&started, 1);
    return 0;
}

int gh_vips_start(const char *library, char *error, size_t capacity) {
    if (atomic_load(&started)) return 0;
    pthread_mutex_lock(&lock);
    int result = start_locked(library, error, capacity);
    pthread_mutex_unlock(&lock);
    return result;
}

GhVipsImage *gh_vips_header(const void *buf, size_t len) {
    return vips.image_new_from_buffer(buf, len, "", "access", GH_VIPS_ACCESS_SEQUENTIAL, NULL);
}

GhVipsImage *gh_vips_thumbnail(const void *buf, size_t len, int side) {
    GhVipsImage *out = NULL;
    if (vips.thumbnail_buffer((void *)buf, len, &out, side, "height", side, "size", GH_VIPS_SIZE_DOWN,
            "option_string", "fail_on=error", NULL) != 0) return NULL;
    return out;
}

int gh_vips_width(const GhVipsImage *image) { return vips.image_get_width(image); }
int gh_vips_height(const GhVipsImage *image) { return vips.image_get_height(image); }

const char *gh_vips_loader(const GhVipsImage *image) {
    const char *name = NULL;
    if (vips.image_get_string(image, "vips-loader", &name) != 0) return NULL;
    return name;
}

void gh_vips_unref(GhVipsImage *image) { vips.object_unref(image); }

int gh_vips_jpegsave(GhVipsImage *in, void **buf, size_t *len) {
    return vips.jpegsave_buffer(in, buf, len, "strip", GH_TRUE, "Q", 85, "optimize_coding", GH_TRUE, NULL);
}

int gh_vips_pngsave(GhVipsImage *in, void **buf, size_t *len) {
    return vips.pngsave_buffer(in, buf, len, "strip", GH_TRUE, NULL);
}

int gh_vips_webpsave(GhVipsImage *in, void **buf, size_t *len) {
    return vips.webpsave_buffer(in, buf, len, "strip", GH_TRUE, "Q", 85, NULL);
}

void gh_vips_free(void *buf) { vips.free(buf); }

void gh_vips_error_clear(void) { vips.error_clear(); }

int gh_vips_make_test_image(int width, int height, int format, void **buf, size_t *len) {
    GhVipsImage *black = NULL, *colour = NULL;
    if (vips.black(&black, width, height, "bands", 3, NULL) != 0) return -1;
    double add[3] = {40, 120, 200};
    double mul[3] = {1, 1, 1};
    int failed = vips.linear(black, &colour, mul, add, 3, "uchar", GH_TRUE, NULL);
    vips.object_unref(black);
    if (failed) return -1;
    int result = format == 0 ? gh_vips_jpegsave(colour, buf, len)
        : format == 1 ? gh_vips_pngsave(colour, buf, len)
        : gh_vips_webpsave(colour, buf, len);
    vips.object_unref(colour);
    return result;
}
