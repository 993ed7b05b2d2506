import Foundation
import GatehouseCore
import GatehouseTesting
import Testing

/// The published documents cannot drift from the code.
@Suite("Documentation matches the code")
struct DocumentationTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test
    func openAPIListsExactlyTheRoutesOfTheRouter() throws {
        let data = try Data(contentsOf: Self.root.appendingPathComponent("docs/openapi.json"))
        let document = try JSON.parse(Array(data))
        guard case .object(let paths)? = document["paths"] else { Issue.record("no paths"); return }
        var documented = Set<String>()
        for (path, item) in paths {
            guard case .object(let operations) = item else { continue }
            for method in operations.keys where ["get", "put", "post", "patch", "delete"].contains(method) {
                documented.insert("\(method.uppercased()) \(path)")
            }
        }
        let server = try TestServer(.sqlite)
        defer { server.stop() }
        let routed = Set(server.gatehouse.operations.map { "\($0.method) \($0.pattern)" })
        #expect(documented.subtracting(routed).sorted() == [], "documented but not routed")
        #expect(routed.subtracting(documented).sorted() == [], "routed but not documented")
    }

    @Test
    func errorsMarkdownListsEveryCodeWithItsStatus() throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent("docs/errors.md"), encoding: .utf8)
        var documented: [String: Int] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            // "400 / 401": the first is the code's own status, the others are uses the contract gives it.
            guard cells.count >= 2, let status = Int(cells[1].prefix { $0.isNumber }) else { continue }
            documented[cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))] = status
        }
        let inCode = Dictionary(uniqueKeysWithValues: ErrorCode.all.map { ($0.rawValue, $0.status) })
        #expect(documented == inCode)
    }
}
