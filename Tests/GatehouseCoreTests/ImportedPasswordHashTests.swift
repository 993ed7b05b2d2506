import Foundation
import GatehouseCrypto
import Testing

@testable import GatehouseCore

/// Decoding `password_hash` objects, their limits, and their stored form (ADR 0030).
@Suite struct ImportedPasswordHashTests {
    static let firebaseKey = "jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA=="
    static let firebaseHash = "lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ=="

    private static func fields(_ json: JSON, firebase: FirebaseHashConfig? = nil) -> [String: String] {
        do {
            _ = try ImportedPasswordHash.decode(json, firebase: firebase)
            return [:]
        } catch {
            #expect(error.code == .validationFailed)
            return Dictionary(error.fieldErrors.map { ($0.field, $0.message) }) { first, _ in first }
        }
    }

    @Test func everyAlgorithmRoundTripsThroughItsStoredForm() throws {
        let hashes: [(JSON, String)] = [
            (["algorithm": "bcrypt", "hash": "$2y$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW"], "U*U"),
            (["algorithm": "argon2i", "hash": "$argon2i$v=19$m=65536,t=2,p=1$ZGlmZnNhbHQ$sDV8zPvvkfOGCw26RHsjSMvv7K2vmQq/6cxAcmxSEnE"], "password"),
            // RFC 7914's first parameters with the salt "salt" (unpadded base64): a hash made here.
            (["algorithm": "scrypt", "n": 16, "r": 1, "p": 1, "salt": "c2FsdA",
              "hash": "7sgKRg7qq2L+FjCxlJfnumof+F9QgHuc/lKp8ZLltgw="], ""),
            (["algorithm": "pbkdf2_sha256", "iterations": 1, "salt": "c2FsdA==",
              "hash": "VawEblbjCJ/sFpHCJUS2BflBhSFt3gRl5oudV8INrLxJypzM8Xm2RZkWZLOdd+8xfHG4RbHjC9UJESBB06GXgw=="], "passwd"),
            (["algorithm": "firebase_scrypt", "salt": "42xEC+ixf3L2lw==", "hash": .string(Self.firebaseHash)], "user1password"),
        ]
        let firebase = try FirebaseHashConfig.decode(["signer_key": .string(Self.firebaseKey), "salt_separator": "Bw==", "rounds": 8, "mem_cost": 14])
        let sealer = try SecretSealer(masterKey: Array(repeating: 7, count: 32))
        let app = AppID(unchecked: "app_roundtrip")
        for (json, password) in hashes {
            let hash = try ImportedPasswordHash.decode(json, firebase: firebase)
            let stored = hash.storedForm(sealer: sealer, app: app)
            #expect(stored.hasPrefix("$gatehouse-import$v=1$\(hash.algorithm)$"))
            #expect(ImportedPasswordHash.isStoredForm(stored))
            // Never mistaken for a hash the server made.
            #expect(Argon2id.parameters(of: stored) == nil)
            #expect(!Argon2id.verify(password: Array(password.utf8), encoded: stored))
            #expect(ImportedPasswordHash(storedForm: stored, sealer: sealer, app: app) == hash)
            #expect(hash.verify(password), "\(hash.algorithm)")
            #expect(!hash.verify(password + "x"), "\(hash.algorithm)")
        }
        #expect(ImportedPasswordHash(storedForm: "$argon2id$v=19$m=1024,t=1,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc", sealer: sealer, app: app) == nil)
        #expect(ImportedPasswordHash(storedForm: "$gatehouse-import$v=1$md5$abc", sealer: sealer, app: app) == nil)
        #expect(ImportedPasswordHash(storedForm: "$gatehouse-import$v=1$scrypt$n=3,r=1,p=1$c2FsdA==$c2FsdA==", sealer: sealer, app: app) == nil)
    }

