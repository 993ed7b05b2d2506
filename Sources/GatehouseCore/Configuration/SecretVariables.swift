import Foundation

extension Configuration {
    /// The master key (`GATEHOUSE_MASTER_KEY` or its `_FILE`, required with PostgreSQL) and the
    /// platform's admin token (`GATEHOUSE_ADMIN_TOKEN` or its `_FILE`).
    mutating func readSecrets(_ e: inout EnvironmentReader) {
        let keyText = e.value("GATEHOUSE_MASTER_KEY")
        let keyFile = e.value("GATEHOUSE_MASTER_KEY_FILE")
        if keyText != nil && keyFile != nil {
            e.problems.append("Set GATEHOUSE_MASTER_KEY or GATEHOUSE_MASTER_KEY_FILE, not both.")
        } else if let keyText {
            if let key = MasterKey.decode(keyText) { masterKey = key } else { e.problems.append(MasterKey.formatProblem("GATEHOUSE_MASTER_KEY")) }
        } else if let keyFile {
            if let text = try? String(contentsOfFile: keyFile, encoding: .utf8) {
                if let key = MasterKey.decode(text) { masterKey = key } else { e.problems.append(MasterKey.formatProblem("GATEHOUSE_MASTER_KEY_FILE")) }
            } else {
                e.problems.append("GATEHOUSE_MASTER_KEY_FILE: cannot read \(keyFile).")
            }
        }
        if masterKey == nil, case .postgres = database {
            e.problems.append("GATEHOUSE_MASTER_KEY or GATEHOUSE_MASTER_KEY_FILE is required with PostgreSQL (every node needs the same key).")
        }

        let tokenText = e.value("GATEHOUSE_ADMIN_TOKEN")
        let tokenFile = e.value("GATEHOUSE_ADMIN_TOKEN_FILE")
        if tokenText != nil && tokenFile != nil {
            e.problems.append("Set GATEHOUSE_ADMIN_TOKEN or GATEHOUSE_ADMIN_TOKEN_FILE, not both.")
        } else if let tokenText {
            if tokenText.utf8.count < 32 { e.problems.append("GATEHOUSE_ADMIN_TOKEN must be at least 32 characters.") }
            adminToken = tokenText
        } else if let tokenFile {
            if let text = try? String(contentsOfFile: tokenFile, encoding: .utf8) {
                let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
                if token.utf8.count < 32 {
                    e.problems.append("GATEHOUSE_ADMIN_TOKEN_FILE: the token in \(tokenFile) must be at least 32 characters.")
                } else {
                    adminToken = token
                }
            } else {
                e.problems.append("GATEHOUSE_ADMIN_TOKEN_FILE: cannot read \(tokenFile).")
            }
        }
    }
}

/// The master key that encrypts secrets at rest: 32 bytes given as base64 (standard or URL-safe) or 64 hex digits.
public enum MasterKey {
    public static func decode(_ text: String) -> [UInt8]? {
        let t = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if t.utf8.count == 64, t.utf8.allSatisfy({ $0 < 128 && Character(Unicode.Scalar($0)).isHexDigit }) {
            var bytes: [UInt8] = []
            var index = t.startIndex
            while index < t.endIndex {
                let next = t.index(index, offsetBy: 2)
                bytes.append(UInt8(t[index..<next], radix: 16)!)
                index = next
            }
            return bytes
        }
        var b64 = t.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while b64.utf8.count % 4 != 0 { b64 += "=" }
        guard let data = Data(base64Encoded: b64), data.count == 32 else { return nil }
        return Array(data)
    }

    static func formatProblem(_ name: String) -> String {
        "\(name) must be 32 bytes as base64 or 64 hex digits (generate one with: openssl rand -base64 32)."
    }
}
