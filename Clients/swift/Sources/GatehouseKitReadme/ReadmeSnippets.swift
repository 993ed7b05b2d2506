// The README's snippets, each exactly as printed there (GatehouseKitUnitTests' ReadmeTests checks
// that every ```swift block of README.md appears here line for line), inside functions that give
// them the values an app would have. Compiling this target is what keeps the README honest.
import Foundation
import GatehouseKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What an app's UI would supply.
struct AppleCredentialStandIn {
    var fullName: PersonNameComponents?
}

func askForPassword() async -> String { "correct horse battery" }
func showMessage(_ text: String) { print(text) }
func showSignInScreen(reason: ErrorCode) { print(reason) }

func makeClient() -> GatehouseClient {
    let client = GatehouseClient(
        baseURL: URL(string: "https://auth.example.com")!,
        appKey: "pk_live_123"
    )
    return client
}

func passwordSnippet(_ client: GatehouseClient) async throws {
    let result = try await client.signUp(email: "ada@example.com", password: "correct horse battery")
    if result.isNewUser { print("Welcome, \(result.user.email ?? "")") }
    let me = try await client.getUser()
    _ = me
}

func emailCodeSnippet(_ client: GatehouseClient, code: String) async throws {
    try await client.sendSignInCode(to: "ada@example.com")
    // … the user types the 6-digit code from the mail
    let session = try await client.verifySignInCode(email: "ada@example.com", code: code)
    _ = session
}

func appleSnippet(_ client: GatehouseClient, identityToken: String, authorizationCode: String, credential: AppleCredentialStandIn) async throws {
    let nonce = AppleNonce()
    // request.nonce = nonce.hashed, then perform the ASAuthorizationController request
    let result = try await client.signInWithApple(
        identityToken: identityToken,  // String(decoding: credential.identityToken!, as: UTF8.self)
        nonce: nonce,
        authorizationCode: authorizationCode,
        firstName: credential.fullName?.givenName,
        lastName: credential.fullName?.familyName
    )
    _ = result
}

func googleSnippet(_ client: GatehouseClient, googleIDToken: String, googleNonce: String, firebaseIDToken: String) async throws {
    let viaGoogle = try await client.signInWithGoogle(idToken: googleIDToken, nonce: googleNonce)
    let viaFirebase = try await client.signInWithFirebase(provider: .apple, idToken: firebaseIDToken)
    _ = (viaGoogle, viaFirebase)
}

func providerSnippet(_ client: GatehouseClient, kakaoIDToken: String, kakaoNonce: String) async throws {
    let viaKakao = try await client.signInWithProvider("kakao", idToken: kakaoIDToken, nonce: kakaoNonce)
    _ = viaKakao
}

func webFlowSnippet(_ client: GatehouseClient, callbackURL: URL) async throws {
    let flow = client.startWebFlow(provider: "github", redirectURI: "com.example.app:/auth/callback")
    // Open flow.authorizeURL with ASWebAuthenticationSession; it hands back callbackURL.
    let signedIn = try await client.finishWebFlow(flow, callbackURL: callbackURL)
    _ = signedIn
}

func accessTokenSnippet(_ client: GatehouseClient) async throws {
    var request = URLRequest(url: URL(string: "https://api.example.com/photos")!)
    request.setValue("Bearer \(try await client.accessToken())", forHTTPHeaderField: "Authorization")
    _ = request
}

func recentLoginSnippet(_ client: GatehouseClient) async throws {
    try await client.withRecentLogin {
        try await client.deleteAccount(reason: "no longer needed")
    } reauthenticate: {
        try await client.reauthenticate(password: await askForPassword())
    }
}

func errorsSnippet(_ client: GatehouseClient, email: String, password: String) async throws {
    do {
        _ = try await client.signIn(email: email, password: password)
    } catch let error as GatehouseError {
        switch error.code {
        case .invalidCredential?: showMessage("Wrong email or password")
        case .tooManyRequests?: showMessage("Too many tries: wait a minute")
        default: showMessage("Sign-in failed: \(error)")
        }
    }
}

func eventsSnippet(_ client: GatehouseClient) {
    Task {
        for await event in client.authEvents() {
            if case .signedOut(.sessionEnded(let code)) = event { showSignInScreen(reason: code) }
        }
    }
}

func filesSnippet(_ client: GatehouseClient, pdfData: Data, pngData: Data) async throws {
    let report = try await client.uploadFile(pdfData, filename: "report.pdf")
    let avatar = try await client.uploadFile(pngData, filename: "avatar.png", visibility: .public)
    print(avatar.url!)  // served byte for byte, no key needed
    let page = try await client.listFiles(limit: 20)  // page.files, newest first; page.nextCursor
    let content = try await client.getFileContent(id: report.id)  // content.data, content.contentType
    let head = try await client.getFileContent(id: report.id, range: ByteRange(start: 0, end: 1023))
    try await client.deleteFile(id: report.id)
    _ = (page, content, head)
}

func storeSnippet() {
    let store = FileSessionStore(url: URL(fileURLWithPath: "/var/lib/myapp/session.json"))
    let daemon = GatehouseClient(baseURL: URL(string: "https://auth.example.com")!, appKey: "pk_live_123", sessionStore: store)
    _ = daemon
}
