#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/pem.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/rsa.h>
#include <openssl/ecdsa.h>
#include <openssl/hmac.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/kdf.h>

/* EVP_PKEY_PUBLIC_KEY is a compound macro that Swift does not import. */
static inline int gatehouse_evp_pkey_public_key_selection(void) { return EVP_PKEY_PUBLIC_KEY; }
