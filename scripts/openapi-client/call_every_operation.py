"""Calls every operation of docs/openapi.json through a client generated from it
(openapi-python-client), against a running Gatehouse; run by scripts/openapi-client/run.

    call_every_operation.py make-keys RUN               # Apple's and Google's JWKS and signing key
    call_every_operation.py run RUN BASE ADMIN DOCUMENT  # the walk

Each call names its operation and the status the document gives the answer the walk expects;
the generated client raises on a status the document does not list, and parses every body with
the generated models. The walk fails if any operation of the document was not called.
"""

import base64
import hashlib
import hmac
import io
import json
import os
import re
import secrets
import sys
import time
import urllib.parse

KID = "openapi-client-test"


def make_keys(run):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with open(os.path.join(run, "provider-key.pem"), "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    # The app's Apple key (.p8: PKCS#8 PEM, P-256), which the web flow needs configured.
    p8 = ec.generate_private_key(ec.SECP256R1())
    with open(os.path.join(run, "apple-key.p8"), "wb") as f:
        f.write(p8.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    numbers = key.public_key().public_numbers()

    def b64(n):
        return base64.urlsafe_b64encode(n.to_bytes((n.bit_length() + 7) // 8, "big")).rstrip(b"=").decode()

    jwks = json.dumps({"keys": [{"kty": "RSA", "kid": KID, "alg": "RS256", "use": "sig", "n": b64(numbers.n), "e": b64(numbers.e)}]})
    for path in ("apple/auth/keys", "google/jwks.json"):
        with open(os.path.join(run, "keys", path), "w") as f:
            f.write(jwks)


class Walk:
    def __init__(self, run, base, admin, document):
        import jwt

        from gatehouse_client import AuthenticatedClient, Client

        self.jwt = jwt
        self.run = run
        self.base = base
        self.admin = admin
        with open(document) as f:
            self.document = json.load(f)
        with open(os.path.join(run, "provider-key.pem"), "rb") as f:
            self.provider_key = f.read()
        self.Client = Client
        self.AuthenticatedClient = AuthenticatedClient
        self.called = {}
        self.failures = []

    # --- clients -------------------------------------------------------------------------
    def anonymous(self):
        return self.Client(base_url=self.base, raise_on_unexpected_status=True)

    def platform(self):
        return self.AuthenticatedClient(base_url=self.base, token=self.admin, raise_on_unexpected_status=True)

    def app(self):
        return self.Client(base_url=self.base, headers={"X-App-Key": self.app_key}, raise_on_unexpected_status=True)

    def user(self, access_token):
        return self.AuthenticatedClient(base_url=self.base, token=access_token, headers={"X-App-Key": self.app_key}, raise_on_unexpected_status=True)

    def tenant_admin(self):
        return self.AuthenticatedClient(base_url=self.base, token=self.secret_key, raise_on_unexpected_status=True)

    # --- one call ------------------------------------------------------------------------
    def call(self, operation_id, module, status, *args, **kwargs):
        """Calls `module.sync_detailed` and checks the status; answers the parsed body."""
        response = module.sync_detailed(*args, **kwargs)
        self.called.setdefault(operation_id, []).append(response.status_code)
        if response.status_code != status:
            self.failures.append(f"{operation_id}: {response.status_code}, expected {status}: {response.content[:300]!r}")
            raise SystemExit("\n".join(self.failures))
        parsed = response.parsed
        from gatehouse_client.models import Problem

        if status < 400 and isinstance(parsed, Problem):
            raise SystemExit(f"{operation_id}: {status} parsed as a problem")
        if status >= 400 and not isinstance(parsed, Problem):
            raise SystemExit(f"{operation_id}: {status} not parsed as a problem: {response.content[:300]!r}")
        print(f"openapi-client: {operation_id} -> {response.status_code}")
        return response

    # --- mail and provider tokens --------------------------------------------------------
    def mailed_code(self, address, after):
        """The code of the newest mail the log: mailer wrote to `address` after the log had `after`
        bytes: the plain-text part has it alone on its line."""
        path = os.path.join(self.run, "server.log")
        for _ in range(100):
            with open(path, "rb") as f:
                f.seek(after)
                lines = f.read().decode("utf-8", "replace").splitlines()
            codes = []
            for line in lines:
                try:
                    message = json.loads(line).get("message") or ""
                except ValueError:
                    continue
                if message.startswith(f"mail (log:) to {address},"):
                    codes += re.findall(r"\n\n([0-9]{6})\n\n", message)
            if codes:
                return codes[-1]
            time.sleep(0.1)
        raise SystemExit(f"no code was mailed to {address}")

    def log_size(self):
        return os.path.getsize(os.path.join(self.run, "server.log"))

    def provider_token(self, issuer, audience, subject, email, nonce=None, email_verified=True):
        now = int(time.time())
        claims = {"iss": issuer, "aud": audience, "sub": subject, "iat": now, "exp": now + 600, "email": email, "email_verified": email_verified}
        if nonce is not None:
            claims["nonce"] = hashlib.sha256(nonce.encode()).hexdigest() if issuer == "https://appleid.apple.com" else nonce
        return self.jwt.encode(claims, self.provider_key, algorithm="RS256", headers={"kid": KID})

    # --- the walk ------------------------------------------------------------------------
    def walk(self):
        from gatehouse_client import models as m
        from gatehouse_client.api.account import (add_passkey, add_password, begin_totp_enrolment, change_password, confirm_email_change,
                                                  confirm_totp_enrolment, delete_me, delete_passkey, delete_photo, end_session, export_my_data, get_me, get_mfa,
                                                  link_apple, link_google, link_provider, list_identities, list_passkeys, list_sessions, passkey_creation_options,
                                                  patch_me, remove_totp_factor, rename_passkey, request_email_change, unlink_identity, upload_photo)
        from gatehouse_client.api.admin import (ban_user, create_app, delete_user, disable_app, enable_app, end_user_sessions, export_users, list_user_sessions, get_app_settings,
                                                get_user, import_users, list_apps, update_user, list_dead_outbox_items, list_events, list_users, patch_app_settings, remove_user_factor, rotate_secret_key,
                                                retry_outbox_item, rotate_signing_key, unban_user, send_test_email, send_test_webhook,
                                                list_webhook_deliveries)
        from gatehouse_client.api.apps import get_app, get_authorization_server_metadata, get_discovery, get_jwks
        from gatehouse_client.api.auth import (passkey_request_options, reauthenticate, refresh, sign_in, sign_in_anonymously, sign_in_with_passkey,
                                               sign_out, sign_up, verify_mfa)
        from gatehouse_client.api.email_codes import (confirm_password_reset, confirm_verification, send_password_reset, send_reauthentication_code,
                                                      send_sign_in_code, send_verification_code, verify_sign_in_code)
        from gatehouse_client.api.files import delete_file, get_file, get_file_content, get_public_content, list_files, upload_file
        from gatehouse_client.api.operations import health, metrics, ready
        from gatehouse_client.api.providers import (apple_authorize, apple_callback, exchange_login_code, provider_authorize, provider_callback,
                                                    provider_callback_form, receive_apple_notification, sign_in_with_apple, sign_in_with_google,
                                                    sign_in_with_provider)
        from gatehouse_client.types import File

        apple_client_id, google_client_id = "com.example.openapi", "openapi-client.apps.googleusercontent.com"
        kakao_client_id = "openapi-kakao-app-key"
        redirect_uri = "https://app.example.com/signed-in"
        password = "correct horse battery"

        # Operations and the platform.
        self.call("health", health, 200, client=self.anonymous())
        self.call("ready", ready, 200, client=self.anonymous())
        self.call("metrics", metrics, 200, client=self.platform())
        created = self.call("createApp", create_app, 201, client=self.platform(), body=m.AppSettingsFields.from_dict({
            "name": "Generated client", "sign_in_methods": ["password", "email_code", "apple", "google", "kakao"],
            "oidc_providers": [{"id": "kakao", "kind": "kakao", "client_ids": ["openapi-kakao-app-key"]}],
            "rate_limits": {"auth_per_minute_per_ip": 1000, "web_flow_per_minute_per_ip": 1000}}))
        created_at = time.monotonic()
        self.app_key = created.parsed.data.app_key
        self.secret_key = created.parsed.data.secret_key
        app_id = created.parsed.data.app.id
        # The operator's switch, on an app of its own (switched off and on again).
        spare = self.call("createApp", create_app, 201, client=self.platform(), body=m.AppSettingsFields.from_dict({"name": "Switched"}))
        self.call("disableApp", disable_app, 200, spare.parsed.data.app.id, client=self.platform())
        self.call("listApps", list_apps, 200, client=self.platform())
        self.call("enableApp", enable_app, 200, spare.parsed.data.app.id, client=self.platform())

        # The tenant admin configures the providers.
        self.call("getAppSettings", get_app_settings, 200, client=self.tenant_admin())
        self.call("patchAppSettings", patch_app_settings, 200, client=self.tenant_admin(), body=m.AppSettingsPatch.from_dict({
            "redirect_uris": [redirect_uri], "apple": {"client_ids": [apple_client_id], "services_id": "com.example.openapi.web"},
            "google": {"client_ids": [google_client_id]}, "passkeys": {"rp_id": "example.com", "origins": ["https://app.example.com"]},
            "allow_anonymous": True, "anonymous_ttl_days": 7}))
        rotated = self.call("rotateSecretKey", rotate_secret_key, 201, client=self.tenant_admin())
        self.secret_key = rotated.parsed.data.secret_key

        # Public app documents.
        self.call("getApp", get_app, 200, client=self.app())
        self.call("getJWKS", get_jwks, 200, app_id, client=self.anonymous())
        self.call("getDiscovery", get_discovery, 200, app_id, client=self.anonymous())
        self.call("getAuthorizationServerMetadata", get_authorization_server_metadata, 200, app_id, client=self.anonymous())

        # Password accounts and sessions.
        signed_up = self.call("signUp", sign_up, 201, client=self.app(), body=m.SignUpRequest(email="ada@example.com", password=password, first_name="Ada"))
        ada_id = signed_up.parsed.data.user.id
        signed_in = self.call("signIn", sign_in, 200, client=self.app(), body=m.SignInRequest(email="ada@example.com", password=password))
        refreshed = self.call("refresh", refresh, 200, client=self.app(), body=m.RefreshRequest(refresh_token=signed_in.parsed.data.refresh_token))
        ada = self.user(refreshed.parsed.data.access_token)
        # An anonymous account, upgraded in place by an email and a password.
        guest = self.call("signInAnonymously", sign_in_anonymously, 201, client=self.app(), body=m.AnonymousSignInRequest.from_dict({}))
        self.call("addPassword", add_password, 200, client=self.user(guest.parsed.data.access_token),
                  body=m.AddPasswordRequest(password=password, email="guest@example.com"))
        self.call("reauthenticate", reauthenticate, 200, client=ada, body=m.ReauthenticateWithPassword(password=password))
        self.call("getMe", get_me, 200, client=ada)
        self.call("patchMe", patch_me, 200, client=ada, body=m.PatchMeRequest.from_dict({"last_name": "Lovelace", "display_name": "Ada L.", "user_metadata": {"theme": "dark"}}))
        sessions = self.call("listSessions", list_sessions, 200, client=ada)
        other = next(s.id for s in sessions.parsed.data if not s.current)
        self.call("endSession", end_session, 204, other, client=ada)
        self.call("listIdentities", list_identities, 200, client=ada)
        exported = self.call("exportMyData", export_my_data, 200, client=ada)
        if exported.parsed.data.profile.id != ada_id or not exported.parsed.data.events:
            raise SystemExit("exportMyData: not Ada's data")

        # Passkeys: the options, and ceremonies this client cannot sign (an authenticator's
        # answers are made in PasskeysAPITests and DocumentationTests, with a software one).
        def credential(**response):
            return {"id": "AAAA", "rawId": "AAAA", "type": "public-key", "clientExtensionResults": {}, "response": {"clientDataJSON": "e30", **response}}
        self.call("passkeyCreationOptions", passkey_creation_options, 200, client=ada, body=m.EmptyRequest())
        self.call("addPasskey", add_passkey, 400, client=ada, body=m.AddPasskeyRequest.from_dict({"credential": credential(attestationObject="oA"), "name": "Laptop"}))
        self.call("listPasskeys", list_passkeys, 200, client=ada)
        self.call("renamePasskey", rename_passkey, 404, "pk_unknown", client=ada, body=m.RenamePasskeyRequest(name="Phone"))
        self.call("deletePasskey", delete_passkey, 404, "pk_unknown", client=ada)
        self.call("passkeyRequestOptions", passkey_request_options, 200, client=self.app(), body=m.EmptyRequest())
        self.call("signInWithPasskey", sign_in_with_passkey, 400, client=self.app(), body=m.PasskeySignInRequest.from_dict(
            {"credential": credential(authenticatorData="AAAA", signature="AAAA")}))

        # Emailed codes (read from the log: mailer's lines).
        mark = self.log_size()
        self.call("sendSignInCode", send_sign_in_code, 202, client=self.app(), body=m.EmailAddressRequest(email="grace@example.com"))
        verified = self.call("verifySignInCode", verify_sign_in_code, 201, client=self.app(),
                             body=m.EmailCodeRequest(email="grace@example.com", code=self.mailed_code("grace@example.com", mark)))
        if not verified.parsed.data.user.email_verified:
            raise SystemExit("verifySignInCode: the address is not verified")
        mark = self.log_size()
        self.call("sendPasswordReset", send_password_reset, 202, client=self.app(), body=m.EmailAddressRequest(email="grace@example.com"))
        self.call("confirmPasswordReset", confirm_password_reset, 204, client=self.app(), body=m.PasswordResetConfirmRequest(
            email="grace@example.com", code=self.mailed_code("grace@example.com", mark), password="grace's new password"))
        mark = self.log_size()
        self.call("sendReauthenticationCode", send_reauthentication_code, 202, client=ada, body=m.EmptyRequest())
        self.call("reauthenticate", reauthenticate, 200, client=ada, body=m.ReauthenticateWithCode(code=self.mailed_code("ada@example.com", mark)))
        mark = self.log_size()
        self.call("requestEmailChange", request_email_change, 202, client=ada, body=m.EmailAddressRequest(email="ada@new.example"))
        self.call("confirmEmailChange", confirm_email_change, 200, client=ada,
                  body=m.EmailCodeRequest(email="ada@new.example", code=self.mailed_code("ada@new.example", mark)))
        self.call("changePassword", change_password, 204, client=ada, body=m.ChangePasswordRequest(current_password=password, password="a much longer passphrase"))

        # Second factors: an authenticator app enrolled (its codes computed here, RFC 6238), the
        # second step answered with a recovery code, the factor removed by its user, another by the admin.
        self.call("patchAppSettings", patch_app_settings, 200, client=self.tenant_admin(), body=m.AppSettingsPatch.from_dict({"mfa": {"policy": "optional"}}))
        mia_up = self.call("signUp", sign_up, 201, client=self.app(), body=m.SignUpRequest(email="mia@example.com", password=password))
        mia_id = mia_up.parsed.data.user.id
        mia = self.user(mia_up.parsed.data.access_token)

        def totp(secret_text):
            key = base64.b32decode(secret_text + "=" * (-len(secret_text) % 8))
            mac = hmac.new(key, (int(time.time()) // 30).to_bytes(8, "big"), hashlib.sha1).digest()
            offset = mac[-1] & 0x0F
            return f"{(int.from_bytes(mac[offset:offset + 4], 'big') & 0x7FFFFFFF) % 1000000:06d}"

        begun = self.call("beginTOTPEnrolment", begin_totp_enrolment, 201, client=mia, body=m.TOTPEnrolmentRequest(name="Phone"))
        confirmed = self.call("confirmTOTPEnrolment", confirm_totp_enrolment, 200, begun.parsed.data.id, client=mia,
                              body=m.TOTPConfirmRequest(code=totp(begun.parsed.data.secret)))
        self.call("getMFA", get_mfa, 200, client=mia)
        gated = self.call("signIn", sign_in, 401, client=self.app(), body=m.SignInRequest(email="mia@example.com", password=password))
        if gated.parsed.code != "auth/mfa-required" or not gated.parsed.mfa_token:
            raise SystemExit(f"signIn: not auth/mfa-required: {gated.content[:300]!r}")
        answered = self.call("verifyMFA", verify_mfa, 200, client=self.app(), body=m.MFAVerifyRequest(
            mfa_token=gated.parsed.mfa_token, recovery_code=confirmed.parsed.data.recovery_codes[0]))
        self.call("removeTOTPFactor", remove_totp_factor, 204, begun.parsed.data.id, client=self.user(answered.parsed.data.access_token))
        again = self.call("beginTOTPEnrolment", begin_totp_enrolment, 201, client=mia, body=m.TOTPEnrolmentRequest(name="Tablet"))
        self.call("confirmTOTPEnrolment", confirm_totp_enrolment, 200, again.parsed.data.id, client=mia, body=m.TOTPConfirmRequest(code=totp(again.parsed.data.secret)))
        self.call("removeUserFactor", remove_user_factor, 204, mia_id, again.parsed.data.id, client=self.tenant_admin())

        # Google: a new account whose address Google has not verified, then its verification code.
        nonce = secrets.token_urlsafe(16)
        google = self.call("signInWithGoogle", sign_in_with_google, 201, client=self.app(), body=m.GoogleNativeSignIn(
            id_token=self.provider_token("https://accounts.google.com", google_client_id, "google-linus", "linus@example.com", nonce, email_verified=False),
            nonce=nonce))
        linus = self.user(google.parsed.data.access_token)
        mark = self.log_size()
        self.call("sendVerificationCode", send_verification_code, 202, client=linus, body=m.EmptyRequest())
        self.call("confirmVerification", confirm_verification, 200, client=linus, body=m.CodeRequest(code=self.mailed_code("linus@example.com", mark)))
        self.call("addPassword", add_password, 200, client=linus, body=m.AddPasswordRequest(password="linus's own password"))
        nonce = secrets.token_urlsafe(16)
        self.call("linkApple", link_apple, 200, client=linus, body=m.LinkAppleRequest(
            identity_token=self.provider_token("https://appleid.apple.com", apple_client_id, "apple-linus", "linus@privaterelay.appleid.com", nonce),
            nonce=nonce, authorization_code="c-unused.0.abcd"))
        self.call("unlinkIdentity", unlink_identity, 200, "apple", client=linus)

        # Apple: a new account, then Google linked to it.
        nonce = secrets.token_urlsafe(16)
        apple = self.call("signInWithApple", sign_in_with_apple, 201, client=self.app(), body=m.AppleNativeSignIn(
            identity_token=self.provider_token("https://appleid.apple.com", apple_client_id, "apple-tim", "tim@privaterelay.appleid.com", nonce),
            nonce=nonce, first_name="Tim"))
        tim = self.user(apple.parsed.data.access_token)
        nonce = secrets.token_urlsafe(16)
        self.call("linkGoogle", link_google, 200, client=tim, body=m.LinkGoogleRequest(
            id_token=self.provider_token("https://accounts.google.com", google_client_id, "google-tim", "tim@example.com", nonce), nonce=nonce))

        # One of the app's own providers (a kakao one, its discovery document on the static server):
        # a new account through it, then linked to Tim.
        nonce = secrets.token_urlsafe(16)
        self.call("signInWithProvider", sign_in_with_provider, 201, "kakao", client=self.app(), body=m.ProviderIDTokenSignIn(
            id_token=self.provider_token("https://kauth.kakao.com", kakao_client_id, "kakao-kim", "kim@example.com", nonce), nonce=nonce))
        nonce = secrets.token_urlsafe(16)
        self.call("linkProvider", link_provider, 200, "kakao", client=tim, body=m.ProviderIDTokenSignIn(
            id_token=self.provider_token("https://kauth.kakao.com", kakao_client_id, "kakao-tim", "tim@example.com", nonce), nonce=nonce))

        # The kakao provider's web flow: authorize redirects to Kakao's authorization endpoint (from
        # the discovery document); a callback, by query or by form, whose state no flow has is refused.
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        started = self.call("providerAuthorize", provider_authorize, 302, "kakao", client=self.anonymous(), app_key=self.app_key, redirect_uri=redirect_uri,
                            state="openapi", code_challenge=challenge, code_challenge_method=m.ProviderAuthorizeCodeChallengeMethod.S256)
        location = urllib.parse.urlparse(started.headers["Location"])
        if location.geturl().split("?")[0] != "https://kauth.kakao.com/oauth/authorize" or "gh_flow=" not in started.headers.get("Set-Cookie", ""):
            raise SystemExit(f"providerAuthorize: redirected to {location.geturl()}, cookie {started.headers.get('Set-Cookie')!r}")
        self.call("providerCallback", provider_callback, 400, "kakao", client=self.anonymous(), state="not-a-flow", code="c")
        self.call("providerCallbackForm", provider_callback_form, 400, "kakao", client=self.anonymous(),
                  body=m.ProviderCallbackForm(state="not-a-flow", code="c"))

        # The Apple web flow: authorize redirects to Apple; a callback whose state no flow has is
        # refused without a redirect, and an unknown login code is refused too (the callback's
        # success needs Apple's token endpoint, which the Swift tests fake).
        # The web flow needs the app's Apple key; with it, a native authorization code would be
        # redeemed at Apple's token endpoint, which this test does not serve, so it comes last.
        self.call("patchAppSettings", patch_app_settings, 200, client=self.tenant_admin(), body=m.AppSettingsPatch.from_dict({
            "apple": {"team_id": "ABCDE12345", "key_id": "KEY1234567", "private_key": open(os.path.join(self.run, "apple-key.p8")).read()}}))
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        started = self.call("appleAuthorize", apple_authorize, 302, client=self.anonymous(), app_key=self.app_key, redirect_uri=redirect_uri,
                            state="openapi", code_challenge=challenge, code_challenge_method=m.AppleAuthorizeCodeChallengeMethod.S256)
        location = urllib.parse.urlparse(started.headers["Location"])
        if not location.path.endswith("/auth/authorize") or "gh_flow=" not in started.headers.get("Set-Cookie", ""):
            raise SystemExit(f"appleAuthorize: redirected to {location.geturl()}, cookie {started.headers.get('Set-Cookie')!r}")
        self.call("appleCallback", apple_callback, 400, client=self.anonymous(), body=m.AppleCallbackForm(state="not-a-flow", code="c"))
        # Apple's server-to-server notification, signed as Apple signs it, for an Apple account no user has.
        now = int(time.time())
        notification = self.jwt.encode({
            "iss": "https://appleid.apple.com", "aud": apple_client_id, "iat": now, "exp": now + 600, "jti": "openapi",
            "events": json.dumps({"type": "consent-revoked", "sub": "000.openapi.nobody", "event_time": now * 1000})},
            self.provider_key, algorithm="RS256", headers={"kid": KID})
        self.call("receiveAppleNotification", receive_apple_notification, 200, app_id, client=self.anonymous(),
                  body=m.AppleNotificationRequest(payload=notification))
        self.call("exchangeLoginCode", exchange_login_code, 400, client=self.app(), body=m.ExchangeRequest(login_code="unknown", code_verifier=verifier))

        # Files and the photo.
        png = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
        uploaded = self.call("uploadFile", upload_file, 201, client=tim, body=m.FileUpload(
            file=File(payload=io.BytesIO(png), file_name="dot.png", mime_type="image/png"), visibility=m.FileUploadVisibility.PUBLIC))
        file_id = uploaded.parsed.data.id
        self.call("listFiles", list_files, 200, client=tim)
        self.call("getFile", get_file, 200, file_id, client=tim)
        content = self.call("getFileContent", get_file_content, 200, file_id, client=tim)
        if content.content != png:
            raise SystemExit("getFileContent: not the bytes uploaded")
        public_path = urllib.parse.urlparse(uploaded.parsed.data.url).path.split("/")
        self.call("getPublicContent", get_public_content, 200, public_path[3], public_path[5], public_path[6], client=self.anonymous())
        self.call("deleteFile", delete_file, 204, file_id, client=tim)
        self.call("uploadPhoto", upload_photo, 200, client=tim, body=m.PhotoUpload(photo=File(payload=io.BytesIO(png), file_name="me.png", mime_type="image/png")))
        self.call("deletePhoto", delete_photo, 200, client=tim)

        # The tenant admin's user operations.
        self.call("listEvents", list_events, 200, client=self.tenant_admin(), type_="user.signed_in", limit=5)
        self.call("listDeadOutboxItems", list_dead_outbox_items, 200, client=self.tenant_admin(), state="dead", limit=5)
        self.call("retryOutboxItem", retry_outbox_item, 404, "obx_0123456789abcdef", client=self.platform())
        # The admin's checks (ADR 0035): the app has no SMTP server of its own (the log: mailer is
        # the platform's), so a test message is refused; a test delivery to a webhook, listed.
        self.call("sendTestEmail", send_test_email, 400, client=self.tenant_admin(), body=m.EmailTestRequest(to="admin@example.com"))
        hook = "https://hooks.example.com/gatehouse"
        self.call("patchAppSettings", patch_app_settings, 200, client=self.tenant_admin(), body=m.AppSettingsPatch.from_dict({
            "webhooks": [{"url": hook, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "events": ["user.banned"]}]}))
        queued = self.call("sendTestWebhook", send_test_webhook, 202, client=self.tenant_admin(), body=m.WebhookTestRequest(url=hook)).parsed.data
        listed = self.call("listWebhookDeliveries", list_webhook_deliveries, 200, client=self.tenant_admin(), event_type="webhook.test", limit=5).parsed.data
        if [d.id for d in listed] != [queued.deliveries[0].id] or listed[0].url != hook:
            raise SystemExit(f"listWebhookDeliveries: {[d.to_dict() for d in listed]!r}")
        self.call("patchAppSettings", patch_app_settings, 200, client=self.tenant_admin(), body=m.AppSettingsPatch.from_dict({"webhooks": []}))
        lines = b'{"email": "imported@example.com", "password_hash": {"algorithm": "bcrypt", "hash": "$2b$05$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK"}}\n{"email": "not an email"}\n'
        report = self.call("importUsers", import_users, 200, client=self.tenant_admin(),
                           body=File(payload=io.BytesIO(lines), file_name="users.ndjson", mime_type="application/x-ndjson")).parsed.data
        if (report.imported, report.failed, report.errors[0].line) != (1, 1, 2):
            raise SystemExit(f"importUsers: unexpected report {report.to_dict()}")
        self.call("listUsers", list_users, 200, client=self.tenant_admin(), query="ada")
        self.call("getUser", get_user, 200, ada_id, client=self.tenant_admin())
        self.call("exportUsers", export_users, 403, client=self.tenant_admin(), include_hashes=m.ExportUsersIncludeHashes.TRUE)
        users = self.call("exportUsers", export_users, 200, client=self.tenant_admin())
        lines = [json.loads(line) for line in users.content.decode().splitlines()]
        if ada_id not in [line["id"] for line in lines] or any("password_hash" in line for line in lines):
            raise SystemExit(f"exportUsers: {lines!r}")
        self.call("updateUser", update_user, 200, ada_id, client=self.tenant_admin(),
                  body=m.AdminPatchUserRequest.from_dict({"app_metadata": {"plan": "pro"}, "display_name": "Ada"}))
        self.call("banUser", ban_user, 200, ada_id, client=self.tenant_admin(), body=m.BanRequest(sanction_code="spam", reason="Bulk messages"))
        self.call("unbanUser", unban_user, 200, ada_id, client=self.tenant_admin())
        # (The ban above ended Ada's sessions: the list is empty; AdminAPITests checks its content.)
        self.call("listUserSessions", list_user_sessions, 200, ada_id, client=self.tenant_admin())
        self.call("endUserSessions", end_user_sessions, 204, ada_id, client=self.tenant_admin())
        self.call("deleteUser", delete_user, 204, ada_id, client=self.tenant_admin())

        # Signing keys rotate at most once a minute, and creating the app made its first key.
        time.sleep(max(0.0, created_at + 61 - time.monotonic()))
        self.call("rotateSigningKey", rotate_signing_key, 200, client=self.tenant_admin())

        # Last: the calls that end a session or an account.
        self.call("signOut", sign_out, 204, client=linus, body=m.SignOutRequest(scope=m.SignOutRequestScopeType1.ALL))
        self.call("deleteMe", delete_me, 204, client=tim, body=m.DeleteMeRequest(reason="Done testing"))

        documented = {op["operationId"] for item in self.document["paths"].values() for op in item.values() if isinstance(op, dict) and "operationId" in op}
        missing = sorted(documented - set(self.called))
        unknown = sorted(set(self.called) - documented)
        if missing or unknown:
            raise SystemExit(f"operations not called: {missing}; called but not documented: {unknown}")
        print(f"openapi-client: {len(documented)} passed, 0 failed")


def main():
    if sys.argv[1] == "make-keys":
        make_keys(sys.argv[2])
    else:
        Walk(*sys.argv[2:6]).walk()


if __name__ == "__main__":
    main()
