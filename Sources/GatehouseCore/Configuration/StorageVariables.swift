import Foundation

extension Configuration {
    /// `GATEHOUSE_DATABASE_URL`, and where file contents live (`GATEHOUSE_BLOB_STORE` and its
    /// folder or S3 bucket).
    mutating func readStorage(_ e: inout EnvironmentReader) {
        if let url = e.value("GATEHOUSE_DATABASE_URL") {
            if url.hasPrefix("sqlite://") {
                let path = String(url.dropFirst("sqlite://".count))
                if path.isEmpty { e.problems.append("GATEHOUSE_DATABASE_URL: sqlite:// needs a path, e.g. sqlite://./data/gatehouse.db.") }
                database = .sqlite(path: path)
            } else if url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") {
                database = .postgres(url: url)
            } else {
                e.problems.append("GATEHOUSE_DATABASE_URL must start with sqlite:// or postgres://.")
            }
        }
        if let pooler = e.value("GATEHOUSE_DATABASE_POOLER") {
            if let value = DatabasePooler(rawValue: pooler) {
                databasePooler = value
                if value != .none, case .sqlite = database {
                    e.problems.append("GATEHOUSE_DATABASE_POOLER=\(pooler) is only for PostgreSQL (a postgres:// GATEHOUSE_DATABASE_URL).")
                }
            } else {
                e.problems.append("GATEHOUSE_DATABASE_POOLER must be none or transaction.")
            }
        }

        let blobDirectory = e.value("GATEHOUSE_BLOB_DIRECTORY")
        switch e.value("GATEHOUSE_BLOB_STORE") ?? "database" {
        case "database":
            if blobDirectory != nil { e.problems.append("GATEHOUSE_BLOB_DIRECTORY is only for GATEHOUSE_BLOB_STORE=filesystem.") }
        case "s3":
            if blobDirectory != nil { e.problems.append("GATEHOUSE_BLOB_DIRECTORY is only for GATEHOUSE_BLOB_STORE=filesystem.") }
            let endpoint = e.value("GATEHOUSE_S3_ENDPOINT")
            if let endpoint, let problem = s3EndpointProblem(endpoint) { e.problems.append(problem) }
            if endpoint == nil { e.problems.append("GATEHOUSE_BLOB_STORE=s3 needs GATEHOUSE_S3_ENDPOINT.") }
            let bucket = e.value("GATEHOUSE_S3_BUCKET")
            if let bucket, !isBucketName(bucket) {
                e.problems.append("GATEHOUSE_S3_BUCKET must be a bucket name: 3 to 63 of a-z 0-9 . -, starting and ending with a letter or digit.")
            }
            if bucket == nil { e.problems.append("GATEHOUSE_BLOB_STORE=s3 needs GATEHOUSE_S3_BUCKET.") }
            let region = e.value("GATEHOUSE_S3_REGION") ?? "us-east-1"
            if !region.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D }) || region.utf8.count > 64 {
                e.problems.append("GATEHOUSE_S3_REGION must be a region name such as us-east-1.")
            }
            let keyID = e.value("GATEHOUSE_S3_ACCESS_KEY_ID")
            if keyID == nil { e.problems.append("GATEHOUSE_BLOB_STORE=s3 needs GATEHOUSE_S3_ACCESS_KEY_ID.") }
            if let keyID, keyID.contains(":") || keyID.utf8.contains(where: { $0 < 0x21 || $0 == 0x7F }) {
                e.problems.append("GATEHOUSE_S3_ACCESS_KEY_ID must not contain ':', spaces or control characters.")
            }
            var secret: String?
            let secretText = e.value("GATEHOUSE_S3_SECRET_ACCESS_KEY")
            let secretFile = e.value("GATEHOUSE_S3_SECRET_ACCESS_KEY_FILE")
            if secretText != nil && secretFile != nil {
                e.problems.append("Set GATEHOUSE_S3_SECRET_ACCESS_KEY or GATEHOUSE_S3_SECRET_ACCESS_KEY_FILE, not both.")
            } else if let secretText {
                secret = secretText
            } else if let secretFile {
                if let text = try? String(contentsOfFile: secretFile, encoding: .utf8) {
                    let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
                    if trimmed.isEmpty { e.problems.append("GATEHOUSE_S3_SECRET_ACCESS_KEY_FILE: \(secretFile) is empty.") } else { secret = trimmed }
                } else {
                    e.problems.append("GATEHOUSE_S3_SECRET_ACCESS_KEY_FILE: cannot read \(secretFile).")
                }
            } else {
                e.problems.append("GATEHOUSE_BLOB_STORE=s3 needs GATEHOUSE_S3_SECRET_ACCESS_KEY or GATEHOUSE_S3_SECRET_ACCESS_KEY_FILE.")
            }
            if let endpoint, let bucket, let keyID, let secret {
                blobStorage = .s3(S3Settings(endpoint: endpoint, bucket: bucket, region: region, accessKeyID: keyID, secretAccessKey: secret))
            }
        case "filesystem":
            if let blobDirectory {
                blobStorage = .filesystem(directory: blobDirectory)
            } else if let data = dataDirectory {
                blobStorage = .filesystem(directory: data + "/blobs")
            } else {
                e.problems.append("GATEHOUSE_BLOB_STORE=filesystem needs GATEHOUSE_BLOB_DIRECTORY with PostgreSQL.")
            }
        default:
            e.problems.append("GATEHOUSE_BLOB_STORE must be database, filesystem or s3.")
        }
    }
}

/// Why `GATEHOUSE_S3_ENDPOINT` is not usable, or nil: `https://host[:port]`, or `http://` to a
/// loopback host (a local test server); no path, query, user or password.
func s3EndpointProblem(_ endpoint: String) -> String? {
    let message = "GATEHOUSE_S3_ENDPOINT must be https://host[:port] (or http:// to 127.0.0.1, [::1] or localhost), without a path."
    guard let parsed = URLComponents(string: endpoint), let scheme = parsed.scheme?.lowercased(), let host = parsed.host, !host.isEmpty,
        parsed.path.isEmpty || parsed.path == "/", parsed.query == nil, parsed.fragment == nil, parsed.user == nil, parsed.password == nil
    else { return message }
    switch scheme {
    case "https": return nil
    case "http":
        let loopback = host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
        return loopback ? nil : "GATEHOUSE_S3_ENDPOINT: http:// is allowed only to a loopback address; use https://."
    default: return message
    }
}

/// An S3 bucket name (the DNS-compatible rules; no `/`, so it is one path segment).
func isBucketName(_ name: String) -> Bool {
    let bytes = Array(name.utf8)
    func alnum(_ b: UInt8) -> Bool { (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) }
    guard (3...63).contains(bytes.count), alnum(bytes.first!), alnum(bytes.last!) else { return false }
    return bytes.allSatisfy { alnum($0) || $0 == 0x2E || $0 == 0x2D }
}
