// The second-factor and passkey snippets of README.md and of docs/mfa-and-passkeys.md, each
// exactly as printed there (ReadmeTests checks both), inside functions that give them the values
// an app would have. The AuthenticationServices lines compile on Apple platforms only.
import Foundation
import GatehouseKit

#if canImport(AuthenticationServices) && !os(watchOS)
import AuthenticationServices
#endif

func askForCode() async -> String { "123456" }
func showQRCode(_ url: URL) { print(url.absoluteString.count) }
func showOnce(_ codes: [String]) { print(codes.count) }

func totpEnrolmentSnippet(_ client: GatehouseClient) async throws {
    let enrolment = try await client.withRecentLogin {
        try await client.enrollTOTP(name: "iPhone")
    } reauthenticate: {
        try await client.reauthenticate(password: await askForPassword())
    }
    showQRCode(enrolment.otpauthURL)  // or show enrolment.secret for typing in
    let recoveryCodes = try await client.confirmTOTP(id: enrolment.id, code: await askForCode())
    showOnce(recoveryCodes)  // never shown again
}

func secondStepSnippet(_ client: GatehouseClient, email: String, password: String) async throws {
    do {
        _ = try await client.signIn(email: email, password: password)
    } catch GatehouseError.mfaRequired(let challenge) where !challenge.enroll {
        // challenge.methods: .totp, .recoveryCode, .passkey
        _ = try await client.verifyMFA(challenge, code: await askForCode())
    }
}

func recoveryCodeSnippet(_ client: GatehouseClient, challenge: MFAChallenge) async throws {
    _ = try await client.verifyMFA(challenge, recoveryCode: "k7m2p-x9qrt")
}

func requiredEnrolmentSnippet(_ client: GatehouseClient, email: String, password: String) async throws {
    do {
        _ = try await client.signIn(email: email, password: password)
    } catch GatehouseError.mfaRequired(let challenge) where challenge.enroll {
        let enrolment = try await client.enrollTOTP(name: "iPhone", during: challenge)
        showQRCode(enrolment.otpauthURL)
        let recoveryCodes = try await client.confirmTOTP(id: enrolment.id, code: await askForCode(), during: challenge)
        showOnce(recoveryCodes)
        let result = try await client.finishMFAEnrollment(challenge)
        _ = result
    }
}

func factorsSnippet(_ client: GatehouseClient) async throws {
    let status = try await client.listFactors()  // policy, factors, passkeys, recoveryCodesLeft
    for factor in status.factors { print(factor.name ?? "Authenticator", factor.lastUsedAt ?? factor.createdAt) }
    try await client.removeTOTP(id: status.factors[0].id)  // recent login
}

func passkeyCallsSnippet(_ client: GatehouseClient, registration: PasskeyRegistration, assertion: PasskeyAssertion, challenge: MFAChallenge) async throws {
    // Registering (recent login): options → ASAuthorizationController → Gatehouse.
    let creation = try await client.passkeyRegistrationOptions()
    let passkey = try await client.registerPasskey(registration, name: "iPhone")

    // Signing in without an email; the same assertion types answer a second step or a reauthentication.
    let request = try await client.passkeySignInOptions()
    let signedIn = try await client.signInWithPasskey(assertion)
    let forSecondStep = try await client.passkeySignInOptions(for: challenge)
    _ = try await client.verifyMFA(challenge, passkey: assertion)
    let forReauthentication = try await client.passkeyReauthenticationOptions()
    try await client.reauthenticate(passkey: assertion)

    let passkeys = try await client.listPasskeys()
    _ = try await client.renamePasskey(id: passkey.id, name: "Work iPhone")
    try await client.removePasskey(id: passkey.id)  // recent login
    _ = (creation, request, signedIn, forSecondStep, forReauthentication, passkeys)
}

#if canImport(AuthenticationServices) && !os(watchOS)
@available(iOS 15.0, macOS 12.0, tvOS 16.0, *)
@MainActor
final class PasskeySheet: NSObject, @preconcurrency ASAuthorizationControllerDelegate {
    let client: GatehouseClient
    init(client: GatehouseClient) { self.client = client }

    func register() async throws {
        let options = try await client.passkeyRegistrationOptions()
        let controller = ASAuthorizationController(authorizationRequests: [options.authorizationRequest()])
        controller.delegate = self  // and a presentationContextProvider
        controller.performRequests()
    }

    func signIn() async throws {
        let options = try await client.passkeySignInOptions()
        let controller = ASAuthorizationController(authorizationRequests: [options.authorizationRequest()])
        controller.delegate = self
        controller.performRequests()
    }

    func authorizationController(controller: ASAuthorizationController, didCompleteWithAuthorization authorization: ASAuthorization) {
        Task {
            if let registration = PasskeyRegistration(authorization) {
                _ = try await client.registerPasskey(registration, name: "iPhone")
            } else if let assertion = PasskeyAssertion(authorization) {
                _ = try await client.signInWithPasskey(assertion)
            }
        }
    }
}
#endif
