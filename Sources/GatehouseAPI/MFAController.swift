import GatehouseCore
import GatehouseHTTP

/// Second factors: `/v1/me/mfa*` (enrolling and removing authenticator apps), the second step
/// (`POST /v1/auth/mfa/verify`) and the admin's removal of a user's factor.
struct MFAController {
    let auth: Authenticator
    let mfa: MFAService
    let sessions: AuthController

    func register(_ routes: inout Routes) {
        routes.get("/v1/me/mfa", overview)
        routes.post("/v1/me/mfa/totp", beginTOTP)
        routes.post("/v1/me/mfa/totp/{id}/confirm", confirmTOTP)
        routes.delete("/v1/me/mfa/totp/{id}", removeTOTP)
        routes.post("/v1/auth/mfa/verify", verify)
        routes.delete("/v1/admin/users/{id}/factors/{factor_id}", removeByAdmin)
    }

    /// The signed-in user (access token), or an enrolling sign-in (`Authorization: Bearer mfa_…`):
    /// only the enrolment routes take the latter.
    private func actor(_ request: Request) throws -> (AppContext, MFAActor) {
        if let token = request.bearerToken, token.hasPrefix("mfa_") {
            return (try auth.app(request), .enrolling(mfaToken: token))
        }
        let (app, claims) = try auth.user(request)
        return (app, .session(claims))
    }

    func overview(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        let overview = try mfa.overview(app: app, claims: claims)
        return HTTPResponse.data([
            "policy": .string(overview.policy.rawValue), "factors": .array(overview.factors.map(Self.factor)), "passkeys": .int(Int64(overview.passkeys)),
            "recovery_codes_left": .int(Int64(overview.recoveryCodesLeft)),
        ]).noStore()
    }

    func beginTOTP(_ request: Request) throws -> HTTPResponse {
        let (app, actor) = try actor(request)
        var body = try Body(request, allowEmpty: true)
        let name = body.optional("name", maxLength: 256)
        try body.finish()
        let enrolment = try mfa.beginTOTP(app: app, actor: actor, name: name, origin: request.origin)
        return HTTPResponse.data(
            ["id": .string(enrolment.id.rawValue), "secret": .string(enrolment.secret), "otpauth_url": .string(enrolment.otpauthURL)], status: 201
        ).noStore()
    }

    func confirmTOTP(_ request: Request) throws -> HTTPResponse {
        let (app, actor) = try actor(request)
        var body = try Body(request)
        let code = body.required("code", maxLength: 64)
        try body.finish()
        let codes = try mfa.confirmTOTP(app: app, actor: actor, id: request.parameters["id"] ?? "", code: code, origin: request.origin)
        return HTTPResponse.data(["recovery_codes": .array(codes.map(JSON.string))]).noStore()
    }

    func removeTOTP(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        try mfa.removeTOTP(app: app, claims: claims, id: request.parameters["id"] ?? "", origin: request.origin)
        return .noContent
    }

    /// Exactly one proof, or none for an enrolling token whose enrolment was confirmed.
    func verify(_ request: Request) throws -> HTTPResponse {
        let app = try auth.app(request)
        var body = try Body(request)
        let token = body.required("mfa_token", maxLength: 256)
        let code = body.optional("code", maxLength: 64)
        let recoveryCode = body.optional("recovery_code", maxLength: 64)
        let passkey = body.optionalObject("passkey")
        try body.finish()
        let proofs: [MFAProof] = [code.map(MFAProof.totp), recoveryCode.map(MFAProof.recoveryCode), passkey.map(MFAProof.passkey)].compactMap { $0 }
        guard proofs.count <= 1 else { throw GatehouseError.validation("code", "Give only one of code, recovery_code or passkey.") }
        return sessions.sessionResponse(app, try mfa.verify(app: app, mfaToken: token, proof: proofs.first, origin: request.origin))
    }

    func removeByAdmin(_ request: Request) throws -> HTTPResponse {
        let app = try auth.adminApp(request)
        try mfa.removeByAdmin(app: app, user: request.parameters["id"] ?? "", factor: request.parameters["factor_id"] ?? "")
        return .noContent
    }

    static func factor(_ factor: FactorSummary) -> JSON {
        [
            "id": .string(factor.id), "type": .string(factor.type), "name": .optional(factor.name), "created_at": .string(rfc3339(millis: factor.createdAt)),
            "last_used_at": factor.lastUsedAt.map { .string(rfc3339(millis: $0)) } ?? .null,
        ]
    }
}
