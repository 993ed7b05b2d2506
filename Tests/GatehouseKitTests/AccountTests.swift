import Foundation
import GatehouseCore
import GatehouseKit
import GatehouseTesting
import Testing

/// `/me` and the account calls through GatehouseKit, against the real server.
@Suite("GatehouseKit account")
struct AccountTests {
    /// `display_name` and `user_metadata` set through ``GatehouseClient/updateUser``, the
    /// admin's `app_metadata` read back in the user object.
    @Test
    func customData() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let client = world.client()
        let signedUp = try await client.signUp(email: "ada@example.com", password: "correct horse battery")
        #expect(signedUp.user.displayName == nil && signedUp.user.appMetadata == [:] && signedUp.user.userMetadata == [:])
        let preferences: [String: MetadataValue] = ["theme": "dark", "volume": 7, "ratio": 0.5, "tags": ["a", nil, true], "nested": ["k": "v"]]
        let updated = try await client.updateUser(displayName: .set("Ada L."), userMetadata: .set(preferences))
        #expect(updated.displayName == "Ada L." && updated.userMetadata == preferences)
        let cleared = try await client.updateUser(displayName: .clear, userMetadata: .clear)
        #expect(cleared.displayName == nil && cleared.userMetadata == [:])
        let tooBig = await kitError {
            try await client.updateUser(userMetadata: .set(["blob": .string(String(repeating: "x", count: 5000))]))
        }
        guard case .server(let problem)? = tooBig else { Issue.record("expected a problem"); return }
        #expect(problem.code == .validationFailed && problem.fieldErrors.map(\.field) == ["user_metadata"])

