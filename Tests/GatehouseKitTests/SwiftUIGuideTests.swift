import Foundation
import GatehouseKit
import GatehouseTesting
import Testing

/// docs/platforms/swiftui.md leads with GatehouseKit. Its client block and its password and
/// emailed-code block are here line for line (the page's `import` lines aside), and the second
/// runs against the real server; the SwiftUI, Apple and Google blocks, which need Apple's
/// frameworks, are held to GatehouseKit's API as it is: every `gatehouse.` member, type and
/// `AuthEvent` case they name exists in Clients/swift/Sources/GatehouseKit.
@Suite("The SwiftUI guide's GatehouseKit calls")
struct SwiftUIGuideTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The page's ```swift blocks, each as its trimmed, non-empty lines.
    static func pageBlocks() throws -> [[String]] {
        let page = try String(contentsOf: root.appendingPathComponent("docs/platforms/swiftui.md"), encoding: .utf8)
        var blocks: [[String]] = []
        var current: [String]?
        for line in page.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line == "```swift" {
                current = []
            } else if current != nil, line == "```" {
                blocks.append(current!.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
                current = nil
            } else if current != nil {
                current!.append(String(line))
            }
        }
        return blocks
    }

    /// The page's GatehouseKit blocks: those before its REST section.
    static func kitBlocks() throws -> [[String]] {
        Array(try pageBlocks().prefix { !$0.contains("enum GatehouseREST {") })
    }

    /// The page's client, as printed (it names example.com: never called).
    static func pagesClient() -> GatehouseClient {
        let gatehouse = GatehouseClient(
            baseURL: URL(string: "https://auth.example.com")!,
            appKey: "pk_…"
        )
        return gatehouse
    }

    @Test
    func theClientAndPasswordBlocksAreHereAsPrinted() throws {
        let blocks = try Self.kitBlocks()
        #expect(blocks.count >= 4, "the page's GatehouseKit blocks were found")
        let here = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
            .split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        let printed = blocks.filter { block in block.contains { $0.hasPrefix("let gatehouse = GatehouseClient(") || $0.hasPrefix("let signedUp = ") } }
        #expect(printed.count == 2, "the client block and the password block")
        for block in printed {
            let lines = block.filter { !$0.hasPrefix("import ") }
            let found = here.indices.contains { start in start + lines.count <= here.count && Array(here[start..<start + lines.count]) == lines }
            #expect(found, "not in SwiftUIGuideTests.swift as printed:\n\(lines.joined(separator: "\n"))")
        }
        // GatehouseKit's base URL is the server's own URL: GatehouseKit adds /v1.
        #expect(!Self.pagesClient().configuration.baseURL.absoluteString.contains("/v1"))
    }

    @Test
    func thePasswordAndCodeBlockRunsAgainstTheServer() async throws {
        let world = try KitWorld()
        defer { world.stop() }
        let gatehouse = world.client()
        let email = "swiftui.guide@example.com"
        let password = "correct horse battery"
        let firstName = "Sam"
        /// The six digits the user typed: those of the newest sign-in code mailed to `email` (the
        /// verification mail of the sign-up may be delivered after it).
        var code: String {
            while ((try? world.server.gatehouse.outboxWorker.runOnce()) ?? 0) > 0 {}
            let mail = (try? world.sink.messages())?.last { $0.recipients == [email] && $0.header("Subject")?.contains("sign-in code") == true }
            let text = mail.flatMap { try? IndependentMailParser.parse($0.raw).parts.first { $0.contentType == "text/plain" }?.content } ?? ""
            return text.range(of: #"\b[0-9]{6}\b"#, options: .regularExpression).map { String(text[$0]) } ?? ""
        }

        let signedUp = try await gatehouse.signUp(email: email, password: password, firstName: firstName)
        let again = try await gatehouse.signIn(email: email, password: password)

        // Emailed code: the same answer whether or not the address has an account; then the six digits the user typed.
        try await gatehouse.sendSignInCode(to: email)
        let byCode = try await gatehouse.verifySignInCode(email: email, code: code)

        do {
            _ = try await gatehouse.signIn(email: email, password: "not the password")
        } catch let error as GatehouseError where error.code == .invalidCredential {
            // "Wrong email or password": branch on the code, never on the text
        }

        // Ends the session at Gatehouse and forgets it here.
        try await gatehouse.signOut()

        #expect(signedUp.isNewUser && signedUp.user.firstName == "Sam")
        #expect(!again.isNewUser && again.user.id == signedUp.user.id)
        #expect(!byCode.isNewUser && byCode.user.id == signedUp.user.id && byCode.user.emailVerified)
        #expect(gatehouse.currentUser == nil)
    }

    @Test
    func everyGatehouseKitNameOfThePageExists() throws {
        let kit = Self.root.appendingPathComponent("Clients/swift/Sources/GatehouseKit")
        let sources = try FileManager.default.contentsOfDirectory(atPath: kit.path).filter { $0.hasSuffix(".swift") }
            .map { try String(contentsOf: kit.appendingPathComponent($0), encoding: .utf8) }.joined(separator: "\n")
        let text = try Self.kitBlocks().map { $0.joined(separator: "\n") }.joined(separator: "\n")

        let members = Set(text.matches(of: try Regex(#"gatehouse\.([A-Za-z]+)"#)).compactMap { $0.output[1].substring.map(String.init) })
        #expect(members.isSuperset(of: ["signUp", "signIn", "sendSignInCode", "signOut", "authEvents", "currentUser", "signInWithApple", "signInWithGoogle"]), "\(members.sorted())")
        // Declared, and not only as a deprecated alias (whose attribute is the line above).
        let lines = sources.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        for member in members {
            let current = lines.indices.contains { index in
                let line = lines[index].trimmingCharacters(in: .whitespaces)
                let declares = line.hasPrefix("public func \(member)(") || line.hasPrefix("public func \(member)<") || line.hasPrefix("public var \(member):")
                return declares && !(index > 0 && lines[index - 1].contains("deprecated"))
            }
            #expect(current, "gatehouse.\(member) is not a current GatehouseKit call")
        }
        for type in ["GatehouseClient", "GatehouseSession", "AppleNonce", "SignInResult", "GatehouseError", "User"] where text.contains(type) {
            #expect(sources.contains(try Regex(#"public (final class|struct|enum|actor) \#(type)\b"#)), "\(type) is not GatehouseKit's")
        }
        // The AuthEvent cases the SwiftUI block switches over (`case .signedIn(let user):`).
        let cases = Set(text.matches(of: try Regex(#"case \.([A-Za-z]+)(\(let [A-Za-z]+\))?:"#)).compactMap { $0.output[1].substring.map(String.init) })
        #expect(cases == ["initialSession", "signedIn", "tokenRefreshed", "userUpdated", "signedOut"], "\(cases.sorted())")
        for name in cases { #expect(sources.contains("case \(name)"), "AuthEvent.\(name) is not GatehouseKit's") }
        // Names the page uses beside the calls.
        for name in ["hashed", "isNewUser", "code"] { #expect(sources.contains("public let \(name):") || sources.contains("public var \(name):"), "\(name)") }
    }
}
