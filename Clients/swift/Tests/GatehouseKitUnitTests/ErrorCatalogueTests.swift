import Foundation
import GatehouseKit
import Testing

/// ``ErrorCode`` and docs/errors.md list the same codes: a code in one and not the other fails.
@Suite("Error catalogue")
struct ErrorCatalogueTests {
    static var documentedCodes: [String] {
        get throws {
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            let text = try String(contentsOf: root.appendingPathComponent("docs/errors.md"), encoding: .utf8)
            return text.split(separator: "\n").compactMap { line -> String? in
                guard line.hasPrefix("| `") else { return nil }
                let rest = line.dropFirst(3)
                guard let end = rest.firstIndex(of: "`") else { return nil }
                return String(rest[..<end])
            }
        }
    }

    @Test
    func everyDocumentedCodeIsACaseAndEveryCaseIsDocumented() throws {
        let documented = try Self.documentedCodes
        #expect(documented.count > 30, "the table was read")
        let known = ErrorCode.documented.map(\.rawValue)
        #expect(Set(documented).subtracting(known).sorted() == [], "in docs/errors.md, not in ErrorCode")
        #expect(Set(known).subtracting(documented).sorted() == [], "in ErrorCode, not in docs/errors.md")
        #expect(Set(known).count == known.count, "no code twice")
    }

    @Test
    func codesRoundTripAndUnknownOnesAreKept() {
        for code in ErrorCode.documented {
            #expect(ErrorCode(rawValue: code.rawValue) == code)
            if case .unknown = code { Issue.record("\(code) is documented but decodes as unknown") }
        }
        #expect(ErrorCode(rawValue: "auth/requires-recent-login") == .requiresRecentLogin)
        #expect(ErrorCode(rawValue: "auth/something-new") == .unknown("auth/something-new"))
        #expect(ErrorCode.unknown("x/y").rawValue == "x/y")
    }
}
