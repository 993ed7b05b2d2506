"""Schemathesis checks of our own, loaded through SCHEMATHESIS_HOOKS by scripts/fuzz/run."""

import schemathesis

# The 5xx answers docs/errors.md defines, by problem code: a provider the app has not configured, a
# provider that failed, a busy or unreachable database. Anything else at 5xx is a fault.
DOCUMENTED_5XX = {
    503: {"auth/provider-not-configured", "provider/unavailable", "server/busy", "server/unavailable"},
}


@schemathesis.check
def no_undocumented_server_error(ctx, response, case):
    """No 500 ever; a 5xx only with a code docs/errors.md gives it, as problem+json."""
    status = response.status_code
    if status < 500:
        return None
    code = None
    try:
        code = response.json().get("code")
    except Exception:
        pass
    if code not in DOCUMENTED_5XX.get(status, set()):
        raise AssertionError(f"{status} with code {code!r}: not a documented server error")
    return None
