import Foundation
import Synchronization
import Testing

@testable import GatehouseKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The second step's error, decoded from the problem the contract gives, and the requests the
/// MFA and passkey calls send. The calls against the real server are in GatehouseKitTests at
/// the repository's root.
@Suite("MFA")
struct MFATests {
    static func answer(_ status: Int, _ body: String, requestID: String? = nil) -> HTTPAnswer {
        HTTPAnswer(status: status, body: Data(body.utf8), retryAfterHeader: nil, requestID: requestID)
    }

    static let mfaRequired = #"""
        {"type":"urn:gatehouse:error:auth/mfa-required","title":"Second factor required","status":401,"code":"auth/mfa-required",
        "detail":"Answer the second step.","instance":"/v1/auth/signin","request_id":"req_42",
        "mfa_token":"mfa_SECRETtoken123","methods":["totp","recovery_code","passkey"],"enroll":false,"expires_in":300}
        """#

    @Test
    func mfaRequiredIsThrownAsATypedChallenge() throws {
        let error = #expect(throws: GatehouseError.self) { try Transport.check(Self.answer(401, Self.mfaRequired)) }
        guard case .mfaRequired(let challenge)? = error else {
            Issue.record("expected .mfaRequired, got \(String(describing: error))")
            return
        }
        #expect(challenge.mfaToken == "mfa_SECRETtoken123")
        #expect(challenge.methods == [.totp, .recoveryCode, .passkey])
        #expect(challenge.enroll == false)
        #expect(challenge.expiresIn == 300)
        #expect(challenge.requestID == "req_42")
        #expect(abs(challenge.expiresAt.timeIntervalSinceNow - 300) < 5)
        #expect(error?.code == .mfaRequired, "branching on the code still works")
        #expect(error?.mfaChallenge == challenge)
        #expect(GatehouseError.notSignedIn.mfaChallenge == nil)
        for text in [String(describing: error!), String(describing: challenge), "\(challenge)"] {
            #expect(!text.contains("SECRET"), "the token is never printed: \(text)")
        }
    }

    @Test
    func anEnrollingChallengeAndAMethodANewerServerAdds() throws {
        let body = #"{"code":"auth/mfa-required","status":401,"mfa_token":"mfa_x","methods":["totp","passkey","carrier_pigeon"],"enroll":true,"expires_in":300}"#
        let error = #expect(throws: GatehouseError.self) { try Transport.check(Self.answer(401, body)) }
        guard case .mfaRequired(let challenge)? = error else {
            Issue.record("expected .mfaRequired")
            return
        }
        #expect(challenge.enroll)
        #expect(challenge.methods == [.totp, .passkey, MFAMethod(rawValue: "carrier_pigeon")])
    }

    @Test
    func anMFARequiredWithoutATokenStaysAServerProblem() throws {
        let body = #"{"code":"auth/mfa-required","status":401,"title":"Second factor required"}"#
        let error = #expect(throws: GatehouseError.self) { try Transport.check(Self.answer(401, body)) }
        guard case .server(let problem)? = error else {
            Issue.record("expected .server")
            return
        }
        #expect(problem.code == .mfaRequired)
    }

    @Test
    func anInvalidMFATokenIsAnOrdinaryProblem() throws {
        let body = #"{"code":"auth/invalid-mfa-token","status":401,"title":"Invalid MFA token"}"#
        #expect(throws: GatehouseError.server(Transport.problem(Self.answer(401, body)))) { try Transport.check(Self.answer(401, body)) }
        #expect(ErrorCode(rawValue: "auth/invalid-mfa-token") == .invalidMFAToken)
        #expect(ErrorCode(rawValue: "auth/mfa-required") == .mfaRequired)
    }

    @Test
    func enrolmentAndStatusDecodeAndTheSecretIsNotPrinted() throws {
        let enrolment = try Transport.decode(
            TOTPEnrollment.self,
            from: Self.answer(
                201,
                #"{"data":{"id":"mfa_f1","secret":"JBSWY3DPEHPK3PXP","otpauth_url":"otpauth://totp/Kit:ada%40example.com?secret=JBSWY3DPEHPK3PXP&issuer=Kit&algorithm=SHA1&digits=6&period=30"}}"#
            ))
        #expect(enrolment.id == "mfa_f1" && enrolment.secret == "JBSWY3DPEHPK3PXP")
        #expect(enrolment.otpauthURL.scheme == "otpauth")
        #expect(!"\(enrolment)".contains("JBSWY3DPEHPK3PXP"))

        let status = try Transport.decode(
            MFAStatus.self,
            from: Self.answer(
                200,
                #"{"data":{"policy":"optional","factors":[{"id":"mfa_f1","type":"totp","name":"Phone","created_at":"2026-12-05T10:00:00Z","last_used_at":null}],"passkeys":2,"recovery_codes_left":9}}"#
            ))
        #expect(status.policy == .optional)
        #expect(status.factors.map(\.id) == ["mfa_f1"] && status.factors[0].name == "Phone" && status.factors[0].lastUsedAt == nil)
        #expect(status.passkeys == 2 && status.recoveryCodesLeft == 9)
    }
}

/// Requests as the MFA and passkey calls send them, seen by a URLProtocol that answers what the
/// contract answers (no server is needed to see what a call puts on the wire).
@Suite("MFA and passkey requests", .serialized)
struct MFARequestTests {
    final class Recorder: URLProtocol {
        static let seen = Mutex<[(method: String, path: String, authorization: String?, body: Data)]>([])
        static let answers = Mutex<[String: (Int, String)]>([:])

        override class func canInit(with request: URLRequest) -> Bool { true }
        override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

        override func startLoading() {
            var body = request.httpBody ?? Data()
            if body.isEmpty, let stream = request.httpBodyStream {
                stream.open()
                var buffer = [UInt8](repeating: 0, count: 4096)
                while stream.hasBytesAvailable {
                    let count = stream.read(&buffer, maxLength: buffer.count)
                    if count <= 0 { break }
                    body.append(contentsOf: buffer[0..<count])
                }
                stream.close()
            }
            let path = request.url?.path ?? ""
            let method = request.httpMethod ?? "GET"
            Self.seen.withLock { $0.append((method, path, request.value(forHTTPHeaderField: "Authorization"), body)) }
            let (status, text) = Self.answers.withLock { $0["\(method) \(path)"] } ?? (404, #"{"code":"request/not-found","status":404}"#)
            let response = HTTPURLResponse(url: request.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: ["Content-Type": "application/json"])!
            client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
            client?.urlProtocol(self, didLoad: Data(text.utf8))
            client?.urlProtocolDidFinishLoading(self)
        }

        override func stopLoading() {}
    }

    static let user = #"{"id":"usr_1","email":"ada@example.com","email_verified":true,"first_name":null,"last_name":null,"photo_url":null,"locale":null,"created_at":"2026-12-05T10:00:00Z","last_sign_in_at":null,"identities":["password"]}"#
    static let session = #"{"data":{"access_token":"eyJ.access.sig","token_type":"Bearer","expires_in":900,"refresh_token":"rt_1","is_new_user":false,"user":\#(user)}}"#

    func client() -> GatehouseClient {
        Recorder.seen.withLock { $0 = [] }
        Recorder.answers.withLock { $0 = [:] }
        let session = URLSessionConfiguration.ephemeral
        session.protocolClasses = [Recorder.self]
        var configuration = GatehouseClient.Configuration(baseURL: URL(string: "https://auth.example.test")!, appKey: "pk_test", sessionStore: MemorySessionStore())
        configuration.urlSession = URLSession(configuration: session)
        return GatehouseClient(configuration: configuration)
    }

    func answer(_ route: String, _ status: Int, _ body: String) { Recorder.answers.withLock { $0[route] = (status, body) } }

    func sent() throws -> [(method: String, path: String, authorization: String?, body: [String: Any])] {
        try Recorder.seen.withLock { $0 }.map { entry in
            let body = entry.body.isEmpty ? [:] : try #require(try JSONSerialization.jsonObject(with: entry.body) as? [String: Any])
            return (entry.method, entry.path, entry.authorization, body)
        }
    }

    static let challenge = #"{"code":"auth/mfa-required","status":401,"mfa_token":"mfa_tok","methods":["totp","recovery_code","passkey"],"enroll":false,"expires_in":300}"#

    @Test
    func aSignInThatNeedsASecondStepFinishesWithACode() async throws {
        let client = client()
        answer("POST /v1/auth/signin", 401, Self.challenge)
        answer("POST /v1/auth/mfa/verify", 200, Self.session)
        let error = await #expect(throws: GatehouseError.self) { try await client.signIn(email: "ada@example.com", password: "pw") }
        guard case .mfaRequired(let challenge)? = error else {
            Issue.record("expected .mfaRequired, got \(String(describing: error))")
            return
        }
        #expect(client.currentUser == nil, "no session before the second step")
        let result = try await client.verifyMFA(challenge, code: "123456")
        #expect(result.user.id == "usr_1")
        #expect(try await client.accessToken() == "eyJ.access.sig", "the second step's session is kept like a sign-in's")
        let verify = try #require(try sent().last)
        #expect(verify.method == "POST" && verify.path == "/v1/auth/mfa/verify" && verify.authorization == nil)
        #expect(verify.body as NSDictionary == ["mfa_token": "mfa_tok", "code": "123456"] as NSDictionary)

        _ = try await client.verifyMFA(challenge, recoveryCode: "abcde-12345")
        #expect(try sent().last?.body as NSDictionary? == ["mfa_token": "mfa_tok", "recovery_code": "abcde-12345"] as NSDictionary)

        let assertion = PasskeyAssertion(
            credentialID: Data([1]), rawClientDataJSON: Data("{}".utf8), rawAuthenticatorData: Data([2]), signature: Data([3]), userID: Data([4]))
        _ = try await client.verifyMFA(challenge, passkey: assertion)
        let byPasskey = try #require(try sent().last?.body)
        #expect(byPasskey["mfa_token"] as? String == "mfa_tok")
        let passkey = try #require(byPasskey["passkey"] as? [String: Any])
        #expect(passkey["id"] as? String == "AQ" && passkey["type"] as? String == "public-key")
        #expect((passkey["response"] as? [String: Any])?["userHandle"] as? String == "BA")
    }

    @Test
    func anEnrollingChallengeAuthorizesTheEnrolmentCallsAndFinishesWithoutAProof() async throws {
        let client = client()
        answer("POST /v1/me/mfa/totp", 201, #"{"data":{"id":"mfa_f1","secret":"JBSWY3DPEHPK3PXP","otpauth_url":"otpauth://totp/Kit:ada?secret=JBSWY3DPEHPK3PXP"}}"#)
        answer("POST /v1/me/mfa/totp/mfa_f1/confirm", 200, #"{"data":{"recovery_codes":["aaaaa-bbbbb","ccccc-ddddd"]}}"#)
        answer("POST /v1/auth/mfa/verify", 201, Self.session.replacingOccurrences(of: #""is_new_user":false"#, with: #""is_new_user":true"#))
        let challenge = MFAChallenge(mfaToken: "mfa_enrol", methods: [.totp, .passkey], enroll: true, expiresIn: 300)
        let enrolment = try await client.enrollTOTP(name: "Phone", during: challenge)
        let codes = try await client.confirmTOTP(id: enrolment.id, code: "654321", during: challenge)
        #expect(codes == ["aaaaa-bbbbb", "ccccc-ddddd"])
        let finished = try await client.finishMFAEnrollment(challenge)
        #expect(finished.isNewUser)
        let calls = try sent()
        #expect(calls.map { "\($0.method) \($0.path)" } == ["POST /v1/me/mfa/totp", "POST /v1/me/mfa/totp/mfa_f1/confirm", "POST /v1/auth/mfa/verify"])
        #expect(calls[0].authorization == "Bearer mfa_enrol" && calls[1].authorization == "Bearer mfa_enrol")
        #expect(calls[0].body as NSDictionary == ["name": "Phone"] as NSDictionary)
        #expect(calls[1].body as NSDictionary == ["code": "654321"] as NSDictionary)
        #expect(calls[2].authorization == nil && calls[2].body as NSDictionary == ["mfa_token": "mfa_enrol"] as NSDictionary)
    }

    @Test
    func passkeyCallsSendTheContractsShapes() async throws {
        let client = client()
        let options = #"{"data":{"challenge":"3q2-7w","rpId":"example.com","timeout":300000,"userVerification":"required","allowCredentials":[]}}"#
        answer("POST /v1/auth/passkey/options", 200, options)
        answer("POST /v1/auth/passkey/verify", 200, Self.session)
        answer("POST /v1/me/passkeys", 201, #"{"data":{"id":"pk_1","name":"iPhone","created_at":"2026-12-05T10:00:00Z","last_used_at":null,"backed_up":true,"aaguid":"fbfc3007-154e-4ecc-8c0b-6e020557d7bd"}}"#)
        answer("PATCH /v1/me/passkeys/pk_1", 200, #"{"data":{"id":"pk_1","name":"Work phone","created_at":"2026-12-05T10:00:00Z","last_used_at":null,"backed_up":true,"aaguid":null}}"#)
        answer("DELETE /v1/me/passkeys/pk_1", 204, "")
        answer("POST /v1/auth/reauthenticate", 200, #"{"data":{"access_token":"eyJ.fresh.sig","expires_in":900}}"#)

        let signInOptions = try await client.passkeySignInOptions()
        #expect(signInOptions.challenge == Data([0xDE, 0xAD, 0xBE, 0xEF]))
        _ = try await client.passkeySignInOptions(for: MFAChallenge(mfaToken: "mfa_two", methods: [.passkey], enroll: false, expiresIn: 300))
        let assertion = PasskeyAssertion(
            credentialID: Data([1]), rawClientDataJSON: Data("{}".utf8), rawAuthenticatorData: Data([2]), signature: Data([3]), userID: nil)
        _ = try await client.signInWithPasskey(assertion)
        let registration = PasskeyRegistration(credentialID: Data([9]), rawClientDataJSON: Data("{}".utf8), rawAttestationObject: Data([0xA0]))
        let passkey = try await client.registerPasskey(registration, name: "iPhone")
        #expect(passkey.backedUp && passkey.name == "iPhone")
        #expect(try await client.renamePasskey(id: "pk_1", name: "Work phone").name == "Work phone")
        try await client.removePasskey(id: "pk_1")
        _ = try await client.passkeyReauthenticationOptions()
        try await client.reauthenticate(passkey: assertion)
        #expect(try await client.accessToken() == "eyJ.fresh.sig")

        let calls = try sent()
        #expect(
            calls.map { "\($0.method) \($0.path)" } == [
                "POST /v1/auth/passkey/options", "POST /v1/auth/passkey/options", "POST /v1/auth/passkey/verify", "POST /v1/me/passkeys",
                "PATCH /v1/me/passkeys/pk_1", "DELETE /v1/me/passkeys/pk_1", "POST /v1/auth/passkey/options", "POST /v1/auth/reauthenticate",
            ])
        #expect(calls[0].authorization == nil && calls[0].body.isEmpty, "a sign-in's options: no bearer, an empty object")
        #expect(calls[1].authorization == nil && calls[1].body as NSDictionary == ["mfa_token": "mfa_two"] as NSDictionary)
        let credential = try #require(calls[2].body["credential"] as? [String: Any])
        #expect(credential["id"] as? String == "AQ" && (credential["response"] as? [String: Any])?["userHandle"] == nil)
        #expect(calls[3].authorization == "Bearer eyJ.access.sig")
        #expect(calls[3].body["name"] as? String == "iPhone")
        #expect(((calls[3].body["credential"] as? [String: Any])?["response"] as? [String: Any])?["attestationObject"] as? String == "oA")
        #expect(calls[4].body as NSDictionary == ["name": "Work phone"] as NSDictionary)
        #expect(calls[6].authorization == "Bearer eyJ.access.sig", "a reauthentication's options carry the session")
        #expect(calls[7].body["passkey"] is [String: Any])
    }
}
