import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The Gatehouse client: sign-up and sign-in, the account calls, and a session kept in a
/// ``SessionStore`` whose access token is refreshed before it expires (and after an
/// `auth/token-expired`), one refresh at a time however many calls race. Every method is safe to
/// call from any task.
///
/// ```swift
/// let client = GatehouseClient(baseURL: URL(string: "https://auth.example.com")!, appKey: "pk_…")
/// let result = try await client.signIn(email: "ada@example.com", password: "…")
/// ```
public final class GatehouseClient: Sendable {
    /// How a client talks to Gatehouse and keeps its session.
    public struct Configuration: Sendable {
        /// The server's root (`GATEHOUSE_PUBLIC_URL`), without `/v1`.
        public var baseURL: URL
        /// The app's public key (`X-App-Key`).
        public var appKey: String
        /// Where the session is kept; see ``GatehouseClient/defaultSessionStore(appKey:)``.
        public var sessionStore: any SessionStore
        /// Refresh the access token this long before it expires (at most a quarter of its lifetime).
        public var refreshMargin: TimeInterval = 60
        /// The server's refresh grace window (`GATEHOUSE_REFRESH_GRACE_SECONDS`, 10 s by default):
        /// a refresh whose answer was lost is sent again only well within it.
        public var refreshGraceWindow: TimeInterval = 10
        /// The URLSession to use; by default an ephemeral one that keeps no cookies and no cache.
        public var urlSession: URLSession?
        /// The clock that dates token expiry (for tests).
        public var now: @Sendable () -> Date = { Date() }
        /// Refresh in the background, the refresh margin before the access token expires, as
        /// Firebase's and Supabase's clients do (paused while the app is in the background).
        public var autoRefresh = true
        /// How the background refresh waits (for tests); by default `Task.sleep`.
        public var sleep: @Sendable (TimeInterval) async throws -> Void = { seconds in
            try await Task.sleep(nanoseconds: UInt64(max(0, min(seconds, 86_400)) * 1_000_000_000))
        }
        /// The notifications that pause the background refresh and resume it: UIKit's
        /// `didEnterBackground`/`willEnterForeground`, AppKit's `didHide`/`didUnhide`, none elsewhere.
        public var lifecycleNotifications: (background: Notification.Name, foreground: Notification.Name)? = Configuration.platformLifecycle
        /// Where `lifecycleNotifications` are posted.
        public var notificationCenter: NotificationCenter = .default

        /// By their raw names, so that no UIKit or AppKit type (main-actor isolated) is touched here.
        public static var platformLifecycle: (background: Notification.Name, foreground: Notification.Name)? {
            #if canImport(UIKit) && !os(watchOS)
            return (Notification.Name("UIApplicationDidEnterBackgroundNotification"), Notification.Name("UIApplicationWillEnterForegroundNotification"))
            #elseif canImport(AppKit)
            return (Notification.Name("NSApplicationDidHideNotification"), Notification.Name("NSApplicationDidUnhideNotification"))
            #else
            return nil
            #endif
        }

        public init(baseURL: URL, appKey: String, sessionStore: (any SessionStore)? = nil) {
            self.baseURL = baseURL
            self.appKey = appKey
            self.sessionStore = sessionStore ?? GatehouseClient.defaultSessionStore(appKey: appKey)
        }
    }

    public let configuration: Configuration
    let transport: Transport
    let manager: SessionManager
    private let events: EventHub

    /// Reads the stored session once (the ``SessionStore`` answers synchronously), so that
    /// ``currentUser`` is right from the start.
    public init(configuration: Configuration) {
        self.configuration = configuration
        events = EventHub(user: (try? configuration.sessionStore.load())?.user)
        transport = Transport(baseURL: configuration.baseURL, appKey: configuration.appKey, session: configuration.urlSession ?? Transport.makeSession())
        manager = SessionManager(
            store: configuration.sessionStore, transport: transport, now: configuration.now, refreshMargin: configuration.refreshMargin,
            graceWindow: configuration.refreshGraceWindow, events: events)
        autoRefresh = AutoRefresh(manager: manager, now: configuration.now, sleep: configuration.sleep)
        let timer = autoRefresh
        events.observe { [weak timer] _ in timer?.reschedule() }
        if let names = configuration.lifecycleNotifications {
            autoRefresh.follow(background: names.background, foreground: names.foreground, center: configuration.notificationCenter)
        }
        if configuration.autoRefresh { autoRefresh.start() }
    }

    // MARK: - The background refresh

    private let autoRefresh: AutoRefresh

    /// Starts refreshing in the background (on by default: ``Configuration/autoRefresh``).
    public func startAutoRefresh() { autoRefresh.start() }

