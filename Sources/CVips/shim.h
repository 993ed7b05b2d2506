#include <vips/vips.h>

// Swift cannot call libvips' variadic functions (every operation takes its options as a
// NULL-terminated list): these wrappers fix the options Gatehouse uses.

// Once per process: no operation cache, one worker thread per pipeline, and only the loaders of
// the photo types (JPEG, PNG, WebP, GIF) — every other loader, the untrusted ones (ImageMagick,
// PDF, SVG, …) first, is blocked. Nothing here opens a file or the network.
static inline int gh_vips_start(void) {
    if (vips_init("gatehouse") != 0) return -1;
    vips_concurrency_set(1);
    vips_cache_set_max(0);
    vips_cache_set_max_mem(0);
    vips_cache_set_max_files(0);
    vips_block_untrusted_set(TRUE);
    vips_operation_block_set("VipsForeignLoad", TRUE);
    vips_operation_block_set("VipsForeignLoadJpegBuffer", FALSE);
    vips_operation_block_set("VipsForeignLoadPngBuffer", FALSE);
    vips_operation_block_set("VipsForeignLoadWebpBuffer", FALSE);
    vips_operation_block_set("VipsForeignLoadNsgifBuffer", FALSE);
    return 0;
}

// The header only (libvips loads lazily): width, height and the loader's nickname; no pixel is
// decoded. NULL on failure (the reason in vips_error_buffer()).
static inline VipsImage *gh_vips_header(const void *buf, size_t len) {
    return vips_image_new_from_buffer(buf, len, "", "access", VIPS_ACCESS_SEQUENTIAL, NULL);
}

// Decoded, shrunk while loading where the format allows (JPEG, WebP), so that its longest side is
// at most `side` (never enlarged), and turned upright by its EXIF orientation. A damaged image
// fails rather than being half decoded.
static inline VipsImage *gh_vips_thumbnail(const void *buf, size_t len, int side) {
    VipsImage *out = NULL;
    if (vips_thumbnail_buffer((void *)buf, len, &out, side, "height", side, "size", VIPS_SIZE_DOWN,
            "option_string", "fail_on=error", NULL) != 0) return NULL;
    return out;
}

// Encoders, every piece of metadata (EXIF, GPS, XMP, IPTC, ICC profile, comments) left out.
static inline int gh_vips_jpegsave(VipsImage *in, void **buf, size_t *len) {
    return vips_jpegsave_buffer(in, buf, len, "strip", TRUE, "Q", 85, "optimize_coding", TRUE, NULL);
}
static inline int gh_vips_pngsave(VipsImage *in, void **buf, size_t *len) {
    return vips_pngsave_buffer(in, buf, len, "strip", TRUE, NULL);
}
static inline int gh_vips_webpsave(VipsImage *in, void **buf, size_t *len) {
    return vips_webpsave_buffer(in, buf, len, "strip", TRUE, "Q", 85, NULL);
}

// Test support: a uniform image of `width` × `height` (three bands) in `format`
// (0 JPEG, 1 PNG, 2 WebP). NULL-free on success.
static inline int gh_vips_make_test_image(int width, int height, int format, void **buf, size_t *len) {
    VipsImage *black = NULL, *colour = NULL;
    if (vips_black(&black, width, height, "bands", 3, NULL) != 0) return -1;
    double add[3] = {40, 120, 200};
    double mul[3] = {1, 1, 1};
    int failed = vips_linear(black, &colour, mul, add, 3, "uchar", TRUE, NULL);
    g_object_unref(black);
    if (failed) return -1;
    int result = format == 0 ? gh_vips_jpegsave(colour, buf, len) : format == 1 ? gh_vips_pngsave(colour, buf, len) : gh_vips_webpsave(colour, buf, len);
    g_object_unref(colour);
    return result;
}
