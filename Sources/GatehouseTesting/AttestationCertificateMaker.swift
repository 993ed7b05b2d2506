import Foundation
import GatehouseCrypto

/// Attestation certificates for `packed` attestation with `x5c`, made by the `openssl` command
/// (an independent maker: not the code under test): a P-256 leaf signed by a throwaway root.
public enum AttestationCertificateMaker {
    public struct Certificate: Sendable {
        public let der: [UInt8]
        public let key: SigningKey
        public init(der: [UInt8], key: SigningKey) {
            self.der = der
            self.key = key
        }
    }

    /// A leaf with `subject` (the rules want `OU=Authenticator Attestation`), `ca` its basic
    /// constraint, valid 30 days from now.
    public static func make(subject: String = "/C=US/O=Test/OU=Authenticator Attestation/CN=Soft", ca: Bool = false) throws -> Certificate {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-x5c-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
        let openssl = "/usr/bin/openssl"
        _ = try ExternalProgram.run(openssl, ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", path("ca.key")])
        _ = try ExternalProgram.run(openssl, ["req", "-x509", "-new", "-key", path("ca.key"), "-subj", "/CN=Test Root", "-days", "60", "-out", path("ca.pem")])
        _ = try ExternalProgram.run(openssl, ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path("leaf.key")])
        _ = try ExternalProgram.run(openssl, ["req", "-new", "-key", path("leaf.key"), "-subj", subject, "-out", path("leaf.csr")])
        try Data("basicConstraints=critical,CA:\(ca ? "TRUE" : "FALSE")\n".utf8).write(to: URL(fileURLWithPath: path("ext.cnf")))
        let arguments = ["x509", "-req", "-in", path("leaf.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"), "-CAcreateserial",
                         "-extfile", path("ext.cnf"), "-days", "30", "-outform", "DER", "-out", path("leaf.der")]
        _ = try ExternalProgram.run(openssl, arguments)
        let der = Array(try Data(contentsOf: URL(fileURLWithPath: path("leaf.der"))))
        let key = try SigningKey(pem: try String(contentsOfFile: path("leaf.key"), encoding: .utf8), algorithm: .es256)
        return Certificate(der: der, key: key)
    }
}
