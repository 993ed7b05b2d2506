import Dispatch
import GatehouseCrypto
import Synchronization
import Testing

@Suite struct Base64URLTests {
    @Test func encodesWithoutPaddingUsingTheURLSafeAlphabet() {
        #expect(Base64URL.encode([]) == "")
        #expect(Base64URL.encode(Array("f".utf8)) == "Zg")
        #expect(Base64URL.encode(Array("fo".utf8)) == "Zm8")
        #expect(Base64URL.encode(Array("foo".utf8)) == "Zm9v")
        #expect(Base64URL.encode(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(Base64URL.encode([0xFB, 0xFF, 0xBF]) == "-_-_")
    }

    @Test func roundTripsEveryLength() {
        for length in 0..<70 {
            let bytes = SecureRandom.bytes(length)
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
    }

    @Test func decodesRFC4648Vectors() {
        #expect(Base64URL.decode("") == [])
        #expect(Base64URL.decode("Zm9vYg") == Array("foob".utf8))
        #expect(Base64URL.decode("Zm9vYmE") == Array("fooba".utf8))
        #expect(Base64URL.decode("-_-_") == [0xFB, 0xFF, 0xBF])
    }

    @Test(arguments: ["Zm9v=", "Zg==", "Zm8=", "Zm9v+/", "Zm 9v", "Zm9v\n", "Z", "Zm9vY", "Zh", "Zm9", "é", "Zm.v"])
    func rejectsInvalidInput(_ text: String) {
        #expect(Base64URL.decode(text) == nil)
    }
}

@Suite struct DigestTests {
    @Test func sha256OfABCMatchesFIPS180Vector() {
        #expect(Digest.hex(Digest.sha256("abc".utf8))
            == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Digest.hex(Digest.sha256([UInt8]()))
            == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func sha256FedInPiecesEqualsTheOneShotDigest() {
        let data = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let hasher = SHA256Hasher()
        var offset = 0
        for size in [0, 1, 63, 64, 65, 4096, 30_000] + Array(repeating: 10_000, count: 7) where offset < data.count {
            let end = min(data.count, offset + size)
            hasher.update(Array(data[offset..<end]))
            offset = end
        }
        hasher.update(Array(data[offset...]))
        #expect(hasher.finish() == Digest.sha256(data))
        #expect(Digest.hex(SHA256Hasher().finish()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func hmacSHA256MatchesRFC4231TestCase2() {
        let tag = Digest.hmacSHA256(key: Array("Jefe".utf8), data: "what do ya want for nothing?".utf8)
        #expect(Digest.hex(tag) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test func hmacKeyMatchesTheOneShotHMACOnManyThreads() async {
        #expect(Digest.hex(HMACKey(Array("Jefe".utf8)).tag(Array("what do ya want for nothing?".utf8)))
            == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        #expect(Digest.hex(HMACKey([]).tag([])) == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
        // A key longer than SHA-256's block is hashed first (RFC 2104); one template, 8 threads.
        let key = HMACKey(Array(repeating: 0xAA, count: 131))
        let wrong = await withTaskGroup(of: Int.self) { group in
            for thread in 0..<8 {
                group.addTask {
                    (0..<500).reduce(0) { wrong, i in
                        let data = Array("message \(thread) \(i)".utf8)
                        return wrong + (key.tag(data) == Digest.hmacSHA256(key: Array(repeating: 0xAA, count: 131), data: data) ? 0 : 1)
                    }
                }
            }
            return await group.reduce(0, +)
        }
        #expect(wrong == 0)
    }

    @Test func hmacSHA256AcceptsAnEmptyKey() {
        #expect(Digest.hex(Digest.hmacSHA256(key: [], data: [UInt8]()))
            == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
    }

    @Test func hexIsLowercase() {
        #expect(Digest.hex([0x00, 0x0F, 0xAB, 0xFF]) == "000fabff")
    }
}

@Suite struct RandomAndComparisonTests {
    @Test func randomBytesHaveTheRequestedLengthAndDiffer() {
        #expect(SecureRandom.bytes(0).isEmpty)
        #expect(SecureRandom.bytes(32).count == 32)
        #expect(SecureRandom.bytes(32) != SecureRandom.bytes(32))
    }

    @Test func identifierBytesAreDistinctAcrossRefillsAndThreads() {
        // 1,000 draws of 12 bytes a thread empty its 4 KiB pool twice over.
        let draws = Mutex<[[UInt8]]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            let mine = (0..<1_000).map { _ in SecureRandom.identifierBytes(12) }
            draws.withLock { $0 += mine }
        }
        let all = draws.withLock { $0 }
        #expect(all.count == 8_000 && all.allSatisfy { $0.count == 12 })
        #expect(Set(all).count == 8_000, "a draw repeated: pools overlap or a refill did not happen")
        #expect(Set(all.joined()).count == 256, "96,000 random bytes take every value")
        #expect(SecureRandom.identifierBytes(0).isEmpty)
    }

    @Test func tokensAreBase64URLOfTheByteCount() {
        let token = SecureRandom.token()
        #expect(token.count == 43)
        #expect(Base64URL.decode(token)?.count == 32)
        #expect(SecureRandom.token(byteCount: 16).count == 22)
        #expect(SecureRandom.token() != SecureRandom.token())
    }

    @Test func constantTimeEqualsComparesContentAndLength() {
        #expect(constantTimeEquals([UInt8](), [UInt8]()))
        #expect(constantTimeEquals([1, 2, 3] as [UInt8], [1, 2, 3][...] as ArraySlice<UInt8>))
        #expect(!constantTimeEquals([1, 2, 3] as [UInt8], [1, 2, 4] as [UInt8]))
        #expect(!constantTimeEquals([1, 2, 3] as [UInt8], [1, 2] as [UInt8]))
        #expect(!constantTimeEquals([UInt8](), [0] as [UInt8]))
    }
}
