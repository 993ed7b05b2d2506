import Foundation
import GatehouseCrypto
import GatehouseTesting
import Testing

@testable import GatehouseCore

/// A password hash imported from another system (ADR 0030) signs its user in over the real
/// server, is replaced by argon2id at that first sign-in, and refuses a wrong password without
/// being touched. The hashes are the published vectors of ImportedPasswordKDFTests.
@Suite struct ImportedPasswordSignInTests {
    /// (algorithm, its password, the `password_hash` object).
    static let imports: [(String, String, JSON)] = [
        ("bcrypt", "U*U*", ["algorithm": "bcrypt", "hash": "$2b$05$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK"]),
        ("argon2id", "password", ["algorithm": "argon2id", "hash": "$argon2id$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc"]),
        ("argon2i", "password", ["algorithm": "argon2i", "hash": "$argon2i$v=19$m=65536,t=2,p=1$ZGlmZnNhbHQ$sDV8zPvvkfOGCw26RHsjSMvv7K2vmQq/6cxAcmxSEnE"]),
        // RFC 7914 §12's third vector.
        ("scrypt", "pleaseletmein", [
            "algorithm": "scrypt", "n": 16384, "r": 8, "p": 1, "salt": .string(Data("SodiumChloride".utf8).base64EncodedString()),
            "hash": "cCO9yzr9c0hGHAbNgf046/2o+7qQT44+qbVD9lRdofLVQylVYT8Pz2LUlwUkKpr55h6F3A1lHkDfzwF7RVdYhw==",
        ]),
        // RFC 7914 §11's first vector.
        ("pbkdf2_sha256", "passwd", [
            "algorithm": "pbkdf2_sha256", "iterations": 1, "salt": "c2FsdA==",
            "hash": "VawEblbjCJ/sFpHCJUS2BflBhSFt3gRl5oudV8INrLxJypzM8Xm2RZkWZLOdd+8xfHG4RbHjC9UJESBB06GXgw==",
        ]),
        ("pbkdf2_sha512", "password", [
            "algorithm": "pbkdf2_sha512", "iterations": 2, "salt": "c2FsdA==",
            "hash": "4dnBaqaBcIpF9cfE4hXOtm4BGi6fAEBxPxiu/bhm1Tz3bKsoaKObn3hA7c5P71qCvmczXHemBo4EESdU8nzPTg==",
        ]),
        // github.com/firebase/scrypt's README example.
        ("firebase_scrypt", "user1password", [
            "algorithm": "firebase_scrypt", "salt": "42xEC+ixf3L2lw==", "salt_separator": "Bw==", "rounds": 8, "mem_cost": 14,
            "signer_key": "jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==",
            "hash": "lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ==",
        ]),
    ]

    static let cases: [(TestDatabaseKind, String)] = TestDatabase.kinds.flatMap { kind in imports.map { (kind, $0.0) } }

    private struct Imported {
        let server: TestServer
        let app: TestServer.CreatedApp
        let data: any AppScopedStore
        let user: UserID
        let password: String
        let stored: String
    }