    /// The Firebase signer key is a secret of the whole project: the stored form holds it sealed
    /// for the app, never in the clear, and it opens for that app and master key only (ADR 0031).
    @Test func aFirebaseStoredFormHoldsTheSignerKeySealedForItsApp() throws {
        let firebase = try FirebaseHashConfig.decode(["signer_key": .string(Self.firebaseKey), "salt_separator": "Bw==", "rounds": 8, "mem_cost": 14])
        let hash = try ImportedPasswordHash.decode(["algorithm": "firebase_scrypt", "salt": "42xEC+ixf3L2lw==", "hash": .string(Self.firebaseHash)], firebase: firebase)
        let sealer = try SecretSealer(masterKey: Array(repeating: 7, count: 32))
        let app = AppID(unchecked: "app_one")
        let stored = hash.storedForm(sealer: sealer, app: app)
        let key = try #require(Data(base64Encoded: Self.firebaseKey))
        #expect(!stored.contains(Self.firebaseKey))
        #expect(!stored.contains(Self.firebaseKey.replacingOccurrences(of: "=", with: "")))
        #expect(!stored.contains(Base64URL.encode(Array(key))))
        #expect(stored.utf8.count < 2000)
        #expect(ImportedPasswordHash(storedForm: stored, sealer: sealer, app: app) == hash)
        #expect(ImportedPasswordHash(storedForm: stored, sealer: sealer, app: AppID(unchecked: "app_two")) == nil)
        #expect(ImportedPasswordHash(storedForm: stored, sealer: try SecretSealer(masterKey: Array(repeating: 8, count: 32)), app: app) == nil)
        // The form main's first version wrote (the key in base64 in the fourth field) is not read.
        let clear = "$gatehouse-import$v=1$firebase_scrypt$rounds=8,mem_cost=14$42xEC+ixf3L2lw==$Bw==$\(Self.firebaseKey)$\(Self.firebaseHash)"
        #expect(ImportedPasswordHash(storedForm: clear, sealer: sealer, app: app) == nil)
    }

    @Test func scryptVerifiesAgainstItsDerivedKey() throws {
        // RFC 7914 §12's second vector, cut to 32 bytes (scrypt's output is a prefix of the longer one).
        let hash = try ImportedPasswordHash.decode(
            ["algorithm": "scrypt", "n": 1024, "r": 8, "p": 16, "salt": "TmFDbA==", "hash": "/bq+HJ00cgB4VucZDQHp/nxq18vII3gw53N2Y0s3MWI="], firebase: nil)
        #expect(hash.verify("password"))
        #expect(!hash.verify("passwore"))
    }

    @Test func badInputGetsFieldErrors() {
        #expect(Self.fields(["hash": "x"])["password_hash.algorithm"] == "Required.")
        #expect(Self.fields(["algorithm": "md5", "hash": "x"])["password_hash.algorithm"]?.hasPrefix("Must be one of") == true)
        #expect(Self.fields(.string("bcrypt"))["password_hash"] == "Must be a JSON object.")
        #expect(Self.fields(["algorithm": "bcrypt"])["password_hash.hash"] == "Required.")
        #expect(Self.fields(["algorithm": "bcrypt", "hash": "$1$abc"])["password_hash.hash"]?.hasPrefix("Must be a bcrypt string") == true)
        #expect(Self.fields(["algorithm": "bcrypt", "hash": "$2b$05$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK", "salt": "c2FsdA=="])["password_hash.salt"] == "Unknown field.")
        #expect(Self.fields(["algorithm": "argon2id", "hash": "$argon2i$v=19$m=65536,t=2,p=1$ZGlmZnNhbHQ$sDV8zPvvkfOGCw26RHsjSMvv7K2vmQq/6cxAcmxSEnE"])["password_hash.hash"] != nil)
        #expect(Self.fields(["algorithm": "scrypt", "n": 16, "r": 1, "p": 1, "salt": "not base64!", "hash": "c2FsdHNhbHRzYWx0c2FsdA=="])["password_hash.salt"] == "Must be standard base64.")
        let scrypt = Self.fields(["algorithm": "scrypt", "salt": "c2FsdA=="])
        #expect(scrypt["password_hash.hash"] == "Required." && scrypt["password_hash.n"] == "Required." && scrypt["password_hash.r"] == "Required.")
        #expect(Self.fields(["algorithm": "scrypt", "n": 1000, "r": 1, "p": 1, "salt": "c2FsdA==", "hash": "c2FsdHNhbHRzYWx0c2FsdA=="])["password_hash.n"] == "Must be a power of two.")
        #expect(Self.fields(["algorithm": "pbkdf2_sha256", "salt": "c2FsdA==", "hash": "c2FsdHNhbHRzYWx0c2FsdA=="])["password_hash.iterations"] == "Required.")
        #expect(Self.fields(["algorithm": "firebase_scrypt", "salt": "c2FsdA==", "hash": "c2FsdA=="])["password_hash.signer_key"]?.hasPrefix("Required") == true)
        #expect(Self.fields(["algorithm": "firebase_scrypt", "salt": "c2FsdA==", "hash": "c2FsdA==", "signer_key": "c2FsdA=="])["password_hash.rounds"] == "Required.")
    }

