import GatehouseCore
import GatehouseHTTP

/// Passkeys: `/v1/me/passkeys*` (the signed-in user's) and `/v1/auth/passkey/*` (sign-in).
struct PasskeyController {
    let auth: Authenticator
    let passkeys: PasskeyService
    let mfa: MFAService
    let sessions: SessionService
    let sessionResponses: AuthController

    func register(_ routes: inout Routes) {
        routes.post("/v1/me/passkeys/options", creationOptions)
        routes.post("/v1/me/passkeys", add)
        routes.get("/v1/me/passkeys", list)
        routes.patch("/v1/me/passkeys/{id}", rename)
        routes.delete("/v1/me/passkeys/{id}", remove)
        routes.post("/v1/auth/passkey/options", requestOptions)
        routes.post("/v1/auth/passkey/verify", verify)
    }

    /// A sign-in that must enrol a second factor first (`auth/mfa-required` with `enroll: true`)
    /// registers its passkey with `Authorization: Bearer mfa_…`.
    private static func enrollingToken(_ request: Request) -> String? {
        guard let token = request.bearerToken, token.hasPrefix("mfa_") else { return nil }
        return token
    }

    func creationOptions(_ request: Request) throws -> HTTPResponse {
        if let mfaToken = Self.enrollingToken(request) {
            let app = try auth.app(request)
            try Body(request, allowEmpty: true).finish()
            return HTTPResponse.data(try mfa.passkeyCreationOptions(app: app, mfaToken: mfaToken, origin: request.origin)).noStore()
        }
        let (app, claims) = try auth.user(request)
        let body = try Body(request, allowEmpty: true)
        try body.finish()
        try sessions.requireRecentLogin(app: app, claims: claims)
        return HTTPResponse.data(try passkeys.creationOptions(app: app, user: claims.userID, origin: request.origin)).noStore()
    }

    func add(_ request: Request) throws -> HTTPResponse {
        if let mfaToken = Self.enrollingToken(request) {
            let app = try auth.app(request)
            var body = try Body(request)
            let credential = body.requiredObject("credential")
            let name = try Self.name(&body, required: false)
            try body.finish()
            let passkey = try mfa.registerPasskey(app: app, mfaToken: mfaToken, credential: credential, name: name, origin: request.origin)
            return HTTPResponse.data(PasskeyService.json(passkey), status: 201).noStore()
        }
        let (app, claims) = try auth.user(request)
        var body = try Body(request)
        let credential = body.requiredObject("credential")
        let name = try Self.name(&body, required: false)
        try body.finish()
        try sessions.requireRecentLogin(app: app, claims: claims)
        let passkey = try passkeys.register(app: app, user: claims.userID, session: claims.sessionID, credential: credential, name: name, origin: request.origin)
        return HTTPResponse.data(PasskeyService.json(passkey), status: 201).noStore()
    }

    func list(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        return HTTPResponse.data(.array(try passkeys.list(app: app, user: claims.userID).map(PasskeyService.json))).noStore()
    }

    func rename(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        var body = try Body(request)
        let name = try Self.name(&body, required: true) ?? ""
        try body.finish()
        let passkey = try passkeys.rename(app: app, user: claims.userID, id: request.parameters["id"] ?? "", name: name)
        return HTTPResponse.data(PasskeyService.json(passkey)).noStore()
    }

    func remove(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        try sessions.requireRecentLogin(app: app, claims: claims)
        try passkeys.remove(app: app, user: claims.userID, session: claims.sessionID, id: request.parameters["id"] ?? "", by: "user", origin: request.origin)
        return .noContent
    }

    /// `{}`: a sign-in's options (app key only); `{mfa_token}`: a second step's (the user's
    /// passkeys); with a Bearer access token, a reauthentication's.
    func requestOptions(_ request: Request) throws -> HTTPResponse {
        var body = try Body(request, allowEmpty: true)
        let mfaToken = body.optional("mfa_token", maxLength: 128)
        try body.finish()
        if let mfaToken {
            let app = try auth.app(request)
            return HTTPResponse.data(try mfa.passkeyRequestOptions(app: app, mfaToken: mfaToken, origin: request.origin)).noStore()
        }
        if request.bearerToken != nil {
            let (app, claims) = try auth.user(request)
            return HTTPResponse.data(try passkeys.requestOptions(app: app, purpose: .reauth, user: claims.userID, origin: request.origin)).noStore()
        }
        let app = try auth.app(request)
        return HTTPResponse.data(try passkeys.requestOptions(app: app, purpose: .signIn, user: nil, origin: request.origin)).noStore()
    }

    func verify(_ request: Request) throws -> HTTPResponse {
        let app = try auth.app(request)
        var body = try Body(request)
        let credential = body.requiredObject("credential")
        try body.finish()
        return sessionResponses.sessionResponse(app, try passkeys.signIn(app: app, credential: credential, origin: request.origin))
    }

    /// A passkey's name: 1 to 100 characters, trimmed, no control or format characters.
    private static func name(_ body: inout Body, required: Bool) throws -> String? {
        let raw = required ? body.required("name", maxLength: 100) : body.optional("name", maxLength: 100)
        try body.check()
        guard let raw else { return nil }
        let name = raw.trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty else { throw GatehouseError.validation("name", "Must be 1 to 100 characters.") }
        guard !InputRules.hasControlOrFormatCharacters(name) else { throw GatehouseError.validation("name", InputRules.nameCharactersMessage) }
        return name
    }
}
