import GatehouseCrypto
import Testing

/// RFC 6238 appendix B's vectors (8 digits, T0 = 0, X = 30) and RFC 4648's base32 vectors.
@Suite struct TOTPTests {
    static let sha1Secret = Array("12345678901234567890".utf8)

    @Test(arguments: [
        (Int64(59), "94287082"), (1_111_111_109, "07081804"), (1_111_111_111, "14050471"), (1_234_567_890, "89005924"),
        (2_000_000_000, "69279037"), (20_000_000_000, "65353130"),
    ])
    func matchesRFC6238VectorsForSHA1(time: Int64, expected: String) {
        #expect(TOTP.code(secret: Self.sha1Secret, step: TOTP.step(at: time), digits: 8) == expected)
    }

    @Test func matchesRFC6238VectorsForSHA256() {
        let secret = Array("12345678901234567890123456789012".utf8)
        #expect(TOTP.code(secret: secret, step: TOTP.step(at: 59), digits: 8, hash: "SHA256") == "46119246")
        #expect(TOTP.code(secret: secret, step: TOTP.step(at: 20_000_000_000), digits: 8, hash: "SHA256") == "77737706")
    }

    @Test func sixDigitCodesAreTheLastSixOfTheEightDigitOnes() {
        // Dynamic truncation takes the value modulo 10^digits.
        #expect(TOTP.code(secret: Self.sha1Secret, step: TOTP.step(at: 59)) == "287082")
        #expect(TOTP.code(secret: Self.sha1Secret, step: TOTP.step(at: 1_111_111_109)) == "081804")
    }

    @Test func acceptsOneStepEitherSideAndNoMore() {
        let now: Int64 = 1_111_111_111
        let step = TOTP.step(at: now)
        for offset: Int64 in [-1, 0, 1] {
            let code = TOTP.code(secret: Self.sha1Secret, step: step + offset)
            #expect(TOTP.matchingStep(code, secret: Self.sha1Secret, at: now) == step + offset)
        }
        for offset: Int64 in [-2, 2] {
            #expect(TOTP.matchingStep(TOTP.code(secret: Self.sha1Secret, step: step + offset), secret: Self.sha1Secret, at: now) == nil)
        }
        #expect(TOTP.matchingStep("12345", secret: Self.sha1Secret, at: now) == nil)
        #expect(TOTP.matchingStep("12345a", secret: Self.sha1Secret, at: now) == nil)
    }

    @Test func encodesAndDecodesBase32() {
        let vectors = [("", ""), ("f", "MY"), ("fo", "MZXQ"), ("foo", "MZXW6"), ("foob", "MZXW6YQ"), ("fooba", "MZXW6YTB"), ("foobar", "MZXW6YTBOI")]
        for (plain, encoded) in vectors {
            #expect(Base32.encode(Array(plain.utf8)) == encoded)
            #expect(Base32.decode(encoded) == Array(plain.utf8))
            #expect(Base32.decode(encoded.lowercased()) == Array(plain.utf8))
        }
        #expect(Base32.decode("MZXW6===") == Array("foo".utf8))
        #expect(Base32.decode("MZ1W6") == nil)
        for length in 0..<40 {
            let bytes = SecureRandom.bytes(length)
            #expect(Base32.decode(Base32.encode(bytes)) == bytes)
        }
    }
}