    /// Parameters that would make one sign-in too costly are refused when they are imported.
    @Test func costsAboveTheLimitsAreRefused() {
        let salt: JSON = "c2FsdA=="
        let hash: JSON = "c2FsdHNhbHRzYWx0c2FsdA=="
        #expect(Self.fields(["algorithm": "bcrypt", "hash": "$2b$17$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK"])["password_hash.hash"]
            == "The bcrypt cost must be at most 16.")
        #expect(Self.fields(["algorithm": "bcrypt", "hash": "$2b$16$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK"]).isEmpty)
        #expect(Self.fields(["algorithm": "scrypt", "n": .int(1 << 21), "r": 1, "p": 1, "salt": salt, "hash": hash])["password_hash.n"] != nil)
        #expect(Self.fields(["algorithm": "scrypt", "n": .int(1 << 20), "r": 16, "p": 1, "salt": salt, "hash": hash])["password_hash.n"] == "n × r × 128 bytes must be at most 1 GiB.")
        #expect(Self.fields(["algorithm": "scrypt", "n": .int(1 << 20), "r": 8, "p": 1, "salt": salt, "hash": hash]).isEmpty)
        #expect(Self.fields(["algorithm": "scrypt", "n": .int(1 << 20), "r": 8, "p": 2, "salt": salt, "hash": hash])["password_hash.p"] == "n × r × p must be at most 2^23.")
        #expect(Self.fields(["algorithm": "pbkdf2_sha512", "iterations": 10_000_001, "salt": salt, "hash": hash])["password_hash.iterations"] != nil)
        #expect(Self.fields(["algorithm": "pbkdf2_sha512", "iterations": 10_000_000, "salt": salt, "hash": hash]).isEmpty)
        #expect(Self.fields(["algorithm": "argon2id", "hash": "$argon2id$v=19$m=2097152,t=2,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc"])["password_hash.hash"]?
            .hasPrefix("Its costs") == true)
        #expect(Self.fields(["algorithm": "argon2i", "hash": "$argon2i$v=19$m=65536,t=11,p=1$ZGlmZnNhbHQ$sDV8zPvvkfOGCw26RHsjSMvv7K2vmQq/6cxAcmxSEnE"])["password_hash.hash"]?
            .hasPrefix("Its costs") == true)
        // Numbers past UInt64's range of KiB, and signs, are refused, not overflowed.
        #expect(Self.fields(["algorithm": "argon2id", "hash": "$argon2id$v=19$m=18446744073709551615,t=2,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc"])["password_hash.hash"]?
            .hasPrefix("Its costs") == true)
        #expect(Self.fields(["algorithm": "argon2id", "hash": "$argon2id$v=19$m=+65536,t=2,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc"])["password_hash.hash"] != nil)
        #expect(Self.fields(["algorithm": "bcrypt", "hash": "$2b$+5$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK"])["password_hash.hash"]?.hasPrefix("Must be a bcrypt string") == true)
        let firebase: JSON = ["algorithm": "firebase_scrypt", "salt": salt, "hash": .string(Self.firebaseHash), "signer_key": .string(Self.firebaseKey), "salt_separator": "Bw=="]
        #expect(Self.fields(firebase.merging(patch: ["rounds": 32, "mem_cost": 20]))["password_hash.mem_cost"] != nil)
        #expect(Self.fields(firebase.merging(patch: ["rounds": 8, "mem_cost": 21]))["password_hash.mem_cost"] != nil)
        #expect(Self.fields(firebase.merging(patch: ["rounds": 8, "mem_cost": 14])).isEmpty)
    }

    @Test func theAppsFirebaseParametersAreUsedWhenTheLineHasNone() throws {
        #expect(throws: GatehouseError.self) { try FirebaseHashConfig.decode(["signer_key": "c2FsdA==", "rounds": 8]) }
        let config = try FirebaseHashConfig.decode(["signer_key": .string(Self.firebaseKey), "salt_separator": "Bw==", "rounds": 8, "mem_cost": 14])
        let own = try ImportedPasswordHash.decode(
            ["algorithm": "firebase_scrypt", "salt": "42xEC+ixf3L2lw==", "hash": .string(Self.firebaseHash), "signer_key": .string(Self.firebaseKey),
             "salt_separator": "Bw==", "rounds": 8, "mem_cost": 14], firebase: nil)
        let fromApp = try ImportedPasswordHash.decode(["algorithm": "firebase_scrypt", "salt": "42xEC+ixf3L2lw==", "hash": .string(Self.firebaseHash)], firebase: config)
        #expect(own == fromApp)
        // The hash must be as long as the signer key it encrypts.
        #expect(Self.fields(["algorithm": "firebase_scrypt", "salt": "42xEC+ixf3L2lw==", "hash": "c2FsdA=="], firebase: config)["password_hash.hash"] == "Must be as long as the signer key.")
    }
}
