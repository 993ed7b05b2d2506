import Foundation
import Testing

@testable import GatehouseKit

@Suite("Apple nonce and PKCE")
struct NonceAndPKCETests {
    /// RFC 7636, Appendix B.
    @Test
    func theRFCExampleChallenge() {
        let pkce = PKCE(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        #expect(pkce.challenge == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        #expect(pkce.method == "S256")
    }

    @Test
    func aNewVerifierIsFortyThreeUnreservedCharactersAndNeverRepeats() {
        let unreserved = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        var seen = Set<String>()
        for _ in 0..<200 {
            let pkce = PKCE()
            #expect(pkce.verifier.count == 43)
            #expect(pkce.verifier.allSatisfy { unreserved.contains($0) })
            #expect(pkce.challenge.count == 43 && !pkce.challenge.contains("="))
            #expect(pkce.challenge == PKCE(verifier: pkce.verifier).challenge)
            seen.insert(pkce.verifier)
        }
        #expect(seen.count == 200)
    }

    @Test
    func anAppleNonceHandsAppleTheLowercaseHexSHA256OfTheRawOne() {
        let known = AppleNonce(raw: "abc")
        #expect(known.hashed == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        var seen = Set<String>()
        for _ in 0..<200 {
            let nonce = AppleNonce()
            #expect(nonce.raw.count == 43)
            #expect(nonce.hashed.count == 64 && nonce.hashed.allSatisfy { "0123456789abcdef".contains($0) })
            #expect(nonce.hashed == SHA256Hashing.hex(PortableSHA256.hash(Array(nonce.raw.utf8))))
            seen.insert(nonce.raw)
        }
        #expect(seen.count == 200)
    }

    @Test
    func base64URLHasNoPaddingAndTheURLSafeAlphabet() {
        #expect(Base64URL.encode([]) == "")
        #expect(Base64URL.encode([0xFB]) == "-w")
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
        #expect(Base64URL.encode(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(Base64URL.encode(Array("fooba".utf8)) == "Zm9vYmE")
    }

    @Test
    func statesAreComparedWholly() {
        #expect(constantTimeEqual("abc", "abc"))
        #expect(!constantTimeEqual("abc", "abd"))
        #expect(!constantTimeEqual("abc", "abcd"))
        #expect(!constantTimeEqual("", "a"))
    }
}

@Suite("Stored session")
struct StoredSessionTests {
    @Test
    func printingASessionShowsNoToken() throws {
        let userJSON = #"{"id":"usr_1","email":null,"email_verified":false,"first_name":null,"last_name":null,"photo_url":null,"created_at":1,"last_sign_in_at":null,"identities":["password"]}"#
        let user = try JSONDecoder().decode(User.self, from: Data(userJSON.utf8))
        let session = StoredSession(
            accessToken: "eyJ.secret-access.sig", refreshToken: "secret-refresh-token", accessTokenExpiresAt: Date(), accessTokenLifetime: 900, user: user)
        for text in [String(describing: session), String(reflecting: session), "\(session)"] {
            #expect(!text.contains("secret"))
            #expect(text.contains("usr_1"))
        }
    }
}
