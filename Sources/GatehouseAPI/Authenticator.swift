import GatehouseCore

/// Who is calling: the app of `X-App-Key`, an app's admin (secret key), or the platform operator.
struct Authenticator: Sendable {
    let directory: AppDirectory
    let apps: AppService
    let tokens: TokenService

    /// The app of `X-App-Key` and the signed-in user of its `Authorization: Bearer` access token.
    func user(_ request: Request) throws -> (AppContext, AccessClaims) {
        let app = try self.app(request)
        guard let token = request.bearerToken else { throw GatehouseError(.missingToken, "Send the access token as Authorization: Bearer ….") }
        return (app, try tokens.verifyAccessToken(token, app: app))
    }

    /// The app named by `X-App-Key`: 401 `app/missing-key` or `app/invalid-key` otherwise.
    func app(_ request: Request) throws -> AppContext {
        guard let key = request.header("X-App-Key"), !key.isEmpty else {
            throw GatehouseError(.missingAppKey, "Send the app's public key in the X-App-Key header.")
        }
        guard key.utf8.count <= 128, let app = try request.context.app(key: key) else {
            throw GatehouseError(.invalidAppKey, "The X-App-Key is not a key of any active app.")
        }
        RequestLogContext.current?.appID = app.id.rawValue
        return app
    }

    /// The app whose secret key is the bearer token.
    func adminApp(_ request: Request) throws -> AppContext {
        guard let token = request.bearerToken else {
            throw GatehouseError(.missingToken, "Send the app's secret key as Authorization: Bearer sk_….")
        }
        guard let app = try apps.app(secretKey: token) else { throw GatehouseError(.invalidToken, "The secret key is not valid.") }
        RequestLogContext.current?.appID = app.id.rawValue
        return app
    }

    /// The platform operator (the platform token: nil) or the app whose secret key is the bearer token.
    func adminAppOrPlatform(_ request: Request) throws -> AppContext? {
        guard let token = request.bearerToken else {
            throw GatehouseError(.missingToken, "Send the app's secret key or the platform token as Authorization: Bearer ….")
        }
        if apps.isPlatformToken(token) { return nil }
        return try adminApp(request)
    }

    /// Requires the platform token (`GATEHOUSE_ADMIN_TOKEN`).
    func platform(_ request: Request) throws {
        guard let token = request.bearerToken else {
            throw GatehouseError(.missingToken, "Send the platform token as Authorization: Bearer ….")
        }
        guard apps.isPlatformToken(token) else { throw GatehouseError(.invalidToken, "The platform token is not valid.") }
    }
}
