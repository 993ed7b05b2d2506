#include <curl/curl.h>

static inline CURLcode gh_curl_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode gh_curl_setopt_ptr(CURL *h, CURLoption o, const void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode gh_curl_setopt_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode gh_curl_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }

typedef size_t (*gh_curl_write_callback)(char *ptr, size_t size, size_t nmemb, void *userdata);
static inline CURLcode gh_curl_set_write_function(CURL *h, gh_curl_write_callback f) { return curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, f); }
static inline CURLcode gh_curl_set_header_function(CURL *h, gh_curl_write_callback f) { return curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, f); }
static inline CURLcode gh_curl_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode gh_curl_set_opensocket_function(CURL *h, curl_opensocket_callback f) { return curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, f); }
static inline CURLcode gh_curl_set_read_function(CURL *h, curl_read_callback f) { return curl_easy_setopt(h, CURLOPT_READFUNCTION, f); }
static inline CURLcode gh_curl_set_debug_function(CURL *h, curl_debug_callback f) { return curl_easy_setopt(h, CURLOPT_DEBUGFUNCTION, f); }

/* libcurl converts a non-ASCII host name to IDNA A-labels with libidn2's idn2_lookup_ul, which
   reads its input in the charset of the current locale: in the C locale every such name fails to
   convert (curl_url_get with CURLU_PUNYCODE answers CURLUE_OUT_OF_MEMORY, and SMTP sends the
   domain as raw UTF-8). A C.UTF-8 LC_CTYPE locale, set on the calling thread only with
   uselocale, makes the input read as UTF-8. NULL if the system has no C.UTF-8. */
#include <locale.h>
static inline locale_t gh_utf8_ctype_locale(void) { return newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0); }
