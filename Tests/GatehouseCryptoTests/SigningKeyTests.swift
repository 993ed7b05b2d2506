import Foundation
import GatehouseCrypto
import Testing

@Suite struct SigningKeyTests {
    @Test(arguments: SignatureAlgorithm.allCases)
    func signThenVerifyThroughTheJWKBuiltKey(_ algorithm: SignatureAlgorithm) throws {
        let key = try SigningKey.generate(algorithm)
        let message = Array("signing input".utf8)
        let signature = try key.sign(message)
        if algorithm == .es256 { #expect(signature.count == 64) } else { #expect(signature.count == 256) }

        let jwk = key.publicJWK(kid: "k1")
        let verifier = try VerificationKey(jwk: jwk)
        #expect(verifier.algorithm == algorithm)
        #expect(verifier.verify(signature: signature, message: message))
        #expect(key.verificationKey.verify(signature: signature, message: message))
        #expect(!verifier.verify(signature: signature, message: Array("other input".utf8)))

        var tampered = signature
        tampered[5] ^= 0x01
        #expect(!verifier.verify(signature: tampered, message: message))
        #expect(!verifier.verify(signature: [], message: message))
        #expect(!verifier.verify(signature: Array(signature.dropLast()), message: message))
    }

    @Test func jwkMembersHaveTheExpectedShape() throws {
        let rsa = try SigningKey.generate(.rs256).publicJWK(kid: "r")
        #expect(rsa.kty == "RSA" && rsa.use == "sig" && rsa.alg == "RS256" && rsa.kid == "r")
        #expect(rsa.e == "AQAB")
        #expect(Base64URL.decode(rsa.n ?? "")?.count == 256)
        #expect(rsa.crv == nil && rsa.x == nil && rsa.y == nil)

        let ec = try SigningKey.generate(.es256).publicJWK(kid: "e")
        #expect(ec.kty == "EC" && ec.crv == "P-256" && ec.alg == "ES256" && ec.use == "sig")
        #expect(Base64URL.decode(ec.x ?? "")?.count == 32 && Base64URL.decode(ec.y ?? "")?.count == 32)
        #expect(ec.n == nil && ec.e == nil)
    }

    @Test func jwkSetEncodesOnlyPresentMembersAndRoundTrips() throws {
        let set = JWKSet(keys: [try SigningKey.generate(.es256).publicJWK(kid: "a/b")])
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        let json = String(decoding: try encoder.encode(set), as: UTF8.self)
        #expect(!json.contains("null") && !json.contains("\"n\"") && json.contains("\"kid\":\"a/b\""))
        let decoded = try JSONDecoder().decode(JWKSet.self, from: Data(json.utf8))
        #expect(decoded == set)
        #expect(decoded.key(kid: "a/b") == set.keys[0])
    }

    @Test func thumbprintMatchesRFC7638Example() {
        let jwk = JWK(
            kty: "RSA",
            n: "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
            e: "AQAB")
        #expect(jwk.thumbprint() == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs")
        #expect(JWK(kty: "oct").thumbprint() == nil)
    }

    @Test func pkcs8PEMRoundTrips() throws {
        for algorithm in SignatureAlgorithm.allCases {
            let key = try SigningKey.generate(algorithm)
            let pem = key.pkcs8PEM()
            #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
            let reloaded = try SigningKey(pem: pem, algorithm: algorithm)
            #expect(reloaded.publicJWK(kid: "k") == key.publicJWK(kid: "k"))
            let other: SignatureAlgorithm = algorithm == .rs256 ? .es256 : .rs256
            #expect { try SigningKey(pem: pem, algorithm: other) } throws: { ($0 as? CryptoError)?.code == .invalidKey }
        }
    }

    @Test func verificationKeyPEMRoundTrips() throws {
        let key = try SigningKey.generate(.es256)
        let pem = key.verificationKey.spkiPEM()
        #expect(pem.hasPrefix("-----BEGIN PUBLIC KEY-----"))
        let verifier = try VerificationKey(pem: pem)
        #expect(verifier.verify(signature: try key.sign([1, 2, 3]), message: [1, 2, 3]))
    }

    @Test func rejectsUnsupportedJWKs() throws {
        let ec = try SigningKey.generate(.es256).publicJWK(kid: "k")
        func rejects(_ jwk: JWK) {
            #expect { try VerificationKey(jwk: jwk) } throws: { ($0 as? CryptoError)?.code == .invalidKey }
        }
        rejects(JWK(kty: "oct", kid: "k"))
        rejects(JWK(kty: "OKP", crv: "Ed25519", x: ec.x))
        var p384 = ec; p384.crv = "P-384"; rejects(p384)
        var wrongAlg = ec; wrongAlg.alg = "RS256"; rejects(wrongAlg)
        var offCurve = ec; offCurve.y = Base64URL.encode([UInt8](repeating: 1, count: 32)); rejects(offCurve)
        var shortX = ec; shortX.x = Base64URL.encode([UInt8](repeating: 1, count: 31)); rejects(shortX)

        let rsa = try SigningKey.generate(.rs256).publicJWK(kid: "k")
        var small = rsa; small.n = Base64URL.encode(Array((Base64URL.decode(rsa.n!) ?? []).prefix(128))); rejects(small)
        var evenExponent = rsa; evenExponent.e = Base64URL.encode([0x01, 0x00, 0x00]); rejects(evenExponent)
        var missing = rsa; missing.e = nil; rejects(missing)
    }

    @Test func rejectsGarbageAndEncryptedPEM() throws {
        #expect { try SigningKey(pem: "not a key", algorithm: .rs256) } throws: { ($0 as? CryptoError)?.code == .invalidKey }
        #expect { try VerificationKey(pem: "") } throws: { ($0 as? CryptoError)?.code == .invalidKey }
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        try ExternalTool.openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                                  "-aes-256-cbc", "-pass", "pass:secret", "-out", "enc.pem"], in: dir.url)
        #expect { try SigningKey(pem: try dir.readText("enc.pem"), algorithm: .es256) } throws: {
            ($0 as? CryptoError)?.code == .invalidKey
        }
        try ExternalTool.openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", "p384.pem"], in: dir.url)
        #expect { try SigningKey(pem: try dir.readText("p384.pem"), algorithm: .es256) } throws: {
            ($0 as? CryptoError)?.code == .invalidKey
        }
        try ExternalTool.openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-out", "rsa1024.pem"], in: dir.url)
        #expect { try SigningKey(pem: try dir.readText("rsa1024.pem"), algorithm: .rs256) } throws: {
            ($0 as? CryptoError)?.code == .invalidKey
        }
    }

    @Test func signingIsSafeFromManyTasksAtOnce() async throws {
        for algorithm in SignatureAlgorithm.allCases {
            let key = try SigningKey.generate(algorithm)
            let verifier = try VerificationKey(jwk: key.publicJWK(kid: "k"))
            let results = try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<32 {
                    group.addTask {
                        let message = Array("message \(index)".utf8)
                        return verifier.verify(signature: try key.sign(message), message: message)
                    }
                }
                return try await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(results.count == 32 && results.allSatisfy { $0 })
        }
    }
}

