import Foundation

/// Every sample of a `/metrics` scrape (platform token) by its series (`name{labels}`), and the scrape's text.
public struct MetricsScrape {
    public struct Failed: Error { public let status: Int }
    public let text: String
    public let samples: [String: Double]

    public init(_ server: TestServer) throws {
        let response = try server.request("GET", "/metrics", bearer: TestServer.adminToken)
        guard response.status == 200 else { throw Failed(status: response.status) }
        text = response.text
        var samples: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            samples[String(line[..<space])] = value
        }
        self.samples = samples
    }

    public subscript(_ series: String) -> Double { samples[series] ?? 0 }

    /// The `# TYPE` line of `name`.
    public func type(of name: String) -> String? {
        text.split(separator: "\n").first { $0.hasPrefix("# TYPE \(name) ") }.map { String($0.split(separator: " ")[3]) }
    }
}
