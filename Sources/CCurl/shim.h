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
