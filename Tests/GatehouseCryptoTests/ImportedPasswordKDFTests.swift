import Foundation
import GatehouseCrypto
import Testing

/// The verifiers of imported password hashes against published test vectors (ADR 0030).
@Suite struct ImportedPasswordKDFTests {
    private static func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    /// Openwall's crypt_blowfish vectors (`wrapper.c`'s tests, also in libxcrypt's), as `$2a$` and
    /// (the same hashes, passwords under 72 bytes) `$2b$` and `$2y$`.
    static let bcryptVectors: [(String, String)] = [
        ("U*U", "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW"),
        ("U*U*", "$2a$05$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK"),
        ("U*U*U", "$2a$05$XXXXXXXXXXXXXXXXXXXXXOAcXxm9kjPGEMsLznoKqmqw7tc8WCx4a"),
        (
            "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789chars after 72 are ignored",
            "$2a$05$abcdefghijklmnopqrstuu5s2v8.iXieOjg/.AySBTTZIIVFJeBui"
        ),
    ]

    @Test(arguments: bcryptVectors)
    func bcryptVerifiesThePublishedVectors(_ password: String, _ hash: String) {
        #expect(ImportedPasswordKDF.bcrypt(password: Array(password.utf8), encoded: hash))
        #expect(ImportedPasswordKDF.bcrypt(password: Array(password.utf8), encoded: "$2b" + hash.dropFirst(3)))
        #expect(ImportedPasswordKDF.bcrypt(password: Array(password.utf8), encoded: "$2y" + hash.dropFirst(3)))
        // (bcrypt reads 72 bytes at most: the changed byte is the first.)
        #expect(!ImportedPasswordKDF.bcrypt(password: Array(("V" + password.dropFirst()).utf8), encoded: hash))
        #expect(!ImportedPasswordKDF.bcrypt(password: Array(password.utf8.dropFirst()), encoded: hash))
    }

    @Test func bcryptRefusesOtherSchemesAndNulBytes() {
        // A DES crypt string libxcrypt would verify: not bcrypt, so refused.
        #expect(!ImportedPasswordKDF.bcrypt(password: Array("U*U".utf8), encoded: "abJnggxhB/yWI"))
        #expect(!ImportedPasswordKDF.bcrypt(password: Array("U*U".utf8) + [0], encoded: Self.bcryptVectors[0].1))
    }

    /// RFC 7914 §12 (the fourth, N = 2^20, takes a GiB and is left out).
    @Test func scryptGivesRFC7914Vectors() {
        #expect(ImportedPasswordKDF.scrypt(password: [UInt8](), salt: [], n: 16, r: 1, p: 1, length: 64) == Self.hex(
            "77d6576238657b203b19ca42c18a0497f16b4844e3074ae8dfdffa3fede21442fcd0069ded0948f8326a753a0fc81f17e8d3e0fb2e0d3628cf35e20c38d18906"))
        #expect(ImportedPasswordKDF.scrypt(password: Array("password".utf8), salt: Array("NaCl".utf8), n: 1024, r: 8, p: 16, length: 64) == Self.hex(
            "fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b3731622eaf30d92e22a3886ff109279d9830dac727afb94a83ee6d8360cbdfa2cc0640"))
        #expect(ImportedPasswordKDF.scrypt(password: Array("pleaseletmein".utf8), salt: Array("SodiumChloride".utf8), n: 16384, r: 8, p: 1, length: 64) == Self.hex(
            "7023bdcb3afd7348461c06cd81fd38ebfda8fbba904f8e3ea9b543f6545da1f2d5432955613f0fcf62d49705242a9af9e61e85dc0d651e40dfcf017b45575887"))
        #expect(ImportedPasswordKDF.scrypt(password: Array("x".utf8), salt: [1], n: 1000, r: 1, p: 1, length: 32) == nil, "N not a power of two")
    }

    /// RFC 7914 §11 (PBKDF2-HMAC-SHA256), and the PBKDF2-HMAC-SHA512 vectors of RFC 6070's
    /// inputs that are commonly published with it (password "password", salt "salt").
    @Test func pbkdf2GivesPublishedVectors() {
        #expect(ImportedPasswordKDF.pbkdf2(password: Array("passwd".utf8), salt: Array("salt".utf8), iterations: 1, digest: .sha256, length: 64) == Self.hex(
            "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc49ca9cccf179b645991664b39d77ef317c71b845b1e30bd509112041d3a19783"))
        #expect(ImportedPasswordKDF.pbkdf2(password: Array("Password".utf8), salt: Array("NaCl".utf8), iterations: 80000, digest: .sha256, length: 64) == Self.hex(
            "4ddcd8f60b98be21830cee5ef22701f9641a4418d04c0414aeff08876b34ab56a1d425a1225833549adb841b51c9b3176a272bdebba1d078478f62b397f33c8d"))
        #expect(ImportedPasswordKDF.pbkdf2(password: Array("password".utf8), salt: Array("salt".utf8), iterations: 1, digest: .sha512, length: 64) == Self.hex(
            "867f70cf1ade02cff3752599a3a53dc4af34c7a669815ae5d513554e1c8cf252c02d470a285a0501bad999bfe943c08f050235d7d68b1da55e63f73b60a57fce"))
        #expect(ImportedPasswordKDF.pbkdf2(password: Array("password".utf8), salt: Array("salt".utf8), iterations: 2, digest: .sha512, length: 64) == Self.hex(
            "e1d9c16aa681708a45f5c7c4e215ceb66e011a2e9f0040713f18aefdb866d53cf76cab2868a39b9f7840edce4fef5a82be67335c77a6068e04112754f27ccf4e"))
    }

    /// The reference implementation's PHC strings (phc-winner-argon2, `src/test.c`).
    @Test func argon2VerifiesTheReferenceStrings() {
        let argon2i = "$argon2i$v=19$m=65536,t=2,p=1$ZGlmZnNhbHQ$sDV8zPvvkfOGCw26RHsjSMvv7K2vmQq/6cxAcmxSEnE"
        let argon2id = "$argon2id$v=19$m=65536,t=2,p=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc"
        #expect(ImportedPasswordKDF.argon2(password: Array("password".utf8), encoded: argon2i, argon2i: true))
        #expect(!ImportedPasswordKDF.argon2(password: Array("passwore".utf8), encoded: argon2i, argon2i: true))
        #expect(!ImportedPasswordKDF.argon2(password: Array("password".utf8), encoded: argon2i, argon2i: false), "not the variant named")
        #expect(ImportedPasswordKDF.argon2(password: Array("password".utf8), encoded: argon2id, argon2i: false))
        #expect(!ImportedPasswordKDF.argon2(password: Array("passwore".utf8), encoded: argon2id, argon2i: false))
    }

    /// The example of github.com/firebase/scrypt's README: its sample project parameters, the
    /// exported account's salt and hash, and the password `user1password`.
    @Test func firebaseScryptGivesTheREADMEsExample() throws {
        let signerKey = try #require(Data(base64Encoded: "jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA=="))
        let hash = ImportedPasswordKDF.firebaseScrypt(
            password: Array("user1password".utf8), salt: Array(Data(base64Encoded: "42xEC+ixf3L2lw==")!), saltSeparator: Array(Data(base64Encoded: "Bw==")!),
            signerKey: Array(signerKey), rounds: 8, memoryCost: 14)
        #expect(hash.map { Data($0).base64EncodedString() } == "lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ==")
    }
}
