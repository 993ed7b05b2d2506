import Foundation
import Testing

/// Every ```swift block of README.md and of the GatehouseKit snippets of the docs/ guides
/// appears, line for line (indentation aside), in one of the files of
/// Sources/GatehouseKitReadme, which the build compiles.
@Suite("README snippets")
struct ReadmeTests {
    static let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func trimmedLines(_ text: some StringProtocol) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// The lines of each compiled snippet file.
    static func compiled() throws -> [[String]] {
        try ["ReadmeSnippets.swift", "MFASnippets.swift"].map {
            trimmedLines(try String(contentsOf: package.appendingPathComponent("Sources/GatehouseKitReadme/\($0)"), encoding: .utf8))
        }
    }

    static func contains(_ files: [[String]], _ snippet: [String]) -> Bool {
        files.contains { compiled in
            compiled.indices.contains { start in
                start + snippet.count <= compiled.count && Array(compiled[start..<start + snippet.count]) == snippet
            }
        }
    }

    static func swiftBlocks(_ text: String) -> [[String]] {
        var snippets: [[String]] = []
        var current: [String]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line == "```swift" {
                current = []
            } else if current != nil, line == "```" {
                snippets.append(trimmedLines(current!.joined(separator: "\n")))
                current = nil
            } else if current != nil {
                current!.append(String(line))
            }
        }
        return snippets
    }

    /// docs/mfa-and-passkeys.md: its Swift is GatehouseKit's.
    @Test
    func theSecondFactorGuidesSwiftIsCompiled() throws {
        let guide = try String(contentsOf: Self.package.appendingPathComponent("../../docs/mfa-and-passkeys.md").standardizedFileURL, encoding: .utf8)
        let snippets = Self.swiftBlocks(guide)
        #expect(snippets.count >= 5, "the guide's snippets were found")
        let compiled = try Self.compiled()
        for snippet in snippets {
            #expect(Self.contains(compiled, snippet), "not in Sources/GatehouseKitReadme:\n\(snippet.joined(separator: "\n"))")
        }
    }

    @Test
    func everySwiftSnippetIsCompiled() throws {
        let readme = try String(contentsOf: Self.package.appendingPathComponent("README.md"), encoding: .utf8)
        let compiled = try Self.compiled()
        var snippets: [[String]] = []
        var current: [String]?
        for line in readme.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line == "```swift" {
                current = []
            } else if current != nil, line == "```" {
                snippets.append(Self.trimmedLines(current!.joined(separator: "\n")))
                current = nil
            } else if current != nil {
                current!.append(String(line))
            }
        }
        #expect(snippets.count >= 10, "the README's snippets were found")
        for snippet in snippets {
            #expect(Self.contains(compiled, snippet), "not in Sources/GatehouseKitReadme:\n\(snippet.joined(separator: "\n"))")
        }
    }
}
