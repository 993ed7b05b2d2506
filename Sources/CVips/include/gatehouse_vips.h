#ifndef GATEHOUSE_VIPS_H
#define GATEHOUSE_VIPS_H

#include <stddef.h>

// libvips, opened at the first photo rather than linked (ADR 0025): libvips and the ~70 libraries
// it needs stay out of a server that is never sent a photo. libvips' headers are not included: a
// VipsImage is opaque here, and the few enumeration values used are fixed by libvips' ABI (soname
// libvips.so.42).
//
// libvips' plug-in modules (ImageMagick, PDF, HEIF, JPEG XL, OpenSlide) are never loaded: at
// process start, before any thread, `VIPSHOME` is set to /dev/null, so the folder libvips loads
// them from cannot exist. Their loaders would be blocked anyway; this keeps their code out of the
// process, and libvips no longer sets `VIPSHOME` itself at its start (a setenv while other threads
// may read the environment).

typedef struct GhVipsImage GhVipsImage;

// Opens `library` (a soname, such as "libvips.so.42"), resolves every function used below and
// starts libvips: no operation cache, one worker thread per pipeline, and only the loaders of the
// photo types (JPEG, PNG, WebP, GIF) — every other loader, the untrusted ones first, is blocked.
// Thread-safe; once started, later calls return 0 at once. Returns 0, or -1 with the reason in
// `error` (NUL-terminated, at most `capacity` bytes). A library that cannot be opened or lacks a
// function is closed again and tried anew by the next call; a failed vips_init is final (libvips
// cannot be started twice), and later calls give its reason again.
int gh_vips_start(const char *library, char *error, size_t capacity);

// Test support: opens `library` and resolves those functions, then closes it; starts nothing.
// 0, or -1 with the reason in `error`.
int gh_vips_check(const char *library, char *error, size_t capacity);

// Everything below requires a successful gh_vips_start.

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

// Empties libvips' error buffer (one for the process): PhotoCodec reports its own errors.
void gh_vips_error_clear(void);

// Test support: a uniform image of `width` × `height` (three bands) in `format`
// (0 JPEG, 1 PNG, 2 WebP). 0 on success.
int gh_vips_make_test_image(int width, int height, int format, void **buf, size_t *len);

#endif
