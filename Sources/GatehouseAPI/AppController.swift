import GatehouseCore
import GatehouseHTTP

/// What any client or backend may read about an app: its public settings, its JWKS and its
/// discovery document (RFC 8414 metadata).
struct AppController {
    let auth: Authenticator
    let directory: AppDirectory

    func register(_ routes: inout Routes) {
        routes.get("/v1/app", publicSettings)
        routes.get("/v1/apps/{app_id}/jwks.json", jwks)
        routes.get("/v1/apps/{app_id}/.well-known/openid-configuration", discovery)
        // RFC 8414 §3.1's location for the issuer `<public URL>/v1/apps/<id>`: the well-known
        // segment between the host and the issuer's path.
        routes.get("/.well-known/oauth-authorization-server/v1/apps/{app_id}", discovery)
    }

    func publicSettings(_ request: Request) throws -> HTTPResponse {
        let app = try auth.app(request)
        let s = app.settings
        return .data([
            "id": .string(app.id.rawValue),
            "name": .string(s.name),
            "require_verified_email": .bool(s.requireVerifiedEmail),
            // Only what signs in today: a method the settings name but this version does not offer yet is not advertised.
            "sign_in_methods": .array(s.signInMethods.map { .string($0.rawValue) } + s.signInProviders.map(JSON.string)),
            "password_min_length": .int(s.passwordMinLength),
            // Whether `POST /v1/auth/anonymous` may be offered ("continue without an account").
            "allow_anonymous": .bool(s.allowAnonymous),
            "files": ["max_bytes": .int(s.files.maxBytes), "photo_types": .array(s.files.photoTypes.map(JSON.string))],
        ])
    }

    func jwks(_ request: Request) throws -> HTTPResponse {
        let app = try pathApp(request)
        var response = HTTPResponse(status: 200, headers: HTTPHeaders([("Content-Type", "application/jwk-set+json")]), body: app.jwks)
        response.headers.set("Cache-Control", "public, max-age=300")
        return response
    }

    /// RFC 8414 authorization-server metadata, for the backends that verify the app's access tokens
    /// (RFC 9068 §4), at the path-appended location API.md fixes and at RFC 8414's own. Gatehouse runs no RFC 6749
    /// authorization or token endpoint and issues no ID tokens, so it names none: its grants and
    /// response types are empty lists, saying so rather than leaving RFC 8414's defaults
    /// (`authorization_code`, `implicit`) to be assumed (docs/adr/0017).
    func discovery(_ request: Request) throws -> HTTPResponse {
        let app = try pathApp(request)
        let issuer = auth.tokens.issuer(app.id)
        var response = HTTPResponse.json([
            "issuer": .string(issuer),
            "jwks_uri": .string(issuer + "/jwks.json"),
            "response_types_supported": [],
            "grant_types_supported": [],
            // The algorithm of the key that signs now. An app's algorithm is fixed when it is
            // created and every key it rotates to has it, so this list never has two members.
            "access_token_signing_alg_values_supported": [.string(app.signingKey.algorithm.rawValue)],
            "subject_types_supported": ["public"],
            "claims_supported": .array(TokenService.accessTokenClaims.map(JSON.string)),
        ])
        response.headers.set("Cache-Control", "public, max-age=300")
        return response
    }

    /// The app of the path; a disabled one is not found (its keys are not published).
    private func pathApp(_ request: Request) throws -> AppContext {
        guard let id = request.parameters["app_id"].flatMap({ AppID(parsing: $0) }), let app = try directory.app(id: id), !app.isDisabled else {
            throw GatehouseError(.notFound, "No such app.")
        }
        RequestLogContext.current?.appID = app.id.rawValue
        return app
    }
}
