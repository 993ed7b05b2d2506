import GatehouseCore
import GatehouseHTTP

/// The routes that mail a code, and those that take it back. Every send answers 202 with no
/// body, whether or not the address has an account. The routes that mail read the request's
/// `Accept-Language` (``Request/mailOrigin``): the language of a mail to someone who chose none.
struct EmailController {
    let auth: Authenticator
    let flows: EmailFlowService
    let sessions: AuthController

    func register(_ routes: inout Routes) {
        routes.post("/v1/auth/email-code/send", sendSignInCode)
        routes.post("/v1/auth/email-code/verify", verifySignInCode)
        routes.post("/v1/auth/email/verification/send", sendVerification)
        routes.post("/v1/auth/email/verification/confirm", confirmVerification)
        routes.post("/v1/auth/password-reset/send", sendPasswordReset)
        routes.post("/v1/auth/password-reset/confirm", hashesPassword: true, confirmPasswordReset)
        routes.post("/v1/auth/reauthenticate/send-code", sendReauthenticationCode)
        routes.post("/v1/me/email", requestEmailChange)
        routes.post("/v1/me/email/confirm", confirmEmailChange)
    }

    func sendSignInCode(_ request: Request) throws -> HTTPResponse {
        let app = try auth.app(request)
        var body = try Body(request)
        let email = body.required("email", maxLength: 320)
        try body.finish()
        try flows.sendSignInCode(app: app, email: email, origin: request.mailOrigin)
        return .accepted
    }

    func verifySignInCode(_ request: Request) throws -> HTTPResponse {
        let app = try auth.app(request)
        var body = try Body(request)
        let email = body.required("email", maxLength: 320)
        let code = body.required("code", maxLength: 64)
        let locale = body.optional("locale", maxLength: 64)
        try body.finish()
        return sessions.sessionResponse(app, try flows.verifySignInCode(app: app, email: email, code: code, locale: locale, origin: request.origin))
    }

    func sendVerification(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        let body = try Body(request, allowEmpty: true)
        try body.finish()
        try flows.sendVerification(app: app, claims: claims, origin: request.mailOrigin)
        return .accepted
    }

    func confirmVerification(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        var body = try Body(request)
        let code = body.required("code", maxLength: 64)
        try body.finish()
        let (user, identities) = try flows.confirmVerification(app: app, claims: claims, code: code, origin: request.origin)
        return HTTPResponse.data(UserObject.json(user, identities)).noStore()
    }

    func sendPasswordReset(_ request: Request) throws -> HTTPResponse {
        let app = try auth.app(request)
        var body = try Body(request)
        let email = body.required("email", maxLength: 320)
        try body.finish()
        try flows.sendPasswordReset(app: app, email: email, origin: request.mailOrigin)
        return .accepted
    }

    func confirmPasswordReset(_ request: Request) throws -> HTTPResponse {
        let app = try auth.app(request)
        var body = try Body(request)
        let email = body.required("email", maxLength: 320)
        let code = body.required("code", maxLength: 64)
        let password = body.required("password", maxLength: 4096)
        try body.finish()
        try flows.confirmPasswordReset(app: app, email: email, code: code, password: password, origin: request.origin)
        return .noContent
    }

    func sendReauthenticationCode(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        let body = try Body(request, allowEmpty: true)
        try body.finish()
        try flows.sendReauthenticationCode(app: app, claims: claims, origin: request.mailOrigin)
        return .accepted
    }

    func requestEmailChange(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        var body = try Body(request)
        let email = body.required("email", maxLength: 320)
        try body.finish()
        try flows.requestEmailChange(app: app, claims: claims, email: email, origin: request.mailOrigin)
        return .accepted
    }

    func confirmEmailChange(_ request: Request) throws -> HTTPResponse {
        let (app, claims) = try auth.user(request)
        var body = try Body(request)
        let email = body.required("email", maxLength: 320)
        let code = body.required("code", maxLength: 64)
        try body.finish()
        let (user, identities) = try flows.confirmEmailChange(app: app, claims: claims, email: email, code: code, origin: request.mailOrigin)
        return HTTPResponse.data(UserObject.json(user, identities)).noStore()
    }
}