    /// Stops the background refresh (calls still refresh a token about to expire when they need one).
    public func stopAutoRefresh() { autoRefresh.stop() }

    /// Whether a background refresh is waiting for its turn.
    public var autoRefreshScheduled: Bool { autoRefresh.isScheduled }

    /// Stops the background refresh (as the client's deinit does).
    public func close() { autoRefresh.stop() }

    deinit { autoRefresh.stop() }

    /// A client with the default session store for this app.
    public convenience init(baseURL: URL, appKey: String, sessionStore: (any SessionStore)? = nil) {
        self.init(configuration: Configuration(baseURL: baseURL, appKey: appKey, sessionStore: sessionStore))
    }

    /// The Keychain on Apple platforms; elsewhere a 0600 file under the user's application-support
    /// folder (`~/.local/share/GatehouseKit/` on Linux).
    public static func defaultSessionStore(appKey: String) -> any SessionStore {
        #if canImport(Security)
        return KeychainSessionStore(service: "GatehouseKit", account: appKey)
        #else
        let folder = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/share")
        let name = String(appKey.map { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" ? $0 : "_" })
        return FileSessionStore(url: folder.appendingPathComponent("GatehouseKit").appendingPathComponent(name + ".json"))
        #endif
    }

    // MARK: - State

    /// What happens to the session, as it happens: first ``AuthEvent/initialSession(_:)`` (the
    /// user signed in now, or `nil`), then sign-ins, refreshes, changes of the user and sign-outs
    /// (including a session Gatehouse ended). Each call returns a new stream.
    public func authEvents() -> AsyncStream<AuthEvent> { events.stream() }

    /// The signed-in user as last answered by the server, or `nil`: from memory, read from the
    /// session store when the client was made and kept up to date by every change (a SwiftUI
    /// view can read it; ``GatehouseSession`` makes it observable).
    public var currentUser: User? { events.currentUser }

    /// Whether a session is stored (``currentUser`` is not `nil`).
    public var isSignedIn: Bool { currentUser != nil }

    /// An access token valid now (refreshed first when it is about to expire), for calls to your
    /// own backend, which verifies it against the app's JWKS.
    public func accessToken() async throws -> String {
        try await manager.validAccessToken()
    }

    /// Refreshes the tokens now (joining a refresh already in flight).
    public func refresh() async throws {
        _ = try await manager.refreshNow()
    }

    // MARK: - App

    /// `GET /v1/app`: the app's public settings.
    public func getApp() async throws -> AppInfo {
        try Transport.decode(AppInfo.self, from: try await transport.send("GET", "/v1/app"))
    }

    @available(*, deprecated, renamed: "getApp()")
    public func app() async throws -> AppInfo { try await getApp() }

    // MARK: - Email and password

    /// `POST /v1/auth/signup`: creates the account and signs in (a verification code is mailed).
    /// `locale` is the user's language, a BCP 47 tag (`ja`, `ko-KR`): the language of their mail.
    public func signUp(
        email: String, password: String, firstName: String? = nil, lastName: String? = nil, locale: String? = nil, displayName: String? = nil
    ) async throws -> SignInResult {
        var body: [String: JSONValue] = ["email": .string(email), "password": .string(password)]
        if let firstName { body["first_name"] = .string(firstName) }
        if let lastName { body["last_name"] = .string(lastName) }
        if let locale { body["locale"] = .string(locale) }
        if let displayName { body["display_name"] = .string(displayName) }
        return try await signIn("/v1/auth/signup", body)
    }

    /// `POST /v1/auth/anonymous`: a new anonymous account (no email, no sign-in method;
    /// ``User/isAnonymous``) and its session, for an app with `allow_anonymous`. Upgrade it in
    /// place later: ``addPassword(_:email:)``, ``changeEmail(to:)`` then its confirmation, or a `link…`.
    public func signInAnonymously(locale: String? = nil) async throws -> SignInResult {
        var body: [String: JSONValue] = [:]
        if let locale { body["locale"] = .string(locale) }
        return try await signIn("/v1/auth/anonymous", body)
    }

    /// `POST /v1/auth/signin` with a password.
    public func signIn(email: String, password: String) async throws -> SignInResult {
        try await signIn("/v1/auth/signin", ["email": .string(email), "password": .string(password)])
    }

    /// `POST /v1/auth/email-code/send`: mails a 6-digit sign-in code (answered the same whether or
    /// not the address has an account).
    public func sendSignInCode(to email: String) async throws {
        try Transport.check(try await transport.send("POST", "/v1/auth/email-code/send", body: .json(["email": .string(email)])))
    }

    /// `POST /v1/auth/email-code/verify`: signs in (or up) with the mailed code.
    public func verifySignInCode(email: String, code: String) async throws -> SignInResult {
        try await signIn("/v1/auth/email-code/verify", ["email": .string(email), "code": .string(code)])
    }

    @available(*, deprecated, renamed: "verifySignInCode(email:code:)")
    public func signIn(email: String, code: String) async throws -> SignInResult { try await verifySignInCode(email: email, code: code) }

    /// `POST /v1/auth/password-reset/send`: mails a reset code.
    public func sendPasswordReset(to email: String) async throws {
        try Transport.check(try await transport.send("POST", "/v1/auth/password-reset/send", body: .json(["email": .string(email)])))
    }

    /// `POST /v1/auth/password-reset/confirm`: sets the new `password` with the mailed code; every
    /// session of the user ends.
    public func confirmPasswordReset(email: String, code: String, password: String) async throws {
        let body: [String: JSONValue] = ["email": .string(email), "code": .string(code), "password": .string(password)]
        try Transport.check(try await transport.send("POST", "/v1/auth/password-reset/confirm", body: .json(body)))
    }

    @available(*, deprecated, renamed: "confirmPasswordReset(email:code:password:)")
    public func resetPassword(email: String, code: String, newPassword: String) async throws {
        try await confirmPasswordReset(email: email, code: code, password: newPassword)
    }

    // MARK: - Apple, Google, Firebase

    /// `POST /v1/auth/oauth/apple` with Apple's identity token. `nonce` is the ``AppleNonce`` whose
    /// ``AppleNonce/hashed`` you gave Apple's request (its raw value is sent). Send the name Apple
    /// gives on the first authorization only; Gatehouse keeps it when the user has none.
    public func signInWithApple(
        identityToken: String, nonce: AppleNonce?, authorizationCode: String? = nil, firstName: String? = nil, lastName: String? = nil
    ) async throws -> SignInResult {
        var body: [String: JSONValue] = ["identity_token": .string(identityToken)]
        if let nonce { body["nonce"] = .string(nonce.raw) }
        if let authorizationCode { body["authorization_code"] = .string(authorizationCode) }
        if let firstName { body["first_name"] = .string(firstName) }
        if let lastName { body["last_name"] = .string(lastName) }
        return try await signIn("/v1/auth/oauth/apple", body)
    }

    /// `POST /v1/auth/oauth/google` with Google's ID token (and the nonce you gave Google, if any).
    public func signInWithGoogle(idToken: String, nonce: String? = nil) async throws -> SignInResult {
        var body: [String: JSONValue] = ["id_token": .string(idToken)]
        if let nonce { body["nonce"] = .string(nonce) }
        return try await signIn("/v1/auth/oauth/google", body)
    }

    /// `POST /v1/auth/oidc/{id}` with an ID token of one of the app's own providers (its
    /// `oidc_providers` id: kinds oidc, kakao, line, microsoft) and the raw nonce it carries.
    public func signInWithProvider(_ id: String, idToken: String, nonce: String) async throws -> SignInResult {
        try await signIn("/v1/auth/oidc/\(pathSegment(id))", ["id_token": .string(idToken), "nonce": .string(nonce)])
    }

    /// `POST /v1/auth/oidc/{id}` with an access token of one of the app's own providers of kind naver or github.
    public func signInWithProvider(_ id: String, accessToken: String) async throws -> SignInResult {
        try await signIn("/v1/auth/oidc/\(pathSegment(id))", ["access_token": .string(accessToken)])
    }

    @available(*, deprecated, renamed: "signInWithProvider(_:idToken:nonce:)")
    public func signIn(provider id: String, idToken: String, nonce: String) async throws -> SignInResult {
        try await signInWithProvider(id, idToken: idToken, nonce: nonce)
    }

    @available(*, deprecated, renamed: "signInWithProvider(_:accessToken:)")
    public func signIn(provider id: String, accessToken: String) async throws -> SignInResult {
        try await signInWithProvider(id, accessToken: accessToken)
    }

    /// The providers whose Firebase ID tokens Gatehouse takes.
    public enum FirebaseProvider: String, Sendable {
        /// `firebase.sign_in_provider` `apple.com`.
        case apple
        /// `firebase.sign_in_provider` `google.com`.
        case google
    }

    /// A Firebase ID token (for apps whose clients sign in to Firebase first), posted to the
    /// endpoint of the provider the user signed in to Firebase with; Gatehouse refuses a token of
    /// another provider (401 `auth/invalid-credential`).
    public func signInWithFirebase(provider: FirebaseProvider, idToken: String) async throws -> SignInResult {
        try await signIn("/v1/auth/oauth/\(provider.rawValue)", ["firebase_id_token": .string(idToken)])
    }

    @available(*, deprecated, renamed: "signInWithFirebase(provider:idToken:)")
    public func signInWithFirebase(idToken: String, provider: FirebaseProvider) async throws -> SignInResult {
        try await signInWithFirebase(provider: provider, idToken: idToken)
    }

    // MARK: - The web flow

    /// A web sign-in to start with `provider`: `"apple"` (Sign in with Apple) or the `id` of one of
    /// the app's `oidc_providers`, whatever its kind. Open ``WebFlow/authorizeURL`` in a browser
    /// (`ASWebAuthenticationSession` on Apple platforms); Gatehouse sends it to the provider and back
    /// to `redirectURI` (one of the app's `redirect_uris`). The state and PKCE verifier stay here,
    /// in the returned value; finish with ``finishWebFlow(_:callbackURL:)``.
    public func startWebFlow(provider: String, redirectURI: String) -> WebFlow {
        let state = SecureRandom.token(byteCount: 16)
        let pkce = PKCE()
        let path = provider == "apple" ? "/v1/auth/oauth/apple/authorize" : "/v1/auth/oidc/\(pathSegment(provider))/authorize"
        let url = transport.url(
            path,
            query: [
                URLQueryItem(name: "app_key", value: configuration.appKey), URLQueryItem(name: "redirect_uri", value: redirectURI),
                URLQueryItem(name: "state", value: state), URLQueryItem(name: "code_challenge", value: pkce.challenge),
                URLQueryItem(name: "code_challenge_method", value: pkce.method),
            ])
        return WebFlow(provider: provider, authorizeURL: url, redirectURI: redirectURI, state: state, pkce: pkce)
    }

    /// Whether `url` is a web flow coming back: it carries a `state` with a `login_code` or an
    /// `error`, as gatehouse-js's `isWebFlowReturn` reads it (for an app that receives its
    /// redirect through `onOpenURL` or a universal link).
    /// Whether it is *this* flow's is checked by ``finishWebFlow(_:callbackURL:)``.
    public func isWebFlowReturn(_ url: URL) -> Bool {
        let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
        func has(_ name: String) -> Bool { items.contains { $0.name == name } }
        return has("state") && (has("login_code") || has("error"))
    }

    /// Finishes a web sign-in with the URL the browser came back to: checks it is this flow's
    /// redirect (its address and state), then trades the login code and the PKCE verifier for a
    /// session. An `error` in the redirect throws ``GatehouseError/webSignInFailed(error:)``.
    public func finishWebFlow(_ flow: WebFlow, callbackURL: URL) async throws -> SignInResult {
        guard let components = URLComponents(url: callbackURL, resolvingAgainstBaseURL: false),
            let expected = URLComponents(string: flow.redirectURI),
            components.scheme?.lowercased() == expected.scheme?.lowercased(), components.host?.lowercased() == expected.host?.lowercased(),
            components.port == expected.port, components.path == expected.path
        else { throw GatehouseError.webSignInFailed(error: "state_mismatch") }
        let items = components.queryItems ?? []
        func value(_ name: String) -> String? { items.first { $0.name == name }?.value }
        guard let state = value("state"), constantTimeEqual(state, flow.state) else { throw GatehouseError.webSignInFailed(error: "state_mismatch") }
        if let error = value("error") { throw GatehouseError.webSignInFailed(error: error) }
        guard let loginCode = value("login_code") else { throw GatehouseError.webSignInFailed(error: "missing_login_code") }
        return try await exchange(loginCode: loginCode, codeVerifier: flow.pkce.verifier)
    }

    @available(*, deprecated, renamed: "startWebFlow(provider:redirectURI:)")
    public func startWebSignIn(provider: String, redirectURI: String) -> WebFlow {
        startWebFlow(provider: provider, redirectURI: redirectURI)
    }

    @available(*, deprecated, renamed: "finishWebFlow(_:callbackURL:)")
    public func completeWebSignIn(_ flow: WebFlow, callbackURL: URL) async throws -> SignInResult {
        try await finishWebFlow(flow, callbackURL: callbackURL)
    }

    @available(*, deprecated, message: "use startWebFlow(provider: \"apple\", redirectURI:)")
    public func startAppleWebSignIn(redirectURI: String) -> WebFlow {
        startWebFlow(provider: "apple", redirectURI: redirectURI)
    }

    @available(*, deprecated, renamed: "finishWebFlow(_:callbackURL:)")
    public func completeAppleWebSignIn(_ flow: WebFlow, callbackURL: URL) async throws -> SignInResult {
        try await finishWebFlow(flow, callbackURL: callbackURL)
    }

    /// `POST /v1/auth/exchange`: a web flow's one-time login code (and its PKCE verifier) for a session.
    public func exchange(loginCode: String, codeVerifier: String?) async throws -> SignInResult {
        var body: [String: JSONValue] = ["login_code": .string(loginCode)]
        if let codeVerifier { body["code_verifier"] = .string(codeVerifier) }
        return try await signIn("/v1/auth/exchange", body)
    }

    // MARK: - Recent login

    /// `POST /v1/auth/reauthenticate` with the password: a fresh `auth_time` for the sensitive calls.
    public func reauthenticate(password: String) async throws {
        try await reauthenticate(["password": .string(password)])
    }

    /// Reauthenticates with a new Apple identity token (asked for with a new ``AppleNonce``).
    public func reauthenticate(appleIdentityToken: String, nonce: AppleNonce) async throws {
        try await reauthenticate(["provider": .string("apple"), "identity_token": .string(appleIdentityToken), "nonce": .string(nonce.raw)])
    }

    /// Reauthenticates with a new Google ID token and the nonce given to Google for it.
    public func reauthenticate(googleIDToken: String, nonce: String) async throws {
        try await reauthenticate(["provider": .string("google"), "id_token": .string(googleIDToken), "nonce": .string(nonce)])
    }

    /// Reauthenticates with a new ID token of one of the app's own providers (its id) and its nonce.
    public func reauthenticate(provider id: String, idToken: String, nonce: String) async throws {
        try await reauthenticate(["provider": .string(id), "id_token": .string(idToken), "nonce": .string(nonce)])
    }

    /// `POST /v1/auth/reauthenticate/send-code`: mails a code for ``reauthenticate(code:)``.
    public func sendReauthenticationCode() async throws {
        try Transport.check(try await authorized("POST", "/v1/auth/reauthenticate/send-code"))
    }

    /// Reauthenticates with the mailed code.
    public func reauthenticate(code: String) async throws {
        try await reauthenticate(["code": .string(code)])
    }

    /// Runs `action`; if it fails with `auth/requires-recent-login`, runs `reauthenticate`
    /// (which asks the user and calls one of the `reauthenticate` methods) and then `action`
    /// once more. The same order as gatehouse-js's `withRecentLogin(action, reauthenticate)`.
    public func withRecentLogin<T: Sendable>(
        _ action: () async throws -> T, reauthenticate: () async throws -> Void
    ) async throws -> T {
        do {
            return try await action()
        } catch let error as GatehouseError where error.requiresRecentLogin {
            try await reauthenticate()
            return try await action()
        }
    }

    @available(*, deprecated, message: "use withRecentLogin(_:reauthenticate:): the action first, as in gatehouse-js")
    public func withRecentLogin<T: Sendable>(
        reauthenticate: () async throws -> Void, _ operation: () async throws -> T
    ) async throws -> T {
        try await withRecentLogin(operation, reauthenticate: reauthenticate)
    }

    // MARK: - The account

    /// `GET /v1/me`: the user as the server has it now. It becomes ``currentUser``, but a read
    /// never sends an ``AuthEvent`` (so reloading the profile on each event cannot loop).
    public func getUser() async throws -> User {
        try await userAnswer(try await authorized("GET", "/v1/me"), quietly: true)
    }

    @available(*, deprecated, renamed: "getUser()")
    public func me() async throws -> User { try await getUser() }

    /// `PATCH /v1/me`: names, the user's `locale` (a BCP 47 tag), `display_name` (at most 100
    /// characters), `user_metadata` (replaced as a whole: a JSON object of at most 4 KiB, 5 levels
    /// deep; ``FieldChange/clear`` empties it) and the photo by a file id. ``FieldChange/clear``
    /// sends `null`.
    public func updateUser(
        firstName: FieldChange<String> = .unchanged, lastName: FieldChange<String> = .unchanged, locale: FieldChange<String> = .unchanged,
        displayName: FieldChange<String> = .unchanged, userMetadata: FieldChange<[String: MetadataValue]> = .unchanged, photoFileID: String? = nil
    ) async throws -> User {
        var body: [String: JSONValue] = [:]
        for (key, change) in [("first_name", firstName), ("last_name", lastName), ("locale", locale), ("display_name", displayName)] {
            switch change {
            case .unchanged: break
            case .set(let value): body[key] = .string(value)
            case .clear: body[key] = .null
            }
        }
        switch userMetadata {
        case .unchanged: break
        case .set(let value): body["user_metadata"] = .metadata(.object(value))
        case .clear: body["user_metadata"] = .null
        }
        if let photoFileID { body["photo_file_id"] = .string(photoFileID) }
        return try await userAnswer(try await authorized("PATCH", "/v1/me", body: .json(body)))
    }

    @available(*, deprecated, renamed: "updateUser(firstName:lastName:locale:displayName:userMetadata:photoFileID:)")
    public func updateProfile(
        firstName: FieldChange<String> = .unchanged, lastName: FieldChange<String> = .unchanged, locale: FieldChange<String> = .unchanged,
        displayName: FieldChange<String> = .unchanged, userMetadata: FieldChange<[String: MetadataValue]> = .unchanged, photoFileID: String? = nil
    ) async throws -> User {
        try await updateUser(
            firstName: firstName, lastName: lastName, locale: locale, displayName: displayName, userMetadata: userMetadata, photoFileID: photoFileID)
    }

    /// `POST /v1/me/photo`: a JPEG, PNG, WebP or GIF (checked by its content on the server).
    public func uploadPhoto(_ data: Data, contentType: String, filename: String = "photo") async throws -> User {
        let boundary = "gatehousekit-" + SecureRandom.token(byteCount: 12)
        let safeName = String(filename.filter { $0 != "\"" && $0 != "\r" && $0 != "\n" })
        var body = Data("--\(boundary)\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"\(safeName)\"\r\nContent-Type: \(contentType)\r\n\r\n".utf8)
        body.append(data)
        body.append(Data("\r\n--\(boundary)--\r\n".utf8))
        return try await userAnswer(try await authorized("POST", "/v1/me/photo", body: .multipart(body, boundary: boundary)))
    }

    @available(*, deprecated, renamed: "uploadPhoto(_:contentType:filename:)")
    public func uploadPhoto(_ data: Data, contentType: String, fileName: String) async throws -> User {
        try await uploadPhoto(data, contentType: contentType, filename: fileName)
    }

    /// `DELETE /v1/me/photo`.
    public func deletePhoto() async throws -> User {
        try await userAnswer(try await authorized("DELETE", "/v1/me/photo"))
    }

    /// `PUT /v1/me/password`: the user's other sessions end; this one stays.
    public func changePassword(current: String, new: String) async throws {
        let body: [String: JSONValue] = ["current_password": .string(current), "password": .string(new)]
        try Transport.check(try await authorized("PUT", "/v1/me/password", body: .json(body)))
    }

    /// `POST /v1/me/email` (recent login): mails a code to the new address.
    public func changeEmail(to email: String) async throws {
        try Transport.check(try await authorized("POST", "/v1/me/email", body: .json(["email": .string(email)])))
    }

    /// `POST /v1/me/email/confirm`: the new address, verified.
    public func confirmEmailChange(email: String, code: String) async throws -> User {
        try await userAnswer(try await authorized("POST", "/v1/me/email/confirm", body: .json(["email": .string(email), "code": .string(code)])))
    }

    /// `POST /v1/auth/email/verification/send`: mails a verification code.
    public func sendEmailVerification() async throws {
        try Transport.check(try await authorized("POST", "/v1/auth/email/verification/send"))
    }

    /// `POST /v1/auth/email/verification/confirm`, then a refresh so the access token says
    /// `email_verified: true` too (if that refresh fails, the next one does it).
    public func confirmEmailVerification(code: String) async throws -> User {
        let user = try await userAnswer(try await authorized("POST", "/v1/auth/email/verification/confirm", body: .json(["code": .string(code)])))
        _ = try? await manager.refreshNow()
        return user
    }

    // MARK: - Sign-in methods

    /// `GET /v1/me/identities`: the user's sign-in methods, every page.
    public func getIdentities() async throws -> [Identity] {
        try await allPages(Identity.self, "/v1/me/identities")
    }

    @available(*, deprecated, renamed: "getIdentities()")
    public func identities() async throws -> [Identity] { try await getIdentities() }

    /// `POST /v1/me/identities/password`: adds a password to an account without one. An anonymous
    /// account gives its `email` with it (it has none) and is upgraded in place, the same user id.
    public func addPassword(_ password: String, email: String? = nil) async throws -> [Identity] {
        var body: [String: JSONValue] = ["password": .string(password)]
        if let email { body["email"] = .string(email) }
        return try Transport.decode([Identity].self, from: try await authorized("POST", "/v1/me/identities/password", body: .json(body)))
    }

    /// `POST /v1/me/identities/apple` (recent login): links an Apple account.
    public func linkApple(identityToken: String, nonce: AppleNonce, authorizationCode: String) async throws -> [Identity] {
        let body: [String: JSONValue] = [
            "identity_token": .string(identityToken), "nonce": .string(nonce.raw), "authorization_code": .string(authorizationCode),
        ]
        return try Transport.decode([Identity].self, from: try await authorized("POST", "/v1/me/identities/apple", body: .json(body)))
    }

    /// `POST /v1/me/identities/google` (recent login): links a Google account.
    public func linkGoogle(idToken: String, nonce: String) async throws -> [Identity] {
        let body: [String: JSONValue] = ["id_token": .string(idToken), "nonce": .string(nonce)]
        return try Transport.decode([Identity].self, from: try await authorized("POST", "/v1/me/identities/google", body: .json(body)))
    }

    /// `POST /v1/me/identities/{id}` (recent login): links one of the app's own providers (its
    /// `oidc_providers` id) with an ID token and its raw nonce.
    public func linkProvider(_ id: String, idToken: String, nonce: String) async throws -> [Identity] {
        try await linkProvider(id, ["id_token": .string(idToken), "nonce": .string(nonce)])
    }

    /// Links one of the app's own providers of kind naver or github with an access token (recent login).
    public func linkProvider(_ id: String, accessToken: String) async throws -> [Identity] {
        try await linkProvider(id, ["access_token": .string(accessToken)])
    }

    private func linkProvider(_ id: String, _ body: [String: JSONValue]) async throws -> [Identity] {
        try Transport.decode([Identity].self, from: try await authorized("POST", "/v1/me/identities/\(pathSegment(id))", body: .json(body)))
    }

    @available(*, deprecated, renamed: "linkProvider(_:idToken:nonce:)")
    public func link(provider id: String, idToken: String, nonce: String) async throws -> [Identity] {
        try await linkProvider(id, idToken: idToken, nonce: nonce)
    }

    /// `DELETE /v1/me/identities/{provider}` (recent login).
    public func unlink(_ provider: SignInProvider) async throws -> [Identity] {
        try Transport.decode([Identity].self, from: try await authorized("DELETE", "/v1/me/identities/\(pathSegment(provider.rawValue))"))
    }

    // MARK: - Devices

    /// `GET /v1/me/sessions`: the user's signed-in devices, every page.
    public func getSessions() async throws -> [DeviceSession] {
        try await allPages(DeviceSession.self, "/v1/me/sessions")
    }

    @available(*, deprecated, renamed: "getSessions()")
    public func sessions() async throws -> [DeviceSession] { try await getSessions() }

    /// `GET /v1/me/export`: what the server holds about the user (profile, identities, sessions,
    /// files' metadata, factors, the newest 1,000 events), never a secret. A few an hour; more is
    /// ``GatehouseError/server(_:)`` with `auth/too-many-requests`.
    public func exportMyData() async throws -> AccountExport {
        try Transport.decode(AccountExport.self, from: try await authorized("GET", "/v1/me/export"))
    }

    /// `DELETE /v1/me/sessions/{id}`: signs that device out (this one too, if it is `current`:
    /// the local session is then forgotten, ``SignOutReason/signedOut``).
    public func endSession(id: String) async throws {
        let current = await manager.currentSessionID()
        try Transport.check(try await authorized("DELETE", "/v1/me/sessions/\(pathSegment(id))"))
        if current == id { await manager.end(.signedOut) }
    }

    @available(*, deprecated, renamed: "endSession(id:)")
    public func revokeSession(id: String) async throws { try await endSession(id: id) }

    // MARK: - Ending

    /// `POST /v1/auth/signout`. With `.current` or `.all` the local session is forgotten too, even
    /// when the server cannot be reached (the error is still thrown).
    public func signOut(scope: SignOutScope = .current) async throws {
        do {
            try Transport.check(try await authorized("POST", "/v1/auth/signout", body: .json(["scope": .string(scope.rawValue)])))
        } catch GatehouseError.notSignedIn {
            return
        } catch {
            if scope != .others { await manager.end(.signedOut) }
            if case GatehouseError.server(let problem) = error, [.sessionRevoked, .invalidRefreshToken, .refreshTokenReused].contains(problem.code) {
                return  // already ended on the server
            }
            throw error
        }
        if scope != .others { await manager.end(.signedOut) }
    }

    /// `DELETE /v1/me` (recent login): deletes the account and forgets the session.
    /// `appleAuthorizationCode` lets Gatehouse revoke the user's Apple tokens when it stores none.
    public func deleteAccount(reason: String? = nil, appleAuthorizationCode: String? = nil) async throws {
        var body: [String: JSONValue] = [:]
        if let reason { body["reason"] = .string(reason) }
        if let appleAuthorizationCode { body["apple_authorization_code"] = .string(appleAuthorizationCode) }
        try Transport.check(try await authorized("DELETE", "/v1/me", body: body.isEmpty ? nil : .json(body)))
        await manager.end(.accountDeleted)
    }

    // MARK: - Plumbing

    /// A call answered by a session (a sign-in, or its second step): the session is installed.
    func signIn(_ path: String, _ body: [String: JSONValue]) async throws -> SignInResult {
        let payload = try Transport.decode(SessionPayload.self, from: try await transport.send("POST", path, body: .json(body)))
        return try await manager.install(payload)
    }

    func reauthenticate(_ body: [String: JSONValue]) async throws {
        struct Access: Decodable {
            let access_token: String
            let expires_in: Double
        }
        let access = try Transport.decode(Access.self, from: try await authorized("POST", "/v1/auth/reauthenticate", body: .json(body)))
        try await manager.replaceAccessToken(access.access_token, expiresIn: access.expires_in)
    }

    private func userAnswer(_ answer: HTTPAnswer, quietly: Bool = false) async throws -> User {
        let user = try Transport.decode(User.self, from: answer)
        await manager.updateUser(user, quietly: quietly)
        return user
    }

    /// Sends a call with the session's access token: refreshed first when about to expire, and
    /// once more after `auth/token-expired`; an ended session (`auth/session-revoked`) is forgotten.
    func authorized(
        _ method: String, _ path: String, query: [URLQueryItem] = [], body: RequestBody? = nil, headers: [String: String] = [:]
    ) async throws -> HTTPAnswer {
        let token = try await manager.validAccessToken()
        var answer = try await transport.send(method, path, query: query, body: body, bearer: token, headers: headers)
        if answer.status == 401, Transport.problem(answer).code == .tokenExpired {
            let fresh = try await manager.accessToken(afterRejecting: token)
            answer = try await transport.send(method, path, query: query, body: body, bearer: fresh, headers: headers)
        }
        if answer.status == 401, Transport.problem(answer).code == .sessionRevoked {
            await manager.end(.sessionEnded(.sessionRevoked))
        }
        return answer
    }

    private func allPages<Item: Decodable & Sendable>(_ type: Item.Type, _ path: String) async throws -> [Item] {
        var items: [Item] = []
        var cursor: String?
        repeat {
            var query = [URLQueryItem(name: "limit", value: "100")]
            if let cursor { query.append(URLQueryItem(name: "cursor", value: cursor)) }
            let answer = try await authorized("GET", path, query: query)
            try Transport.check(answer)
            guard let page = try? Transport.decoder.decode(ListPage<Item>.self, from: answer.body) else {
                throw GatehouseError.unexpectedResponse(status: answer.status)
            }
            items += page.data
            cursor = page.next_cursor
        } while cursor != nil
        return items
    }

    func pathSegment(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? value
    }
}

/// One page of a list answer.
private struct ListPage<Item: Decodable>: Decodable {
    let data: [Item]
    let next_cursor: String?
}

/// A web sign-in in progress; see ``GatehouseClient/startWebFlow(provider:redirectURI:)``.
/// Printed, it shows neither its state nor its PKCE verifier.
public struct WebFlow: Sendable, Equatable, CustomStringConvertible {
    /// `"apple"` or the id of one of the app's `oidc_providers`.
    public let provider: String
    /// Where to send the browser.
    public let authorizeURL: URL
    /// Where Gatehouse sends the browser back.
    public let redirectURI: String
    /// The random state that the redirect must carry back.
    public let state: String
    /// The PKCE pair: the challenge went out in ``authorizeURL``, the verifier goes to `/v1/auth/exchange`.
    public let pkce: PKCE

    public var description: String { "WebFlow(provider: \(provider), redirectURI: \(redirectURI), state: <redacted>, pkce: <redacted>)" }
}

@available(*, deprecated, renamed: "WebFlow")
public typealias WebSignIn = WebFlow

/// The Apple web sign-in of earlier versions: a ``WebFlow`` whose provider is `"apple"`.
@available(*, deprecated, renamed: "WebFlow")
public typealias AppleWebSignIn = WebFlow

/// Compares without stopping at the first difference.
func constantTimeEqual(_ a: String, _ b: String) -> Bool {
    let x = Array(a.utf8)
    let y = Array(b.utf8)
    guard x.count == y.count else { return false }
    var difference: UInt8 = 0
    for index in x.indices { difference |= x[index] ^ y[index] }
    return difference == 0
}
