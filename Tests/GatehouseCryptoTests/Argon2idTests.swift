import Foundation
import GatehouseCrypto
import Testing

@Suite struct Argon2idTests {
    let fast = Argon2id.Parameters(memoryKiB: 1024, iterations: 1, parallelism: 1)

    @Test func hashHasTheStandardEncodedForm() throws {
        let encoded = try Argon2id.hash(password: "correct horse".utf8, parameters: fast)
        #expect(encoded.hasPrefix("$argon2id$v=19$m=1024,t=1,p=1$"))
        let parts = encoded.split(separator: "$")
        #expect(parts.count == 5)
        #expect(parts[3].count == 22)  // 16-byte salt, unpadded base64
        #expect(parts[4].count == 43)  // 32-byte hash, unpadded base64
        #expect(Argon2id.parameters(of: encoded) == fast)
    }

    @Test func verifyAcceptsTheRightPasswordOnly() throws {
        let encoded = try Argon2id.hash(password: "correct horse".utf8, parameters: fast)
        #expect(Argon2id.verify(password: "correct horse".utf8, encoded: encoded))
        #expect(!Argon2id.verify(password: "correct horsf".utf8, encoded: encoded))
        #expect(!Argon2id.verify(password: [UInt8](), encoded: encoded))
    }

    @Test func saltsMakeEqualPasswordsHashDifferently() throws {
        let first = try Argon2id.hash(password: "pw".utf8, parameters: fast)
        let second = try Argon2id.hash(password: "pw".utf8, parameters: fast)
        #expect(first != second)
    }

    @Test func emptyPasswordsHashAndVerify() throws {
        let encoded = try Argon2id.hash(password: [UInt8](), parameters: fast)
        #expect(Argon2id.verify(password: [UInt8](), encoded: encoded))
        #expect(!Argon2id.verify(password: "x".utf8, encoded: encoded))
    }

    @Test func owaspParametersWork() throws {
        let encoded = try Argon2id.hash(password: "hunter2".utf8, parameters: .owasp)
        #expect(encoded.hasPrefix("$argon2id$v=19$m=19456,t=2,p=1$"))
        #expect(Argon2id.verify(password: "hunter2".utf8, encoded: encoded))
        #expect(!Argon2id.needsRehash(encoded: encoded, parameters: .owasp))
    }

    @Test func needsRehashWhenParametersDiffer() throws {
        let encoded = try Argon2id.hash(password: "pw".utf8, parameters: fast)
        #expect(!Argon2id.needsRehash(encoded: encoded, parameters: fast))
        #expect(Argon2id.needsRehash(encoded: encoded, parameters: .owasp))
        #expect(Argon2id.needsRehash(encoded: encoded, parameters: .init(memoryKiB: 1024, iterations: 2, parallelism: 1)))
        #expect(Argon2id.needsRehash(encoded: "$argon2i$v=19$m=1024,t=1,p=1$c2FsdHNhbHQ$aGFzaA", parameters: fast))
        #expect(Argon2id.needsRehash(encoded: "garbage", parameters: fast))
    }

    @Test func verifyRejectsMalformedAndOverExpensiveHashes() throws {
        let encoded = try Argon2id.hash(password: "pw".utf8, parameters: fast)
        #expect(!Argon2id.verify(password: "pw".utf8, encoded: ""))
        #expect(!Argon2id.verify(password: "pw".utf8, encoded: "$argon2id$v=19$"))
        #expect(!Argon2id.verify(password: "pw".utf8, encoded: encoded.replacingOccurrences(of: "argon2id", with: "argon2i")))
        let huge = encoded.replacingOccurrences(of: "m=1024", with: "m=4194304")
        #expect(!Argon2id.verify(password: "pw".utf8, encoded: huge))
    }

    @Test func hashRejectsParametersOutOfRange() {
        for parameters in [Argon2id.Parameters(memoryKiB: 4, iterations: 1, parallelism: 1),
                           .init(memoryKiB: 1024, iterations: 0, parallelism: 1),
                           .init(memoryKiB: 1024, iterations: 1, parallelism: 0),
                           .init(memoryKiB: 1 << 21, iterations: 1, parallelism: 1)] {
            #expect { try Argon2id.hash(password: "pw".utf8, parameters: parameters) } throws: {
                ($0 as? CryptoError)?.code == .invalidParameters
            }
        }
    }
}
