import Foundation

extension Configuration {
    /// Where the server listens (`GATEHOUSE_LISTEN`) and the URL clients reach it at
    /// (`GATEHOUSE_PUBLIC_URL`, else the listen address).
    mutating func readAddress(_ e: inout EnvironmentReader) {
        var listenGiven = false
        if let listen = e.value("GATEHOUSE_LISTEN") {
            listenGiven = true
            if let (host, port) = Self.parseListen(listen) {
                listenHost = host
                listenPort = port
            } else {
                e.problems.append("GATEHOUSE_LISTEN must be host:port, e.g. 127.0.0.1:8080 or [::]:8080.")
            }
        }
        if let publicURL = e.value("GATEHOUSE_PUBLIC_URL") {
            if let parsed = URLComponents(string: publicURL), let scheme = parsed.scheme, ["http", "https"].contains(scheme),
                parsed.host?.isEmpty == false, parsed.query == nil, parsed.fragment == nil, parsed.user == nil, parsed.password == nil
            {
                var trimmed = Substring(publicURL)
                while trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
                self.publicURL = String(trimmed)
            } else {
                e.problems.append("GATEHOUSE_PUBLIC_URL must be an absolute http(s) URL without user, query or fragment, e.g. https://auth.example.com.")
            }
        } else if listenGiven {
            let host = listenHost.contains(":") ? "[\(listenHost)]" : listenHost
            publicURL = "http://\(host):\(listenPort)"
        }
    }

    /// `GATEHOUSE_TENANTS_DIR` and `GATEHOUSE_UPLOAD_SPOOL_DIR`.
    mutating func readFolders(_ e: inout EnvironmentReader) {
        if let dir = e.value("GATEHOUSE_TENANTS_DIR") {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: dir, isDirectory: &isDirectory), isDirectory.boolValue {
                tenantsDirectory = dir
            } else {
                e.problems.append("GATEHOUSE_TENANTS_DIR: \(dir) is not a folder.")
            }
        }
        if let dir = e.value("GATEHOUSE_UPLOAD_SPOOL_DIR") {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: dir, isDirectory: &isDirectory), isDirectory.boolValue,
                FileManager.default.isWritableFile(atPath: dir)
            {
                uploadSpoolDirectory = dir
            } else {
                e.problems.append("GATEHOUSE_UPLOAD_SPOOL_DIR: \(dir) is not a writable folder.")
            }
        }
    }

    static func parseListen(_ text: String) -> (String, UInt16)? {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            // An IPv6 address goes in brackets: `::1:8080` could be read two ways.
            guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        // Port 0 would bind a port nobody knows (and a public URL that says 0).
        guard !host.isEmpty, let port = UInt16(portText), port > 0, IPRange(String(host)) != nil || host == "localhost" else { return nil }
        return (host == "localhost" ? "127.0.0.1" : String(host), port)
    }
}
