import Foundation
import GatehouseAPI
import GatehouseApp
import GatehouseCore
import GatehouseCrypto
import GatehouseHTTP
import GatehouseTesting
import Testing

/// The guides under docs/ run as written: every command of the first-user page against the built
/// server, and every backend verification program against tokens the server issued.
@Suite("Guides run as written")
struct GuidesTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    // MARK: docs/first-user.md

    /// Each `sh` block of the page, in order, in one shell, against `gatehouse serve` started as
    /// scripts/quickstart starts it (the demo app from Tenants/, mail to the log). The only
    /// changes are those the page asks of its reader: `GH=` (where the server listens),
    /// `VERIFY_CODE=` and `CODE=` (codes read from the server's log); and the one file it asks the reader to
    /// save (verify.mjs, from verifying-tokens.md). Each block's output is compared with the
    /// answer the page shows after it.
    @Test
    func theFirstUserPageRunsAsWritten() throws {
        let page = try Self.read("docs/first-user.md")
        // The page shows the code as the server's log line holds it (checked against the log below).
        #expect(page.matches(of: try Regex(#":\\n\\n[0-9]{6}\\n\\nThe code expires"#)).count == 2, "the two mails' codes as the log shows them")
        let blocks = Markdown.fencedBlocks(page)
        let steps = try Markdown.steps(blocks)
        #expect(steps.first?.command == "scripts/quickstart", "the page starts the server with the README's command")
        let quickstart = try Self.read("scripts/quickstart")
        #expect(quickstart.contains("GATEHOUSE_TENANTS_DIR=\"${GATEHOUSE_TENANTS_DIR:-$PWD/Tenants}\"") && quickstart.contains("gatehouse serve"))

        let folder = NSTemporaryDirectory() + "gatehouse-first-user-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (server, base) = try ServerProcess.withDemoApp(in: folder)
        defer { server.stop() }
        try server.waitUntilReady(base)

        let shell = try Shell(folder: folder)
        defer { shell.stop() }
        var ran = 0
        var substituted: [String] = []
        for step in steps.dropFirst() {
            var (command, setsGH) = Self.replacingAssignment("GH", in: step.command, with: base)
            if setsGH { substituted.append("GH") }
            for (variable, subject) in [("VERIFY_CODE", "Verify your email for Gatehouse Demo"), ("CODE", "Your Gatehouse Demo sign-in code")]
            where command.split(separator: "\n").contains(where: { $0.hasPrefix("\(variable)=") }) {
                let code = try #require(try server.newestMailedCode(to: "ada@example.com", subject: subject))
                // As the page tells the reader to find it: in the raw JSON line of the mail, between two `\n\n`.
                let raw = server.log.split(separator: "\n").last { $0.contains(#""msg":"mail""#) && $0.contains(#"Subject: \#(subject)\n"#) }
                #expect(raw?.contains(#":\n\n\#(code)\n\nThe code expires"#) == true, "the \(variable) mail's log line: \(raw ?? "none")")
                command = Self.replacingAssignment(variable, in: command, with: code).0
                substituted.append(variable)
            }
            if command.contains("node verify.mjs") {
                let program = try #require(try Self.program("js", in: "docs/verifying-tokens.md"))
                try program.write(toFile: folder + "/verify.mjs", atomically: true, encoding: .utf8)
            }
            let output = try shell.run(command)
            let expected = step.expected.text.replacingOccurrences(of: "http://127.0.0.1:8080", with: base)
            let mismatch = try OutputMatcher.mismatch(expected: expected, actual: output, kind: step.expected.info)
            #expect(mismatch == nil, "step \(ran + 1):\n\(step.command)\n\(mismatch ?? "")\nstderr: \(shell.errors)")
            if mismatch != nil { break }
            ran += 1
        }
        #expect(ran == steps.count - 1)
        #expect(ran >= 12)
        #expect(substituted == ["GH", "VERIFY_CODE", "CODE"])
    }

    /// scripts/quickstart tells the address the server listens on (GATEHOUSE_LISTEN, a wildcard
    /// host reached on loopback), not 8080 whatever the setting; `--address` prints it and exits
    /// before installing or building anything.
    @Test
    func quickstartTellsTheAddressOfGatehouseListen() throws {
        func address(_ listen: String?) throws -> String {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/bash")
            process.arguments = [Self.root.appendingPathComponent("scripts/quickstart").path, "--address"]
            var environment = ["PATH": "/usr/bin:/bin"]
            if let listen { environment["GATEHOUSE_LISTEN"] = listen }
            process.environment = environment
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
            return text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(try address(nil) == "http://127.0.0.1:8080")
        #expect(try address("127.0.0.1:9123") == "http://127.0.0.1:9123")
        #expect(try address("0.0.0.0:9124") == "http://127.0.0.1:9124")
        #expect(try address("[::]:9125") == "http://[::1]:9125")
        #expect(try address("[::1]:9126") == "http://[::1]:9126")
        let script = try Self.read("scripts/quickstart")
        #expect(!script.contains("8080/"), "a fixed address in the script's message")
        #expect(script.contains("curl -s $url/v1/app"))
    }

    // MARK: docs/verifying-tokens.md

    enum Language: String, CaseIterable, CustomStringConvertible, Sendable {
        case node = "js", python, go, java
        var description: String { rawValue }
    }

    /// Each program of the page accepts real tokens of an RS256 and an ES256 app, and refuses a
    /// token that differs in one respect: each forged token is signed with the app's own key
    /// unless the signature is what is wrong, and a control token made the same way (nothing
    /// wrong with it) must pass, so a refusal is for the reason the case names.
    @Test(arguments: Language.allCases)
    func backendProgramsAcceptRealTokensAndRefuseForgedOnes(_ language: Language) throws {
        let folder = NSTemporaryDirectory() + "gatehouse-verify-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let program = try #require(try Self.program(language.rawValue, in: "docs/verifying-tokens.md"), "no \(language) block")
        let verifier = try BackendVerifier(language, source: program, folder: folder)

        let server = try PublicServer()
        defer { server.stop() }
        for algorithm in ["RS256", "ES256"] {
            let app = try server.createApp(["name": .string("Backend \(algorithm)"), "signing_algorithm": .string(algorithm)])
            let other = try server.createApp(["name": "Another app", "signing_algorithm": .string(algorithm)])
            let issuer = "\(server.baseURL)/v1/apps/\(app.id)"
            func verify(_ token: String) -> Result<JSON, GuideFailure> {
                verifier.run(token: token, issuer: issuer, appID: app.id)
            }

            // A real token, from a real sign-up.
            let session = try server.signUp(app, email: "backend-\(algorithm.lowercased())@example.com")
            let token = try #require(session["access_token"]?.stringValue)
            let userID = try #require(session["user"]?["id"]?.stringValue)
            let claims = try verify(token).get()
            #expect(claims["sub"] == .string(userID), "\(language) \(algorithm)")
            #expect(claims["aud"] == .string(app.id))
            #expect(claims["iss"] == .string(issuer))
            #expect(claims["sid"]?.stringValue?.hasPrefix("ses_") == true)

            // Tokens made with the app's own key, one thing wrong in each.
            let appID = try #require(AppID(parsing: app.id))
            let context = try #require(try server.gatehouse.directory.app(id: appID))
            let now = Int64(Date().timeIntervalSince1970)
            let good: [String: JSON] = [
                "iss": .string(issuer), "aud": .string(app.id), "sub": .string(userID), "sid": "ses_forged", "iat": .int(now),
                "exp": .int(now + 600), "auth_time": .int(now), "amr": ["pwd"], "email_verified": false,
            ]
            func signed(_ claims: [String: JSON], type: String? = "at+jwt", kid: String? = nil) throws -> String {
                try JWT.sign(payload: JSON.object(claims).serialized(), key: context.signingKey, kid: kid ?? context.signingKeyID, type: type)
            }
            func changed(_ name: String, _ value: JSON) -> [String: JSON] {
                var claims = good
                claims[name] = value
                return claims
            }
            let control = try signed(good)
            #expect(try verify(control).get()["sid"] == "ses_forged", "\(language) \(algorithm): the forging itself works")

            let parts = token.split(separator: ".").map(String.init)
            let otherUser = Base64URL.encode(JSON.object(changed("sub", "usr_someone_else")).serialized())
            let otherSession = try server.signUp(other, email: "other@example.com")
            let refusals: [(String, String)] = [
                ("tampered claims", "\(parts[0]).\(otherUser).\(parts[2])"),
                ("tampered signature", "\(parts[0]).\(parts[1]).\(Self.flippingLastCharacter(parts[2]))"),
                ("another app's token", try #require(otherSession["access_token"]?.stringValue)),
                ("wrong audience", try signed(changed("aud", .string(other.id)))),
                ("wrong issuer", try signed(changed("iss", .string("\(server.baseURL)/v1/apps/\(other.id)")))),
                ("expired", try signed(changed("exp", .int(now - 60)))),
                ("no exp", try signed(good.filter { $0.key != "exp" })),
                ("typ JWT", try signed(good, type: "JWT")),
                ("no typ", try signed(good, type: nil)),
                ("unknown kid", try signed(good, kid: "not-a-published-kid")),
                ("alg none", Self.unsigned(good, kid: context.signingKeyID)),
                ("not a JWT", "not-a-token"),
            ]
            for (name, forged) in refusals {
                switch verify(forged) {
                case .success(let claims): Issue.record("\(language) \(algorithm) accepted a token with \(name): \(claims.serializedString)")
                case .failure(let failure): #expect(failure.description.contains("refused"), "\(language) \(algorithm) \(name): \(failure.description)")
                }
            }
        }
    }

    // MARK: docs/platforms/swiftui.md

    /// The SwiftUI guide's URLSession helper and its password, emailed-code, refresh and
    /// sign-out calls, built with swiftc (Linux: FoundationNetworking added) and run against the
    /// built server with the demo app. The page's variables (`email`, `password`, `firstName`)
    /// are given values, and `code`, "the six digits the user typed", is read from the server's
    /// log when the program asks for it. The epilogue prints what the calls answered.
    @Test
    func theSwiftCallsRunAgainstTheServer() throws {
        let folder = NSTemporaryDirectory() + "gatehouse-swift-guide-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let blocks = Markdown.fencedBlocks(try Self.read("docs/platforms/swiftui.md")).filter { $0.info == "swift" }
        // The REST helper and the calls after it (the page leads with GatehouseKit: SwiftUIGuideTests).
        let rest = try #require(blocks.firstIndex { $0.text.contains("enum GatehouseREST {") }, "no REST helper on the page")
        guard rest + 1 < blocks.count else { Issue.record("no REST calls after the helper"); return }

        let (server, base) = try ServerProcess.withDemoApp(in: folder)
        defer { server.stop() }

        var helper = blocks[rest].text
        // The page's baseURL is the server's own URL, as GatehouseKit's is: no /v1 in it.
        #expect(helper.contains("    static let baseURL = URL(string: \"https://auth.example.com\")!"))
        helper = try Self.replacingLine(starting: "    static let baseURL = ", in: helper, with: "    static let baseURL = URL(string: \"\(base)\")!")
        helper = try Self.replacingLine(starting: "    static let appKey = ", in: helper, with: "    static let appKey = \"pk_demo_gatehouse_local_only\"")
        let program = Self.swiftPrelude + "\n" + helper + "\n\n" + blocks[rest + 1].text + "\n\n" + Self.swiftEpilogue
        try program.write(toFile: folder + "/main.swift", atomically: true, encoding: .utf8)
        _ = try ExternalProgram.run("/usr/bin/env", ["swiftc", "-swift-version", "6", "-o", folder + "/guide", folder + "/main.swift"])
        try server.waitUntilReady(base)

        let output = try ExternalProgram.run("/usr/bin/env", ["GUIDE_SERVER_LOG=\(folder)/server.log", folder + "/guide"])
        #expect(output.split(separator: "\n") == [
            "signed up: new user true", "signed in: new user false", "by code: new user false",
            "refreshed: 900 s, a new refresh token: true", "wrong password: 400 auth/invalid-credential",
            "after sign-out: 401 auth/invalid-refresh-token",
        ], "\(output)")
    }

    static let swiftPrelude = #"""
        import Foundation
        #if canImport(FoundationNetworking)
        import FoundationNetworking
        #endif

        let email = "swift.guide@example.com"
        let password = "correct horse battery staple"
        let firstName = "Sam"
        /// The six digits the user typed: the newest sign-in code in the server's log.
        var code: String {
            let log = ProcessInfo.processInfo.environment["GUIDE_SERVER_LOG"]!
            for _ in 0..<100 {
                let lines = (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n") ?? []
                let mails = lines.compactMap { line -> String? in
                    guard let entry = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                        entry["msg"] as? String == "mail", let text = entry["message"] as? String,
                        text.contains("To: <\(email)>"), text.contains("sign-in code")
                    else { return nil }
                    return text
                }
                if let digits = mails.last?.components(separatedBy: "\n").first(where: { $0.count == 6 && $0.allSatisfy(\.isNumber) }) {
                    return digits
                }
                usleep(100_000)
            }
            fatalError("no code in the server's log")
        }
        """#

    static let swiftEpilogue = #"""
        print("signed up: new user \(session.isNewUser)")
        print("signed in: new user \(again.isNewUser)")
        print("by code: new user \(byCode.isNewUser)")
        print("refreshed: \(fresh.expiresIn) s, a new refresh token: \(fresh.refreshToken != byCode.refreshToken)")
        do {
            let _: Session = try await GatehouseREST.post("/v1/auth/signin", ["email": email, "password": "not the password"])
        } catch let problem as GatehouseProblem {
            print("wrong password: \(problem.status) \(problem.code)")
        }
        do {
            let _: Session = try await GatehouseREST.post("/v1/auth/refresh", ["refresh_token": fresh.refreshToken])
        } catch let problem as GatehouseProblem {
            print("after sign-out: \(problem.status) \(problem.code)")
        }
        """#

    // MARK: docs/platforms/react-native.md

    /// The React Native guide's fetch helper and its password, emailed-code, refresh and
    /// sign-out calls, in Node against the built server with the demo app (React Native's fetch
    /// is the same API). As for the Swift guide: the page's variables get values, `code` is read
    /// from the server's log when asked for, and `storedRefreshToken` is the newest session's.
    @Test
    func theReactNativeCallsRunAgainstTheServer() throws {
        let folder = NSTemporaryDirectory() + "gatehouse-rn-guide-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let blocks = Markdown.fencedBlocks(try Self.read("docs/platforms/react-native.md")).filter { $0.info == "js" }
        #expect(blocks.count == 5)
        guard blocks.count >= 2 else { return }

        let (server, base) = try ServerProcess.withDemoApp(in: folder)
        defer { server.stop() }

        var helper = blocks[0].text
        helper = try Self.replacingLine(starting: "const BASE_URL = ", in: helper, with: "const BASE_URL = '\(base)/v1';")
        helper = try Self.replacingLine(starting: "const APP_KEY = ", in: helper, with: "const APP_KEY = 'pk_demo_gatehouse_local_only';")
        let program = Self.javaScriptPrelude + "\n" + helper + "\n\n" + blocks[1].text + "\n\n" + Self.javaScriptEpilogue
        try program.write(toFile: folder + "/guide.mjs", atomically: true, encoding: .utf8)
        try server.waitUntilReady(base)

        let output = try ExternalProgram.run("/usr/bin/env", ["GUIDE_SERVER_LOG=\(folder)/server.log", "/usr/bin/node", folder + "/guide.mjs"])
        #expect(output.split(separator: "\n") == [
            "signed up: new user true", "signed in: new user false", "by code: new user false",
            "refreshed: 900 s, a new refresh token: true", "wrong password: GatehouseProblem 400 auth/invalid-credential",
            "after sign-out: GatehouseProblem 401 auth/invalid-refresh-token",
        ], "\(output)")
    }

    static let javaScriptPrelude = #"""
        import { readFileSync } from 'node:fs';

        const email = 'rn.guide@example.com';
        const password = 'correct horse battery staple';
        const firstName = 'Rae';
        const pause = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
        // The six digits the user typed: the newest sign-in code in the server's log.
        Object.defineProperty(globalThis, 'code', { get() {
          for (let attempt = 0; attempt < 100; attempt++) {
            const mails = readFileSync(process.env.GUIDE_SERVER_LOG, 'utf8').split('\n').flatMap((line) => {
              try {
                const entry = JSON.parse(line);
                return entry.msg === 'mail' && entry.message.includes(`To: <${email}>`) && entry.message.includes('sign-in code') ? [entry.message] : [];
              } catch { return []; }
            });
            const digits = mails.at(-1)?.split('\n').find((l) => /^[0-9]{6}$/.test(l));
            if (digits) return digits;
            pause(100);
          }
          throw new Error("no code in the server's log");
        } });
        // The refresh token the app stored: the newest session's.
        Object.defineProperty(globalThis, 'storedRefreshToken', { get: () => byCode.refresh_token });
        """#

    static let javaScriptEpilogue = #"""
        console.log(`signed up: new user ${session.is_new_user}`);
        console.log(`signed in: new user ${signedIn.is_new_user}`);
        console.log(`by code: new user ${byCode.is_new_user}`);
        console.log(`refreshed: ${fresh.expires_in} s, a new refresh token: ${fresh.refresh_token !== byCode.refresh_token}`);
        for (const [what, call] of [
          ['wrong password', () => post('auth/signin', { email, password: 'not the password' })],
          ['after sign-out', () => post('auth/refresh', { refresh_token: fresh.refresh_token })],
        ]) {
          try {
            await call();
            console.log(`${what}: accepted`);
          } catch (error) {
            console.log(`${what}: ${error.constructor.name} ${error.status} ${error.code}`);
          }
        }
        """#

    // MARK: docs/platforms/web.md

    /// The page's module in Node, the browser's parts (location, sessionStorage, Google's GIS
    /// script) stood in for by a small harness, against the server with fake Google and Apple:
    /// Google's button callback signs a user in, and the Apple web flow goes from the page's
    /// `authorize` URL through Gatehouse and the fake Apple back to the page, which exchanges
    /// the login code. Only the page's three constants change (the page asks the reader to).
    @Test
    func theWebPageSignsInWithGoogleAndApple() throws {
        let world = try ProviderWorld(.sqlite)
        defer { world.stop() }
        let folder = NSTemporaryDirectory() + "gatehouse-web-page-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }

        let blocks = Markdown.fencedBlocks(try Self.read("docs/platforms/web.md")).filter { $0.info == "js" }
        #expect(blocks.count == 3)
        var module = blocks.map(\.text).joined(separator: "\n\n")
        module = try Self.replacingConstant("GATEHOUSE", in: module, with: world.server.baseURL)
        module = try Self.replacingConstant("APP_KEY", in: module, with: world.app.appKey)
        module = try Self.replacingConstant("REDIRECT_URI", in: module, with: ProviderWorld.redirect)
        try module.write(toFile: folder + "/gatehouse-web.mjs", atomically: true, encoding: .utf8)
        try Self.browserHarness.write(toFile: folder + "/harness.mjs", atomically: true, encoding: .utf8)
        let page = try Shell(folder: folder, program: "/usr/bin/node", arguments: [folder + "/harness.mjs"])
        defer { page.stop() }
        func ask(_ words: String...) throws -> JSON {
            let line = try page.ask(JSON.array(words.map(JSON.string)).serializedString)
            return try JSON.parse(Array(line.utf8))
        }

        // Google: the button's callback gets an ID token carrying the nonce the page gave GIS.
        let setup = try ask("google-setup", ProviderWorld.googleClient)
        #expect(setup["client_id"] == .string(ProviderWorld.googleClient))
        let nonce = try #require(setup["nonce"]?.stringValue)
        #expect(nonce.count >= 40)
        let idToken = world.google.mintIDToken(sub: "web.google.1", aud: ProviderWorld.googleClient, email: "gwen@example.com", nonce: nonce)
        let google = try ask("google-callback", idToken)
        #expect(google["session"]?["is_new_user"] == true, "\(google.serializedString) \(page.errors)")
        #expect(google["session"]?["user"]?["identities"] == ["google"])
        #expect(google["session"]?["user"]?["email"] == "gwen@example.com")

        // Apple: the page leaves for Gatehouse's authorize URL…
        let start = try ask("apple-start")
        let url = try #require(start["url"]?.stringValue)
        #expect(url.hasPrefix("\(world.server.baseURL)/v1/auth/oauth/apple/authorize?"))
        let authorize = try TestHTTPClient.send("GET", url)
        #expect(authorize.status == 302, "\(authorize.text)")
        let toApple = try #require(authorize.header("Location").flatMap { URLComponents(string: $0) })
        #expect(toApple.host == URLComponents(string: world.apple.baseURL)?.host)
        let flowState = try #require(toApple.queryItems?.first { $0.name == "state" }?.value)
        let flowNonce = try #require(toApple.queryItems?.first { $0.name == "nonce" }?.value)
        let cookie = try #require(authorize.header("Set-Cookie")).prefix { $0 != ";" }
        // …Apple (the fake) authenticates the user and posts back to Gatehouse…
        let code = world.apple.issueCode(
            for: FakeAppleUser(sub: "web.apple.1", email: "ada.web@example.com", nonce: flowNonce), clientID: ProviderWorld.servicesID,
            redirectURI: "\(TestServer.publicURL)/v1/auth/oauth/apple/callback")
        let form = "state=\(flowState)&code=\(code.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
        let back = try world.server.request(
            "POST", "/v1/auth/oauth/apple/callback", headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Cookie", String(cookie))],
            body: Array(form.utf8))
        #expect(back.status == 303, "\(back.text)")
        // …which sends the browser to the page's callback, where the page exchanges the code.
        let landing = try #require(back.header("Location").flatMap { URLComponents(string: $0) })
        #expect("\(landing.scheme ?? "")://\(landing.host ?? "")\(landing.path)" == ProviderWorld.redirect)
        let apple = try ask("apple-finish", "?" + (landing.percentEncodedQuery ?? ""))
        let session = try #require(apple["session"], "\(apple.serializedString) \(page.errors)")
        #expect(session["is_new_user"] == true)
        #expect(session["user"]?["identities"] == ["apple"])
        #expect(apple["history"] == "/auth/callback", "the code leaves the address bar")
        let me = try world.server.request("GET", "/v1/me", appKey: world.app.appKey, bearer: try #require(session["access_token"]?.stringValue))
        #expect(me.data?["email"] == "ada.web@example.com")

        // The code was single-use, and the page's errors carry Gatehouse's code.
        let loginCode = try #require(landing.queryItems?.first { $0.name == "login_code" }?.value)
        let again = try ask("post", "auth/exchange", JSON.object(["login_code": .string(loginCode)]).serializedString)
        #expect(again["error"]?["name"] == "GatehouseProblem")
        #expect(again["error"]?["status"] == 400)
        #expect(again["error"]?["code"] == "auth/invalid-login-code")
        // A callback whose state is not the page's is refused before anything is sent.
        let forged = try ask("apple-finish", "?login_code=x&state=someone-elses")
        #expect(forged["error"]?["message"] == "state mismatch")
    }

    /// Stands in for the browser around the page's module: `location`, `sessionStorage`,
    /// `history`, Web Crypto (global from Node 19; Node 18 has it as `webcrypto`) and Google's
    /// GIS script. Reads one JSON array per line (a command and its arguments), answers one
    /// JSON line.
    static let browserHarness = """
        import { webcrypto } from 'node:crypto';
        import { createInterface } from 'node:readline';

        if (!globalThis.crypto) globalThis.crypto = webcrypto;
        const storage = new Map();
        globalThis.sessionStorage = {
          getItem: (key) => (storage.has(key) ? storage.get(key) : null),
          setItem: (key, value) => storage.set(key, String(value)),
          removeItem: (key) => storage.delete(key),
        };
        const browser = { assigned: null, replaced: null, gis: null, button: null };
        globalThis.location = { search: '', pathname: '/auth/callback', assign: (url) => { browser.assigned = url; } };
        globalThis.history = { replaceState: (_state, _title, url) => { browser.replaced = url; } };
        globalThis.google = { accounts: { id: {
          initialize: (config) => { browser.gis = config; },
          renderButton: (element, options) => { browser.button = options; },
        } } };

        const page = await import('./gatehouse-web.mjs');
        let googleSession = null;
        for await (const line of createInterface({ input: process.stdin })) {
          const [command, ...args] = JSON.parse(line);
          let answer;
          try {
            switch (command) {
              case 'google-setup':
                googleSession = new Promise((resolve) => page.setUpGoogle(args[0], {}, resolve));
                answer = { client_id: browser.gis.client_id, nonce: browser.gis.nonce, button: browser.button };
                break;
              case 'google-callback':
                browser.gis.callback({ credential: args[0] });
                answer = { session: await googleSession };
                break;
              case 'apple-start':
                await page.startAppleSignIn();
                answer = { url: browser.assigned };
                break;
              case 'apple-finish':
                location.search = args[0];
                answer = { session: await page.finishAppleSignIn(), history: browser.replaced };
                break;
              case 'post':
                answer = { data: await page.post(args[0], JSON.parse(args[1]), args[2]) };
                break;
              default:
                answer = { error: { message: `unknown command ${command}` } };
            }
          } catch (error) {
            answer = { error: { name: error.constructor.name, message: error.message, status: error.status ?? null, code: error.code ?? null } };
          }
          console.log(JSON.stringify(answer));
        }
        """

    // MARK: helpers

    static func read(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// The first fenced block of `language` in the page.
    static func program(_ language: String, in path: String) throws -> String? {
        Markdown.fencedBlocks(try read(path)).first { $0.info == language }?.text
    }

    /// `NAME=value   # comment` → `NAME=<value>   # comment`, and whether the block set `NAME`.
    static func replacingAssignment(_ name: String, in command: String, with value: String) -> (String, Bool) {
        var found = false
        let lines = command.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            guard line.hasPrefix("\(name)=") else { return String(line) }
            found = true
            let comment = line.firstRange(of: "  #").map { String(line[$0.lowerBound...]) } ?? ""
            return "\(name)=\(value)\(comment)"
        }
        return (lines.joined(separator: "\n"), found)
    }

    /// The one line that starts with `prefix`, replaced by `line`.
    static func replacingLine(starting prefix: String, in text: String, with line: String) throws -> String {
        var count = 0
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { current -> String in
            guard current.hasPrefix(prefix) else { return String(current) }
            count += 1
            return line
        }
        guard count == 1 else { throw GuideFailure("\(count) lines start with \(prefix)") }
        return lines.joined(separator: "\n")
    }

    /// `export const NAME = '…';` → `export const NAME = '<value>';`, exactly once.
    static func replacingConstant(_ name: String, in module: String, with value: String) throws -> String {
        var count = 0
        let lines = module.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            guard line.hasPrefix("export const \(name) = '") else { return String(line) }
            count += 1
            return "export const \(name) = '\(value)';"
        }
        guard count == 1 else { throw GuideFailure("the page sets \(name) \(count) times") }
        return lines.joined(separator: "\n")
    }

    static func flippingLastCharacter(_ text: String) -> String {
        // Not the very last character: its low bits may be padding that decoders ignore.
        var characters = Array(text)
        let index = characters.count - 3
        characters[index] = characters[index] == "A" ? "B" : "A"
        return String(characters)
    }

    /// `alg: none`, no signature: what a forger sends to a verifier that trusts the header.
    static func unsigned(_ claims: [String: JSON], kid: String) -> String {
        let header: JSON = ["alg": "none", "kid": .string(kid), "typ": "at+jwt"]
        return "\(Base64URL.encode(header.serialized())).\(Base64URL.encode(JSON.object(claims).serialized()))."
    }
}

/// Fenced code blocks of a Markdown page, and the page's steps: a command and the answer shown
/// after it.
enum Markdown {
    struct Block: Equatable {
        let info: String
        let text: String
    }

    struct Step {
        let command: String
        let expected: Block
    }

    static func fencedBlocks(_ page: String) -> [Block] {
        var blocks: [Block] = []
        var info: String?
        var lines: [Substring] = []
        for line in page.split(separator: "\n", omittingEmptySubsequences: false) {
            if let open = info {
                if line == "```" {
                    blocks.append(Block(info: open, text: lines.joined(separator: "\n")))
                    info = nil
                    lines = []
                } else {
                    lines.append(line)
                }
            } else if line.hasPrefix("```") {
                info = line.dropFirst(3).trimmingCharacters(in: .whitespaces)
            }
        }
        return blocks
    }

    /// Every `sh` block, each followed by its answer (a `json` or `text` block), but the first
    /// (the server's start), which has none.
    static func steps(_ blocks: [Block]) throws -> [Step] {
        var steps: [Step] = []
        var index = 0
        while index < blocks.count {
            let block = blocks[index]
            guard block.info == "sh" else {
                throw GuideFailure( "a \(block.info) block follows no command: \(block.text)")
            }
            if steps.isEmpty {
                steps.append(Step(command: block.text, expected: Block(info: "text", text: "")))
                index += 1
                continue
            }
            guard index + 1 < blocks.count, ["json", "text"].contains(blocks[index + 1].info) else {
                throw GuideFailure( "the command shows no answer: \(block.text)")
            }
            steps.append(Step(command: block.text, expected: blocks[index + 1]))
            index += 2
        }
        return steps
    }
}

/// Compares a command's output with the answer a page shows, where `…` in a string stands for
/// any non-empty text. JSON answers are compared as values (any layout, any key order, one value
/// or several in a row); text answers line by line.
enum OutputMatcher {
    static func mismatch(expected: String, actual: String, kind: String) throws -> String? {
        if kind == "json" {
            let want = try values(expected)
            let got: [JSON]
            do { got = try values(actual) } catch { return "not JSON: \(actual)" }
            guard want.count == got.count else { return "expected \(want.count) JSON values, got \(got.count): \(actual)" }
            for (w, g) in zip(want, got) where !matches(w, g) {
                return "expected \(w.serializedString)\n     got \(g.serializedString)"
            }
            return nil
        }
        let want = expected.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        let got = actual.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        guard want.count == got.count, zip(want, got).allSatisfy({ matches(pattern: $0, $1) }) else {
            return "expected:\n\(expected)\ngot:\n\(actual)"
        }
        return nil
    }

    /// One or more JSON values, one after the other (as jq prints them), read by jq itself.
    static func values(_ text: String) throws -> [JSON] {
        let compact = try ExternalProgram.run("/usr/bin/jq", ["-c", "."], stdin: Array(text.utf8))
        return try compact.split(separator: "\n").map { try JSON.parse(Array($0.utf8)) }
    }

    static func matches(_ expected: JSON, _ actual: JSON) -> Bool {
        switch (expected, actual) {
        case (.string(let pattern), .string(let text)): matches(pattern: pattern, text)
        case (.array(let w), .array(let g)): w.count == g.count && zip(w, g).allSatisfy { matches($0, $1) }
        case (.object(let w), .object(let g)): Set(w.keys) == Set(g.keys) && w.allSatisfy { key, value in matches(value, g[key]!) }
        default: expected == actual
        }
    }

    static func matches(pattern: String, _ text: String) -> Bool {
        let pieces = pattern.components(separatedBy: "…")
        guard pieces.count > 1 else { return pattern == text }
        guard text.hasPrefix(pieces[0]), text.count > pieces.reduce(0, { $0 + $1.count }) else { return false }
        var rest = text.dropFirst(pieces[0].count)
        for piece in pieces.dropFirst().dropLast() {
            guard let range = rest.dropFirst().range(of: piece) else { return false }
            rest = rest[range.upperBound...]
        }
        return rest.count > pieces.last!.count && rest.hasSuffix(pieces.last!)
    }
}

/// One bash session that keeps its variables from block to block, as a reader's terminal does.
final class Shell {
    let process = Process()
    let input = Pipe()
    let output = Pipe()
    let errorPath: String
    private var pending = Data()

    init(folder: String, program: String = "/bin/bash", arguments: [String] = ["--noprofile", "--norc"]) throws {
        errorPath = folder + "/\(URL(fileURLWithPath: program).lastPathComponent).stderr"
        _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: folder)
        let environment = ProcessInfo.processInfo.environment
        process.environment = ["PATH": environment["PATH"] ?? "/usr/bin:/bin", "HOME": folder, "LANG": "C.UTF-8"]
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle(forWritingAtPath: errorPath)
        try process.run()
    }

    var errors: String { (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "" }

    /// Runs `commands` and returns what they printed; gives up after `timeout` seconds.
    func run(_ commands: String, timeout: Double = 60) throws -> String {
        let marker = "__gatehouse_guide_step_done_\(UUID().uuidString)__"
        input.fileHandleForWriting.write(Data("\(commands)\nprintf '\\n%s\\n' '\(marker)'\n".utf8))
        let watchdog = DispatchWorkItem { [process] in if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
        defer { watchdog.cancel() }
        var buffer = Data()
        while true {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { throw GuideFailure( "the shell ended (timeout?): \(String(decoding: buffer, as: UTF8.self))") }
            buffer.append(chunk)
            let text = String(decoding: buffer, as: UTF8.self)
            if let range = text.range(of: "\n\(marker)\n") { return String(text[..<range.lowerBound]) }
        }
    }

    /// Sends one line to a program that answers each line with one line; returns the answer.
    func ask(_ line: String, timeout: Double = 60) throws -> String {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
        let watchdog = DispatchWorkItem { [process] in if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
        defer { watchdog.cancel() }
        while true {
            if let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let answer = String(decoding: pending[..<newline], as: UTF8.self)
                pending.removeSubrange(...newline)
                return answer
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { throw GuideFailure("\(process.executableURL?.path ?? "") ended: \(errors)") }
            pending.append(chunk)
        }
    }

    func stop() {
        try? input.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}

/// The built `gatehouse serve`, its log (standard output and error) in a file.
final class ServerProcess {
    let process = Process()
    let logPath: String

    /// `scripts/quickstart`'s server: the demo app from Tenants/, its defaults, but a fresh
    /// database in `folder` (which also gets the log) and a free port. Returns the base URL too.
    static func withDemoApp(in folder: String) throws -> (ServerProcess, String) {
        let port = ExecutableTests().freePort()
        let server = try ServerProcess(
            binary: ExecutableTests().binary, logPath: folder + "/server.log",
            environment: [
                "GATEHOUSE_DATABASE_URL": "sqlite://\(folder)/data/gatehouse.db", "GATEHOUSE_LISTEN": "127.0.0.1:\(port)",
                "GATEHOUSE_TENANTS_DIR": GuidesTests.root.appendingPathComponent("Tenants").path,
            ])
        return (server, "http://127.0.0.1:\(port)")
    }

    init(binary: String, logPath: String, environment: [String: String]) throws {
        self.logPath = logPath
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try #require(FileHandle(forWritingAtPath: logPath))
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["serve"]
        process.environment = environment
        process.standardOutput = log
        process.standardError = log
        try process.run()
    }

    func waitUntilReady(_ base: String) throws {
        for _ in 0..<100 {
            if (try? TestHTTPClient.send("GET", base + "/readyz", timeoutSeconds: 1))?.status == 200 { return }
            usleep(100_000)
        }
        throw GuideFailure( "the server did not start: \(log)")
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// The six-digit code of the newest mail with `subject` that the `log:` mailer printed for
    /// `address`, waiting up to 10 s for the outbox to deliver it.
    func newestMailedCode(to address: String, subject: String) throws -> String? {
        for _ in 0..<100 {
            let mails = log.split(separator: "\n").compactMap { line -> String? in
                guard let entry = try? JSON.parse(Array(line.utf8)), entry["msg"] == "mail", let text = entry["message"]?.stringValue,
                    text.contains("\nTo: <\(address)>\n"), text.contains("\nSubject: \(subject)\n")
                else { return nil }
                return text
            }
            if let mail = mails.last {
                let lines = mail.components(separatedBy: "\n")
                return lines.first { $0.count == 6 && $0.allSatisfy(\.isNumber) }
            }
            usleep(100_000)
        }
        return nil
    }

    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}

struct GuideFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

struct PublicApp {
    let id: String
    let appKey: String
}

/// A server whose public URL is the address it listens on, as in a deployment: the programs
/// fetch the key set from the issuer's own URL.
final class PublicServer {
    let gatehouse: Gatehouse
    let server: HTTPServer
    let database: TestDatabase
    let baseURL: String

    init() throws {
        database = try TestDatabase.make(.sqlite)
        let port = ExecutableTests().freePort()
        baseURL = "http://127.0.0.1:\(port)"
        var configuration = Configuration()
        configuration.database = database.configuration
        configuration.masterKey = Array(repeating: 7, count: 32)
        configuration.adminToken = TestServer.adminToken
        configuration.publicURL = baseURL
        configuration.accessLog = false
        configuration.argon2MemoryKiB = 1024
        configuration.argon2Iterations = 1
        gatehouse = try Gatehouse.open(configuration: configuration, environment: [:], log: Log(enabled: false))
        server = gatehouse.makeServer(host: "127.0.0.1", port: port)
        try server.start()
    }

    func stop() {
        server.shutdown()
        gatehouse.close()
        database.drop()
    }

    func createApp(_ settings: JSON) throws -> PublicApp {
        let response = try TestHTTPClient.send(
            "POST", baseURL + "/v1/admin/apps", headers: [("Authorization", "Bearer \(TestServer.adminToken)"), ("Content-Type", "application/json")],
            body: settings.serialized())
        guard response.status == 201, let data = response.data, let id = data["app"]?["id"]?.stringValue, let appKey = data["app_key"]?.stringValue
        else { throw GuideFailure( "creating an app answered \(response.status): \(response.text)") }
        return PublicApp(id: id, appKey: appKey)
    }

    func signUp(_ app: PublicApp, email: String) throws -> JSON {
        let body: JSON = ["email": .string(email), "password": "correct horse battery staple"]
        let response = try TestHTTPClient.send(
            "POST", baseURL + "/v1/auth/signup", headers: [("X-App-Key", app.appKey), ("Content-Type", "application/json")], body: body.serialized())
        guard response.status == 201, let data = response.data else {
            throw GuideFailure( "sign-up answered \(response.status): \(response.text)")
        }
        return data
    }
}

/// One of the page's programs, built once (Go, Java) and run once per token.
struct BackendVerifier {
    let command: [String]

    init(_ language: GuidesTests.Language, source: String, folder: String) throws {
        func write(_ name: String) throws -> String {
            let path = folder + "/" + name
            try source.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        switch language {
        case .node:
            command = ["/usr/bin/node", try write("verify.mjs")]
        case .python:
            command = [ExternalProgram.python, try write("verify.py")]
        case .go:
            let go = try Self.tool("go", in: ["/usr/bin/go", "/usr/lib/go/bin/go"])
            // A cache of its own, so the build does not depend on (or fill) the runner's home.
            _ = try ExternalProgram.run(
                "/usr/bin/env", ["GOCACHE=\(folder)/gocache", "GOPATH=\(folder)/gopath", "HOME=\(folder)", go, "build", "-o", folder + "/verify", try write("verify.go")])
            command = [folder + "/verify"]
        case .java:
            let javac = try Self.tool("javac", in: ["/usr/bin/javac"])
            _ = try ExternalProgram.run(javac, ["-d", folder + "/classes", try write("Verify.java")])
            command = ["/usr/bin/java", "-cp", folder + "/classes", "Verify"]
        }
    }

    static func tool(_ name: String, in paths: [String]) throws -> String {
        guard let path = paths.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw GuideFailure( "\(name) is not installed: run scripts/install-deps --test")
        }
        return path
    }

    /// The claims the program printed, or its refusal (exit status and standard error).
    func run(token: String, issuer: String, appID: String) -> Result<JSON, GuideFailure> {
        do {
            let output = try ExternalProgram.run(
                "/usr/bin/env", ["GATEHOUSE_ISSUER=\(issuer)", "GATEHOUSE_APP_ID=\(appID)"] + command + [token])
            return .success(try JSON.parse(Array(output.utf8)))
        } catch {
            return .failure(GuideFailure( "\(error)"))
        }
    }
}
