import GatehouseCrypto
import Testing

@Suite struct AESGCMTests {
    let cipher: AESGCM

    init() throws {
        cipher = try AESGCM(key: AESGCM.generateKey())
    }

    @Test func sealThenOpenRoundTrips() throws {
        for length in [0, 1, 15, 16, 17, 1000] {
            let plaintext = SecureRandom.bytes(length)
            let box = cipher.seal(plaintext, associatedData: Array("user:42".utf8))
            #expect(box.count == 12 + length + 16)
            #expect(try cipher.open(box, associatedData: Array("user:42".utf8)) == plaintext)
        }
    }

    @Test func sealingTwiceUsesDifferentNonces() {
        let message = Array("same".utf8)
        #expect(cipher.seal(message) != cipher.seal(message))
    }

    @Test func anyTamperingFailsAuthentication() throws {
        let box = cipher.seal(Array("refresh token secret".utf8))
        for index in [0, 11, 12, box.count - 17, box.count - 1] {
            var tampered = box
            tampered[index] ^= 0x01
            #expect(throws: CryptoError(.authenticationFailed, "AES-GCM authentication failed")) {
                try cipher.open(tampered)
            }
        }
    }

    @Test func wrongKeyFails() throws {
        let box = cipher.seal(Array("secret".utf8))
        let other = try AESGCM(key: AESGCM.generateKey())
        #expect { try other.open(box) } throws: { ($0 as? CryptoError)?.code == .authenticationFailed }
    }

    @Test func wrongAssociatedDataFails() throws {
        let box = cipher.seal(Array("secret".utf8), associatedData: Array("app-1".utf8))
        #expect { try cipher.open(box, associatedData: Array("app-2".utf8)) } throws: {
            ($0 as? CryptoError)?.code == .authenticationFailed
        }
        #expect { try cipher.open(box) } throws: { ($0 as? CryptoError)?.code == .authenticationFailed }
    }

    @Test func rejectsShortBoxesAndBadKeyLengths() {
        #expect { try cipher.open(SecureRandom.bytes(27)) } throws: { ($0 as? CryptoError)?.code == .malformedInput }
        for length in [0, 16, 24, 31, 33] {
            #expect { try AESGCM(key: SecureRandom.bytes(length)) } throws: {
                ($0 as? CryptoError)?.code == .invalidKey
            }
        }
    }

    @Test func errorDescriptionsNeverContainTheKey() throws {
        let key = [UInt8](repeating: 0x41, count: 31)
        do {
            _ = try AESGCM(key: key)
            Issue.record("expected an error")
        } catch {
            #expect(!error.description.contains("AAAA"))
            #expect(!error.description.contains("65, 65"))
        }
    }
}