    /// An account signed up, whose password column is then set to the imported hash.
    private static func imported(_ kind: TestDatabaseKind, _ algorithm: String) throws -> Imported {
        let (_, password, json) = try #require(imports.first { $0.0 == algorithm })
        let server = try TestServer(kind)
        do {
            let app = try server.createApp(["name": "Imports"])
            let session = try server.signUp(app, email: "ada@example.com", password: "signed up with this")
            let user = UserID(unchecked: try #require(session["user"]?["id"]?.stringValue))
            let data = server.gatehouse.store.app(AppID(unchecked: app.id))
            let hash = try ImportedPasswordHash.decode(json, firebase: nil)
            #expect(hash.algorithm == algorithm)
            let old = try #require(try data.passwords.passwordHash(user))
            let stored = hash.storedForm(sealer: server.gatehouse.sealer, app: AppID(unchecked: app.id))
            #expect(try data.passwords.setPasswordHash(user, hash: stored, replacing: old, addIdentity: nil, now: server.clock.nowMillis()))
            return Imported(server: server, app: app, data: data, user: user, password: password, stored: stored)
        } catch {
            server.stop()
            throw error
        }
    }

    private static func signIn(_ world: Imported, _ password: String) throws -> TestResponse {
        try world.server.request("POST", "/v1/auth/signin", appKey: world.app.appKey, json: ["email": "ada@example.com", "password": .string(password)])
    }

    @Test(arguments: cases)
    func theImportedPasswordSignsInAndIsRehashedToArgon2id(_ kind: TestDatabaseKind, _ algorithm: String) throws {
        let world = try Self.imported(kind, algorithm)
        defer { world.server.stop() }
        // The password the account was signed up with is gone with its hash.
        #expect(try Self.signIn(world, "signed up with this").problemCode == "auth/invalid-credential")
        let first = try Self.signIn(world, world.password)
        #expect(first.status == 200, "\(first.text)")
        let stored = try #require(try world.data.passwords.passwordHash(world.user))
        #expect(!ImportedPasswordHash.isStoredForm(stored))
        #expect(Argon2id.parameters(of: stored) != nil)
        #expect(Argon2id.verify(password: Array(world.password.utf8), encoded: stored))
        let events = try world.server.gatehouse.database.query("SELECT data FROM events WHERE type = 'user.signed_in' ORDER BY created_at")
            .map { try $0.string("data") }
        #expect(events.count == 2 && events.last?.contains("\"rehashed\":true") == true, "\(events)")
        // The next sign-in is against the argon2id hash, and rehashes nothing.
        #expect(try Self.signIn(world, world.password).status == 200)
        #expect(try world.data.passwords.passwordHash(world.user) == stored)
        let later = try world.server.gatehouse.database.query("SELECT data FROM events WHERE type = 'user.signed_in' ORDER BY created_at").map { try $0.string("data") }
        #expect(later.count == 3 && later.last?.contains("rehashed") == false)
    }

    @Test(arguments: cases)
    func aWrongPasswordIsRefusedAndLeavesTheImportedHash(_ kind: TestDatabaseKind, _ algorithm: String) throws {
        let world = try Self.imported(kind, algorithm)
        defer { world.server.stop() }
        let wrong = try Self.signIn(world, world.password + "!")
        #expect(wrong.status == 400)
        #expect(wrong.problemCode == "auth/invalid-credential")
        #expect(try Self.signIn(world, "V" + world.password.dropFirst()).problemCode == "auth/invalid-credential")
        #expect(try world.data.passwords.passwordHash(world.user) == world.stored)
    }

    /// Reauthentication takes the imported password too (and leaves the rehash to sign-in).
    @Test(arguments: TestDatabase.kinds)
    func reauthenticationAcceptsAnImportedHash(_ kind: TestDatabaseKind) throws {
        let world = try Self.imported(kind, "bcrypt")
        defer { world.server.stop() }
        // A session from before the import (the sign-up's would do; this one is fresh).
        let session = try world.server.request(
            "POST", "/v1/auth/signin", appKey: world.app.appKey, json: ["email": "ada@example.com", "password": .string(world.password)])
        let token = try #require(session.data?["access_token"]?.stringValue)
        let old = try #require(try world.data.passwords.passwordHash(world.user))
        #expect(try world.data.passwords.setPasswordHash(world.user, hash: world.stored, replacing: old, addIdentity: nil, now: world.server.clock.nowMillis()))
        let wrong = try world.server.request("POST", "/v1/auth/reauthenticate", appKey: world.app.appKey, bearer: token, json: ["password": "U*U*U"])
        #expect(wrong.problemCode == "auth/invalid-credential")
        let right = try world.server.request("POST", "/v1/auth/reauthenticate", appKey: world.app.appKey, bearer: token, json: ["password": .string(world.password)])
        #expect(right.status == 200, "\(right.text)")
    }

    /// The current password of a change may be the imported one; the new one is argon2id.
    @Test(arguments: TestDatabase.kinds)
    func aPasswordChangeTakesTheImportedPasswordAsCurrent(_ kind: TestDatabaseKind) throws {
        let world = try Self.imported(kind, "pbkdf2_sha256")
        defer { world.server.stop() }
        let session = try Self.signIn(world, world.password)
        let token = try #require(session.data?["access_token"]?.stringValue)
        let old = try #require(try world.data.passwords.passwordHash(world.user))
        #expect(try world.data.passwords.setPasswordHash(world.user, hash: world.stored, replacing: old, addIdentity: nil, now: world.server.clock.nowMillis()))
        let wrong = try world.server.request(
            "PUT", "/v1/me/password", appKey: world.app.appKey, bearer: token, json: ["current_password": "passwd!", "password": "a brand new one"])
        #expect(wrong.problemCode == "auth/invalid-credential")
        #expect(try world.data.passwords.passwordHash(world.user) == world.stored)
        let changed = try world.server.request(
            "PUT", "/v1/me/password", appKey: world.app.appKey, bearer: token, json: ["current_password": .string(world.password), "password": "a brand new one"])
        #expect(changed.status == 204, "\(changed.text)")
        let stored = try #require(try world.data.passwords.passwordHash(world.user))
        #expect(Argon2id.verify(password: Array("a brand new one".utf8), encoded: stored))
        #expect(try Self.signIn(world, world.password).problemCode == "auth/invalid-credential")
    }
}
