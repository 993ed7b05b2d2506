import Foundation
import GatehouseCore
import GatehouseCrypto
import GatehouseKit
import GatehouseTesting
import Testing

/// Every way in, from GatehouseKit to the real server and its fake providers over HTTP.
@Suite("GatehouseKit sign-in")
struct SignInTests {
    @Test
    func passwordSignUpSignInAndSignOut() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let client = world.client()
        let events = EventLog(client)

        let app = try await client.getApp()
        #expect(app.name == "Kit" && app.signInMethods.contains(.emailCode) && app.passwordMinLength == 8)

        let created = try await client.signUp(email: "Ada@Example.com", password: "correct horse battery", firstName: "Ada", lastName: "Lovelace")
        #expect(created.isNewUser && !created.isRestored)
        #expect(created.user.email == "ada@example.com" && created.user.firstName == "Ada" && created.user.identities == [.password])
        #expect(client.currentUser?.id == created.user.id)
        let me = try await client.getUser()
        #expect(me.id == created.user.id && me.lastName == "Lovelace")

        // The same email again, a weak password, a wrong password: typed, with the server's status.
        let taken = await kitError { try await world.client().signUp(email: "ada@example.com", password: "another long one") }
        #expect(taken?.code == .emailAlreadyInUse)
        let weak = await kitError { try await world.client().signUp(email: "bob@example.com", password: "short") }
        guard case .server(let problem)? = weak else { Issue.record("expected a problem, got \(String(describing: weak))"); return }
        #expect(problem.code == .weakPassword && problem.status == 400 && problem.requestID?.isEmpty == false)
        let wrong = await kitError { try await world.client().signIn(email: "ada@example.com", password: "not the password") }
        #expect(wrong?.code == .invalidCredential)

