#ifndef GATEHOUSE_VIPS_H
#define GATEHOUSE_VIPS_H

#include <stddef.h>

// libvips, loaded at the first photo rather than linked (ADR 0025): libvips and the ~60 libraries
// only it needs stay out of a server that is never sent a photo, about 10 MiB of its memory.
// libvips' headers are not included: a VipsImage is opaque here, and the few enumeration values
// used are fixed by libvips' ABI (soname libvips.so.42).

typedef struct GhVipsImage GhVipsImage;

// Opens `library` (a soname, such as "libvips.so.42") and resolves every function used below; on
// success, starts libvips once for the process: no operation cache, one worker thread per
// pipeline, and only the loaders of the photo types (JPEG, PNG, WebP, GIF) — every other loader,
// the untrusted ones (ImageMagick, PDF, SVG, …) first, is blocked. Returns 0, or -1 with the reason
// in `error` (NUL-terminated, at most `capacity` bytes); a library that cannot be opened or lacks a
// function is closed again. Not thread-safe: PhotoCodec calls it once, from a Swift global's
// initialiser. After a success, a later call only checks that `library` opens and has those
// functions; libvips is not started again.
int gh_vips_load(const char *library, char *error, size_t capacity);

// Everything below requires a successful gh_vips_load.

// The header only (libvips decodes lazily): no pixel is decoded. NULL on failure.
GhVipsImage *gh_vips_header(const void *buf, size_t len);

// Decoded, shrunk while loading where the format allows (JPEG, WebP), so that its longest side is
// at most `side` (never enlarged), and turned upright by its EXIF orientation. A damaged image
// fails rather than being half decoded. NULL on failure.
GhVipsImage *gh_vips_thumbnail(const void *buf, size_t len, int side);

int gh_vips_width(const GhVipsImage *image);
int gh_vips_height(const GhVipsImage *image);
// The loader's nickname ("jpegload_buffer", …); NULL when unknown. Owned by the image.
const char *gh_vips_loader(const GhVipsImage *image);
void gh_vips_unref(GhVipsImage *image);

// Encoders, every piece of metadata (EXIF, GPS, XMP, IPTC, ICC profile, comments) left out.
// 0 on success, with a buffer to release with gh_vips_free.
int gh_vips_jpegsave(GhVipsImage *in, void **buf, size_t *len);
int gh_vips_pngsave(GhVipsImage *in, void **buf, size_t *len);
int gh_vips_webpsave(GhVipsImage *in, void **buf, size_t *len);
void gh_vips_free(void *buf);

// libvips' error buffer, per thread, emptied.
void gh_vips_error_clear(void);

// Test support: a uniform image of `width` × `height` (three bands) in `format`
// (0 JPEG, 1 PNG, 2 WebP). 0 on success.
int gh_vips_make_test_image(int width, int height, int format, void **buf, size_t *len);

#endif
