// The Apple-only part of passkeys: requests for ASAuthorizationController made from Gatehouse's
// options, and GatehouseKit's values made from what it hands back. Not built on Linux (this
// repository's CI); the platform-neutral types and calls are in Passkeys.swift.
#if canImport(AuthenticationServices) && !os(watchOS)
import AuthenticationServices
import Foundation

@available(iOS 15.0, macOS 12.0, tvOS 16.0, *)
extension PasskeyRegistrationOptions {
    /// A registration request for `ASAuthorizationController(authorizationRequests:)`: the
    /// challenge, the user handle and name, the relying party, and user verification required.
    @MainActor
    public func authorizationRequest() -> ASAuthorizationPlatformPublicKeyCredentialRegistrationRequest {
        let provider = ASAuthorizationPlatformPublicKeyCredentialProvider(relyingPartyIdentifier: relyingPartyIdentifier)
        let request = provider.createCredentialRegistrationRequest(challenge: challenge, name: userName, userID: userID)
        request.displayName = userDisplayName
        request.userVerificationPreference = .required
        return request
    }
}

@available(iOS 15.0, macOS 12.0, tvOS 16.0, *)
extension PasskeySignInOptions {
    /// An assertion request for `ASAuthorizationController(authorizationRequests:)` (use
    /// `performAutoFillAssistedRequests()` for a sign-in offered in the keyboard's bar).
    @MainActor
    public func authorizationRequest() -> ASAuthorizationPlatformPublicKeyCredentialAssertionRequest {
        let provider = ASAuthorizationPlatformPublicKeyCredentialProvider(relyingPartyIdentifier: relyingPartyIdentifier)
        let request = provider.createCredentialAssertionRequest(challenge: challenge)
        request.allowedCredentials = allowedCredentialIDs.map { ASAuthorizationPlatformPublicKeyCredentialDescriptor(credentialID: $0) }
        request.userVerificationPreference = .required
        return request
    }
}

@available(iOS 15.0, macOS 12.0, tvOS 16.0, *)
extension PasskeyRegistration {
    /// The new passkey in an authorization (in
    /// `authorizationController(controller:didCompleteWithAuthorization:)`), or nil when the
    /// authorization is not a passkey registration.
    @MainActor
    public init?(_ authorization: ASAuthorization) {
        guard let credential = authorization.credential as? ASAuthorizationPlatformPublicKeyCredentialRegistration,
            let attestation = credential.rawAttestationObject
        else { return nil }
        self.init(credentialID: credential.credentialID, rawClientDataJSON: credential.rawClientDataJSON, rawAttestationObject: attestation)
    }
}

@available(iOS 15.0, macOS 12.0, tvOS 16.0, *)
extension PasskeyAssertion {
    /// The passkey's assertion in an authorization, or nil when the authorization is not one.
    @MainActor
    public init?(_ authorization: ASAuthorization) {
        guard let credential = authorization.credential as? ASAuthorizationPlatformPublicKeyCredentialAssertion else { return nil }
        let userID: Data? = credential.userID
        self.init(
            credentialID: credential.credentialID, rawClientDataJSON: credential.rawClientDataJSON,
            rawAuthenticatorData: credential.rawAuthenticatorData, signature: credential.signature, userID: userID)
    }
}
#endif