        try await client.signOut()
        #expect(client.currentUser == nil)
        #expect(await kitError { try await client.getUser() } == .notSignedIn)
        let again = try await client.signIn(email: "ada@example.com", password: "correct horse battery")
        #expect(!again.isNewUser && again.user.id == created.user.id)
        let seen = await events.first(3)
        #expect(seen == [.signedIn(created.user), .signedOut(.signedOut), .signedIn(again.user)])
    }

    @Test
    func anAnonymousSignInIsUpgradedInPlaceByAPasswordWithAnEmail() async throws {
        let closed = try KitWorld()
        let refused = await kitError { try await closed.client().signInAnonymously() }
        #expect(refused?.code == .signInMethodDisabled)
        #expect(try await closed.client().getApp().allowAnonymous == false)
        closed.stop()

        let world = try KitWorld(settings: ["allow_anonymous": true])
        defer { world.stop() }
        let client = world.client()
        #expect(try await client.getApp().allowAnonymous)
        let guest = try await client.signInAnonymously(locale: "ja")
        #expect(guest.isNewUser && guest.user.isAnonymous && guest.user.email == nil && guest.user.identities == [] && guest.user.locale == "ja")
        let claims = try KitWorld.claims(try await client.accessToken())
        #expect(claims["is_anonymous"] == true && claims["amr"] == ["anon"])

        let identities = try await client.addPassword("correct horse battery", email: "guest@example.com")
        #expect(identities.map(\.provider) == [.password])
        let me = try await client.getUser()
        #expect(me.id == guest.user.id && !me.isAnonymous && me.email == "guest@example.com")
        let again = try await world.client().signIn(email: "guest@example.com", password: "correct horse battery")
        #expect(again.user.id == guest.user.id && !again.user.isAnonymous)
        // Upgraded, it is an ordinary account: an email given with a password is refused.
        let refusedEmail = await kitError { try await client.addPassword("another horse battery", email: "x@example.com") }
        #expect(refusedEmail?.code == .validationFailed)
    }

    @Test
    func anEmailedCodeSignsUpAndTheVerificationCodeVerifies() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let client = world.client()
        try await client.sendSignInCode(to: "grace@example.com")
        let created = try await client.verifySignInCode(email: "grace@example.com", code: try world.code(to: "grace@example.com"))
        #expect(created.isNewUser && created.user.emailVerified && created.user.identities == [])
        let wrongCode = await kitError { try await world.client().verifySignInCode(email: "grace@example.com", code: "000000") }
        #expect(wrongCode?.code == .invalidCode)

        // A password account verifies its address with the code mailed at sign-up; the client
        // refreshes so that the access token says so too.
        let other = world.client()
        _ = try await other.signUp(email: "hopper@example.com", password: "correct horse battery")
        #expect(try KitWorld.claims(try await other.accessToken())["email_verified"] == false)
        let verified = try await other.confirmEmailVerification(code: try world.code(to: "hopper@example.com"))
        #expect(verified.emailVerified)
        #expect(try KitWorld.claims(try await other.accessToken())["email_verified"] == true)
        world.clock.advance(seconds: 61)  // one code a minute per address and purpose
        try await other.sendEmailVerification()
        #expect(try world.code(to: "hopper@example.com").count == 6)
    }

    @Test
    func aPasswordResetEndsTheSessionAndTheClientSaysSo() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let client = world.client()
        let events = EventLog(client)
        _ = try await client.signUp(email: "reset@example.com", password: "correct horse battery")
        _ = try world.code(to: "reset@example.com")  // the verification mail
        try await client.sendPasswordReset(to: "reset@example.com")
        try await client.confirmPasswordReset(email: "reset@example.com", code: try world.code(to: "reset@example.com"), password: "a brand new password")
        #expect(await kitError { try await client.getUser() }?.code == .sessionRevoked)
        #expect(client.currentUser == nil)
        #expect(await events.first(2).last == .signedOut(.sessionEnded(.sessionRevoked)))
        #expect(try await client.signIn(email: "reset@example.com", password: "a brand new password").isNewUser == false)
    }

    /// The app gives Apple the nonce's hash and Gatehouse the raw nonce: the server (OpenSSL)
    /// checks the token's claim against the SHA-256 GatehouseKit computed.
    @Test
    func signInWithAppleSendsTheRawNonceAndAppleGetsItsHash() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let client = world.client()
        let nonce = AppleNonce()
        #expect(nonce.hashed == KitWorld.hashHex(nonce.raw), "GatehouseKit's SHA-256 equals OpenSSL's")
        // What Apple would answer the request whose nonce was `nonce.hashed`.
        let user = FakeAppleUser(sub: "001.kit.apple", email: "pat@example.com", nonce: nonce.hashed)
        let code = world.apple.issueCode(for: user, clientID: KitWorld.bundleID)
        let token = world.apple.mintIdentityToken(sub: user.sub, aud: KitWorld.bundleID, email: user.email, nonce: nonce.hashed)
        let created = try await client.signInWithApple(identityToken: token, nonce: nonce, authorizationCode: code, firstName: "Pat", lastName: "Lee")
        #expect(created.isNewUser && created.user.identities == [.apple] && created.user.firstName == "Pat")
        #expect(world.apple.tokenCalls.count == 1, "the authorization code was redeemed")
        #expect(try KitWorld.claims(try await client.accessToken())["amr"] == ["apple"])

        // A token made for another nonce is refused, and so is the same token twice.
        let otherNonce = AppleNonce()
        let mismatched = world.apple.mintIdentityToken(sub: user.sub, aud: KitWorld.bundleID, email: user.email, nonce: otherNonce.hashed)
        #expect(await kitError { try await world.client().signInWithApple(identityToken: mismatched, nonce: AppleNonce()) }?.code == .invalidCredential)
        #expect(await kitError { try await world.client().signInWithApple(identityToken: token, nonce: nonce) }?.code == .invalidCredential)
        // Through Firebase, the same Apple user is the same account.
        let firebaseToken = world.firebase.mintIDToken(projectID: KitWorld.project, signInProvider: "apple.com", providerSubject: user.sub, email: user.email)
        let viaFirebase = try await world.client().signInWithFirebase(provider: .apple, idToken: firebaseToken)
        #expect(!viaFirebase.isNewUser && viaFirebase.user.id == created.user.id)
        #expect(world.apple.errors.isEmpty)
    }

    @Test
    func aProviderOfTheAppSignsInLinksReauthenticatesAndUnlinksByItsID() async throws {
        let kakao = try FakeOIDCProvider(.fixed(issuer: "https://kauth.kakao.com"), kidPrefix: "kit-kakao")
        defer { kakao.stop() }
        let kakaoURL = kakao.baseURL
        let world = try KitWorld(
            settings: [
                "sign_in_methods": ["password", "kakao"], "oidc_providers": [["id": "kakao", "kind": "kakao", "client_ids": ["kit-kakao-key"]]],
            ],
            configure: { $0.providerURLs["kakao"] = kakaoURL })
        defer { world.stop() }
        // Tokens dated by the world's clock (manual: it does not move while the test runs).
        let token = kakao.mintIDToken(sub: "k-kit-1", aud: "kit-kakao-key", nonce: "kakao-nonce-1", issuedAt: world.clock.nowSeconds)
        let created = try await world.client().signInWithProvider("kakao", idToken: token, nonce: "kakao-nonce-1")
        #expect(created.isNewUser && created.user.identities == [SignInProvider(rawValue: "kakao")])
        let wrongApp = await kitError {
            try await world.client().signInWithProvider("kakao", idToken: kakao.mintIDToken(sub: "k-kit-1", aud: "other-key", nonce: "n2", issuedAt: world.clock.nowSeconds), nonce: "n2")
        }
        guard case .server(let problem)? = wrongApp else { Issue.record("expected a problem"); return }
        #expect(problem.code == .invalidCredential && problem.status == 401)

        let client = world.client()
        _ = try await client.signUp(email: "kim@example.com", password: "correct horse battery")
        let linked = try await client.linkProvider("kakao", idToken: kakao.mintIDToken(sub: "k-kit-2", aud: "kit-kakao-key", nonce: "n3", issuedAt: world.clock.nowSeconds), nonce: "n3")
        #expect(Set(linked.map(\.provider.rawValue)) == ["password", "kakao"])
        try await client.reauthenticate(provider: "kakao", idToken: kakao.mintIDToken(sub: "k-kit-2", aud: "kit-kakao-key", nonce: "n4", issuedAt: world.clock.nowSeconds), nonce: "n4")
        #expect(try await client.unlink(SignInProvider(rawValue: "kakao")).map(\.provider) == [.password])
    }

    @Test
    func googleAndFirebaseTokensAreExchanged() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let token = world.google.mintIDToken(sub: "g-kit-1", aud: KitWorld.googleClient, email: "gus@gmail.com", nonce: "google-nonce-1", givenName: "Gus")
        let created = try await world.client().signInWithGoogle(idToken: token, nonce: "google-nonce-1")
        #expect(created.isNewUser && created.user.identities == [.google] && created.user.email == "gus@gmail.com")
        let firebaseToken = world.firebase.mintIDToken(
            uid: "fb-uid-2", projectID: KitWorld.project, signInProvider: "google.com", providerSubject: "g-kit-1", email: "gus@gmail.com")
        let viaFirebase = try await world.client().signInWithFirebase(provider: .google, idToken: firebaseToken)
        #expect(!viaFirebase.isNewUser && viaFirebase.user.id == created.user.id)
        // A Google-minted Firebase token at the Apple endpoint is refused.
        let wrongEndpoint = await kitError { try await world.client().signInWithFirebase(provider: .apple, idToken: firebaseToken) }
        guard case .server(let problem)? = wrongEndpoint else { Issue.record("expected a problem"); return }
        #expect(problem.code == .invalidCredential && problem.status == 401)
    }

    /// The web flow as a browser runs it: GatehouseKit makes the authorize URL (state and S256
    /// challenge), the test plays the browser and Apple, and GatehouseKit checks the redirect and
    /// exchanges the login code with its verifier.
    @Test
    func theAppleWebFlowEndsInAnExchangeWithPKCE() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let client = world.client()
        let flow = client.startWebFlow(provider: "apple", redirectURI: KitWorld.redirect)
        let query = URLComponents(url: flow.authorizeURL, resolvingAgainstBaseURL: false)?.queryItems ?? []
        func item(_ name: String) -> String? { query.first { $0.name == name }?.value }
        #expect(flow.authorizeURL.absoluteString.hasPrefix(world.server.baseURL + "/v1/auth/oauth/apple/authorize?"))
        #expect(item("app_key") == world.app.appKey && item("redirect_uri") == KitWorld.redirect && item("state") == flow.state)
        #expect(item("code_challenge_method") == "S256")
        #expect(item("code_challenge") == Base64URL.encode(Digest.sha256(Array(flow.pkce.verifier.utf8))), "S256 as OpenSSL computes it")

        func browse(_ flow: GatehouseKit.WebFlow) throws -> String {
            let authorize = try TestHTTPClient.send("GET", flow.authorizeURL.absoluteString)
            guard authorize.status == 302, let location = authorize.header("Location"), let cookie = authorize.header("Set-Cookie"),
                let appleQuery = URLComponents(string: location)?.queryItems
            else { throw KitWorld.NoCode(description: "authorize answered \(authorize.status): \(authorize.text)") }
            let appleState = appleQuery.first { $0.name == "state" }?.value ?? ""
            let appleNonce = appleQuery.first { $0.name == "nonce" }?.value
            let code = world.apple.issueCode(
                for: FakeAppleUser(sub: "web.kit.1", email: "web@example.com", nonce: appleNonce), clientID: KitWorld.servicesID,
                redirectURI: "\(TestServer.publicURL)/v1/auth/oauth/apple/callback")
            let form = "state=\(appleState)&code=\(code)"
            let back = try world.server.request(
                "POST", "/v1/auth/oauth/apple/callback",
                headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Cookie", String(cookie.prefix { $0 != ";" }))], body: Array(form.utf8))
            guard back.status == 303, let target = back.header("Location") else { throw KitWorld.NoCode(description: "callback answered \(back.status)") }
            return target
        }

        let target = try browse(flow)
        #expect(target.hasPrefix(KitWorld.redirect + "?"))
        // A redirect of another flow (its state) is refused before any exchange; so is an error redirect.
        let stranger = client.startWebFlow(provider: "apple", redirectURI: KitWorld.redirect)
        #expect(await kitError { try await client.finishWebFlow(stranger, callbackURL: URL(string: target)!) } == .webSignInFailed(error: "state_mismatch"))
        let denied = URL(string: "\(KitWorld.redirect)?error=access_denied&state=\(flow.state)")!
        #expect(await kitError { try await client.finishWebFlow(flow, callbackURL: denied) } == .webSignInFailed(error: "access_denied"))
        let elsewhere = URL(string: target.replacingOccurrences(of: "app.example.com", with: "evil.example.com"))!
        #expect(await kitError { try await client.finishWebFlow(flow, callbackURL: elsewhere) } == .webSignInFailed(error: "state_mismatch"))

        let created = try await client.finishWebFlow(flow, callbackURL: URL(string: target)!)
        #expect(created.isNewUser && created.user.identities == [.apple] && created.user.email == "web@example.com")
        #expect(try await client.getUser().id == created.user.id)
        // The login code was used once: the same redirect again is refused by the server.
        #expect(await kitError { try await world.client().finishWebFlow(flow, callbackURL: URL(string: target)!) }?.code == .invalidLoginCode)
        // A verifier that is not the flow's is refused too.
        let second = client.startWebFlow(provider: "apple", redirectURI: KitWorld.redirect)
        let secondTarget = try browse(second)
        let loginCode = URLComponents(string: secondTarget)?.queryItems?.first { $0.name == "login_code" }?.value ?? ""
        #expect(await kitError { try await world.client().exchange(loginCode: loginCode, codeVerifier: PKCE().verifier) }?.code == .invalidLoginCode)
        #expect(world.apple.errors.isEmpty)
    }

    /// The web flow through a provider the app defines (`oidc`, on a fake issuer): GatehouseKit
    /// makes the authorize URL at the provider's path, the test plays the browser and the user at
    /// the provider, and GatehouseKit checks the redirect and exchanges the login code.
    @Test
    func anAppsOwnProviderSignsInThroughTheWebFlow() async throws {
        let clock = ManualClock()
        let corp = try FakeOIDCProvider(.generic(path: "/realms/corp"), clock: clock, kidPrefix: "kit-corp")
        defer { corp.stop() }
        corp.registerClient("kit-corp", secret: "kit-corp-secret")
        let world = try KitWorld(
            clock: clock,
            settings: [
                "sign_in_methods": ["password", "corp"],
                "oidc_providers": [
                    ["id": "corp", "kind": "oidc", "client_ids": ["kit-corp"], "client_secret": "kit-corp-secret", "issuer": .string(corp.issuer)]
                ],
            ],
            configure: { $0.allowPrivateOutbound = true })  // the issuer is on 127.0.0.1
        defer { world.stop() }
        let client = world.client()
        let flow = client.startWebFlow(provider: "corp", redirectURI: KitWorld.redirect)
        #expect(flow.provider == "corp")
        #expect(flow.authorizeURL.absoluteString.hasPrefix(world.server.baseURL + "/v1/auth/oidc/corp/authorize?"))

        /// Gatehouse → the provider (the user signs in there) → Gatehouse's callback: where the browser lands.
        func browse(_ flow: GatehouseKit.WebFlow, sub: String) throws -> String {
            let authorize = try TestHTTPClient.send("GET", flow.authorizeURL.absoluteString)
            guard authorize.status == 302, let location = authorize.header("Location"), let cookie = authorize.header("Set-Cookie"),
                let asked = URLComponents(string: location)
            else { throw KitWorld.NoCode(description: "authorize answered \(authorize.status): \(authorize.text)") }
            func item(_ name: String) -> String? { asked.queryItems?.first { $0.name == name }?.value }
            #expect(location.hasPrefix(corp.issuer + "/authorize?"))
            #expect(item("client_id") == "kit-corp" && item("response_type") == "code")
            #expect(item("redirect_uri") == "\(TestServer.publicURL)/v1/auth/oidc/corp/callback")
            #expect(item("state") != nil && item("state") != flow.state, "Gatehouse's own state at the provider")
            // Gatehouse's own PKCE pair with the provider (the issuer lists S256); the app's stays between it and Gatehouse.
            #expect(item("code_challenge_method") == "S256" && item("code_challenge") != nil && item("code_challenge") != flow.pkce.challenge)
            let code = corp.issueCode(
                clientID: item("client_id") ?? "", redirectURI: item("redirect_uri") ?? "", nonce: item("nonce"), codeChallenge: item("code_challenge"),
                sub: sub, email: "\(sub)@corp.example", emailVerified: true)
            var back = URLComponents()
            back.queryItems = [URLQueryItem(name: "code", value: code), URLQueryItem(name: "state", value: item("state"))]
            let callback = try world.server.request(
                "GET", "/v1/auth/oidc/corp/callback?" + (back.percentEncodedQuery ?? ""), headers: [("Cookie", String(cookie.prefix { $0 != ";" }))])
            guard callback.status == 303, let target = callback.header("Location") else {
                throw KitWorld.NoCode(description: "callback answered \(callback.status): \(callback.text)")
            }
            return target
        }

        let target = try browse(flow, sub: "corp-kit-1")
        #expect(target.hasPrefix(KitWorld.redirect + "?"))
        // Another flow's redirect is refused before any exchange.
        let stranger = client.startWebFlow(provider: "corp", redirectURI: KitWorld.redirect)
        #expect(await kitError { try await client.finishWebFlow(stranger, callbackURL: URL(string: target)!) } == .webSignInFailed(error: "state_mismatch"))

        let created = try await client.finishWebFlow(flow, callbackURL: URL(string: target)!)
        #expect(created.isNewUser && created.user.identities == [SignInProvider(rawValue: "corp")] && created.user.email == "corp-kit-1@corp.example")
        #expect(try await client.getUser().id == created.user.id)
        #expect(corp.tokenRequests == 1, "Gatehouse redeemed the provider's code once")
        // The login code is single-use.
        #expect(await kitError { try await world.client().finishWebFlow(flow, callbackURL: URL(string: target)!) }?.code == .invalidLoginCode)
        // The same provider user again: the same account.
        let second = client.startWebFlow(provider: "corp", redirectURI: KitWorld.redirect)
        let again = try await world.client().finishWebFlow(second, callbackURL: URL(string: try browse(second, sub: "corp-kit-1"))!)
        #expect(!again.isNewUser && again.user.id == created.user.id)
        #expect(corp.errors.isEmpty)
    }
}