/// Interop with the `openssl` command-line tool: keys and signatures made by independent code.
@Suite struct OpenSSLCommandLineInteropTests {
    @Test(arguments: [
        (SignatureAlgorithm.rs256, ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "key.pem"]),
        (SignatureAlgorithm.rs256, ["genrsa", "-traditional", "-out", "key.pem", "2048"]),
        (SignatureAlgorithm.es256, ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "key.pem"]),
        (SignatureAlgorithm.es256, ["ecparam", "-name", "prime256v1", "-genkey", "-out", "key.pem"]),
    ])
    func signaturesInteroperateWithOpenSSLCLI(_ algorithm: SignatureAlgorithm, _ generate: [String]) throws {
        let dir = try ScratchDirectory()
        defer { dir.remove() }
        try ExternalTool.openssl(generate, in: dir.url)
        try ExternalTool.openssl(["pkey", "-in", "key.pem", "-pubout", "-out", "pub.pem"], in: dir.url)
        let message = Array("interop message \(algorithm.rawValue)".utf8)
        try dir.write("message.txt", message)

        // openssl signs, we verify with the SPKI PEM and with the private key's own public half.
        try ExternalTool.openssl(["dgst", "-sha256", "-sign", "key.pem", "-out", "cli.sig", "message.txt"], in: dir.url)
        var cliSignature = try dir.read("cli.sig")
        if algorithm == .es256 { cliSignature = try #require(rawECDSASignature(fromDER: cliSignature)) }
        let verifier = try VerificationKey(pem: try dir.readText("pub.pem"))
        #expect(verifier.algorithm == algorithm)
        #expect(verifier.verify(signature: cliSignature, message: message))
        let key = try SigningKey(pem: try dir.readText("key.pem"), algorithm: algorithm)
        #expect(key.verificationKey.verify(signature: cliSignature, message: message))

        // We sign, openssl verifies.
        var ourSignature = try key.sign(message)
        if algorithm == .es256 { ourSignature = derECDSASignature(fromRaw: ourSignature) }
        try dir.write("ours.sig", ourSignature)
        let result = try ExternalTool.openssl(
            ["dgst", "-sha256", "-verify", "pub.pem", "-signature", "ours.sig", "message.txt"], in: dir.url)
        #expect(result.stdout.contains("Verified OK"))
    }
}