        let admin = try world.server.request(
            "PATCH", "/v1/admin/users/\(signedUp.user.id)", bearer: world.app.secretKey, json: ["app_metadata": ["plan": "pro", "seats": 3]])
        #expect(admin.status == 200)
        #expect(try await client.getUser().appMetadata == ["plan": "pro", "seats": 3])
    }

    /// ``GatehouseClient/exportMyData()``: the user's own data, decoded into ``AccountExport``;
    /// `display_name` given at sign-up; a few exports an hour.
    @Test
    func exportMyData() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let client = world.client()
        let signedUp = try await client.signUp(email: "ada@example.com", password: "correct horse battery", displayName: "Ada L.")
        #expect(signedUp.user.displayName == "Ada L.")
        let mine = try await client.exportMyData()
        #expect(mine.profile.id == signedUp.user.id && mine.profile.displayName == "Ada L." && mine.profile.email == "ada@example.com")
        #expect(mine.identities.map(\.provider) == [.password])
        #expect(mine.sessions.count == 1 && mine.sessions.first?.current == true)
        #expect(mine.files.isEmpty && mine.factors.isEmpty)
        // Newest first (events of one millisecond in any order): the sign-up, its session, this export.
        #expect(Set(mine.events.map(\.type)) == ["user.signed_up", "user.signed_in", "user.exported"])
        #expect(mine.events.map(\.createdAt) == mine.events.map(\.createdAt).sorted(by: >))
        #expect(mine.events.first { $0.type == "user.exported" }?.sessionID == mine.sessions.first?.id)
        #expect(mine.events.first { $0.type == "user.signed_up" }?.data == ["method": "password"])
        for _ in 1..<5 { _ = try await client.exportMyData() }
        let limited = await kitError { try await client.exportMyData() }
        #expect(limited?.code == .tooManyRequests)
    }

    @Test
    func profilePhotoPasswordAndEmail() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let client = world.client()
        let signedUp = try await client.signUp(email: "ada@example.com", password: "correct horse battery", firstName: "Ada", locale: "ja")
        #expect(signedUp.user.locale == "ja")
        _ = try world.code(to: "ada@example.com")

        let named = try await client.updateUser(lastName: .set("Lovelace"), locale: .set("ko-kr"))
        #expect(named.firstName == "Ada" && named.lastName == "Lovelace" && named.locale == "ko-KR")
        #expect(try await client.updateUser(locale: .clear).locale == nil)
        let cleared = try await client.updateUser(firstName: .clear)
        #expect(cleared.firstName == nil && cleared.lastName == "Lovelace")
        #expect(client.currentUser == cleared, "the stored user follows the server's answers")
        let tooLong = await kitError { try await client.updateUser(firstName: .set(String(repeating: "x", count: 51))) }
        guard case .server(let problem)? = tooLong else { Issue.record("expected a problem"); return }
        #expect(problem.code == .validationFailed && problem.fieldErrors.map(\.field) == ["first_name"])

        let withPhoto = try await client.uploadPhoto(Data(KitWorld.png), contentType: "image/png", filename: "me.png")
        let photoURL = try #require(withPhoto.photoURL)
        #expect(photoURL.absoluteString.hasPrefix(TestServer.publicURL))
        let notAnImage = await kitError { try await client.uploadPhoto(Data("plain text".utf8), contentType: "image/png") }
        #expect(notAnImage?.code == .unsupportedFileType)
        #expect(try await client.deletePhoto().photoURL == nil)

        let second = world.client()
        _ = try await second.signIn(email: "ada@example.com", password: "correct horse battery")
        let wrongCurrent = await kitError { try await client.changePassword(current: "not it at all", new: "a new long password") }
        #expect(wrongCurrent?.code == .invalidCredential)
        try await client.changePassword(current: "correct horse battery", new: "a new long password")
        #expect(try await client.getUser().id == cleared.id, "this session stays")
        #expect(await kitError { try await second.getUser() }?.code == .sessionRevoked, "the other one ended")
        #expect(second.currentUser == nil)

        try await client.changeEmail(to: "ada@new.example.com")
        let moved = try await client.confirmEmailChange(email: "ada@new.example.com", code: try world.code(to: "ada@new.example.com"))
        #expect(moved.email == "ada@new.example.com" && moved.emailVerified)
    }

    @Test
    func devicesAreListedAndOneIsSignedOutFromAnother() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let phone = world.client()
        let tablet = world.client()
        _ = try await phone.signUp(email: "dev@example.com", password: "correct horse battery")
        _ = try await tablet.signIn(email: "dev@example.com", password: "correct horse battery")
        let devices = try await phone.getSessions()
        #expect(devices.count == 2 && devices.filter(\.current).count == 1)
        let other = try #require(devices.first { !$0.current })
        #expect(other.method == "password")
        let tabletEvents = EventLog(tablet)
        try await phone.endSession(id: other.id)
        #expect(await kitError { try await tablet.getUser() }?.code == .sessionRevoked)
        #expect(await tabletEvents.first(1) == [.signedOut(.sessionEnded(.sessionRevoked))])
        #expect(try await phone.getSessions().count == 1)

        // Sign out everywhere else, then here.
        _ = try await tablet.signIn(email: "dev@example.com", password: "correct horse battery")
        try await phone.signOut(scope: .others)
        #expect(phone.currentUser != nil)
        #expect(await kitError { try await tablet.getUser() }?.code == .sessionRevoked)
        try await phone.signOut()
        #expect(await kitError { try await phone.getUser() } == .notSignedIn)
    }

    /// Linking needs a recent sign-in: the client surfaces `requiresRecentLogin`, and
    /// `withRecentLogin` reauthenticates (password, Apple token, mailed code) and retries once.
    @Test
    func recentLoginIsSurfacedAndWithRecentLoginRetriesAfterReauthenticating() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let client = world.client()
        let created = try await client.signUp(email: "link@example.com", password: "correct horse battery")
        _ = try world.code(to: "link@example.com")
        world.clock.advance(seconds: 301)  // past recent_login_seconds (300), within the access token's 900

        let googleToken = { (nonce: String) in
            world.google.mintIDToken(sub: "g-link-1", aud: KitWorld.googleClient, email: "link@gmail.com", nonce: nonce)
        }
        let stale = await kitError { try await client.linkGoogle(idToken: googleToken("n-1"), nonce: "n-1") }
        #expect(stale?.requiresRecentLogin == true)
        guard case .server(let problem)? = stale else { Issue.record("expected a problem"); return }
        #expect(problem.status == 403)

        let asked = Locked(0)
        let identities = try await client.withRecentLogin {
            try await client.linkGoogle(idToken: googleToken("n-2"), nonce: "n-2")
        } reauthenticate: {
            asked.update { $0 += 1 }
            try await client.reauthenticate(password: "correct horse battery")
        }
        #expect(asked.value == 1)
        #expect(Set(identities.map(\.provider)) == [.password, .google])
        #expect(Set(try await client.getIdentities().map(\.provider)) == [.password, .google])
        // No second reauthentication while the login is recent.
        let unlinked = try await client.withRecentLogin({ try await client.unlink(.google) }, reauthenticate: { asked.update { $0 += 1 } })
        #expect(asked.value == 1 && unlinked.map(\.provider) == [.password])
        #expect(await kitError { try await client.unlink(.password) }?.code == .lastSignInMethod)

        // Reauthenticating with an Apple token (new nonce) and with a mailed code, then linking Apple.
        world.clock.advance(seconds: 301)
        let appleNonce = AppleNonce()
        let appleCode = world.apple.issueCode(for: FakeAppleUser(sub: "001.link.apple", email: "link@example.com", nonce: appleNonce.hashed), clientID: KitWorld.bundleID)
        let appleToken = world.apple.mintIdentityToken(sub: "001.link.apple", aud: KitWorld.bundleID, email: "link@example.com", nonce: appleNonce.hashed)
        #expect(await kitError { try await client.linkApple(identityToken: appleToken, nonce: appleNonce, authorizationCode: appleCode) }?.requiresRecentLogin == true)
        try await client.sendReauthenticationCode()
        try await client.reauthenticate(code: try world.code(to: "link@example.com"))
        let linked = try await client.linkApple(identityToken: appleToken, nonce: appleNonce, authorizationCode: appleCode)
        #expect(Set(linked.map(\.provider)) == [.password, .apple])
        world.clock.advance(seconds: 301)
        let reauthNonce = AppleNonce()
        try await client.reauthenticate(
            appleIdentityToken: world.apple.mintIdentityToken(sub: "001.link.apple", aud: KitWorld.bundleID, email: "link@example.com", nonce: reauthNonce.hashed),
            nonce: reauthNonce)
        #expect(try await client.unlink(.apple).map(\.provider) == [.password])
        // Reauthenticating with Google's token works once Google is linked again.
        world.clock.advance(seconds: 301)
        try await client.reauthenticate(password: "correct horse battery")
        _ = try await client.linkGoogle(idToken: googleToken("n-3"), nonce: "n-3")
        world.clock.advance(seconds: 301)
        try await client.reauthenticate(googleIDToken: googleToken("n-4"), nonce: "n-4")
        #expect(try await client.unlink(.google).map(\.provider) == [.password])
        #expect(try await client.getUser().id == created.user.id)
    }

    @Test
    func deletingTheAccountNeedsARecentLoginAndSignsTheClientOut() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let client = world.client()
        let events = EventLog(client)
        let created = try await client.signUp(email: "gone@example.com", password: "correct horse battery")
        world.clock.advance(seconds: 301)
        #expect(await kitError { try await client.deleteAccount(reason: "testing") }?.requiresRecentLogin == true)
        #expect(client.currentUser != nil, "a refused deletion keeps the session")
        try await client.withRecentLogin {
            try await client.deleteAccount(reason: "testing")
        } reauthenticate: {
            try await client.reauthenticate(password: "correct horse battery")
        }
        #expect(client.currentUser == nil)
        #expect(await events.first(3) == [.signedIn(created.user), .tokenRefreshed, .signedOut(.accountDeleted)])
        #expect(await kitError { try await world.client().signIn(email: "gone@example.com", password: "correct horse battery") }?.code == .invalidCredential)
        #expect(try await world.client().signUp(email: "gone@example.com", password: "correct horse battery").isNewUser)
    }
}
