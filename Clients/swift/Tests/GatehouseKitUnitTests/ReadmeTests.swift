import Foundation
import Testing

/// Every ```swift block of README.md appears, line for line (indentation aside), in
/// Sources/GatehouseKitReadme/ReadmeSnippets.swift, which the build compiles.
@Suite("README snippets")
struct ReadmeTests {
    static let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func trimmedLines(_ text: some StringProtocol) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    @Test
    func everySwiftSnippetIsCompiled() throws {
        let readme = try String(contentsOf: Self.package.appendingPathComponent("README.md"), encoding: .utf8)
        let compiled = Self.trimmedLines(
            try String(contentsOf: Self.package.appendingPathComponent("Sources/GatehouseKitReadme/ReadmeSnippets.swift"), encoding: .utf8))
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
            let found = compiled.indices.contains { start in
                start + snippet.count <= compiled.count && Array(compiled[start..<start + snippet.count]) == snippet
            }
            #expect(found, "not in ReadmeSnippets.swift:\n\(snippet.joined(separator: "\n"))")
        }
    }
}
