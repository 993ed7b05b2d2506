"""Schemathesis checks and hooks of our own, loaded through SCHEMATHESIS_HOOKS by scripts/fuzz/run."""

import re
import sys

import schemathesis

_reported = set()


def _not_counted(case, response, why):
    """Says once per operation and reason which refusals were not counted, so that the log shows them."""
    key = (case.operation.label, response.status_code, why)
    if key not in _reported:
        _reported.add(key)
        print(f"fuzz: not counted as schema-valid request rejected: {case.operation.label} {response.status_code} {why}", file=sys.stderr)
    return False

# The 5xx answers docs/errors.md defines, by problem code: a provider the app has not configured, a
# provider that failed, a busy or unreachable database. Anything else at 5xx is a fault.
DOCUMENTED_5XX = {
    502: {"email/test-failed"},
    503: {"auth/provider-not-configured", "provider/unavailable", "server/busy", "server/unavailable"},
}

# Answers to a well-formed request that say something about the world, not about the request's
# shape: a wrong password or code, a code that expired, a password under the app's minimum (which
# the app sets), a login code or web flow that is unknown or used, a redirect URI the app does not
# list, bytes that are not an image. The document cannot know these in advance, so schemathesis's
# positive_data_acceptance ("schema-valid request rejected") may not count them. A
# request/validation-failed answer to a schema-valid request is still a failure: it means the
# document promised a shape the server refuses.
DOMAIN_REFUSALS = {
    400: {"auth/invalid-credential", "auth/invalid-code", "auth/code-expired", "auth/weak-password",
          "auth/invalid-login-code", "auth/invalid-flow", "auth/invalid-redirect-uri"},
    415: {"files/unsupported-type"},
}

# Fields whose valid values depend on what the server issued or stored, on the clock, or on
# outside facts, which no schema can state: a cursor is valid only if the endpoint gave it out; a
# ban's suspended_until must be in the future; an Apple private key must parse as a P-256 key; a
# webhook URL must not name a private address; a mail template must hold the placeholders of its
# purpose (and its body fit in bytes, not characters); email.locale must have templates. A
# validation error on such fields alone is a domain refusal too. So is a passkey credential (its
# bytes are an authenticator's to make: base64url that is not CBOR or client data JSON) and the
# passkeys settings (rp_id must be a domain of every origin's host: a rule across fields), and the
# Firebase hash parameters (base64 keys of bounded decoded length, and scrypt's memory,
# 2^mem_cost × rounds × 128 bytes at most 1 GiB: a rule across fields), and a provider's issuer
# and secret, whose rules depend on its kind (LINE's issuer is fixed, GitHub needs a secret).
OUTSIDE_FACT_FIELDS = [
    re.compile(r"^firebase\.hash_config\."),
    re.compile(r"^oidc_providers\[\d+\]\.(issuer|client_secret)$"),
    re.compile(r"^credential(\.|$)"),
    re.compile(r"^passkey(\.|$)"),
    re.compile(r"^passkeys\."),
    re.compile(r"^cursor$"),
    re.compile(r"^suspended_until$"),
    re.compile(r"^apple\.private_key$"),
    re.compile(r"^webhooks\[\d+\]\.url$"),
    re.compile(r"^email\.templates\."),
    re.compile(r"^email\.locale$"),
]
# Rules between two fields that OpenAPI cannot state (an idle timeout at least the access token's
# life), a secret kept with {"set": true} when none is stored, and the read-only fields of the
# settings, which a patch may carry only with their stored values, and an email change to the
# account's own address, and a NUL in a field the schema leaves open (Apple's notification body
# accepts fields Apple may add; the server refuses U+0000 anywhere in JSON), and the limits of a
# user's custom data (app_metadata, user_metadata: at most 4096 bytes serialized, 5 levels deep,
# which JSON Schema cannot state), and the anonymous users' rules: an email with a password only
# for an account that has none, anonymous users only without a required second step, and a
# reauthentication's provider and a sign_in_methods entry, which must name a provider the app
# defines (a rule across fields), and the admin checks, which need what the app's settings hold
# (an SMTP server of its own to test, the webhook URL to send a test delivery to), and a stored SMTP
# password kept only for the server it was stored for (a rule across fields and the stored state): known by their
# messages.
OUTSIDE_FACT_MESSAGES = ("The app has no SMTP server of its own to test", "Not one of the app's webhooks",
                         "The app has no webhook to test", "Send the password again",
                         "No value is set to keep", "Must be at least access_token_ttl_seconds", "Read-only.",
                         "This is the account's address already.", "Must not contain U+0000.",
                         "Must be at most 4096 bytes as JSON.", "Must not nest objects and arrays more than 5 levels deep.",
                         "The account has an email address already", "Must be false while mfa.policy is required",
                         "Must be apple, google or the id of one of the app's oidc_providers.", "Unknown sign-in method")



def _outside_fact(error):
    field, message = error.get("field") or "", error.get("message") or ""
    return any(pattern.match(field) for pattern in OUTSIDE_FACT_FIELDS) or message.startswith(OUTSIDE_FACT_MESSAGES)


def _problem(response):
    try:
        body = response.json()
    except Exception:
        return {}
    return body if isinstance(body, dict) else {}


def _refresh_without_token(case):
    """POST /v1/auth/refresh with neither a body token nor a refresh cookie: the one rule of
    the document (written in its description) that OpenAPI cannot state across body and cookie."""
    if case.operation.definition.raw.get("operationId") != "refresh":
        return False
    body = case.body if isinstance(case.body, dict) else {}
    cookies = case.cookies or {}
    return not body.get("refresh_token") and not any(name == "gh_refresh" or name.startswith("gh_refresh_") for name in cookies)


@schemathesis.check
def no_undocumented_server_error(ctx, response, case):
    """No 500 ever; a 5xx only with a code docs/errors.md gives it, as problem+json."""
    status = response.status_code
    if status < 500:
        return None
    code = _problem(response).get("code")
    if code not in DOCUMENTED_5XX.get(status, set()):
        raise AssertionError(f"{status} with code {code!r}: not a documented server error")
    return None


@schemathesis.hook
def filter_failure(context, failure, case, response):
    """Keeps every failure but a "schema-valid request rejected" whose answer is a domain refusal
    (above). Everything else positive_data_acceptance finds fails the run."""
    if getattr(failure, "code", None) != "ST202":
        return True
    problem = _problem(response)
    code = problem.get("code")
    if code in DOMAIN_REFUSALS.get(response.status_code, set()):
        return _not_counted(case, response, code)
    if response.status_code == 400 and code == "request/validation-failed":
        errors = [error for error in problem.get("errors", []) if isinstance(error, dict)]
        if errors and all(_outside_fact(error) for error in errors):
            return _not_counted(case, response, "request/validation-failed on " + ", ".join(sorted({e.get("field") or "" for e in errors})))
        fields = {error.get("field") for error in errors}
        if fields == {"refresh_token"} and _refresh_without_token(case):
            return _not_counted(case, response, "request/validation-failed on refresh_token, with neither the body's token nor the cookie")
    return True


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx, value):
    """The import's NDJSON body (POST /v1/admin/users/import), which the document gives as a
    binary string: the example's text, or the bytes the fuzzer made, sent as they are (the server
    reports each line that is not an import line)."""
    return value if isinstance(value, bytes) else str(value).encode("utf-8")
