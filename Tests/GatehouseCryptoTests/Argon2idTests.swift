import CArgon2
import Foundation
@testable import GatehouseCrypto
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

    /// Hashes are made and checked through `argon2_ctx` with Gatehouse's own memory and PHC
    /// encoding: libargon2's own encoder and verifier must agree with them both ways.
    @Test func hashesAgreeWithLibargon2sOwnEncodedFunctions() throws {
        for parameters in [fast, .init(memoryKiB: 2048, iterations: 3, parallelism: 2)] {
            let ours = try Argon2id.hash(password: "correct horse".utf8, parameters: parameters)
            #expect(argon2id_verify(ours, "correct horse", 13) == ARGON2_OK.rawValue)
            #expect(argon2id_verify(ours, "correct horsf", 13) == ARGON2_VERIFY_MISMATCH.rawValue)

            let salt = Array("sixteen byte slt".utf8)
            var theirs = [CChar](repeating: 0, count: 256)
            let status = argon2id_hash_encoded(
                parameters.iterations, parameters.memoryKiB, parameters.parallelism, "battery staple", 14, salt, salt.count, 32, &theirs, theirs.count)
            #expect(status == ARGON2_OK.rawValue)
            let encoded = text(theirs)
            #expect(Argon2id.verify(password: "battery staple".utf8, encoded: encoded))
            #expect(!Argon2id.verify(password: "battery stapler".utf8, encoded: encoded))
            // The same salt gives the same string through either encoder.
            #expect(encoded.split(separator: "$")[3] == Substring(Argon2id.base64(salt)))
        }
        // Salts and hashes of other lengths than Gatehouse's own, as an import may bring.
        var long = [CChar](repeating: 0, count: 256)
        let salt = Array("a salt of thirty-two bytes here!".utf8)
        #expect(argon2id_hash_encoded(1, 1024, 1, "pw", 2, salt, salt.count, 64, &long, long.count) == ARGON2_OK.rawValue)
        #expect(Argon2id.verify(password: "pw".utf8, encoded: text(long)))
        #expect(!Argon2id.verify(password: "pv".utf8, encoded: text(long)))
    }

    @Test func verifyRejectsBadBase64() throws {
        let encoded = try Argon2id.hash(password: "pw".utf8, parameters: fast)
        var parts = encoded.split(separator: "$", omittingEmptySubsequences: false).map(String.init)
        let salt = parts[4]
        for broken in [salt + "=", String(salt.dropLast()) + "*", "", "A", "c2FsdA"] {  // "c2FsdA": 4 bytes, too short a salt
            parts[4] = broken
            #expect(!Argon2id.verify(password: "pw".utf8, encoded: parts.joined(separator: "$")), "\(broken)")
        }
        parts[4] = salt
        // A hash part longer than any real one is refused before anything is computed.
        parts[5] = Argon2id.base64([UInt8](repeating: 7, count: 1025))
        #expect(!Argon2id.verify(password: "pw".utf8, encoded: parts.joined(separator: "$")))
    }

    /// A work area is kept for the next hash of its size, and given back once idle.
    @Test func workAreasAreReusedAndGivenBackWhenIdle() throws {
        // A size no other test hashes with (argon2 rounds m down to 4 blocks a lane).
        let odd = Argon2id.Parameters(memoryKiB: 1236, iterations: 1, parallelism: 1)
        let size = 1236 * 1024
        let first = try Argon2id.hash(password: "pw".utf8, parameters: odd)
        #expect(Argon2idMemory.keptBlockCount(size: size) == 1)
        #expect(Argon2id.verify(password: "pw".utf8, encoded: first))
        #expect(Argon2idMemory.keptBlockCount(size: size) == 1)  // the same block again, not a second one
        #expect(Argon2idMemory.releaseIdle(after: .seconds(3600)) >= 0)
        #expect(Argon2idMemory.keptBlockCount(size: size) == 1)  // not idle long enough
        Argon2idMemory.releaseIdle(after: .zero)
        #expect(Argon2idMemory.keptBlockCount(size: size) == 0)
    }

    /// A NUL-terminated C string's text.
    private func text(_ characters: [CChar]) -> String {
        String(decoding: characters.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
