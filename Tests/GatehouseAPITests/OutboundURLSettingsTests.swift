import GatehouseCore
import GatehouseTesting
import Testing

@Suite("Outbound URLs in app settings")
struct OutboundURLSettingsTests {
    /// The SMTP URL an admin sets is only ever an SMTP server: no http (a webhook-style request
    /// forger), no file or other scheme curl speaks, no credentials in the URL.
    @Test(arguments: TestDatabase.kinds)
    func anAppsSMTPURLIsSMTPOrSMTPSOnly(_ kind: TestDatabaseKind) throws {
        let server = try TestServer(kind)
        defer { server.stop() }
        let app = try server.createApp()
        for url in ["http://169.254.169.254/latest/meta-data/", "file:///etc/passwd", "gopher://127.0.0.1:25/", "smtp://user:pass@mail.example.com", "smtp://", "mail.example.com:25"] {
            let refused = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["email": ["smtp_url": .string(url)]])
            #expect(refused.status == 400, "\(url)")
            #expect(refused.problemCode == "request/validation-failed", "\(url)")
            #expect(refused.json?["errors"]?.arrayValue?.first?["field"]?.stringValue?.hasSuffix("smtp_url") == true, "\(url)")
        }
        for url in ["smtp://mail.example.com:587", "smtps://mail.example.com:465"] {
            let saved = try server.request("PATCH", "/v1/admin/app", bearer: app.secretKey, json: ["email": ["smtp_url": .string(url)]])
            #expect(saved.status == 200, "\(url)")
            #expect(saved.data?["email"]?["smtp_url"]?.stringValue == url)
        }
    }
}
