/// One file of the web console (docs/console.md): its name under `/console/`, its media type and
/// its bytes, compiled into the executable (`embedInCode` in Package.swift), so a release build
/// serves the console with no folder beside it.
public struct ConsoleFile: Sendable {
    public let name: String
    public let contentType: String
    public let bytes: [UInt8]
}

/// The console's files: a fixed table, looked up by name. Nothing is read from the file system
/// at run time and no path from a URL ever reaches one. A file added to `Console/` is added to
/// Package.swift's resources and here (Console/test checks that every file is served).
public enum ConsoleFiles {
    /// The page `/console/` answers with.
    public static let index = ConsoleFile(name: "index.html", contentType: "text/html; charset=utf-8", bytes: PackageResources.index_html)

    /// Every file, by name; `index.html` among them.
    public static let all: [String: ConsoleFile] = Dictionary(
        uniqueKeysWithValues: [
            index,
            ConsoleFile(name: "console.css", contentType: "text/css; charset=utf-8", bytes: PackageResources.console_css),
            ConsoleFile(name: "console.js", contentType: "text/javascript; charset=utf-8", bytes: PackageResources.console_js),
            ConsoleFile(name: "api.js", contentType: "text/javascript; charset=utf-8", bytes: PackageResources.api_js),
            ConsoleFile(name: "ui.js", contentType: "text/javascript; charset=utf-8", bytes: PackageResources.ui_js),
            ConsoleFile(name: "settings.js", contentType: "text/javascript; charset=utf-8", bytes: PackageResources.settings_js),
            ConsoleFile(name: "users.js", contentType: "text/javascript; charset=utf-8", bytes: PackageResources.users_js),
            ConsoleFile(name: "activity.js", contentType: "text/javascript; charset=utf-8", bytes: PackageResources.activity_js),
            ConsoleFile(name: "platform.js", contentType: "text/javascript; charset=utf-8", bytes: PackageResources.platform_js),
        ].map { ($0.name, $0) })
}
